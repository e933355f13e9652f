// The value exports of each entry of package.json "exports", by name. test/exports.test.js
// compares them with what the entries export at run time, and test/types/*.test-d.ts with
// what their declarations export: all three must agree.

export const NODE_EXPORTS = /** @type {const} */ ([
  'ContentionError', 'CorruptJournalError', 'CorruptJournalFileError', 'FakeClock', 'FileJournal', 'Gate',
  'GateError', 'Interlock', 'InterlockError', 'InvalidFieldError', 'InvalidJsonError', 'JournalError',
  'JournalFailedError', 'JournalLockedError', 'MemoryJournal', 'Payments', 'PaymentsService', 'PostgresJournal', 'PremiseReadError', 'Rejected',
  'ServiceError', 'SqliteJournal', 'SystemClock', 'TargetTimeoutError', 'TooLargeError', 'TornTailError', 'UnexpectedReplyError',
  'UnknownEffectError', 'UnknownOperationError', 'UnsupportedJournalError', 'describeJournalError',
  'gateComponent', 'gateError', 'invalidField', 'journalFormat', 'openJournal', 'paymentsComponent', 'paymentsTarget', 'refuseJournalUrl',
  'protect', 'toOutcome', 'writeStateFile',
]);

export const BROWSER_EXPORTS = /** @type {const} */ ([
  'ContentionError', 'CorruptJournalError', 'CorruptJournalFileError', 'FakeClock', 'Gate', 'GateError',
  'IndexedDbJournal', 'Interlock', 'InterlockError', 'InvalidFieldError', 'InvalidJsonError', 'JournalError',
  'JournalFailedError', 'JournalLockedError', 'MemoryJournal', 'Payments', 'PaymentsService', 'PremiseReadError', 'Rejected',
  'ServiceError', 'SystemClock', 'TargetTimeoutError', 'TooLargeError', 'TornTailError', 'UnexpectedReplyError',
  'UnknownEffectError', 'UnknownOperationError', 'UnsupportedJournalError', 'describeJournalError',
  'gateComponent', 'gateError', 'invalidField', 'journalFormat', 'paymentsComponent', 'paymentsTarget', 'refuseJournalUrl',
  'protect', 'toOutcome',
]);
