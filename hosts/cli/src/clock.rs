//! `wasi:clocks/wall-clock`: the only time the gate sees (lease expiry, claim deadlines,
//! dedupe windows). Tests and `--clock-ms` use a fake clock so runs are reproducible.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::bindings::wasi::clocks0_2_0::wall_clock::{Datetime, Host};

/// A wall clock in Unix milliseconds: the system's, or a fake one that only moves when
/// told. Clones of a fake clock share one time, so a test can move the time a running
/// host sees.
#[derive(Clone, Debug)]
pub enum Clock {
    System,
    Fake(Arc<AtomicU64>),
}

impl Clock {
    /// A fake clock that reads `now_ms` until it is set or advanced.
    pub fn fake(now_ms: u64) -> Clock {
        Clock::Fake(Arc::new(AtomicU64::new(now_ms)))
    }

    pub fn now_ms(&self) -> u64 {
        match self {
            Clock::System => SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                // A clock before 1970 is a broken machine; 0 makes every lease look expired,
                // which fails closed.
                .unwrap_or(0),
            Clock::Fake(ms) => ms.load(Ordering::SeqCst),
        }
    }

    /// Moves a fake clock forward; a no-op on the system clock.
    pub fn advance(&self, by_ms: u64) {
        if let Clock::Fake(ms) = self {
            ms.fetch_add(by_ms, Ordering::SeqCst);
        }
    }

    /// Waits `ms`: really on the system clock, by advancing a fake one (so a waiting loop
    /// makes progress without slowing tests down).
    pub fn sleep(&self, ms: u64) {
        match self {
            Clock::System => std::thread::sleep(Duration::from_millis(ms)),
            Clock::Fake(_) => self.advance(ms),
        }
    }
}

impl Host for Clock {
    fn now(&mut self) -> Datetime {
        let ms = self.now_ms();
        Datetime {
            seconds: ms / 1000,
            nanoseconds: ((ms % 1000) * 1_000_000) as u32,
        }
    }

    fn resolution(&mut self) -> Datetime {
        // The gate only ever reads milliseconds.
        Datetime {
            seconds: 0,
            nanoseconds: 1_000_000,
        }
    }
}

/// The same clock as WASI's wall clock, for a component that imports it through WASI (the
/// wasi:http component).
#[cfg(feature = "serve")]
impl wasmtime_wasi::HostWallClock for Clock {
    fn resolution(&self) -> Duration {
        Duration::from_millis(1)
    }
    fn now(&self) -> Duration {
        Duration::from_millis(self.now_ms())
    }
}
