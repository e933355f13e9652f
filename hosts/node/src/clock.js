// `wasi:clocks/wall-clock`: the only time the gate sees. Tests use a fake clock so runs are
// reproducible (and journals byte-identical across hosts).

/** @import { Clock } from './types.js' */

/**
 * The system clock (Unix ms).
 * @implements {Clock}
 */
export class SystemClock {
  nowMs() {
    return Date.now();
  }
  /**
   * @param {number} ms
   * @returns {Promise<void>}
   */
  sleep(ms) {
    return new Promise((resolve) => setTimeout(resolve, ms));
  }
}

/**
 * A clock that only moves when told; `sleep` advances it instead of waiting.
 * @implements {Clock}
 */
export class FakeClock {
  #ms;

  /** @param {number} nowMs */
  constructor(nowMs) {
    this.#ms = nowMs;
  }
  nowMs() {
    return this.#ms;
  }
  /** @param {number} ms */
  advance(ms) {
    this.#ms += ms;
  }
  /** @param {number} ms */
  set(ms) {
    this.#ms = ms;
  }
  /** @param {number} ms */
  async sleep(ms) {
    this.advance(ms);
  }
}
