// Transpiles the gate component, the payments simulator and the test components
// (../../dist, made by scripts/build-wasm.sh at the repository root) into gen/ with jco, in
// instantiation mode: the host passes the imports (storage, clock) as an object, so the same
// JS runs in Node, in a browser and in workerd. jco's output is used as it comes (no text
// patch), its .d.ts files included: they are the interface types the JS is checked against.
// gen/manifest.json lists each component's core modules (stable names: a loader that cannot
// compile at run time, workerd, imports them by name).
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const dist = process.env.INTERLOCK_DIST ?? resolve(root, '../../dist');
const gen = join(root, 'gen');
const jco = join(root, 'node_modules/@bytecodealliance/jco/dist/jco.js');

const components = [
  { wasm: 'interlock_gate.wasm', out: 'gate' },
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
