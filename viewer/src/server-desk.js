// The inbox page against a server (`interlock serve` or the Worker): the same verbs as the
// in-page shop, over the HTTP API (docs/http-api.yaml), same-origin (`/v1/...`, proxied by
// `node viewer/serve.js --api URL`). The server's gate answers; this file only carries.
//
//   GET  /v1/journals/{j}/inbox                      your token (a decider's) or the server's
//   POST /v1/journals/{j}/inbox/{item}/decision      your own token: the decider is its owner
//   GET  /v1/journals/{j}/approval-rules             the server token
//   GET  /v1/journals/{j}/scoreboard                 the server token (or yours)
//   GET  /v1/journals/{j}/effects/{effect}/receipt   the server token

/** The server's answer when it is not 2xx: its typed error (`{error: {kind, message}}`). */
export class ServerError extends Error {
  constructor(status, kind, message, value) {
    super(message);
    this.name = 'ServerError';
    this.status = status;
    this.kind = kind;
    this.value = value;
  }
}

const JOURNAL = /^[A-Za-z0-9._-]{1,64}$/;

export class ServerDesk {
  /**
   * `journal`: its name on the server; `token`: yours (a decider's own token, or the
   * server's to read only); `serverToken`: optional, for the rules and receipts.
   */
  constructor({ journal, token, serverToken = '', base = '' }) {
    if (!JOURNAL.test(journal)) throw new TypeError(`journal: ${JSON.stringify(journal)} is not 1 to 64 of A-Z a-z 0-9 . _ -`);
    this.journal = journal;
    this.token = token;
    this.serverToken = serverToken;
    this.base = base;
  }

  async #call(method, path, { body, token = this.token } = {}) {
    const headers = { accept: 'application/json' };
    if (token) headers.authorization = `Bearer ${token}`;
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res = await fetch(`${this.base}/v1/journals/${encodeURIComponent(this.journal)}${path}`, {
      method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: 'no-store',
    });
    const text = await res.text();
    let json = null;
    try {
      json = text ? JSON.parse(text) : null;
    } catch {
      // Not JSON: said below with the text.
    }
    if (!res.ok) {
      const e = json?.error;
      throw new ServerError(res.status, e?.kind ?? `http-${res.status}`, e?.message ?? (text.trim() || res.statusText), e?.value);
    }
    if (json === null && text) throw new ServerError(res.status, 'invalid-body', `the server answered ${method} ${path} with something that is not JSON: ${text.slice(0, 200)}`);
    return json;
  }

  inbox() {
    return this.#call('GET', '/inbox');
  }

  /** `{item, verdict, why?, evidence?}`: the decider is the owner of this desk's token. */
  decide({ item, verdict, why, evidence }) {
    const body = { verdict };
    if (why !== undefined) body.why = why;
    if (evidence !== undefined) body.evidence = evidence;
    return this.#call('POST', `/inbox/${encodeURIComponent(item)}/decision`, { body });
  }

  rules() {
    return this.#call('GET', '/approval-rules', { token: this.serverToken || this.token });
  }

  scoreboard() {
    return this.#call('GET', '/scoreboard', { token: this.serverToken || this.token });
  }

  receipt(effectId) {
    return this.#call('GET', `/effects/${encodeURIComponent(effectId)}/receipt`, { token: this.serverToken || this.token });
  }
}
