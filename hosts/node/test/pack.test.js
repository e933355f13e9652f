// `npm pack` of @interlock/gate installs into an empty folder and the README's protect()
// quickstart runs there, with no Rust toolchain on the PATH: the tarball carries the
// transpiled components (gen/), byte for byte what `npm run build` made. The quickstart is
// the snippet between the "README: protect" markers of test/tools-quickstart.test.js, as is,
// with the payments simulator standing for the developer's functions around it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PKG } from './helpers.js';

// Every PATH entry that holds a Rust toolchain is left out (fs-ext, the file journal's
// flock, builds with node-gyp: a C++ compiler, no Rust).
const RUST = ['cargo', 'rustc', 'rustup'];
const PATH = (process.env.PATH ?? '').split(path.delimiter)
  .filter((d) => d && !RUST.some((t) => fs.existsSync(path.join(d, t))))
  .join(path.delimiter);
const env = { ...process.env, PATH, npm_config_nodedir: process.env.npm_config_nodedir ?? '/usr', CARGO_HOME: '/nonexistent', RUSTUP_HOME: '/nonexistent' };

/** The README snippet's blocks (imports, then the body), dedented. */
function snippet() {
  const text = fs.readFileSync(path.join(PKG, 'test/tools-quickstart.test.js'), 'utf8');
  const blocks = [...text.matchAll(/\/\/ README: protect \(begin\)\n([\s\S]*?)\n\s*\/\/ README: protect \(end\)/g)].map((m) => {
    const lines = m[1].split('\n');
    const indent = Math.min(...lines.filter((l) => l.trim()).map((l) => l.match(/^ */)[0].length));
    return lines.map((l) => l.slice(indent)).join('\n');
  });
  assert.equal(blocks.length, 2, 'test/tools-quickstart.test.js has two README: protect blocks (imports, body)');
  return blocks;
}

test('npm pack: the tarball installs into an empty folder and the protect() quickstart runs there without Rust', { timeout: 120_000 }, () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'interlock-pack-'));
  try {
    for (const t of RUST) {
      assert.ok(PATH.split(path.delimiter).every((d) => !fs.existsSync(path.join(d, t))), `${t} is still on the PATH`);
    }
    const [packed] = JSON.parse(execFileSync('npm', ['pack', '--json', '--pack-destination', dir], { cwd: PKG, env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }));
    const files = packed.files.map((f) => f.path);
    for (const f of ['gen/manifest.json', 'gen/gate/interlock_gate.js', 'gen/gate/interlock_gate.core.wasm', 'gen/payments/payments_sim.core.wasm',
      'gen/gate/interlock_gate.core2.wasm', 'gen/gate/interlock_gate.core3.wasm', 'src/index.js', 'src/browser.js', 'src/core.js', 'types/index.d.ts']) {
      assert.ok(files.includes(f), `the tarball lacks ${f}`);
    }
    assert.deepEqual(files.filter((f) => /^(test|conformance|scripts|examples|node_modules)\//.test(f)), [], 'the tarball ships only the package');

    const app = path.join(dir, 'app');
    fs.mkdirSync(app);
    fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'quickstart', private: true, type: 'module' }));
    // Optional dependencies (the SQL journals' clients) are left out: the quickstart's
    // journal is a folder, and better-sqlite3 alone would take minutes to build here.
    execFileSync('npm', ['install', path.join(dir, packed.filename), '--omit=optional', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'],
      { cwd: app, env, stdio: ['ignore', 'pipe', 'pipe'] });

    // The installed package holds the transpiled components as built here.
    const installed = path.join(app, 'node_modules/@interlock/gate');
    for (const f of files.filter((x) => x.startsWith('gen/'))) {
      assert.ok(fs.readFileSync(path.join(installed, f)).equals(fs.readFileSync(path.join(PKG, f))), `${f} differs from the build's`);
    }

    const [imports, body] = snippet();
    fs.writeFileSync(path.join(app, 'quickstart.js'), `${imports}
import { Payments } from '@interlock/gate';

const payments = await Payments.create('payments.json', '2');
payments.addOrder('881', 10000);
const get_order = ({ order_id, excluding }) => ({ refunded_total: payments.premises(order_id, excluding).refunded_by_others_cents });
const create_refund = ({ order_id, amount_cents, reference }) => payments.refund(order_id, amount_cents, null, reference, Date.now());
const find_refund = ({ reference }) => ({ found: payments.findByReference(reference) });

${body}

const again = await tools.create_refund({ order_id: '881', amount_cents: 2000 });
tools.close();
console.log(JSON.stringify({ from: import.meta.resolve('@interlock/gate'), ok: out.ok, state: out.outcome.state, replayed: again.outcome.replayed }));
`);
    const lines = execFileSync(process.execPath, ['quickstart.js'], { cwd: app, env, encoding: 'utf8' }).trim().split('\n');
    const report = JSON.parse(lines.at(-1));
    assert.ok(report.from.startsWith(`file://${fs.realpathSync(app)}/node_modules/@interlock/gate/`), `the quickstart ran ${report.from}, not the installed package`);
    assert.deepEqual([report.ok, report.state, report.replayed], [true, 'COMMITTED', true]);
    assert.match(lines[0], /^true create_refund done; it happened once/);
    // Counted at the service (its state file): one $20 refund.
    const refunds = JSON.parse(fs.readFileSync(path.join(app, 'payments.json'), 'utf8')).refunds;
    assert.deepEqual(refunds.map((r) => [r.order, r.amount_cents]), [['881', 2000]]);
    assert.ok(fs.existsSync(path.join(app, '.interlock/tools/journal.jsonl')));
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
