//! Shared by the integration tests: the component, the support case, a proposal.
#![allow(dead_code)] // each test binary uses a different part

use std::sync::OnceLock;

use interlock_cli::Runtime;

#[allow(unused_imports)] // each test binary uses a different part
pub use interlock_cli::case::{proposal, HOUR_MS, LEASE, ORDER, PAID_CENTS, REFUND_CENTS};
/// 2027-01-15T08:00:00Z: a fixed start for the fake clock.
pub const T0_MS: u64 = 1_800_000_000_000;

/// The gate component, compiled once per test binary. A missing .wasm fails the test:
/// these tests are the host's reason to exist, so they never skip.
pub fn runtime() -> &'static Runtime {
    static RT: OnceLock<Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        let wasm = interlock_cli::runtime::locate(None).unwrap_or_else(|e| {
            panic!("{e:#}\n(run `bash scripts/build-wasm.sh` from the repo root)")
        });
        Runtime::load(&wasm).unwrap_or_else(|e| panic!("cannot load {}: {e:#}", wasm.display()))
    })
}

/// splitmix64: a seeded stream of delays and choices, no dependency.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}
