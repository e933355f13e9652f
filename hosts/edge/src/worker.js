// The gate as a Cloudflare Worker: the HTTP API of docs/http-api.yaml, one Durable Object
// per journal. The Worker hands each request to the object its path names; the object
// holds one gate component instance over its own SQLite storage (the component's SQL
// journal over ctx.storage.sql, @interlock/gate/workerd), and the component's `http-api` answers it: the token, the routes and
// every decision are the component's, as in `interlock serve`.
//
// Which runtime guarantee carries which invariant (hosts/edge/README.md says more):
// - compare-and-append: a Durable Object is one instance in the world, and its JavaScript
//   runs one event at a time; every gate call is synchronous, and so are its journal
//   appends (transactionSync), so nothing interleaves inside an append, and nobody else
//   can write this storage.
// - the intent is durable before the send: the output gate. Writes made in a turn commit
//   at its end; until the commit is done, every outgoing message (a fetch to the target, a
//   response) is held. INTERLOCK_EXPLICIT_SYNC=1 also awaits ctx.storage.sync() before
//   anything leaves (GateApi's flush), for a runtime without it.
import { gateComponent, DurableObjectSql } from '@interlock/gate/workerd';
import { gateRoot, SystemClock } from '@interlock/gate/core';
import { GateApi, configured, front, toResponse } from './api.js';

/**
 * @typedef {{ INTERLOCK_TOKEN?: string, INTERLOCK_TARGETS?: string, INTERLOCK_RECEIPT_KEY?: string, INTERLOCK_SIGNING_KEY?: string, INTERLOCK_STRICT_AUTHORITY?: string,
 *   INTERLOCK_DECIDERS?: string, INTERLOCK_WEBHOOK_SECRETS?: string, INTERLOCK_NOTIFY_SECRET?: string,
 *   INTERLOCK_EXPLICIT_SYNC?: string, JOURNALS: any }} Env
 */

export class InterlockJournal {
  /** Whether `journal-admin.open` succeeded (until it does, each request tries it first). */
  opened = false;

  /**
   * @param {DurableObjectState} ctx
   * @param {Env} env
   */
  constructor(ctx, env) {
    this.ctx = ctx;
    this.env = env;
    /** @type {Promise<{ root: any, api: GateApi }>} */
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
    // Only requests with the token get here (the front asks `refusal` first).
    const storage = this.ctx.storage;
    const journal = new DurableObjectSql(storage, `Durable Object journal ${this.ctx.id}`);
    const root = await gateRoot(gateComponent(), { storage: journal, clock: new SystemClock() });
    const explicit = this.env.INTERLOCK_EXPLICIT_SYNC === '1';
    return { root, api: new GateApi(configured(root, this.env), { flush: explicit ? () => storage.sync() : undefined }) };
  }

  /** @param {Request} request */
  async fetch(request) {
    const { root, api } = await this.ready;
    if (!this.opened) {
      // As `interlock serve` does: a journal that cannot be opened (a newer format, an I/O
      // error) is left for the component to answer (every journal call fails with the
      // open's error, 503), and the next request tries again.
      try {
        root.journalAdmin.open('sqlite');
        this.opened = true;
      } catch (e) {
        if (!(/** @type {any} */ (e)?.payload)) throw e;
      }
    }
    return api.handle(request);
  }
}

/** @type {Promise<import('./api.js').HttpApi> | undefined} */
let gateFront;

export default {
  /**
   * Refuses a request without the token before any journal is reached (the component's
   * `refusal`, the rule `handle` applies too), then hands it to the Durable Object of the
   * journal its path names; the object's component answers it.
   * @param {Request} request
   * @param {Env} env
   */
  async fetch(request, env) {
    gateFront ??= front(env);
    const path = new URL(request.url).pathname;
    const refused = (await gateFront).refusal(path, request.headers.get('authorization') ?? undefined);
    if (refused) return toResponse(refused);
    const name = /^\/v1\/journals\/([^/]*)/.exec(path)?.[1] ?? '';
    return env.JOURNALS.get(env.JOURNALS.idFromName(name)).fetch(request);
  },
};
