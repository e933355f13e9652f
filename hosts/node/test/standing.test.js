// `Interlock.open('.interlock')`, no options, and an effect that names no lease (issue 23,
// item 2), in Node on the file journal: the scenario is test/browser/standing-scenario.js,
// which test/browser/standing.test.js runs in headless Chromium on IndexedDB. Before commit
// 76c5c15 such an effect was refused unless `standingLease: true` was given.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as api from '@interlock/gate';
import { standingByDefault, strictRefuses } from './browser/standing-scenario.js';

/** A fresh working directory: `.interlock` is a new folder there. */
const place = { fresh: async () => process.chdir(fs.mkdtempSync(path.join(os.tmpdir(), 'interlock-standing-'))) };

test('Interlock.open(".interlock") with no options: an effect naming no lease commits under the standing lease, GRANTED once, said once when defined', async () => {
  const r = await standingByDefault(api, place);
  assert.deepEqual(r.atOpen, []);
  assert.deepEqual(r.atDefine, [r.notice], 'the gate\'s notice, once, when the effect is defined');
  assert.match(r.notice, /standing lease agent-standing/);
  assert.deepEqual(r.atCall, []);
  assert.deepEqual(r.first, ['COMMITTED', 'yes', false]);
  assert.deepEqual(r.again, ['COMMITTED', true, true]);
  assert.deepEqual(r.authority, { lease: 'agent-standing' });
  assert.equal(r.leaseChecked, 'agent-standing');
  assert.deepEqual(r.granted, [['lease:agent-standing', 'agent-standing']]);
  assert.equal(r.sent, 1);
  assert.equal(r.refunds, 1);
  assert.equal(r.problems, 0);
  // The file journal on disk is the CLI's: the GRANTED line is in it, once.
  const lines = fs.readFileSync('.interlock/journal.jsonl', 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
  assert.deepEqual(lines.filter((e) => e.state === 'GRANTED').map((e) => e.stream), ['lease:agent-standing']);
});

test('Interlock.open(".interlock", { strict: true }): the effect naming no lease is InvalidFieldError at /authority; nothing recorded, nothing sent', async () => {
  const r = await strictRefuses(api, place);
  assert.equal(r.invalidField, true, r.error);
  assert.equal(r.field, '/authority');
  assert.deepEqual(r.streams, []);
  assert.deepEqual(r.streamsAfterReopen, []);
  assert.deepEqual(r.warned, []);
  assert.equal(r.sent, 0);
  assert.equal(r.read, 0, 'the premises were not read');
  assert.equal(r.refunds, 0);
  const file = '.interlock/journal.jsonl';
  assert.equal(fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '', '', 'the journal file holds nothing');
});
