// A test Worker: the journal contract suite and the conformance vectors inside Durable
// Objects, over each object's own SQLite through the storage the production Worker gives
// the gate (@interlock/gate/workerd's DurableObjectSql). Same bearer-token front as the
// production Worker; one object per case and per vector (the path's journal name).
//
//   GET  /v1/journals/<any>/contract          the suite's SQLite cases (names)
//   POST /v1/journals/<case>/contract/<case>  runs one case on that object's empty storage
import worker from '../src/worker.js';
import { DurableObjectSql } from '@interlock/gate/workerd';
import { storageImport } from '@interlock/gate/core';
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
    return new Response('no such test route', { status: 404 });
  }
}

export default worker;
