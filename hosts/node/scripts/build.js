// Transpiles the gate component, the payments simulator and the journal format
// (../../dist, made by the lead's scripts/build-wasm.sh) into gen/ with jco, in
// instantiation mode: the host passes the imports (journal, clock) as an object, so the
// same JS runs in Node and in a browser. Copies the shared journals' one schema
// (adapters/sql-journal/src/schema.sql) to gen/schema.sql, where the SQLite and PostgreSQL
// journals read it at run time: gen/ is what the package ships.
//
// One patch is applied to jco's output: its debug logger reads process.env.JCO_DEBUG on
// every call (a getenv through Node's env proxy, about a third of a cheap call's time).
// The patch reads it once, when the module loads. The build fails if jco's text changes,
// so a jco upgrade cannot silently drop the patch.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const dist = process.env.INTERLOCK_DIST ?? resolve(root, '../../dist');
const gen = join(root, 'gen');
const jco = join(root, 'node_modules/@bytecodealliance/jco/dist/jco.js');

const components = [
  { wasm: 'interlock_gate.wasm', out: 'gate', js: 'interlock_gate.js' },
  { wasm: 'payments_sim.wasm', out: 'payments', js: 'payments_sim.js' },
  // Sync instantiation: FileJournal.open is synchronous, and this small component imports
  // nothing, so it is compiled and instantiated on first use (Node only).
  { wasm: 'journal_format.wasm', out: 'journal-format', js: 'journal_format.js', mode: 'sync' },
  // The conformance runner (tests/conformance/runner): for this package's tests and the
  // viewer, so it goes to conformance/gen/, which the package does not ship.
  { wasm: 'conformance_runner.wasm', out: '../conformance/gen', js: 'conformance_runner.js' },
];

const SLOW = 'if (!globalThis?.process?.env?.JCO_DEBUG) { return; }';
const FAST = 'if (!JCO_DEBUG_ONCE) { return; }';
const ONCE = 'const JCO_DEBUG_ONCE = !!globalThis?.process?.env?.JCO_DEBUG;\n';

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
  execFileSync(process.execPath, [jco, 'transpile', src, '-o', out, '--instantiation', c.mode ?? 'async', '--quiet'], {
    stdio: 'inherit',
  });
  const file = join(out, c.js);
  let text = readFileSync(file, 'utf8');
  const hits = text.split(SLOW).length - 1;
  if (process.env.INTERLOCK_NO_JCO_PATCH) {
    // For measuring what the patch saves (see README, "Per-call cost").
  } else if (hits === 1) {
    text = text.replace(SLOW, FAST).replace('"use components";\n', `"use components";\n${ONCE}`);
    if (!text.includes(ONCE)) throw new Error(`${file}: no "use components" header; jco changed`);
  } else if (hits !== 0 || text.includes('JCO_DEBUG')) {
    throw new Error(`${file}: jco's JCO_DEBUG check changed (${hits} hits); update scripts/build.js`);
  }
  writeFileSync(file, text);
  manifest[c.out] = {
    wasm: c.wasm,
    // Its core modules, for a loader that compiles them before a synchronous instantiation.
    cores: readdirSync(out).filter((f) => f.endsWith('.wasm')).sort(),
    sha256: createHash('sha256').update(readFileSync(src)).digest('hex'),
  };
}
const schema = 'adapters/sql-journal/src/schema.sql';
copyFileSync(resolve(root, '../..', schema), join(gen, 'schema.sql'));
manifest['schema.sql'] = { source: schema, sha256: createHash('sha256').update(readFileSync(join(gen, 'schema.sql'))).digest('hex') };
writeFileSync(join(gen, 'manifest.json'), JSON.stringify(manifest, null, 2) + '\n');
console.log(`gen/: ${Object.entries(manifest).map(([k, v]) => `${k} (${v.wasm ?? v.source} ${v.sha256.slice(0, 12)})`).join(', ')}`);
