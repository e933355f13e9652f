// Values crossing into the gate as JSON text: checked first, so the gate never decides on a
// value the caller did not give (JSON.stringify would silently change some).
import { invalidField } from './errors.js';

/**
 * `name` as one JSON pointer token (RFC 6901).
 * @param {string | number} name
 */
const token = (name) => String(name).replaceAll('~', '~0').replaceAll('/', '~1');

/**
 * Why `v` cannot cross as JSON unchanged, or null. JSON.stringify would silently turn NaN and
 * Infinity into null, drop undefined, functions and symbols, turn a Date into a string and a
 * Map into {}, and throw an untyped TypeError on a BigInt or a cycle: the gate would decide
 * on a value the caller never gave. Integer magnitude is the core's rule, not checked here.
 * @param {unknown} v
 * @returns {string | null}
 */
function unfaithful(v) {
  switch (typeof v) {
    case 'string':
    case 'boolean':
      return null;
    case 'number':
      return Number.isFinite(v) ? null : `is ${v}, which JSON cannot carry`;
    case 'bigint':
      return `is a BigInt (${v}n), which JSON cannot carry; pass a number (at most 2^53-1) or a string`;
    case 'undefined':
      return 'is undefined, which JSON cannot carry (it would be dropped)';
    case 'function':
      return 'is a function, which JSON cannot carry (it would be dropped)';
    case 'symbol':
      return 'is a symbol, which JSON cannot carry (it would be dropped)';
    default: {
      if (v === null || Array.isArray(v)) return null;
      const o = /** @type {Record<string | symbol, any>} */ (v);
      const proto = Object.getPrototypeOf(o);
      if (proto !== Object.prototype && proto !== null) {
        const kind = o.constructor?.name ?? 'object';
        return `is a ${kind}, not a plain object, array, string, number, boolean or null (JSON would change it)`;
      }
      if (typeof o.toJSON === 'function') return 'has a toJSON method (JSON would send what it returns instead)';
      if (Object.getOwnPropertySymbols(o).some((s) => Object.prototype.propertyIsEnumerable.call(o, s))) {
        return 'has symbol keys, which JSON cannot carry (they would be dropped)';
      }
      return null;
    }
  }
}

/**
 * Throws InvalidFieldError at the JSON pointer of the first value JSON would not carry as is.
 * @param {unknown} v
 * @param {string} path
 * @param {Set<object>} seen
 */
function checkJson(v, path, seen) {
  const problem = unfaithful(v);
  if (problem) throw invalidField(path, problem);
  if (typeof v !== 'object' || v === null) return;
  if (seen.has(v)) throw invalidField(path, 'refers back to itself (a cycle), which JSON cannot carry');
  seen.add(v);
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      if (!(i in v)) throw invalidField(`${path}/${i}`, 'is a hole in the array, which JSON would turn into null');
      checkJson(v[i], `${path}/${i}`, seen);
    }
  } else {
    const o = /** @type {Record<string, unknown>} */ (v);
    for (const k of Object.keys(o)) checkJson(o[k], `${path}/${token(k)}`, seen);
  }
  seen.delete(v);
}

/**
 * Throws InvalidFieldError (`field`: `root` + the pointer) unless JSON carries `value` as is.
 * @param {unknown} value
 * @param {string} [root]
 */
export function assertJson(value, root = '') {
  checkJson(value, root, new Set());
}

/**
 * An input as the JSON text a gate export takes: text as given, a value checked (nothing
 * recorded, nothing sent when it fails) and then serialized.
 * @param {unknown} value
 * @returns {string}
 */
export function jsonText(value) {
  if (typeof value === 'string') return value;
  assertJson(value);
  return JSON.stringify(value);
}

