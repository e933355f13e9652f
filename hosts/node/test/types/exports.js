// The value exports of each entry of package.json "exports", by name. test/exports.test.js
// compares them with what the entries export at run time, and test/types/*.test-d.ts with
// what their declarations export: all three must agree.

export const NODE_EXPORTS = /** @type {const} */ ([
  'BadKeyError', 'BadSignatureError', 'ContentionError', 'CorruptJournalError', 'CrashedError',
  'ExportError', 'ExportFailedError', 'FakeClock', 'FileJournal', 'Gate', 'GateComponent',
  'GateError', 'Interlock', 'InterlockError', 'InvalidFieldError', 'InvalidJsonError',
  'JournalError', 'JournalFailedError', 'JournalLockedError', 'MalformedError', 'MemoryJournal',
  'PUBLIC_KEY_ENV', 'Payments', 'PaymentsService', 'PostgresJournal', 'PremiseReadError',
  'ProofError', 'ProofFailedError', 'Rejected', 'SIGNING_KEY_ENV', 'ServiceError', 'SqliteJournal',
  'StorageError', 'SystemClock', 'TargetTimeoutError', 'TooLargeError', 'TornTailError',
  'UnexpectedReplyError', 'UnknownEffectError', 'UnknownOperationError', 'UnknownVersionError',
  'UnsupportedJournalError', 'describeJournalError', 'gateComponent', 'gateError', 'gateRoot',
  'invalidField', 'journalError', 'openJournal', 'openedRoot', 'paymentsComponent',
  'paymentsTarget', 'proofError', 'protect', 'readKey', 'refuseJournalUrl', 'repairJournal',
  'toOutcome', 'writePrivateKey', 'writeStateFile',
]);

export const BROWSER_EXPORTS = /** @type {const} */ ([
  'BadKeyError', 'BadSignatureError', 'ContentionError', 'CorruptJournalError', 'CrashedError',
  'FakeClock', 'Gate', 'GateComponent', 'GateError', 'IndexedDbJournal', 'Interlock', 'InterlockError',
  'InvalidFieldError', 'InvalidJsonError', 'JournalError', 'JournalFailedError', 'JournalLockedError',
  'MalformedError', 'MemoryJournal', 'Payments', 'PaymentsService', 'PremiseReadError', 'ProofError',
  'ProofFailedError', 'Rejected', 'ServiceError', 'StorageError', 'SystemClock', 'TargetTimeoutError',
  'TooLargeError', 'TornTailError', 'UnexpectedReplyError', 'UnknownEffectError',
  'UnknownOperationError', 'UnknownVersionError', 'UnsupportedJournalError', 'describeJournalError',
  'gateComponent', 'gateError', 'gateRoot', 'invalidField', 'journalError', 'openedRoot',
  'paymentsComponent', 'paymentsTarget', 'proofError', 'protect', 'refuseJournalUrl', 'toOutcome',
]);

export const CORE_EXPORTS = /** @type {const} */ ([
  'BadKeyError', 'BadSignatureError', 'ContentionError', 'CorruptJournalError', 'CrashedError',
  'FakeClock', 'Gate', 'GateComponent', 'GateError', 'Interlock', 'InterlockError',
  'InvalidFieldError', 'InvalidJsonError', 'JournalError', 'JournalFailedError', 'JournalLockedError',
  'MalformedError', 'MemoryJournal', 'PaymentsService', 'PremiseReadError', 'ProofError',
  'ProofFailedError', 'Rejected', 'ServiceError', 'SqlStorage', 'StorageError', 'SystemClock',
  'TargetTimeoutError', 'TooLargeError', 'TornTailError', 'UnexpectedReplyError', 'UnknownEffectError',
  'UnknownOperationError', 'UnknownVersionError', 'UnsupportedJournalError', 'admin', 'assertJson',
  'describeJournalError', 'gateError', 'gateRoot', 'invalidField', 'journalError', 'jsonText',
  'openedRoot', 'paymentsTarget', 'proofError', 'protectWith', 'refuseJournalUrl', 'repairJournal',
  'storageImport', 'toOutcome',
]);
