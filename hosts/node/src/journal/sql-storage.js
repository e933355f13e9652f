// What the SQL storages (SQLite, PostgreSQL) share: they answer `sql-batch` only (the file
// calls are `unsupported`), and count the writing batches they committed.
import { StorageError } from '../errors.js';

export class SqlStorage {
  /** Writing transactions committed, and those of them that were durable. */
  commits = 0;
  durableCommits = 0;

  /** @param {string} label the journal, for messages */
  constructor(label) {
    this.label = label;
  }

  /**
   * @protected
   * @param {boolean} write
   * @param {boolean} durable
   */
  count(write, durable) {
    if (!write) return;
    this.commits += 1;
    if (durable) this.durableCommits += 1;
  }

  /** @returns {never} */
  fileSize() {
    throw new StorageError('unsupported', `${this.label} is a SQL journal, not a file one`);
  }
  fileRead = this.fileSize;
  fileAppend = this.fileSize;
  fileSync = this.fileSize;
  fileTruncate = this.fileSize;
  fileReplace = this.fileSize;
  fileCreate = this.fileSize;
}
