"""``wasi:clocks/wall-clock``: the only time the gate sees (lease expiry, claim deadlines,
dedupe windows). Tests use :class:`FakeClock` so runs are reproducible."""

from __future__ import annotations

import threading
import time


class SystemClock:
    """The machine's wall clock, in Unix milliseconds."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def advance(self, ms: int) -> None:
        """A no-op: the system clock moves by itself."""

    def sleep(self, ms: int) -> None:
        time.sleep(ms / 1000)

    async def asleep(self, ms: int) -> None:
        import asyncio

        await asyncio.sleep(ms / 1000)


class FakeClock:
    """A clock that reads ``now_ms`` until it is advanced. Waiting advances it, so a
    waiting loop makes progress without slowing tests down."""

    def __init__(self, now_ms: int):
        self._ms = int(now_ms)
        self._lock = threading.Lock()

    def now_ms(self) -> int:
        return self._ms

    def advance(self, ms: int) -> None:
        with self._lock:
            self._ms += int(ms)

    def sleep(self, ms: int) -> None:
        self.advance(ms)

    async def asleep(self, ms: int) -> None:
        self.advance(ms)
