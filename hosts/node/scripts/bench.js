// Per-call cost of the Node host: `node scripts/bench.js [N]`.
// Measures, after a warm-up, (a) a cheap export call (effect-id-of), (b) a whole submit
// (submit -> capture -> resume -> apply -> resume -> done: 3 export calls, the storage
// calls of the journal inside the gate, 1 durable append) on the in-memory storage and (c)
// on a folder (fdatasync included), with jco's output as scripts/build.js leaves it (gen/).
import { readFile } from 'node:fs/promises';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Gate } from '../src/gate.js';
import { GateComponent } from '../src/component.js';
import { MemoryJournal } from '../src/journal/memory.js';
import { FileJournal } from '../src/journal/file.js';
import { FakeClock } from '../src/clock.js';

const N = Number(process.argv[2] ?? 2000);
const root = fileURLToPath(new URL('..', import.meta.url));

async function component(dir) {
  const mod = await import(join(dir, 'interlock_gate.js'));
  return new GateComponent(mod.instantiate, async (name) => WebAssembly.compile(await readFile(join(dir, name))));
}

const targets = {
  capture: (req) => ({ tag: 'captured', val: JSON.stringify(Object.fromEntries(req.names.map((n) => [n, n === 'eligible' ? true : 0]))) }),
  authorize: () => ({ tag: 'allowed', val: true }),
  apply: () => ({ tag: 'applied', val: '{"refund_id":"re_1"}' }),
  query: () => ({ tag: 'not-found' }),
};
const proposal = (i) => ({
  agent: 'bench', target: { name: 'payments', dedupes: true, timeout_ms: 1000 }, key: `k${i}`,
  effect: { order: `o${i}`, amount_cents: 2000 }, authority: { lease: 'l' },
  premises: { eligible: true, refunded_by_others_cents: 0 },
});

async function measure(comp, journal) {
  const gate = await Gate.instantiate(comp, { storage: journal, clock: new FakeClock(1_800_000_000_000) });
  await gate.grantLease('l', 1_900_000_000_000);
  for (let i = 0; i < 200; i++) gate.effectIdOf(proposal(i));
  for (let i = 0; i < 200; i++) await gate.submit(proposal(`w${i}`), targets);
  let t = process.hrtime.bigint();
  for (let i = 0; i < N; i++) gate.effectIdOf(proposal(i));
  const cheap = Number(process.hrtime.bigint() - t) / N / 1000;
  t = process.hrtime.bigint();
  for (let i = 0; i < N; i++) {
    const o = await gate.submit(proposal(i), targets);
    if (o.state !== 'COMMITTED') throw new Error(JSON.stringify(o));
  }
  const submit = Number(process.hrtime.bigint() - t) / N / 1000;
  return { cheap, submit };
}

const rows = [];
for (const [label, dir] of [['gen/ (jco, JCO_DEBUG defined false)', join(root, 'gen/gate')]]) {
  const comp = await component(dir);
  const mem = await measure(comp, new MemoryJournal());
  const fdir = mkdtempSync(join(tmpdir(), 'interlock-bench-'));
  const fj = FileJournal.open(fdir);
  const file = await measure(comp, fj);
  fj.close();
  rmSync(fdir, { recursive: true, force: true });
  rows.push({ label, cheap: mem.cheap, mem: mem.submit, file: file.submit });
}
console.log(`node ${process.version}, N=${N} (after 200 warm-up calls each)`);
console.log('build                  effect-id-of  submit(memory)  submit(file, fdatasync)');
for (const r of rows) {
  console.log(`${r.label.padEnd(22)} ${r.cheap.toFixed(1).padStart(9)} µs ${r.mem.toFixed(1).padStart(11)} µs ${r.file.toFixed(1).padStart(14)} µs`);
}
