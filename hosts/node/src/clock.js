// `wasi:clocks/wall-clock`: the only time the gate sees. Tests use a fake clock so runs are
// reproducible (and journals byte-identical across hosts).

/** The system clock (Unix ms). */
export class SystemClock {
  nowMs() {
    return Date.now();
  }
  sleep(ms) {
    return new Promise((resolve) => setTimeout(resolve, ms));
  }
}

/** A clock that only moves when told; `sleep` advances it instead of waiting. */
export class FakeClock {
  constructor(nowMs) {
    this.ms = nowMs;
  }
  nowMs() {
    return this.ms;
  }
  advance(ms) {
    this.ms += ms;
  }
  set(ms) {
    this.ms = ms;
  }
  async sleep(ms) {
    this.advance(ms);
  }
}
