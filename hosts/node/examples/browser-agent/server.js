// The browser agent example's server: the page and the files it loads, a payments API the
// page calls (the package's payments simulator, its state in a file), and a scripted model
// speaking OpenAI's chat.completions, so the page runs the official `openai` SDK with no
// key and no network.
//
//   node examples/browser-agent/server.js [--port 8090] [--state payments.json] [--tier 2] [--hang]
//
// then open http://127.0.0.1:8090/. --hang: the next refund is made at the service and its
// answer never sent (reload the page while it hangs: the gate recovers it by lookup).
import http from 'node:http';
import fs from 'node:fs';
import { readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Payments, ServiceError } from '../../src/index.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const PKG = path.resolve(HERE, '../..');
const TYPES = { '.js': 'text/javascript', '.mjs': 'text/javascript', '.html': 'text/html', '.wasm': 'application/wasm', '.json': 'application/json' };
// URL prefix -> folder. Only these are served: the page, the package's browser entry and
// transpiled components, and the openai SDK's ESM build.
const STATIC = [
  ['/node_modules/openai/', path.join(PKG, 'node_modules/openai')],
  ['/src/', path.join(PKG, 'src')],
  ['/gen/', path.join(PKG, 'gen')],
  ['/', HERE],
];

/** What the scripted model asks for, and the order it is asked about. */
export const ORDER = '881';
export const AMOUNT_CENTS = 2000;

/**
 * The scripted model: a function of the conversation, not a queue, so a reloaded page that
 * starts the conversation again gets the same turns. No tool result yet: call `create_refund`;
 * after one: answer with what the tool said.
 * @param {any[]} messages
 * @param {number} n
 */
function scriptedCompletion(messages, n) {
  const last = messages.at(-1);
  const message = last?.role === 'tool'
    ? { role: 'assistant', content: `The refund tool answered: ${last.content}`, refusal: null }
    : {
      role: 'assistant',
      content: null,
      refusal: null,
      tool_calls: [{ id: `call_${n}`, type: 'function', function: { name: 'create_refund', arguments: JSON.stringify({ order_id: ORDER, amount_cents: AMOUNT_CENTS }) } }],
    };
  return {
    id: `chatcmpl-${n}`,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model: 'scripted',
    choices: [{ index: 0, message, logprobs: null, finish_reason: message.tool_calls ? 'tool_calls' : 'stop' }],
    usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
  };
}

/** @param {http.IncomingMessage} req */
async function body(req) {
  let text = '';
  for await (const chunk of req) text += chunk;
  return text ? JSON.parse(text) : {};
}

/** @param {http.ServerResponse} res @param {number} status @param {unknown} value */
const json = (res, status, value) => res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' }).end(JSON.stringify(value));

/**
 * Starts the server. `hang()` makes the next refund hang after the service made it (the
 * answer is never sent); `hung` resolves when it did. `payments` is the service itself.
 * @param {{ port?: number, state?: string, tier?: string }} [options]
 */
export async function startServer({ port = 0, state, tier = '2' } = {}) {
  const stateFile = state ?? path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'interlock-browser-agent-')), 'payments.json');
  const fresh = !fs.existsSync(stateFile);
  const payments = fresh ? await Payments.create(stateFile, tier) : await Payments.open(stateFile);
  if (fresh) payments.addOrder(ORDER, 10_000); // the customer paid $100
  /** @type {null | ((refund: unknown) => void)} */
  let hangNext = null;
  let completions = 0;
  /** @type {import('node:net').Socket[]} */
  const sockets = [];

  const server = http.createServer(async (req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    try {
      if (req.method === 'POST' && url.pathname === '/v1/chat/completions') {
        const { messages } = await body(req);
        return json(res, 200, scriptedCompletion(messages, ++completions));
      }
      const order = url.pathname.match(/^\/api\/orders\/([^/]+)$/);
      if (req.method === 'GET' && order) {
        return json(res, 200, payments.premises(decodeURIComponent(order[1]), url.searchParams.get('excluding')));
      }
      if (req.method === 'GET' && url.pathname === '/api/refunds') {
        return json(res, 200, { found: payments.findByReference(url.searchParams.get('reference') ?? '') });
      }
      if (req.method === 'POST' && url.pathname === '/api/refunds') {
        const { order_id, amount_cents, reference } = await body(req);
        const refund = payments.refund(order_id, amount_cents, req.headers['idempotency-key']?.toString() ?? null, reference, Date.now());
        if (hangNext) {
          // Made, and the answer never comes back (a lost reply, a reload mid-send).
          const hung = hangNext;
          hangNext = null;
          hung(refund);
          return;
        }
        return json(res, 200, refund);
      }
      if (url.pathname === '/favicon.ico') return res.writeHead(204).end();
      if (req.method === 'GET') return await serveStatic(url.pathname, res);
      json(res, 404, { error: 'not found' });
    } catch (e) {
      // The service's refusals are definitive (the page throws Rejected); anything else is not.
      if (e instanceof ServiceError) return json(res, 422, { error: e.case, message: e.message });
      json(res, 500, { error: String(/** @type {any} */ (e)?.message ?? e) });
    }
  });
  server.on('connection', (s) => sockets.push(s));
  await new Promise((r) => server.listen(port, '127.0.0.1', () => r(undefined)));
  const { port: bound } = /** @type {import('node:net').AddressInfo} */ (server.address());
  return {
    url: `http://127.0.0.1:${bound}/`,
    payments,
    stateFile,
    /** The next refund is made and never answered; resolves with it once made. */
    hang: () => new Promise((resolve) => { hangNext = resolve; }),
    close: () => new Promise((r) => {
      for (const s of sockets) s.destroy();
      server.close(() => r(undefined));
    }),
  };
}

/** @param {string} pathname @param {http.ServerResponse} res */
async function serveStatic(pathname, res) {
  const rel = pathname === '/' ? '/index.html' : decodeURIComponent(pathname);
  for (const [prefix, dir] of STATIC) {
    if (!rel.startsWith(prefix)) continue;
    const file = path.resolve(dir, rel.slice(prefix.length));
    if (!file.startsWith(dir + path.sep)) break;
    try {
      const data = await readFile(file);
      return res.writeHead(200, { 'content-type': TYPES[/** @type {keyof TYPES} */ (path.extname(file))] ?? 'application/octet-stream', 'cache-control': 'no-store' }).end(data);
    } catch {
      break;
    }
  }
  res.writeHead(404).end();
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({ options: { port: { type: 'string', default: '8090' }, state: { type: 'string' }, tier: { type: 'string', default: '2' }, hang: { type: 'boolean', default: false } } });
  const s = await startServer({ port: Number(values.port), state: values.state, tier: values.tier });
  if (values.hang) s.hang().then((r) => console.log('refund made, its answer withheld:', JSON.stringify(r)));
  console.log(`browser agent: ${s.url}  (payments state: ${s.stateFile})`);
}
