// The gate's HTTP API (docs/http-api.yaml) for any runtime with fetch: the Worker's Durable
// Object runs it. Every rule of the API (routes, the bearer token, the JSON, how a target's
// HTTP answer becomes the gate's reply) is the component's `http-api` interface, the same
// one `interlock serve` runs; this file moves a request in, performs the fetches and sleeps
// the component asks for, and moves the response out.

/**
 * @typedef {{ status: number, contentType: string, body: string, challenge: boolean }} ApiResponse
 * @typedef {{ method: string, url: string, headers: [string, string][], body?: string, timeoutMs?: bigint }} ApiFetch
 * @typedef {{ id: bigint, next: { tag: 'respond', val: ApiResponse } | { tag: 'fetch', val: ApiFetch } | { tag: 'sleep', val: bigint } }} ApiStep
 * @typedef {{ tag: 'ok', val: { status: number, body: string } } | { tag: 'err', val: string }} ApiAnswer
 * @typedef {{
 *   configure(settings: [string, string][]): void,
 *   handle(request: { method: string, path: string, authorization?: string, body: string }): ApiStep,
 *   resume(id: bigint, answer: ApiAnswer | undefined): ApiStep,
 *   abandon(id: bigint): void,
 *   unreadable(authorization: string | undefined, tooLarge: boolean, problem: string): ApiResponse,
 * }} HttpApi the component's `interlock:gate/http-api` export, as jco binds it
 */

/** The largest request body read, in bytes (the gate refuses far less). */
const MAX_BODY = 1 << 20;

/** @param {unknown} e */
const message = (e) => String(/** @type {any} */ (e)?.message ?? e);

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
    const body = await request.text();
    if (new TextEncoder().encode(body).length > MAX_BODY) {
      return toResponse(this.api.unreadable(authorization, true, `larger than ${MAX_BODY} bytes`));
    }
    const url = new URL(request.url);
    let step = this.api.handle({ method: request.method, path: url.pathname, authorization, body });
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
