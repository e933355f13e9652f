// A test Worker: the conformance runner (tests/conformance/runner, the one interpreter of
// the vectors) inside a Durable Object, driving gate instances over that object's own
// SQLite journal (SqlJournal over ctx.storage.sql), exactly as the production Worker
// stores it. Node's driver (hosts/node/conformance/driver.js) is used as it is, given the
// runner made from the Worker's modules (its `runner` option: a Worker cannot read files).
// Same bearer-token front as the production Worker.
import worker from '../src/worker.js';
import SCHEMA from '../src/schema.js';
import { runVector } from '../../node/conformance/driver.js';
import { SqlJournal } from '../src/sql-journal.js';
import { gateComponent, getter } from '../src/load-workerd.js';
import { GateComponent } from '../../node/src/gate.js';
import { instantiate } from '../../node/conformance/gen/conformance_runner.js';
import r1 from '../../node/conformance/gen/conformance_runner.core.wasm';
import r2 from '../../node/conformance/gen/conformance_runner.core2.wasm';
import r3 from '../../node/conformance/gen/conformance_runner.core3.wasm';

/** Read by the driver in place of loading conformance/gen from files (see bundle.js). */
const runner = new GateComponent(instantiate, getter({
  'conformance_runner.core.wasm': r1,
  'conformance_runner.core2.wasm': r2,
  'conformance_runner.core3.wasm': r3,
}));

export class InterlockJournal {
  /** @param {DurableObjectState} ctx */
  constructor(ctx) {
    this.ctx = ctx;
  }

  /** POST /conformance {vector, pins}: the runner's report over this object's journal. */
  async fetch(/** @type {Request} */ request) {
    const { vector, pins } = await request.json();
    const storage = this.ctx.storage;
    const journal = SqlJournal.open({
      all: (sql, ...p) => storage.sql.exec(sql, ...p).toArray(),
      run: (sql, ...p) => void storage.sql.exec(sql, ...p).toArray(),
      transaction: (fn) => storage.transactionSync(fn),
    }, `Durable Object journal ${this.ctx.id}`, SCHEMA);
    const report = await runVector(vector, { gate: gateComponent(), journal, storage: { bytes: () => journal.bytes() }, host: 'edge', pins, runner });
    return Response.json(report);
  }
}

export default worker;
