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
import { PKG, REPO } from './helpers.js';

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

/**
 * `npm pack` of the package in `pkg` (its prepack script runs unless `ignoreScripts`: the
 * jco transpile and tsc), into `dir`; checks what the tarball holds.
 * @returns {{ filename: string, files: string[] }}
 */
function pack(pkg, dir, ignoreScripts) {
  for (const t of RUST) {
    assert.ok(PATH.split(path.delimiter).every((d) => !fs.existsSync(path.join(d, t))), `${t} is still on the PATH`);
  }
  const args = ['pack', '--json', '--pack-destination', dir, ...(ignoreScripts ? ['--ignore-scripts'] : [])];
  const out = execFileSync('npm', args, { cwd: pkg, env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  // The prepack script's own lines come first; npm's JSON report is the rest.
  const [packed] = JSON.parse(out.slice(out.search(/^\[/m)));
  const files = packed.files.map((f) => f.path);
  for (const f of ['gen/manifest.json', 'gen/gate/interlock_gate.js', 'gen/gate/interlock_gate.core.wasm', 'gen/payments/payments_sim.core.wasm',
    'gen/gate/interlock_gate.core2.wasm', 'gen/gate/interlock_gate.core3.wasm', 'gen/gate-api/interlock_gate_api.js', 'gen/gate-api/interlock_gate_api.core.wasm',
    'src/index.js', 'src/browser.js', 'src/core.js', 'types/index.d.ts']) {
    assert.ok(files.includes(f), `the tarball lacks ${f}`);
  }
  assert.deepEqual(files.filter((f) => /^(test|conformance|scripts|examples|node_modules)\//.test(f)), [], 'the tarball ships only the package');
  return { filename: packed.filename, files };
}

test('npm pack: the tarball installs into an empty folder and the protect() quickstart runs there without Rust', { timeout: 120_000 }, () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'interlock-pack-'));
  try {
    // This package is built already (test.sh); --ignore-scripts: no second transpile of
    // gen/ under the other tests running beside this one.
    const packed = pack(PKG, dir, true);
    quickstart(dir, packed);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('npm pack in a fresh checkout, with no Rust and nothing built before: the transpiled components are made at pack time from dist/, byte for byte this build\'s', { timeout: 600_000 }, () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'interlock-fresh-'));
  try {
    // The repository's tracked files (dist/'s components are committed), nothing else.
    const tracked = execFileSync('git', ['ls-files', '-z'], { cwd: REPO, encoding: 'utf8' }).split('\0').filter((f) => f && fs.existsSync(path.join(REPO, f)));
    const checkout = path.join(dir, 'checkout');
    for (const f of tracked) {
      const [from, to] = [path.join(REPO, f), path.join(checkout, f)];
      fs.mkdirSync(path.dirname(to), { recursive: true });
      if (fs.lstatSync(from).isSymbolicLink()) fs.symlinkSync(fs.readlinkSync(from), to);
      else fs.copyFileSync(from, to);
    }
    const pkg = path.join(checkout, 'hosts/node');
    assert.ok(!fs.existsSync(path.join(pkg, 'gen')) && !fs.existsSync(path.join(pkg, 'types')), 'the checkout has no build output');
    // --ignore-scripts: no native addon is built (packing needs none); jco and tsc are JS.
    execFileSync('npm', ['ci', '--ignore-scripts', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: pkg, env, stdio: ['ignore', 'pipe', 'pipe'] });
    const packed = pack(pkg, dir, false);
    for (const f of packed.files.filter((x) => x.startsWith('gen/'))) {
      assert.ok(fs.readFileSync(path.join(pkg, f)).equals(fs.readFileSync(path.join(PKG, f))), `${f} from the fresh checkout differs from this build's`);
    }
    quickstart(dir, packed);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

/**
 * Installs the tarball `packed` into an empty app in `dir` and runs the README's protect()
 * quickstart there, with no Rust on the PATH.
 * @param {string} dir
 * @param {{ filename: string, files: string[] }} packed
 */
function quickstart(dir, packed) {
  const { files } = packed;
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
}
