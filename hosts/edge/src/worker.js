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
import { gateComponent, durableObjectStorage } from '@interlock/gate/workerd';
import { GateApi, toResponse } from './api.js';

/**
 * @typedef {{ INTERLOCK_TOKEN?: string, INTERLOCK_TARGETS?: string, INTERLOCK_RECEIPT_KEY?: string, INTERLOCK_STRICT_AUTHORITY?: string,
 *   INTERLOCK_EXPLICIT_SYNC?: string, JOURNALS: any }} Env
 */

/** The settings the component's http-api takes, from the Worker's bindings. */
const SETTINGS = ['INTERLOCK_TOKEN', 'INTERLOCK_TARGETS', 'INTERLOCK_RECEIPT_KEY', 'INTERLOCK_STRICT_AUTHORITY'];

/** The wall clock the component imports. */
const CLOCK = {
  now() {
    const ms = Date.now();
    return { seconds: BigInt(Math.floor(ms / 1000)), nanoseconds: (ms % 1000) * 1_000_000 };
  },
  resolution: () => ({ seconds: 0n, nanoseconds: 1_000_000 }),
};

/**
 * A gate component instance over `storage`, its `http-api` configured from the Worker's
 * bindings (wrong settings: it answers every request 500, saying what is wrong).
 * @param {any} storage the `interlock:gate/storage` import
 * @param {Env} env
 */
export async function gateInstance(storage, env) {
  const component = gateComponent();
  const root = await component.instantiate(component.getCoreModule, {
    'interlock:gate/storage': storage,
    'wasi:clocks/wall-clock': CLOCK,
  });
  /** @type {[string, string][]} */
  const settings = [];
  for (const k of SETTINGS) {
    const v = env[/** @type {keyof Env} */ (k)];
    if (v) settings.push([k, v]);
  }
  try {
    root.httpApi.configure(settings);
  } catch {
    // Wrong settings: the component answers 500 to every request, saying what is wrong.
  }
  return root;
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
    // Only requests with the token get here (the front asks `refusal` first).
    const storage = this.ctx.storage;
    const root = await gateInstance(durableObjectStorage(storage, `Durable Object journal ${this.ctx.id}`), this.env);
    root.journalAdmin.open('sqlite');
    const explicit = this.env.INTERLOCK_EXPLICIT_SYNC === '1';
    return new GateApi(root.httpApi, { flush: explicit ? () => storage.sync() : undefined });
  }

  /** @param {Request} request */
  async fetch(request) {
    const api = await this.ready;
    return api.handle(request);
  }
}

/** The front's storage: none (it only checks the token; no journal is opened there). */
const NO_STORAGE = new Proxy({}, {
  get: () => () => {
    throw { tag: 'unsupported', val: 'the Worker front holds no journal' };
  },
});

/** @type {Promise<any> | undefined} */
let front;

export default {
  /**
   * Refuses a request without the token before any journal is reached (the component's
   * `refusal`, the rule `handle` applies too), then hands it to the Durable Object of the
   * journal its path names; the object's component answers it.
   * @param {Request} request
   * @param {Env} env
   */
  async fetch(request, env) {
    front ??= gateInstance(NO_STORAGE, env);
    const refused = (await front).httpApi.refusal(request.headers.get('authorization') ?? undefined);
    if (refused) return toResponse(refused);
    const name = /^\/v1\/journals\/([^/]*)/.exec(new URL(request.url).pathname)?.[1] ?? '';
    return env.JOURNALS.get(env.JOURNALS.idFromName(name)).fetch(request);
  },
};
