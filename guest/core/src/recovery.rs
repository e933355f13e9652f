//! The recovery table: every combination of what recovery knows maps to exactly one next
//! action. The gate calls [`decide`] after each thing it learns, until the action is final.
//! A test walks every combination and checks the rules that must never break.
//!
//! | claim | dispatched | lookup     | re-check   | dedupe window | action           |
//! |-------|------------|------------|------------|---------------|------------------|
//! | live  | *          | *          | *          | *             | Wait             |
//! | over  | yes        | not asked  | *          | *             | Query            |
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
//! changed since. A send needs the re-check to hold, and either proof that nothing was sent
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
        return Action::Wait;
    }
    match i.lookup {
        Lookup::NotAsked if i.dispatched => return Action::Query,
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
            // Never act while a send may be in flight.
            if i.claim == Claim::Live {
                assert_eq!(a, Action::Wait, "{i:?}");
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
            // A found effect is committed, whatever changed since.
            if i.claim == Claim::Over && i.lookup == Lookup::Found {
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
            if i.claim == Claim::Over && i.dispatched && i.lookup == Lookup::NotAsked {
                assert_eq!(a, Action::Query, "{i:?}");
            }
            if a == Action::Ambiguous {
                assert!(
                    i.dispatched && i.recheck == Recheck::Holds && i.dedupe != Dedupe::InsideWindow,
                    "{i:?}"
                );
            }
        }
        assert_eq!(n, 2 * 2 * 5 * 4 * 3);
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
