// The value exports of each entry of package.json "exports", by name. test/exports.test.js
// compares them with what the entries export at run time, and test/types/*.test-d.ts with
// what their declarations export: all three must agree.

export const NODE_EXPORTS = /** @type {const} */ ([
  'ContentionError', 'CorruptJournalError', 'CrashedError', 'ExportError', 'ExportFailedError', 'FakeClock', 'FileJournal', 'Gate',
  'GateComponent', 'GateError', 'Interlock', 'InterlockError', 'InvalidFieldError', 'InvalidJsonError',
  'JournalError', 'JournalFailedError', 'JournalLockedError', 'MemoryJournal', 'Payments', 'PaymentsService',
  'PostgresJournal', 'PremiseReadError', 'Rejected', 'ServiceError', 'SqliteJournal', 'StorageError',
  'SystemClock', 'TargetTimeoutError', 'TooLargeError', 'TornTailError', 'UnexpectedReplyError',
  'UnknownEffectError', 'UnknownOperationError', 'UnsupportedJournalError', 'describeJournalError',
  'gateComponent', 'gateError', 'gateRoot', 'invalidField', 'journalError', 'openJournal', 'openedRoot',
  'paymentsComponent', 'paymentsTarget', 'protect', 'refuseJournalUrl', 'repairJournal', 'toOutcome',
  'writeStateFile',
]);

export const BROWSER_EXPORTS = /** @type {const} */ ([
  'ContentionError', 'CorruptJournalError', 'CrashedError', 'FakeClock', 'Gate', 'GateComponent',
  'GateError', 'IndexedDbJournal', 'Interlock', 'InterlockError', 'InvalidFieldError', 'InvalidJsonError',
  'JournalError', 'JournalFailedError', 'JournalLockedError', 'MemoryJournal', 'Payments', 'PaymentsService',
  'PremiseReadError', 'Rejected', 'ServiceError', 'StorageError', 'SystemClock', 'TargetTimeoutError',
  'TooLargeError', 'TornTailError', 'UnexpectedReplyError', 'UnknownEffectError', 'UnknownOperationError',
  'UnsupportedJournalError', 'describeJournalError', 'gateComponent', 'gateError', 'gateRoot',
  'invalidField', 'journalError', 'openedRoot', 'paymentsComponent', 'paymentsTarget', 'protect',
  'refuseJournalUrl', 'toOutcome',
]);

export const CORE_EXPORTS = /** @type {const} */ ([
  'ContentionError', 'CorruptJournalError', 'CrashedError', 'FakeClock', 'Gate', 'GateComponent',
  'GateError', 'Interlock', 'InterlockError', 'InvalidFieldError', 'InvalidJsonError', 'JournalError',
  'JournalFailedError', 'JournalLockedError', 'MemoryJournal', 'PaymentsService', 'PremiseReadError',
  'Rejected', 'ServiceError', 'SqlStorage', 'StorageError', 'SystemClock', 'TargetTimeoutError', 'TooLargeError',
  'TornTailError', 'UnexpectedReplyError', 'UnknownEffectError', 'UnknownOperationError',
  'UnsupportedJournalError', 'admin', 'assertJson', 'describeJournalError', 'gateError', 'gateRoot',
  'invalidField', 'journalError', 'jsonText', 'openedRoot', 'paymentsTarget', 'protectWith',
  'refuseJournalUrl', 'repairJournal', 'storageImport', 'toOutcome',
]);
