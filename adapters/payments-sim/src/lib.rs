//! `interlock-payments-sim`: a simulated refund API with Stripe-like semantics.
//!
//! The service comes in tiers (see `FAULTS.md`, "The payments service, by tier"):
//! - tier 1 dedupes by idempotency key for [`DEDUPE_WINDOW_MS`], then forgets the key;
//! - tier 2 keeps no keys, but a refund can be found by the reference the gate attached;
//! - tier 3 does neither;
//! - "1+lookup" dedupes and offers lookup.
//!
//! Its state lives in its own JSON file, apart from the gate's journal, and is written
//! durably after every mutation (`<file>.tmp`, fsync, rename over the file, fsync the
//! directory), so a refund that `refund` returned survives a kill of the process.
//! Amounts are cents; time is always passed in as Unix milliseconds.
//!
//! [`Payments::capture`], [`Payments::apply`] and [`Payments::query`] answer the gate's
//! steps for this service ([`Reply`]): which refusals are definitive lives there, once.
//!
//! Without the default feature `std` the crate is `no_std` + `alloc`: no file, but every
//! tier rule, plus [`Payments::snapshot`] / [`Payments::restore`] so that whoever hosts it
//! (the component in `component/`, loaded beside the gate) keeps the state itself.
#![cfg_attr(not(feature = "std"), no_std)]
extern crate alloc;

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
#[cfg(feature = "std")]
use std::fs::{self, OpenOptions};
#[cfg(feature = "std")]
use std::io::Write;
#[cfg(feature = "std")]
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

mod target;
pub use target::Reply;

/// How long a tier-1 service remembers an idempotency key after its first use.
pub const DEDUPE_WINDOW_MS: u64 = 24 * 3600 * 1000;

/// Version of the state file layout.
const STATE_VERSION: u32 = 1;

/// What the refund API can do for a caller recovering from a crash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Tier {
    /// Same idempotency key within the window returns the first refund.
    pub dedupes: bool,
    /// Refunds can be found by reference.
    pub lookup: bool,
}

impl Tier {
    /// Dedupes, no lookup.
    pub const ONE: Tier = Tier {
        dedupes: true,
        lookup: false,
    };
    /// Lookup only.
    pub const TWO: Tier = Tier {
        dedupes: false,
        lookup: true,
    };
    /// Neither.
    pub const THREE: Tier = Tier {
        dedupes: false,
        lookup: false,
    };
    /// Dedupes and offers lookup (F10).
    pub const ONE_LOOKUP: Tier = Tier {
        dedupes: true,
        lookup: true,
    };

    /// Parses `"1"`, `"2"`, `"3"` or `"1+lookup"` (surrounding whitespace ignored).
    pub fn parse(s: &str) -> Result<Tier, Error> {
        match s.trim() {
            "1" => Ok(Tier::ONE),
            "2" => Ok(Tier::TWO),
            "3" => Ok(Tier::THREE),
            "1+lookup" => Ok(Tier::ONE_LOOKUP),
            _ => Err(Error::BadTier(s.to_string())),
        }
    }

    /// The form [`Tier::parse`] accepts: `"1"`, `"2"`, `"3"` or `"1+lookup"`.
    pub fn label(&self) -> String {
        match (self.dedupes, self.lookup) {
            (true, false) => "1",
            (false, true) => "2",
            (false, false) => "3",
            (true, true) => "1+lookup",
        }
        .to_string()
    }
}

/// One refund as the service recorded it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Refund {
    /// `"re_0001"`, `"re_0002"`, ... in creation order, across all orders.
    pub id: String,
    pub order: String,
    pub amount_cents: u64,
    /// The reference the caller attached (the gate's effect id); stored at every tier.
    pub reference: Option<String>,
    /// The key the service deduped on; `None` on tiers that do not dedupe (they ignore keys).
    pub idempotency_key: Option<String>,
    pub created_ms: u64,
    /// Made by a person in the dashboard, not through the API.
    pub by_hand: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("unknown order {0}")]
    UnknownOrder(String),
    #[error(
        "refund of {requested_cents} cents on order {order} exceeds the remaining {remaining_cents} cents"
    )]
    ExceedsBalance {
        order: String,
        requested_cents: u64,
        remaining_cents: u64,
    },
    /// Same key, other parameters, inside the window (Stripe's 400).
    #[error("idempotency key {key} was already used with other parameters")]
    IdempotencyMismatch { key: String },
    /// `find_by_reference` on a service without lookup.
    #[error("this payments service offers no lookup by reference")]
    LookupUnsupported,
    #[error("bad tier {0:?} (expected 1, 2, 3 or 1+lookup)")]
    BadTier(String),
    #[cfg(feature = "std")]
    #[error("payments state i/o: {0}")]
    Io(#[from] std::io::Error),
    /// The state parses as JSON but is not a valid state (schema, version, references).
    #[error("corrupt payments state: {0}")]
    Corrupt(String),
    /// [`Payments::restore`] was given text that is not JSON at all.
    #[error("payments state is not JSON: {0}")]
    InvalidJson(String),
}

impl Error {
    /// The error as a stable code and its fields: `code` or `code: name=value ...`, string
    /// values JSON-quoted, e.g. `exceeds_balance: order="order_881" requested_cents=3000
    /// remaining_cents=2000`. Records compared byte for byte across hosts (a journal's
    /// `detail`) carry this, never the Display text: a code is not reworded.
    pub fn detail(&self) -> String {
        match self {
            Error::UnknownOrder(order) => format!("unknown_order: order={}", quote(order)),
            Error::ExceedsBalance {
                order,
                requested_cents,
                remaining_cents,
            } => format!(
                "exceeds_balance: order={} requested_cents={requested_cents} remaining_cents={remaining_cents}",
                quote(order)
            ),
            Error::IdempotencyMismatch { key } => {
                format!("idempotency_mismatch: key={}", quote(key))
            }
            Error::LookupUnsupported => "lookup_unsupported".to_string(),
            Error::BadTier(tier) => format!("bad_tier: tier={}", quote(tier)),
            #[cfg(feature = "std")]
            Error::Io(e) => format!("state_io: message={}", quote(&e.to_string())),
            Error::Corrupt(m) => format!("corrupt_state: message={}", quote(m)),
            Error::InvalidJson(m) => format!("state_not_json: message={}", quote(m)),
        }
    }
}

/// `s` as a JSON string, so that a field value in a detail is unambiguous.
fn quote(s: &str) -> String {
    serde_json::to_string(s).expect("a string always serializes")
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Order {
    paid_cents: u64,
    eligible: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct State {
    version: u32,
    tier: Tier,
    /// Number of the last refund id handed out.
    last_seq: u64,
    orders: BTreeMap<String, Order>,
    /// All refunds, in creation order.
    refunds: Vec<Refund>,
}

impl State {
    /// Parses and validates a state: [`Error::InvalidJson`] when `json` is not JSON,
    /// [`Error::Corrupt`] when it is JSON but not a valid state.
    fn parse(json: &str) -> Result<Self, Error> {
        // Two steps, so that text that is not JSON is told apart from JSON of the wrong
        // shape (a streaming parse reports whichever problem it meets first).
        let value: serde_json::Value =
            serde_json::from_str(json).map_err(|e| Error::InvalidJson(e.to_string()))?;
        let state: State =
            serde_json::from_value(value).map_err(|e| Error::Corrupt(e.to_string()))?;
        state.validate().map_err(Error::Corrupt)?;
        Ok(state)
    }

    /// The state file's JSON: pretty, fields in declaration order, orders sorted by name.
    fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a state always serializes")
    }

    fn new(tier: Tier) -> Self {
        State {
            version: STATE_VERSION,
            tier,
            last_seq: 0,
            orders: BTreeMap::new(),
            refunds: Vec::new(),
        }
    }

    fn order(&self, order: &str) -> Result<&Order, Error> {
        self.orders
            .get(order)
            .ok_or_else(|| Error::UnknownOrder(order.to_string()))
    }

    fn refunded_cents(&self, order: &str) -> u64 {
        self.refunds
            .iter()
            .filter(|r| r.order == order)
            .map(|r| r.amount_cents)
            .sum()
    }

    fn check_balance(&self, order: &str, amount_cents: u64) -> Result<(), Error> {
        let paid = self.order(order)?.paid_cents;
        let remaining = paid.saturating_sub(self.refunded_cents(order));
        if amount_cents > remaining {
            return Err(Error::ExceedsBalance {
                order: order.to_string(),
                requested_cents: amount_cents,
                remaining_cents: remaining,
            });
        }
        Ok(())
    }

    fn push_refund(
        &mut self,
        order: &str,
        amount_cents: u64,
        idempotency_key: Option<&str>,
        reference: Option<&str>,
        now_ms: u64,
        by_hand: bool,
    ) -> Refund {
        self.last_seq += 1;
        let refund = Refund {
            id: format!("re_{:04}", self.last_seq),
            order: order.to_string(),
            amount_cents,
            reference: reference.map(str::to_string),
            idempotency_key: idempotency_key.map(str::to_string),
            created_ms: now_ms,
            by_hand,
        };
        self.refunds.push(refund.clone());
        refund
    }

    fn validate(&self) -> Result<(), String> {
        if self.version != STATE_VERSION {
            return Err(format!("unsupported state version {}", self.version));
        }
        for r in &self.refunds {
            if !self.orders.contains_key(&r.order) {
                return Err(format!("refund {} names unknown order {}", r.id, r.order));
            }
        }
        if (self.refunds.len() as u64) > self.last_seq {
            return Err(format!(
                "{} refunds but last id number is {}",
                self.refunds.len(),
                self.last_seq
            ));
        }
        Ok(())
    }
}

/// The simulated refund service: its state and, unless in memory, the file it lives in.
#[derive(Debug)]
pub struct Payments {
    state: State,
    #[cfg(feature = "std")]
    path: Option<PathBuf>,
}

#[cfg(feature = "std")]
impl Payments {
    /// A new, empty service, persisted at `path` (an existing file there is replaced).
    pub fn create(path: &Path, tier: Tier) -> Result<Self, Error> {
        let p = Payments {
            state: State::new(tier),
            path: Some(path.to_path_buf()),
        };
        save(path, &p.state)?;
        Ok(p)
    }

    /// Reloads a service from `path`, as after a restart. Anything unreadable in the file
    /// (not UTF-8, not JSON, not a valid state) is [`Error::Corrupt`] naming the path.
    pub fn open(path: &Path) -> Result<Self, Error> {
        let bytes = fs::read(path)?;
        let corrupt =
            |e: &dyn core::fmt::Display| Error::Corrupt(format!("{}: {e}", path.display()));
        let text = core::str::from_utf8(&bytes).map_err(|e| corrupt(&e))?;
        let state = State::parse(text).map_err(|e| match e {
            Error::Corrupt(m) | Error::InvalidJson(m) => corrupt(&m),
            other => other,
        })?;
        Ok(Payments {
            state,
            path: Some(path.to_path_buf()),
        })
    }
}

impl Payments {
    /// A service with no file: tests, and hosts that keep [`Payments::snapshot`] themselves.
    pub fn in_memory(tier: Tier) -> Self {
        Payments {
            state: State::new(tier),
            #[cfg(feature = "std")]
            path: None,
        }
    }

    /// The whole state as JSON, exactly the text of the state file (without its final
    /// newline). [`Payments::restore`] takes it back.
    pub fn snapshot(&self) -> String {
        self.state.to_json()
    }

    /// A service with no file from a [`Payments::snapshot`], validated like
    /// [`Payments::open`]: [`Error::InvalidJson`] when `json` is not JSON,
    /// [`Error::Corrupt`] when it is not a valid state.
    pub fn restore(json: &str) -> Result<Payments, Error> {
        Ok(Payments {
            state: State::parse(json)?,
            #[cfg(feature = "std")]
            path: None,
        })
    }

    pub fn tier(&self) -> Tier {
        self.state.tier
    }

    /// Adds an order paid `paid_cents`, eligible for refunds. On an existing order this
    /// sets the paid amount and makes it eligible again; its refunds stay.
    pub fn add_order(&mut self, order: &str, paid_cents: u64) -> Result<(), Error> {
        let mut next = self.state.clone();
        next.orders.insert(
            order.to_string(),
            Order {
                paid_cents,
                eligible: true,
            },
        );
        self.commit(next)
    }

    pub fn set_eligible(&mut self, order: &str, eligible: bool) -> Result<(), Error> {
        self.state.order(order)?;
        let mut next = self.state.clone();
        if let Some(o) = next.orders.get_mut(order) {
            o.eligible = eligible;
        }
        self.commit(next)
    }

    /// Refunds `amount_cents` on `order` through the API.
    ///
    /// On a deduping tier a key seen within [`DEDUPE_WINDOW_MS`] of its first use returns
    /// that first refund and creates nothing (checked before the balance, as Stripe
    /// replays the stored response); the same key with another order or amount inside the
    /// window is [`Error::IdempotencyMismatch`]. Past the window the key is forgotten and a
    /// new refund is made. On other tiers the key is ignored entirely. The reference is
    /// always stored.
    ///
    /// Eligibility is NOT checked: it is a fact of the order system, which the gate reads
    /// as a premise and re-checks before the send. A caller without a gate (the baselines
    /// of the fault table, F7) can pay out on an ineligible order, as in the real world.
    pub fn refund(
        &mut self,
        order: &str,
        amount_cents: u64,
        idempotency_key: Option<&str>,
        reference: Option<&str>,
        now_ms: u64,
    ) -> Result<Refund, Error> {
        let key = if self.state.tier.dedupes {
            idempotency_key
        } else {
            None
        };
        if let Some(key) = key {
            // The latest refund under this key is its current first use (earlier ones expired).
            let first = self
                .state
                .refunds
                .iter()
                .rev()
                .find(|r| r.idempotency_key.as_deref() == Some(key));
            if let Some(first) = first {
                if now_ms.saturating_sub(first.created_ms) <= DEDUPE_WINDOW_MS {
                    if first.order == order && first.amount_cents == amount_cents {
                        return Ok(first.clone());
                    }
                    return Err(Error::IdempotencyMismatch {
                        key: key.to_string(),
                    });
                }
            }
        }
        self.state.check_balance(order, amount_cents)?;
        let mut next = self.state.clone();
        let refund = next.push_refund(order, amount_cents, key, reference, now_ms, false);
        self.commit(next)?;
        Ok(refund)
    }

    /// A person refunds in the dashboard: no key, no reference, `by_hand = true`.
    /// The order must exist and have the balance; eligibility is the person's call.
    pub fn refund_by_hand(
        &mut self,
        order: &str,
        amount_cents: u64,
        now_ms: u64,
    ) -> Result<Refund, Error> {
        self.state.check_balance(order, amount_cents)?;
        let mut next = self.state.clone();
        let refund = next.push_refund(order, amount_cents, None, None, now_ms, true);
        self.commit(next)?;
        Ok(refund)
    }

    /// The first refund carrying `reference`, if any. [`Error::LookupUnsupported`]
    /// unless the tier offers lookup.
    pub fn find_by_reference(&self, reference: &str) -> Result<Option<Refund>, Error> {
        if !self.state.tier.lookup {
            return Err(Error::LookupUnsupported);
        }
        Ok(self
            .state
            .refunds
            .iter()
            .find(|r| r.reference.as_deref() == Some(reference))
            .cloned())
    }

    /// The refunds on `order`, in creation order (empty for an unknown order).
    pub fn refunds(&self, order: &str) -> Vec<Refund> {
        self.state
            .refunds
            .iter()
            .filter(|r| r.order == order)
            .cloned()
            .collect()
    }

    /// Total refunded on `order` (0 for an unknown order).
    pub fn refunded_cents(&self, order: &str) -> u64 {
        self.state.refunded_cents(order)
    }

    /// `{"eligible": bool, "refunded_by_others_cents": u64}` read from the system of
    /// record, at every tier. Refunds whose reference is `excluding_reference` are not
    /// counted (an effect's own refund never counts against it); hand refunds and
    /// refunds without a reference always count.
    pub fn premises(
        &self,
        order: &str,
        excluding_reference: Option<&str>,
    ) -> Result<serde_json::Value, Error> {
        let o = self.state.order(order)?;
        let by_others: u64 = self
            .state
            .refunds
            .iter()
            .filter(|r| r.order == order)
            .filter(|r| {
                excluding_reference.is_none() || r.reference.as_deref() != excluding_reference
            })
            .map(|r| r.amount_cents)
            .sum();
        Ok(serde_json::json!({
            "eligible": o.eligible,
            "refunded_by_others_cents": by_others,
        }))
    }

    /// Number of refund records across all orders.
    pub fn refund_count(&self) -> usize {
        self.state.refunds.len()
    }

    /// Persists `next`, then makes it the current state (so a failed write changes nothing).
    fn commit(&mut self, next: State) -> Result<(), Error> {
        #[cfg(feature = "std")]
        if let Some(path) = &self.path {
            save(path, &next)?;
        }
        self.state = next;
        Ok(())
    }
}

#[cfg(feature = "std")]
fn save(path: &Path, state: &State) -> Result<(), Error> {
    write_state_file(path, &state.to_json())
}

/// Writes a [`Payments::snapshot`] to `path` durably: `<path>.tmp`, fsync, rename over
/// `path`, fsync the directory; a crash leaves the old file or the new one, never half.
/// The file format of [`Payments::create`]; [`Payments::open`] reads it back. For hosts
/// that run the service elsewhere (the component) and keep its state in a file.
#[cfg(feature = "std")]
pub fn write_state_file(path: &Path, snapshot: &str) -> Result<(), Error> {
    let json = snapshot.as_bytes();
    let mut tmp_name = path.as_os_str().to_owned();
    tmp_name.push(".tmp");
    let tmp = PathBuf::from(tmp_name);
    {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        f.write_all(json)?;
        f.write_all(b"\n")?;
        f.sync_all()?;
    }
    fs::rename(&tmp, path)?;
    sync_dir(path)?;
    Ok(())
}

#[cfg(all(feature = "std", unix))]
fn sync_dir(path: &Path) -> Result<(), Error> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    fs::File::open(dir)?.sync_all()?;
    Ok(())
}

#[cfg(all(feature = "std", not(unix)))]
fn sync_dir(_path: &Path) -> Result<(), Error> {
    // Directories cannot be opened for fsync here; the rename is as durable as the OS makes it.
    Ok(())
}

#[cfg(test)]
mod tests;
