// Shared by the Node tests: paths, the vectors, the CLI binary.
import { readFileSync, readdirSync, existsSync, mkdtempSync } from 'node:fs';
import { join, resolve, dirname } from 'node:path';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { createHash } from 'node:crypto';

export const PKG = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const REPO = resolve(PKG, '../..');
export const VECTORS = join(REPO, 'tests/conformance');
export const PINS = 'journal-pins.json';

/** Every *.json vector (sorted by file name), except the pins file. */
export function loadVectors() {
  return readdirSync(VECTORS)
    .filter((f) => f.endsWith('.json') && f !== PINS)
    .sort()
    .map((f) => ({ file: f, vector: JSON.parse(readFileSync(join(VECTORS, f), 'utf8')) }));
}

export function loadPins() {
  const p = join(VECTORS, PINS);
  return existsSync(p) ? JSON.parse(readFileSync(p, 'utf8')) : {};
}

export const sha256 = (bytes) => createHash('sha256').update(bytes).digest('hex');

export function tempDir(prefix = 'interlock-node-') {
  return mkdtempSync(join(tmpdir(), prefix));
}

/** The CLI binary: $INTERLOCK_BIN, else $CARGO_TARGET_DIR (or ~/.cache/interlock-target)/debug/interlock. */
export function cliBinary() {
  if (process.env.INTERLOCK_BIN) return process.env.INTERLOCK_BIN;
  const target = process.env.CARGO_TARGET_DIR ?? join(process.env.HOME ?? '/root', '.cache/interlock-target');
  for (const profile of ['debug', 'release']) {
    const p = join(target, profile, 'interlock');
    if (existsSync(p)) return p;
  }
  return null;
}

export const GATE_WASM = join(REPO, 'dist/interlock_gate.wasm');
