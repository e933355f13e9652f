// Node submit, one built host against another (for example main against the commit before
// the thin hosts), in alternating processes on one machine, so load moves both alike.
//
//   node experiments/bench/node/ab.mjs HOST_A HOST_B [--pairs N] [--out FILE.json]
//
// HOST_A and HOST_B are built hosts/node folders (`npm ci && npm run build` in each). Each
// process measures one host: submits over its in-memory journal (median of 9 rounds x 300)
// and over its file journal (median of 300, fdatasync included). Both hosts' APIs are
// served: a journal (before the thin hosts) or a storage (after) is passed under both names.
// The proposal and target are bench.mjs's (common.mjs).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { LEASE, LEASE_UNTIL_MS, T0_MS, median, nullTarget, proposal } from './common.mjs';


if (process.argv[2] === '--one') {
  const host = await import(join(resolve(process.argv[3]), 'src/index.js'));
  const { Gate, gateComponent, MemoryJournal, FileJournal, FakeClock } = host;
  const component = await gateComponent();
  const gateOver = async (j) => {
    const g = await Gate.instantiate(component, { journal: j, storage: j, clock: new FakeClock(T0_MS) });
    await g.grantLease(LEASE, LEASE_UNTIL_MS);
    return g;
  };
  const submit = async (g, n) => {
    const o = await g.submit(proposal(n), nullTarget);
    if (o.state !== 'COMMITTED') throw new Error(`unexpected outcome ${JSON.stringify(o)}`);
  };
  const mem = await gateOver(new MemoryJournal());
  let n = 0;
  const rounds = [];
  for (let r = 0; r <= 9; r++) {
    const t = performance.now();
    for (let i = 0; i < 300; i++) await submit(mem, n++);
    if (r > 0) rounds.push(((performance.now() - t) * 1000) / 300);
  }
  const dir = fs.mkdtempSync(join(os.homedir(), '.cache', 'bench-node-ab-'));
  const file = [];
  try {
    const fj = FileJournal.open(join(dir, 'journal'));
    const fg = await gateOver(fj);
    for (let i = 0; i < 300; i++) {
      const t = performance.now();
      await submit(fg, 1e9 + i);
      file.push((performance.now() - t) * 1000);
    }
    fj.close();
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  console.log(JSON.stringify({ memory_us: median(rounds), file_us: median(file) }));
  process.exit(0);
}

const [a, b] = process.argv.slice(2, 4).map((p) => resolve(p));
if (!a || !b) {
  console.error('usage: node experiments/bench/node/ab.mjs HOST_A HOST_B [--pairs N] [--out FILE.json]');
  process.exit(2);
}
const flag = (name, dflt) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : dflt;
};
const pairs = Number(flag('--pairs', '4'));
const self = fileURLToPath(import.meta.url);
const one = (host) => JSON.parse(execFileSync(process.execPath, [self, '--one', host], { encoding: 'utf8' }).trim());
const runs = { a: [], b: [] };
for (let p = 0; p < pairs; p++) {
  // Alternate which goes first, so neither always runs on a warmer machine.
  const order = p % 2 === 0 ? ['a', 'b'] : ['b', 'a'];
  for (const k of order) runs[k].push(one(k === 'a' ? a : b));
  console.error(`pair ${p + 1}: A ${JSON.stringify(runs.a.at(-1))} B ${JSON.stringify(runs.b.at(-1))}`);
}
const sum = (k, f) => median(runs[k].map((r) => r[f]));
const result = {
  a,
  b,
  pairs,
  memory_us: { a: sum('a', 'memory_us'), b: sum('b', 'memory_us') },
  file_us: { a: sum('a', 'file_us'), b: sum('b', 'file_us') },
  runs,
};
result.memory_b_over_a = result.memory_us.b / result.memory_us.a;
result.file_b_over_a = result.file_us.b / result.file_us.a;
console.log(JSON.stringify(result, null, 2));
const out = flag('--out');
if (out) fs.writeFileSync(out, JSON.stringify(result, null, 2) + '\n');
