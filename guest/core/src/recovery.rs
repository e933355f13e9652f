//! The recovery table: every combination of what recovery knows maps to exactly one next
//! action. The gate calls [`decide`] after each thing it learns, until the action is final.
//! A test walks every combination and checks the rules that must never break.
//!
//! | claim | dispatched | lookup     | re-check   | dedupe window | action           |
//! |-------|------------|------------|------------|---------------|------------------|
//! | live  | yes        | not asked  | *          | *             | Query            |
//! | live  | *          | found      | *          | *             | CommitFound      |
//! | live  | *          | else       | *          | *             | Wait             |
//! | over  | yes        | not asked, not found under claim | * | *  | Query            |
//! | over  | *          | found      | *          | *             | CommitFound      |
//! | over  | *          | failed     | *          | *             | StayOpen         |
//! | over  | *          | else       | not done   | *             | Recheck          |
//! | over  | *          | else       | read fails | *             | StayOpen         |
//! | over  | *          | else       | fails      | *             | Refuse           |
//! | over  | no         | else       | holds      | *             | Send             |
//! | over  | yes        | not found  | holds      | *             | Send             |
//! | over  | yes        | none       | holds      | inside        | Send (same key)  |
//! | over  | yes        | none       | holds      | passed        | Ambiguous        |
//! | over  | yes        | none       | holds      | no dedupe     | Ambiguous        |
//!
//! Lookup comes first because it only reads: an effect that happened is COMMITTED whatever
//! changed since, and even while another worker's claim is live (a restart after a crash
//! closes what landed with one lookup, instead of waiting out the whole claim). A send needs the re-check to hold, and either proof that nothing was sent
//! (never dispatched, or the lookup says not found) or a dedupe window that covers it.

/// Whether another send of this effect may still be in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Claim {
    Live,
    Over,
}

/// What the target's lookup said, if the target has one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Lookup {
    /// The target cannot be queried.
    Unavailable,
    NotAsked,
    Found,
    NotFound,
    /// Not found by a lookup asked while a claim was live: a send still in flight may land
    /// after it, so it is no evidence that nothing was sent. Once the claim is over the
    /// lookup is asked again.
    NotFoundUnderClaim,
    Failed,
}

/// Authority and premises, re-read now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Recheck {
    NotDone,
    Holds,
    Fails,
    ReadFailed,
}

/// Whether a resend under the idempotency key would be deduped by the target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dedupe {
    No,
    InsideWindow,
    WindowPassed,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Inputs {
    pub claim: Claim,
    /// A DISPATCHED entry exists: a send may have gone out.
    pub dispatched: bool,
    pub lookup: Lookup,
    pub recheck: Recheck,
    pub dedupe: Dedupe,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Leave it: a send may be in flight. Nothing is written.
    Wait,
    /// Ask the target whether the effect happened.
    Query,
    /// The target has it: record COMMITTED.
    CommitFound,
    /// Re-read authority and premises.
    Recheck,
    /// Take a fresh claim (durably) and send under the effect id as idempotency key.
    Send,
    /// Record REFUSED: nothing (more) will be sent.
    Refuse,
    /// Record AMBIGUOUS: nobody can tell, a person decides.
    Ambiguous,
    /// A read failed: leave the effect open for a later recovery, nothing sent.
    StayOpen,
}

pub fn decide(i: Inputs) -> Action {
    if i.claim == Claim::Live {
        // A lookup only reads, so it may be asked while another send may be in flight: an
        // effect the target already has is closed at once instead of after the claim.
        // Anything else waits the claim out (and asks again after it: a send still in
        // flight may land after a "not found").
        return match i.lookup {
            Lookup::NotAsked if i.dispatched => Action::Query,
            Lookup::Found => Action::CommitFound,
            _ => Action::Wait,
        };
    }
    match i.lookup {
        Lookup::NotAsked | Lookup::NotFoundUnderClaim if i.dispatched => return Action::Query,
        Lookup::Found => return Action::CommitFound,
        Lookup::Failed => return Action::StayOpen,
        _ => {}
    }
    match i.recheck {
        Recheck::NotDone => return Action::Recheck,
        Recheck::ReadFailed => return Action::StayOpen,
        Recheck::Fails => return Action::Refuse,
        Recheck::Holds => {}
    }
    if !i.dispatched || i.lookup == Lookup::NotFound {
        return Action::Send;
    }
    match i.dedupe {
        Dedupe::InsideWindow => Action::Send,
        Dedupe::WindowPassed | Dedupe::No => Action::Ambiguous,
    }
}

/// Every combination of inputs, for the table walk and for documentation.
pub fn all_inputs() -> impl Iterator<Item = Inputs> {
    let claims = [Claim::Live, Claim::Over];
    let lookups = [
        Lookup::Unavailable,
        Lookup::NotAsked,
        Lookup::Found,
        Lookup::NotFound,
        Lookup::NotFoundUnderClaim,
        Lookup::Failed,
    ];
    let rechecks = [
        Recheck::NotDone,
        Recheck::Holds,
        Recheck::Fails,
        Recheck::ReadFailed,
    ];
    let dedupes = [Dedupe::No, Dedupe::InsideWindow, Dedupe::WindowPassed];
    claims.into_iter().flat_map(move |claim| {
        [false, true].into_iter().flat_map(move |dispatched| {
            lookups.into_iter().flat_map(move |lookup| {
                rechecks.into_iter().flat_map(move |recheck| {
                    dedupes.into_iter().map(move |dedupe| Inputs {
                        claim,
                        dispatched,
                        lookup,
                        recheck,
                        dedupe,
                    })
                })
            })
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walk_every_combination() {
        let mut n = 0;
        for i in all_inputs() {
            n += 1;
            let a = decide(i);
            // While a send may be in flight, only read: ask the lookup, or close what the
            // lookup found; never send, re-check, refuse or give up.
            if i.claim == Claim::Live {
                assert!(
                    matches!(a, Action::Wait | Action::Query | Action::CommitFound),
                    "{i:?} -> {a:?}"
                );
                if a == Action::Query {
                    assert!(i.dispatched && i.lookup == Lookup::NotAsked, "{i:?}");
                }
                if i.lookup == Lookup::Unavailable {
                    assert_eq!(a, Action::Wait, "{i:?}");
                }
            }
            if a == Action::Send {
                // Never send blind: authority and premises were re-read and hold ...
                assert_eq!(i.recheck, Recheck::Holds, "{i:?}");
                // ... and either nothing went out, or the target dedupes inside its window.
                let nothing_sent = !i.dispatched || i.lookup == Lookup::NotFound;
                assert!(nothing_sent || i.dedupe == Dedupe::InsideWindow, "{i:?}");
                // A target that can neither dedupe nor be queried is never resent after a dispatch.
                assert!(
                    !(i.dispatched && i.dedupe == Dedupe::No && i.lookup == Lookup::Unavailable),
                    "{i:?}"
                );
            }
            // A found effect is committed, whatever changed since, claim or no claim.
            if i.lookup == Lookup::Found {
                assert_eq!(a, Action::CommitFound, "{i:?}");
            }
            // A failed read never ends an effect.
            if (i.lookup == Lookup::Failed || i.recheck == Recheck::ReadFailed)
                && a != Action::Wait
                && a != Action::CommitFound
            {
                assert!(
                    matches!(a, Action::StayOpen | Action::Query),
                    "{i:?} -> {a:?}"
                );
            }
            // A dispatched effect is never refused or resent before the lookup was asked.
            if i.dispatched && i.lookup == Lookup::NotAsked {
                assert_eq!(a, Action::Query, "{i:?}");
            }
            // A "not found" heard while a send may have been in flight proves nothing: the
            // claim is waited out and the lookup asked again, never a send or an end on it.
            if i.dispatched && i.lookup == Lookup::NotFoundUnderClaim {
                let want = if i.claim == Claim::Live {
                    Action::Wait
                } else {
                    Action::Query
                };
                assert_eq!(a, want, "{i:?}");
            }
            if a == Action::Ambiguous {
                assert!(
                    i.dispatched && i.recheck == Recheck::Holds && i.dedupe != Dedupe::InsideWindow,
                    "{i:?}"
                );
            }
        }
        assert_eq!(n, 2 * 2 * 6 * 4 * 3);
    }

    #[test]
    fn the_tiers_after_a_lost_reply() {
        let base = Inputs {
            claim: Claim::Over,
            dispatched: true,
            lookup: Lookup::Unavailable,
            recheck: Recheck::Holds,
            dedupe: Dedupe::No,
        };
        // Tier 1: resend under the key, deduped.
        assert_eq!(
            decide(Inputs {
                dedupe: Dedupe::InsideWindow,
                ..base
            }),
            Action::Send
        );
        // Tier 1 past its window without lookup: never a resend.
        assert_eq!(
            decide(Inputs {
                dedupe: Dedupe::WindowPassed,
                ..base
            }),
            Action::Ambiguous
        );
        // Tier 2: ask first.
        assert_eq!(
            decide(Inputs {
                lookup: Lookup::NotAsked,
                ..base
            }),
            Action::Query
        );
        assert_eq!(
            decide(Inputs {
                lookup: Lookup::Found,
                ..base
            }),
            Action::CommitFound
        );
        // Tier 3: say so.
        assert_eq!(decide(base), Action::Ambiguous);
        // Any tier: authority or premises gone, nothing more is sent.
        assert_eq!(
            decide(Inputs {
                recheck: Recheck::Fails,
                dedupe: Dedupe::InsideWindow,
                ..base
            }),
            Action::Refuse
        );
    }
}
