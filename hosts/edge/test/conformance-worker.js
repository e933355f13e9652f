// A test Worker: the journal contract suite and the conformance vectors inside Durable
// Objects, over each object's own SQLite through the storage the production Worker gives
// the gate (@interlock/gate/workerd's DurableObjectSql). Same bearer-token front as the
// production Worker; one object per case and per vector (the path's journal name).
//
//   GET  /v1/journals/<any>/contract          the suite's SQLite cases (names)
//   POST /v1/journals/<case>/contract/<case>  runs one case on that object's empty storage
//   POST /v1/journals/<vector>/conformance     {vector, pins}: the runner's report
// The vectors are played by Node's driver (hosts/node/conformance/driver.js) as it is, given
// the runner made from this Worker's modules (a Worker cannot read files).
import worker from '../src/worker.js';
import { gateComponent, DurableObjectSql } from '@interlock/gate/workerd';
import { GateComponent, storageImport } from '@interlock/gate/core';
import { runVector } from '../../node/conformance/driver.js';
import { instantiate as instantiateRunner } from '../../node/conformance/gen/conformance_runner.js';
import r1 from '../../node/conformance/gen/conformance_runner.core.wasm';
import r2 from '../../node/conformance/gen/conformance_runner.core2.wasm';
import r3 from '../../node/conformance/gen/conformance_runner.core3.wasm';
import { instantiate as instantiateContract } from '../../node/conformance/gen/contract/journal_contract.js';
import c1 from '../../node/conformance/gen/contract/journal_contract.core.wasm';
import c2 from '../../node/conformance/gen/contract/journal_contract.core2.wasm';
import c3 from '../../node/conformance/gen/contract/journal_contract.core3.wasm';

/** @type {Record<string, WebAssembly.Module>} */
const CONTRACT = {
  'journal_contract.core.wasm': c1,
  'journal_contract.core2.wasm': c2,
  'journal_contract.core3.wasm': c3,
};

/** @type {Record<string, WebAssembly.Module>} */
const RUNNER = {
  'conformance_runner.core.wasm': r1,
  'conformance_runner.core2.wasm': r2,
  'conformance_runner.core3.wasm': r3,
};
const runner = new GateComponent(instantiateRunner, (name) => RUNNER[name]);

/**
 * The contract suite (dist/journal_contract.wasm) over `storage`.
 * @param {DurableObjectSql} storage
 */
async function contractSuite(storage) {
  const root = await instantiateContract(async (name) => CONTRACT[name], { 'interlock:gate/storage': storageImport(storage) });
  return root.suite;
}

export class InterlockJournal {
  /** @param {DurableObjectState} ctx */
  constructor(ctx) {
    this.ctx = ctx;
  }

  /** @param {Request} request */
  async fetch(request) {
    const path = new URL(request.url).pathname.replace(/^\/v1\/journals\/[^/]*/, '');
    const storage = new DurableObjectSql(this.ctx.storage, `Durable Object journal ${this.ctx.id}`);
    if (request.method === 'GET' && path === '/contract') {
      return Response.json((await contractSuite(storage)).cases('sqlite'));
    }
    const name = /^\/contract\/(.+)$/.exec(path)?.[1];
    if (request.method === 'POST' && name) {
      try {
        (await contractSuite(storage)).run(decodeURIComponent(name), 'sqlite');
        return Response.json({ failure: null });
      } catch (e) {
        return Response.json({ failure: String(/** @type {any} */ (e)?.payload ?? e) });
      }
    }
    if (request.method === 'POST' && path === '/conformance') {
      const { vector, pins } = await request.json();
      return Response.json(await runVector(vector, { gate: gateComponent(), storage, host: 'edge', pins, runner }));
    }
    return new Response('no such test route', { status: 404 });
  }
}

export default worker;
