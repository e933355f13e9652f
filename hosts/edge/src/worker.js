// The gate as a Cloudflare Worker: the HTTP API of docs/http-api.yaml, one Durable Object
// per journal. The Worker checks the bearer token (nothing reaches a journal without it)
// and hands the request to the journal's object; the object holds one gate instance over
// its own SQLite storage (SqlJournal over ctx.storage.sql).
//
// Which runtime guarantee carries which invariant (hosts/edge/README.md says more):
// - compare-and-append: a Durable Object is one instance in the world, and its JavaScript
//   runs one event at a time; every gate call is synchronous, and so are its journal
//   appends (transactionSync), so nothing interleaves inside an append, and nobody else
//   can write this storage.
// - the intent is durable before the send: the output gate. Writes made in a turn commit
//   at its end; until the commit is done, every outgoing message (a fetch to the target, a
//   response) is held. INTERLOCK_EXPLICIT_SYNC=1 also awaits ctx.storage.sync() before
//   every step leaves the gate (Gate.drive awaits journal.flush), for a runtime without it.
import SCHEMA from './schema.js';
import { Gate } from '../../node/src/gate.js';
import { SystemClock } from '../../node/src/clock.js';
import { SqlJournal } from './sql-journal.js';
import { GateApi, failure } from './api.js';
import { gateComponent } from './load-workerd.js';

/**
 * @typedef {{ INTERLOCK_TOKEN?: string, INTERLOCK_TARGETS?: string, INTERLOCK_RECEIPT_KEY?: string,
 *   INTERLOCK_EXPLICIT_SYNC?: string, JOURNALS: any }} Env
 * @import { ApiResponse } from './api.js'
 */

const JOURNAL_NAME = /^[A-Za-z0-9._-]{1,64}$/;

/** @param {ApiResponse} r */
export function toResponse(r) {
  if (r.status === 204) return new Response(null, { status: 204, headers: r.headers });
  if (r.text !== undefined) return new Response(r.text, { status: r.status, headers: r.headers });
  return Response.json(r.body, { status: r.status, headers: r.headers });
}

/**
 * Whether `request` carries the configured bearer token (compared in constant time).
 * No token configured: nothing is authorized (never an open gate).
 * @param {Request} request
 * @param {string | undefined} token
 */
async function authorized(request, token) {
  if (!token) return false;
  const m = /^Bearer ([^\s]+)$/.exec(request.headers.get('authorization') ?? '');
  if (!m) return false;
  const enc = new TextEncoder();
  const [a, b] = await Promise.all([m[1], token].map((t) => crypto.subtle.digest('SHA-256', enc.encode(t))));
  return /** @type {any} */ (crypto.subtle).timingSafeEqual(a, b);
}

/** The DO's storage as the synchronous handle SqlJournal takes. */
function doSql(/** @type {DurableObjectStorage} */ storage) {
  return {
    all: (/** @type {string} */ sql, /** @type {unknown[]} */ ...p) => storage.sql.exec(sql, ...p).toArray(),
    run: (/** @type {string} */ sql, /** @type {unknown[]} */ ...p) => {
      storage.sql.exec(sql, ...p).toArray();
    },
    transaction: (/** @type {() => any} */ fn) => storage.transactionSync(fn),
  };
}

export class InterlockJournal {
  /**
   * @param {DurableObjectState} ctx
   * @param {Env} env
   */
  constructor(ctx, env) {
    this.ctx = ctx;
    this.env = env;
    /** @type {Promise<GateApi>} */
    this.ready = new Promise((resolve, reject) => {
      ctx.blockConcurrencyWhile(async () => {
        try {
          resolve(await this.#start());
        } catch (e) {
          reject(e);
        }
      });
    });
  }

  async #start() {
    const journal = SqlJournal.open(doSql(this.ctx.storage), `Durable Object journal ${this.ctx.id}`, SCHEMA);
    if (this.env.INTERLOCK_EXPLICIT_SYNC === '1') {
      // Gate.drive awaits this before any step leaves the gate.
      /** @type {any} */ (journal).flush = () => this.ctx.storage.sync();
    }
    const clock = new SystemClock();
    const gate = await Gate.instantiate(gateComponent(), { journal, clock });
    const stepper = await Gate.instantiate(gateComponent(), { journal, clock });
    return new GateApi(gate, stepper, journal, {
      targets: this.env.INTERLOCK_TARGETS ? JSON.parse(this.env.INTERLOCK_TARGETS) : {},
      receiptKey: this.env.INTERLOCK_RECEIPT_KEY,
    });
  }

  /** @param {Request} request */
  async fetch(request) {
    const api = await this.ready;
    const url = new URL(request.url);
    const r = await api.route(request.method, url.pathname, await request.text());
    return toResponse(r);
  }
}

export default {
  /**
   * @param {Request} request
   * @param {Env} env
   */
  async fetch(request, env) {
    if (!(await authorized(request, env.INTERLOCK_TOKEN))) {
      return toResponse({ ...failure(401, 'unauthorized', 'a bearer token is required (Authorization: Bearer <token>)'), headers: { 'www-authenticate': 'Bearer' } });
    }
    const url = new URL(request.url);
    const m = /^\/v1\/journals\/([^/]+)(\/.*)?$/.exec(url.pathname);
    if (!m) return toResponse(failure(404, 'not-found', `no route ${request.method} ${url.pathname}`));
    const name = decodeURIComponent(m[1]);
    if (!JOURNAL_NAME.test(name)) return toResponse(failure(404, 'not-found', `not a journal name: ${JSON.stringify(name)} (1 to 64 of A-Z a-z 0-9 . _ -)`));
    const stub = env.JOURNALS.get(env.JOURNALS.idFromName(name));
    return stub.fetch(new Request(`https://journal${m[2] ?? '/'}`, { method: request.method, headers: request.headers, body: request.body }));
  },
};
