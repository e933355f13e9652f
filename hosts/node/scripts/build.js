// Transpiles the gate component, the payments simulator and the test components
// (../../dist, made by scripts/build-wasm.sh at the repository root) into gen/ with jco, in
// instantiation mode: the host passes the imports (storage, clock) as an object, so the same
// JS runs in Node, in a browser and in workerd. jco's output is used as it comes (no text
// patch), its .d.ts files included: they are the interface types the JS is checked against.
// One build-time constant is set with esbuild's `define` (the standard way to fix an
// environment lookup at build time, as bundlers do for NODE_ENV): jco's glue reads
// `globalThis.process.env.JCO_DEBUG` on every call and on every import it lowers, and in
// Node each read goes through the environment's interceptor: about half of a cheap call's
// time (results/bench.md, "Node"). With it defined false the debug logging is compiled out;
// to see jco's debug log, build with INTERLOCK_JCO_DEBUG=1.
// A second define names `WebAssembly.promising` (JSPI) through a constant that is the
// runtime's own `WebAssembly.promising` where it has one, else the identity. jco wraps each
// export's post-return in `try { x = WebAssembly.promising(f) } catch { x = f }`, 19 times
// per instantiation of the gate; where JSPI is missing (Node 20) each is a TypeError whose
// message V8 renders by re-parsing the function around the call, jco's 18,000-line
// instantiation function: ~7 ms each, ~130 ms per instance (results/bench-notes.md). The
// identity gives what jco's `catch` gives (`f` itself), without the throw.
// gen/manifest.json lists each component's core modules (stable names: a loader that cannot
// compile at run time, workerd, imports them by name).
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { transformSync } from 'esbuild';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const dist = process.env.INTERLOCK_DIST ?? resolve(root, '../../dist');
const gen = join(root, 'gen');
const jco = join(root, 'node_modules/@bytecodealliance/jco/dist/jco.js');
// The constant `WebAssembly.promising` is defined to (see the note at the top).
const PROMISING = '__interlockPromising';

const components = [
  { wasm: 'interlock_gate.wasm', out: 'gate' },
  // The gate with its HTTP API, for @interlock/gate/workerd (a Worker serves HTTP).
  { wasm: 'interlock_gate_api.wasm', out: 'gate-api' },
  { wasm: 'payments_sim.wasm', out: 'payments' },
  // For this package's tests and the viewer, in conformance/gen/, which the package does
  // not ship: the conformance runner and the journal contract suite.
  { wasm: 'conformance_runner.wasm', out: '../conformance/gen' },
  { wasm: 'journal_contract.wasm', out: '../conformance/gen/contract' },
];

rmSync(gen, { recursive: true, force: true });
rmSync(join(root, 'conformance/gen'), { recursive: true, force: true });
// tsc (after this script, `npm run build`) writes types/ afresh: no declaration of a module
// that is gone may ship.
rmSync(join(root, 'types'), { recursive: true, force: true });
const manifest = {};
for (const c of components) {
  const src = join(dist, c.wasm);
  if (!existsSync(src)) {
    console.error(`missing ${src}: run \`bash scripts/build-wasm.sh\` at the repository root first`);
    process.exit(2);
  }
  const out = join(gen, c.out);
  mkdirSync(out, { recursive: true });
  execFileSync(process.execPath, [jco, 'transpile', src, '-o', out, '--instantiation', 'async', '--quiet'], { stdio: 'inherit' });
  if (!process.env.INTERLOCK_JCO_DEBUG) {
    for (const f of readdirSync(out).filter((f) => f.endsWith('.js'))) {
      const path = join(out, f);
      const { code } = transformSync(readFileSync(path, 'utf8'), {
        define: { 'globalThis.process.env.JCO_DEBUG': 'false', 'WebAssembly.promising': PROMISING },
        // At the end, so that jco's "use components" directive stays the first line.
        footer: `const ${PROMISING} = globalThis.WebAssembly?.promising ?? ((f) => f);`,
        format: 'esm',
        target: 'es2022',
      });
      if (code.includes('JCO_DEBUG')) {
        console.error(`${path}: jco's output reads JCO_DEBUG in a way the define does not reach; every call pays an environment lookup`);
        process.exit(1);
      }
      if (code.split('WebAssembly?.promising').length - 1 !== 1 || code.includes('WebAssembly.promising')) {
        console.error(`${path}: jco's output reaches WebAssembly.promising in a way the define does not; each instantiation pays a TypeError per export`);
        process.exit(1);
      }
      writeFileSync(path, code);
    }
  }
  if (c.out.startsWith('..')) continue;
  manifest[c.out] = {
    wasm: c.wasm,
    js: c.wasm.replace(/\.wasm$/, '.js'),
    cores: readdirSync(out).filter((f) => f.endsWith('.wasm')).sort(),
    sha256: createHash('sha256').update(readFileSync(src)).digest('hex'),
  };
}
writeFileSync(join(gen, 'manifest.json'), JSON.stringify(manifest, null, 2) + '\n');
console.log(`gen/: ${Object.entries(manifest).map(([k, v]) => `${k} (${v.wasm} ${v.sha256.slice(0, 12)})`).join(', ')}`);
