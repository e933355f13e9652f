// Keys for proof for outsiders (Node): Ed25519 in the C2SP signed-note encoding, read from
// a file or the environment. Only text is read here; the component parses and checks every
// key (a malformed or wrong-half key throws BadKeyError there). A key is never logged or
// put in an error message.
import fs from 'node:fs';
import { BadKeyError } from './errors.js';

/** The environment variables the servers read and a checker may. */
export const SIGNING_KEY_ENV = 'INTERLOCK_SIGNING_KEY';
export const PUBLIC_KEY_ENV = 'INTERLOCK_PUBLIC_KEY';

/**
 * A key's text from `file`, else from the environment variable `env`.
 * @param {{ file?: string, env?: string, what?: string }} source
 * @returns {string}
 */
export function readKey({ file, env, what = 'key' } = {}) {
  if (file !== undefined) {
    try {
      return fs.readFileSync(file, 'utf8');
    } catch (e) {
      throw new BadKeyError('bad-key', `cannot read the ${what} file ${file}: ${/** @type {any} */ (e).code}`);
    }
  }
  if (env !== undefined) {
    const text = process.env[env];
    if (!text) throw new BadKeyError('bad-key', `the environment variable ${env} holds no ${what}`);
    return text;
  }
  throw new BadKeyError('bad-key', `give the ${what}: a file, or an environment variable`);
}

/**
 * Writes a private key to a new file, owner-only (0600); an existing file is never
 * overwritten.
 * @param {string} path
 * @param {string} signer
 */
export function writePrivateKey(path, signer) {
  const fd = fs.openSync(path, 'wx', 0o600);
  try {
    fs.writeSync(fd, `${signer}\n`);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}
