//! The gate's logic as a pure state machine: no clock, no file, no network, no wit-bindgen.
//!
//! Time comes in as an argument (`now_ms`), storage through the [`Journal`] trait, and
//! target I/O leaves as [`Step`]s that the host performs and answers with a [`Reply`]
//! (sans-IO, like quinn-proto). The WebAssembly component in `guest/component` is a thin
//! translation of the WIT contract onto this crate.
#![no_std]
extern crate alloc;
#[cfg(test)]
extern crate std;

mod authority;
mod canon;
pub mod defaults;
pub mod effects;
mod entry;
pub mod export;
mod gate;
pub mod http_api;
mod journal;
pub mod proof;
mod proposal;
mod receipt;
pub mod recovery;
pub mod rules;
pub mod schema;
pub mod targets;
pub mod tools;
mod types;
pub mod webhooks;

pub use canon::{canonical, effect_id_for, sha256_hex};
pub use gate::people::Notice;
pub use gate::{pinned_streams, Gate};
pub use journal::{Journal, JournalError, MemJournal};
pub use proposal::parse_input;
pub use receipt::{Problem, ProblemKind, VerifyReport};
pub use types::*;
