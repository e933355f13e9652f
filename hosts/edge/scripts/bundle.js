// Bundles each Worker of this folder with esbuild (workerd resolves no node_modules) into
// dist/, copies the gate's wasm core modules beside it (workerd compiles no wasm from bytes
// at run time: each is a module of the Worker), and writes each Worker's workerd config
// (dist/<name>.capnp). `node scripts/bundle.js` prints what a Worker uploads.
import { build } from 'esbuild';
import { copyFileSync, mkdirSync, writeFileSync, statSync, rmSync, existsSync } from 'node:fs';
import { basename, dirname, join, resolve, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { builtinModules } from 'node:module';
import { readFileSync } from 'node:fs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const dist = join(root, 'dist');

/** Workers: entry, and the class of Durable Object each exports. */
export const WORKERS = [
  { name: 'interlock', entry: 'src/worker.js' },
  { name: 'conformance', entry: 'test/conformance-worker.js', test: true },
  { name: 'agent', entry: 'examples/agent/worker.js', doClass: 'RefundAgent', binding: 'RefundAgent' },
];

/**
 * esbuild plugin: a `.wasm` import stays an import of a Worker module `gen/<dir>/<file>`,
 * and the file is copied there.
 * @param {Set<string>} wasm
 */
const workerd = (wasm) => ({
  name: 'workerd',
  setup(b) {
    b.onResolve({ filter: /\.wasm$/ }, (args) => {
      const file = resolve(args.resolveDir, args.path);
      const module = `gen/${basename(dirname(file))}/${basename(file)}`;
      wasm.add(JSON.stringify([module, file]));
      return { path: `./${module}`, external: true };
    });
  },
});

/** The workerd config of `w`, its modules listed (paths relative to dist/). */
function capnp(w, modules) {
  const list = [`(name = "${w.name}.js", esModule = embed "${w.name}.js")`]
    .concat(modules.map(([m]) => `(name = "${m}", wasm = embed "${m}")`));
  return `# Made by hosts/edge/scripts/bundle.js. Run: workerd serve dist/${w.name}.capnp
# --socket-addr http=127.0.0.1:PORT --directory-path journal-disk=/path/to/storage
using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [
    (name = "main", worker = .worker),
    (name = "journal-disk", disk = (path = "/tmp/interlock-edge-journals", writable = true)),
    # The targets are reached over the network (a local payments service in the tests).
    (name = "internet", network = (allow = ["public", "private", "local"])),
  ],
  sockets = [(name = "http", address = "127.0.0.1:8787", http = (), service = "main")],
);

const worker :Workerd.Worker = (
  modules = [
    ${list.join(',\n    ')}
  ],
  compatibilityDate = "2026-11-01",
  bindings = [
    (name = "INTERLOCK_TOKEN", fromEnvironment = "INTERLOCK_TOKEN"),
    (name = "INTERLOCK_TARGETS", fromEnvironment = "INTERLOCK_TARGETS"),
    (name = "INTERLOCK_RECEIPT_KEY", fromEnvironment = "INTERLOCK_RECEIPT_KEY"),
    (name = "INTERLOCK_SIGNING_KEY", fromEnvironment = "INTERLOCK_SIGNING_KEY"),
    (name = "INTERLOCK_STRICT_AUTHORITY", fromEnvironment = "INTERLOCK_STRICT_AUTHORITY"),
    (name = "INTERLOCK_DECIDERS", fromEnvironment = "INTERLOCK_DECIDERS"),
    (name = "INTERLOCK_WEBHOOK_SECRETS", fromEnvironment = "INTERLOCK_WEBHOOK_SECRETS"),
    (name = "INTERLOCK_NOTIFY_SECRET", fromEnvironment = "INTERLOCK_NOTIFY_SECRET"),
    (name = "INTERLOCK_EXPLICIT_SYNC", fromEnvironment = "INTERLOCK_EXPLICIT_SYNC"),
    (name = "MODEL_URL", fromEnvironment = "MODEL_URL"),
    (name = "PAYMENTS_URL", fromEnvironment = "PAYMENTS_URL"),
    (name = "${w.binding ?? 'JOURNALS'}", durableObjectNamespace = "${w.doClass ?? 'InterlockJournal'}"),
  ],
  durableObjectNamespaces = [
    (className = "${w.doClass ?? 'InterlockJournal'}", uniqueKey = "interlock-journal", enableSql = true),
  ],
  durableObjectStorage = (localDisk = "journal-disk"),
  globalOutbound = "internet",
);
`;
}

export async function bundle({ quiet = false } = {}) {
  rmSync(dist, { recursive: true, force: true });
  mkdirSync(dist, { recursive: true });
  const sizes = {};
  for (const w of WORKERS.filter((x) => existsSync(join(root, x.entry)))) {
    const wasm = new Set();
    const out = join(dist, `${w.name}.js`);
    await build({
      entryPoints: [join(root, w.entry)],
      outfile: out,
      bundle: true,
      format: 'esm',
      platform: 'browser',
      target: 'es2023',
      minify: true,
      conditions: ['workerd', 'worker', 'browser'],
      // Node's modules come from the runtime (nodejs_compat, the default at this date).
      external: ['cloudflare:*', 'node:*', ...builtinModules],
      alias: w.name === 'agent' ? { 'cloudflare:email': join(root, 'examples/agent/email-stub.js') } : {},
      logLevel: quiet ? 'error' : 'warning',
      plugins: [workerd(wasm)],
    });
    const modules = [...wasm].map((s) => JSON.parse(s)).sort();
    for (const [m, file] of modules) {
      mkdirSync(dirname(join(dist, m)), { recursive: true });
      copyFileSync(file, join(dist, m));
    }
    writeFileSync(join(dist, `${w.name}.capnp`), capnp(w, modules));
    const files = [out, ...modules.map(([m]) => join(dist, m))];
    const raw = files.reduce((n, f) => n + statSync(f).size, 0);
    const gz = files.reduce((n, f) => n + gzipSync(readFileSync(f)).length, 0);
    sizes[w.name] = { files: files.map((f) => relative(dist, f)), bytes: raw, gzipBytes: gz };
  }
  writeFileSync(join(dist, 'sizes.json'), JSON.stringify(sizes, null, 2) + '\n');
  if (!quiet) for (const [n, s] of Object.entries(sizes)) console.log(`${n}: ${s.files.length} modules, ${(s.bytes / 1024).toFixed(0)} KiB, ${(s.gzipBytes / 1024).toFixed(0)} KiB gzipped`);
  return sizes;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await bundle();
