// The browser entry's declarations, as a TypeScript user of a bundler meets them: without
// Node's types, through `@interlock/gate/browser` and through `@interlock/gate` with the
// "browser" condition. Compiled, never run, by `npm run typecheck`.
import { Interlock, IndexedDbJournal, MemoryJournal, Payments, FakeClock } from '@interlock/gate/browser';
import type { Outcome, Storage } from '@interlock/gate/browser';
import * as browser from '@interlock/gate/browser';
import * as bundled from '@interlock/gate';
import { BROWSER_EXPORTS } from './exports.js';

type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
export const exportsListed: Same<keyof typeof browser, (typeof BROWSER_EXPORTS)[number]> = true;
/** A bundler resolving "." with the "browser" condition gets the same declarations. */
export const sameEntry: Same<keyof typeof bundled, keyof typeof browser> = true;

const gate = await Interlock.open('interlock-journal', { clock: new FakeClock(0) });
const inMemory = await Interlock.memory({ agent: 'refund-agent' });
const journal = await IndexedDbJournal.open('interlock-journal');
await journal.flush();
await journal.close();
await IndexedDbJournal.destroy('interlock-journal');
const memory: Storage = new MemoryJournal();
const bytes: Uint8Array = new MemoryJournal().bytes();
await Interlock.withJournal(memory);

const payments = await Payments.inMemory('1+lookup', { persist: (snapshot) => localStorage.setItem('p', snapshot) });
const again = await Payments.restore(payments.snapshot());
const refund = gate.effect(
  { target: 'payments', params: ['order', 'amount_cents'], lease: 'case-4471', lookup: (_e, { effectId }) => again.findByReference(effectId) },
  (order: string, amountCents: number, idempotencyKey: string) => again.refund(order, amountCents, idempotencyKey, idempotencyKey, Date.now()),
);
const outcome: Outcome = await refund('order_881', 2000);
void inMemory, bytes, outcome;

// @ts-expect-error: no file journal in a browser
Interlock.repair('./journal');
// @ts-expect-error: no payments.json in a browser
await Payments.open('payments.json');
// @ts-expect-error: no FileJournal in a browser
export const noFile = browser.FileJournal;
