// The gate's HTTP API (docs/http-api.yaml) for any runtime with fetch: the Worker's Durable
// Object runs it. Every rule of the API (routes, the bearer token, the JSON, how a target's
// HTTP answer becomes the gate's reply) is the component's `http-api` interface, the same
// one `interlock serve` runs; this file configures it from the Worker's bindings, moves a
// request in, performs the fetches and sleeps the component asks for, and moves the
// response out.
import { gateComponent } from '@interlock/gate/workerd';
import { gateRoot, SystemClock, StorageError } from '@interlock/gate/core';

/**
 * @typedef {{ status: number, contentType: string, body: string, challenge: boolean }} ApiResponse
 * @typedef {{ method: string, url: string, headers: [string, string][], body?: string, timeoutMs?: bigint }} ApiFetch
 * @typedef {{ id: bigint, next: { tag: 'respond', val: ApiResponse } | { tag: 'fetch', val: ApiFetch } | { tag: 'sleep', val: bigint } }} ApiStep
 * @typedef {{ tag: 'ok', val: { status: number, body: string } } | { tag: 'err', val: string }} ApiAnswer
 * @typedef {{
 *   configure(settings: [string, string][]): void,
 *   handle(request: { method: string, path: string, authorization?: string, headers: [string, string][], body: Uint8Array }): ApiStep,
 *   resume(id: bigint, answer: ApiAnswer | undefined): ApiStep,
 *   abandon(id: bigint): void,
 *   unreadable(path: string, authorization: string | undefined, tooLarge: boolean, problem: string): ApiResponse,
 *   refusal(path: string, authorization: string | undefined): ApiResponse | undefined,
 * }} HttpApi the component's `interlock:gate/http-api` export, as jco binds it
 */

/** The settings the component's http-api takes, from the Worker's bindings. */
export const SETTINGS = ['INTERLOCK_TOKEN', 'INTERLOCK_TARGETS', 'INTERLOCK_RECEIPT_KEY', 'INTERLOCK_SIGNING_KEY', 'INTERLOCK_STRICT_AUTHORITY',
  'INTERLOCK_DECIDERS', 'INTERLOCK_WEBHOOK_SECRETS', 'INTERLOCK_NOTIFY_SECRET'];

/**
 * The `http-api` of a gate component instance, configured with the bindings `keys` of `env`
 * (wrong settings: it answers every request 500, saying what is wrong).
 * @param {{ httpApi: HttpApi }} root
 * @param {Record<string, unknown>} env
 * @param {string[]} [keys]
 */
export function configured(root, env, keys = SETTINGS) {
  /** @type {[string, string][]} */
  const settings = [];
  for (const k of keys) {
    const v = env[k];
    if (typeof v === 'string' && v) settings.push([k, v]);
  }
  try {
    root.httpApi.configure(settings);
  } catch {
    // Wrong settings: the component answers 500 to every request, saying what is wrong.
  }
  return root.httpApi;
}

/** A front's storage: none (a front only checks the token; it opens no journal). */
const NO_STORAGE = new Proxy({}, {
  get: () => () => {
    throw new StorageError('unsupported', 'the Worker front holds no journal');
  },
});

/**
 * A Worker's front: the component's `http-api` over no journal, for its token rule
 * (`refusal`) before a request reaches a Durable Object.
 * @param {Record<string, unknown>} env
 * @param {string[]} [keys]
 */
export async function front(env, keys) {
  const root = await gateRoot(gateComponent(), { storage: /** @type {any} */ (NO_STORAGE), clock: new SystemClock() });
  return configured(/** @type {any} */ (root), env, keys);
}

/** The largest request body read, in bytes: the API's (interlock_core::http_api::MAX_BODY_BYTES). */
const MAX_BODY = 1 << 20;
/** How long a request's whole body is waited for, in ms: the API's (http_api::BODY_DEADLINE_MS). */
const BODY_DEADLINE_MS = 10_000;

/** @param {unknown} e */
const message = (e) => String(/** @type {any} */ (e)?.message ?? e);

/**
 * A request's body, whole, as the bytes that came (the component decodes them), or why it
 * cannot be read: past MAX_BODY, cut short, or not all of it within BODY_DEADLINE_MS.
 * @param {Request} request
 * @returns {Promise<{ bytes: Uint8Array } | { tooLarge: boolean, problem: string }>}
 */
async function readBody(request) {
  const tooLarge = { tooLarge: true, problem: `larger than ${MAX_BODY} bytes` };
  if (Number(request.headers.get('content-length')) > MAX_BODY) return tooLarge;
  if (!request.body) return { bytes: new Uint8Array(0) };
  const reader = request.body.getReader();
  /** @type {Uint8Array[]} */
  const chunks = [];
  let size = 0;
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let timer;
  const late = new Promise((resolve) => (timer = setTimeout(() => resolve('late'), BODY_DEADLINE_MS)));
  try {
    for (;;) {
      const read = await Promise.race([reader.read(), late]);
      if (read === 'late') {
        reader.cancel().catch(() => {});
        return { tooLarge: false, problem: `not all of it came within ${BODY_DEADLINE_MS / 1000} s` };
      }
      const { done, value } = /** @type {ReadableStreamReadResult<Uint8Array>} */ (read);
      if (done) break;
      size += value.byteLength;
      if (size > MAX_BODY) {
        reader.cancel().catch(() => {});
        return tooLarge;
      }
      chunks.push(value);
    }
  } catch (e) {
    return { tooLarge: false, problem: `cut short: ${message(e)}` };
  } finally {
    clearTimeout(timer);
  }
  const bytes = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    bytes.set(c, at);
    at += c.byteLength;
  }
  return { bytes };
}

/** @param {ApiResponse} r */
export function toResponse(r) {
  /** @type {Record<string, string>} */
  const headers = {};
  if (r.contentType) headers['content-type'] = r.contentType;
  if (r.challenge) headers['www-authenticate'] = 'Bearer';
  return new Response(r.status === 204 ? null : r.body, { status: r.status, headers });
}

/**
 * Performs a fetch the component asked for: its answer, or why there is none.
 * @param {ApiFetch} f
 * @param {typeof fetch} doFetch
 * @returns {Promise<ApiAnswer>}
 */
async function perform(f, doFetch) {
  try {
    const r = await doFetch(f.url, {
      method: f.method,
      headers: Object.fromEntries(f.headers),
      body: f.body,
      signal: f.timeoutMs === undefined ? undefined : AbortSignal.timeout(Number(f.timeoutMs)),
    });
    return { tag: 'ok', val: { status: r.status, body: await r.text() } };
  } catch (e) {
    return { tag: 'err', val: message(e) };
  }
}

/** The API over one journal's gate component instance. */
export class GateApi {
  /**
   * @param {HttpApi} api
   * @param {{ fetch?: typeof fetch, flush?: () => Promise<void>, sleep?: (ms: number) => Promise<void> }} [options]
   *   `flush`: awaited before anything leaves (a fetch, the response), for a journal that
   *   writes behind.
   */
  constructor(api, { fetch: doFetch = (...a) => fetch(...a), flush = async () => {}, sleep = (ms) => new Promise((r) => setTimeout(r, ms)) } = {}) {
    this.api = api;
    this.doFetch = doFetch;
    this.flush = flush;
    this.sleep = sleep;
  }

  /**
   * Answers one request.
   * @param {Request} request
   * @returns {Promise<Response>}
   */
  async handle(request) {
    const authorization = request.headers.get('authorization') ?? undefined;
    // The bytes as they came: the component decodes them (strictly, as UTF-8).
    const path = new URL(request.url).pathname;
    const body = await readBody(request);
    if (!('bytes' in body)) return toResponse(this.api.unreadable(path, authorization, body.tooLarge, body.problem));
    // Names in lower case, as the Fetch API gives them.
    const headers = [...request.headers];
    let step = this.api.handle({ method: request.method, path, authorization, headers, body: body.bytes });
    for (;;) {
      const { id, next } = step;
      if (next.tag === 'respond') {
        await this.flush();
        return toResponse(next.val);
      }
      try {
        if (next.tag === 'fetch') {
          // Nothing leaves before what the gate wrote is durable.
          await this.flush();
          step = this.api.resume(id, await perform(next.val, this.doFetch));
        } else {
          await this.sleep(Number(next.val));
          step = this.api.resume(id, undefined);
        }
      } catch (e) {
        this.api.abandon(id);
        throw e;
      }
    }
  }
}
