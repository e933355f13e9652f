//! A Stateright model of Interlock's send and recovery protocol for one effect.
//!
//! The model is small on purpose: one effect, two workers (the sender, whose first operation
//! is a submit, and a recoverer; after its submit the sender may recover too, as a restarted
//! process does), the journal's effect stream with compare-and-append, the target service
//! at one tier, and an environment that loses messages, crashes workers, revokes the lease,
//! expires the claim and passes the dedupe window. Every next action of a worker comes from
//! [`interlock_core::recovery::decide`], the table the gate itself runs, so the checker
//! explores the code's decisions, not a copy of them.
//!
//! What is abstracted, and why it is faithful:
//! - **Time** is two monotone facts. `claims_over` counts the DISPATCHED entries whose
//!   claim has run out; the environment ends every claim at once (claims are written in
//!   order, each after the one before ran out), and only when no send is in flight or about
//!   to start: that is the host's promise to give up a target call within the claim
//!   (ARCHITECTURE.md, invariant 4). `window_passed` is the dedupe window: the gate and the
//!   service both see it pass, and it can pass only when no send decided inside the window
//!   is still in flight (the gate decides "inside" only if the send lands in time even when
//!   it takes its whole timeout).
//! - **The journal** holds what the protocol reads: the stream's length (for
//!   compare-and-append), how many DISPATCHED entries it has, and its terminal entry. A
//!   worker acts on the snapshot it loaded when its operation started, as the gate does.
//! - **The service** counts how often it applied the effect; a deduping tier remembers the
//!   key until the window passes; lookup finds the effect once applied.
//! - **The world**: the lease can be revoked once, and a read (lookup or re-check) can
//!   fail once. Crashes, lost requests and lost replies are bounded, so every behaviour is
//!   finite and `eventually` is checked on every path.
use interlock_core::recovery::{decide, Action, Claim, Dedupe, Inputs, Lookup, Recheck};
use stateright::{Model, Property};

/// The target service's abilities: the simulated service's own tiers (FAULTS.md, "The
/// payments service, by tier").
pub use interlock_payments_sim::Tier;

/// How much the environment may do in one behaviour.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    pub crashes: u8,
    /// Lost requests and lost replies together.
    pub losses: u8,
    pub lookup_failures: u8,
    pub read_failures: u8,
    /// Times a claim may run out while a worker holds an `applied` reply it has not
    /// recorded yet (a process paused between the call's return and its next write).
    pub stalls: u8,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            crashes: 2,
            losses: 2,
            lookup_failures: 1,
            read_failures: 1,
            stalls: 1,
        }
    }
}

/// The model: one tier, one budget, and the table the workers consult.
#[derive(Clone, Debug)]
pub struct Protocol {
    pub tier: Tier,
    pub budget: Budget,
    /// [`decide`] from the core; a test swaps in a broken table to show that the
    /// properties catch it.
    pub table: fn(Inputs) -> Action,
}

impl Protocol {
    /// The protocol as the gate runs it.
    pub fn new(tier: Tier, budget: Budget) -> Protocol {
        Protocol {
            tier,
            budget,
            table: decide,
        }
    }
}

pub const WORKERS: usize = 2;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Terminal {
    Committed,
    /// REFUSED, with what it says about execution (`executed: no` or `unknown`).
    Refused {
        executed_no: bool,
    },
    Ambiguous,
}

/// The effect's stream, as far as the protocol reads it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Stream {
    pub len: u8,
    pub dispatches: u8,
    pub terminal: Option<Terminal>,
}

/// What one operation knows (the gate's `Ctx`): the snapshot it loaded, and what it learned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Op {
    pub snap: Stream,
    pub lookup: Lookup,
    pub recheck: Recheck,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pc {
    /// No operation in progress (a fresh process, or one that finished).
    Idle,
    /// Consult the table next.
    Decide(Op),
    /// Told `claim_live`: the host waits for the claim, then recovers again.
    WaitClaim { dispatches: u8 },
    /// The intent is durable; the apply call is about to go out.
    Sending { op: Op, inside_window: bool },
    /// The apply call is out; waiting for its reply (or the timeout).
    AwaitReply { op: Op },
    /// The call returned `applied`; COMMITTED is not written yet. The call is over, so
    /// the claim may run out now if the environment stalls this worker (`Budget::stalls`).
    Replied { op: Op },
}

/// An apply call between a worker and the service.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Call {
    /// On its way to the service.
    Request { inside_window: bool },
    /// The service applied (or deduped) it; the reply is on its way back.
    Reply,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Worker {
    pub pc: Pc,
    pub submitted: bool,
    /// This worker's apply call, if one is out (it outlives a crash of the worker).
    pub call: Option<Call>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    pub workers: [Worker; WORKERS],
    pub journal: Stream,
    pub claims_over: u8,
    pub window_passed: bool,
    pub lease_revoked: bool,
    /// Times the service applied the effect (a deduped resend does not count).
    pub applied: u8,
    pub key_remembered: bool,
    /// Apply calls sent, over the whole behaviour.
    pub sends: u8,
    /// A lookup found the effect (recovery's `recovery-query` path).
    pub found_by_lookup: bool,
    // Budgets left.
    pub crashes: u8,
    pub losses: u8,
    pub lookup_failures: u8,
    pub read_failures: u8,
    pub stalls: u8,
    /// A worker was told `applied` by the service but its COMMITTED lost the
    /// compare-and-append (its caller still hears COMMITTED).
    pub commit_dropped: bool,
    // Violations the properties report (set by the transitions that cause them).
    pub sent_without_recheck: bool,
    pub sent_after_close: bool,
    pub appended_after_close: bool,
    pub two_requests: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    /// A worker starts a submit (the sender, once) or a recovery: loads the stream.
    Start(usize),
    /// A worker consults the table and performs its action.
    Decide(usize),
    /// A waiting worker sees the claim over and recovers again.
    Retry(usize),
    /// The apply call goes out.
    Send(usize),
    /// The service receives the request.
    Deliver(usize),
    /// The request is lost before it reaches the service.
    LoseRequest(usize),
    /// The reply reaches the worker.
    Reply(usize),
    /// The reply is lost (or the call times out): the worker hears `unknown`.
    LoseReply(usize),
    /// A worker told `applied` writes COMMITTED.
    Commit(usize),
    Crash(usize),
    /// Every DISPATCHED claim so far runs out.
    ExpireClaims,
    /// The dedupe window passes (the service forgets the key).
    PassWindow,
    RevokeLease,
    /// A lookup fails, or a re-check's read fails (the next one the worker does).
    FailQuery(usize),
    FailRecheck(usize),
}

impl Protocol {
    /// Nothing left for any worker to do: every worker idle with no call out, and none
    /// allowed to start (only the environment's own moves may remain).
    pub fn quiescent(&self, s: &State) -> bool {
        let mut next = Vec::new();
        self.actions(s, &mut next);
        s.workers
            .iter()
            .all(|w| w.pc == Pc::Idle && w.call.is_none())
            && !next.iter().any(|a| matches!(a, Step::Start(_)))
    }

    fn inputs(&self, s: &State, op: &Op) -> Inputs {
        let dispatched = op.snap.dispatches > 0;
        let dedupe = if !self.tier.dedupes {
            Dedupe::No
        } else if !dispatched || !s.window_passed {
            Dedupe::InsideWindow
        } else {
            Dedupe::WindowPassed
        };
        Inputs {
            // The last DISPATCHED in the snapshot is live unless its claim ran out.
            claim: if op.snap.dispatches > s.claims_over {
                Claim::Live
            } else {
                Claim::Over
            },
            dispatched,
            lookup: if self.tier.lookup {
                op.lookup
            } else {
                Lookup::Unavailable
            },
            recheck: op.recheck,
            dedupe,
        }
    }

    /// No apply call is out or about to go out: only then may a claim run out (a host gives
    /// up a target call within the claim).
    fn nothing_in_flight(s: &State) -> bool {
        s.workers.iter().all(|w| {
            !matches!(w.pc, Pc::Sending { .. } | Pc::AwaitReply { .. }) && w.call.is_none()
        })
    }

    /// Some worker holds an `applied` reply it has not recorded: a claim running out now
    /// spends a stall.
    fn holding_reply(s: &State) -> bool {
        s.workers.iter().any(|w| matches!(w.pc, Pc::Replied { .. }))
    }

    /// No send decided inside the dedupe window is still out or about to go out.
    fn no_send_inside_window(s: &State) -> bool {
        s.workers.iter().all(|w| {
            !matches!(
                w.pc,
                Pc::Sending {
                    inside_window: true,
                    ..
                }
            ) && !matches!(
                w.call,
                Some(Call::Request {
                    inside_window: true
                })
            )
        })
    }

    /// Compare-and-append at the snapshot's length. On success the worker's snapshot
    /// follows the journal; on a conflict nothing is written.
    fn append(
        s: &mut State,
        op: &mut Op,
        entries: u8,
        dispatch: bool,
        end: Option<Terminal>,
    ) -> bool {
        if s.journal.len != op.snap.len {
            return false;
        }
        if s.journal.terminal.is_some() {
            s.appended_after_close = true;
        }
        s.journal.len += entries;
        if dispatch {
            s.journal.dispatches += 1;
        }
        if end.is_some() {
            s.journal.terminal = end;
        }
        op.snap = s.journal;
        true
    }

    fn decide_step(&self, s: &mut State, w: usize, mut op: Op) {
        let inputs = self.inputs(s, &op);
        let proposed = u8::from(op.snap.len == 0);
        let next = match (self.table)(inputs) {
            Action::Wait => Pc::WaitClaim {
                dispatches: op.snap.dispatches,
            },
            Action::StayOpen => Pc::Idle,
            Action::Query => {
                // A failed lookup is the environment's move (`Step::FailQuery`).
                op.lookup = if s.applied > 0 {
                    s.found_by_lookup = true;
                    Lookup::Found
                } else if inputs.claim == Claim::Live {
                    // Asked under a live claim (the gate's `Waiting::Query { under_claim }`):
                    // a send in flight may still land, so this proves nothing.
                    Lookup::NotFoundUnderClaim
                } else {
                    Lookup::NotFound
                };
                Pc::Decide(op)
            }
            Action::Recheck => {
                op.recheck = if s.lease_revoked {
                    Recheck::Fails
                } else {
                    Recheck::Holds
                };
                Pc::Decide(op)
            }
            Action::CommitFound => {
                Self::append(s, &mut op, 1 + proposed, false, Some(Terminal::Committed));
                Pc::Idle
            }
            Action::Refuse => {
                // The gate's `executed_if_stopped_now`, from the operation's snapshot.
                let executed_no = op.snap.dispatches == 0 || op.lookup == Lookup::NotFound;
                Self::append(
                    s,
                    &mut op,
                    1 + proposed,
                    false,
                    Some(Terminal::Refused { executed_no }),
                );
                Pc::Idle
            }
            Action::Ambiguous => {
                Self::append(s, &mut op, 1 + proposed, false, Some(Terminal::Ambiguous));
                Pc::Idle
            }
            Action::Send => {
                if op.recheck != Recheck::Holds {
                    s.sent_without_recheck = true;
                }
                let inside_window = inputs.dedupe == Dedupe::InsideWindow;
                // PROPOSED (when new), AUTHORIZED, DISPATCHED: one durable batch.
                if Self::append(s, &mut op, 2 + proposed, true, None) {
                    Pc::Sending { op, inside_window }
                } else {
                    // Lost the race: report where the effect stands, never act on it.
                    Pc::Idle
                }
            }
        };
        s.workers[w].pc = next;
    }
}

impl Model for Protocol {
    type State = State;
    type Action = Step;

    fn init_states(&self) -> Vec<State> {
        let idle = Worker {
            pc: Pc::Idle,
            submitted: false,
            call: None,
        };
        vec![State {
            workers: [idle; WORKERS],
            journal: Stream::default(),
            claims_over: 0,
            window_passed: false,
            lease_revoked: false,
            applied: 0,
            key_remembered: false,
            sends: 0,
            found_by_lookup: false,
            crashes: self.budget.crashes,
            losses: self.budget.losses,
            lookup_failures: self.budget.lookup_failures,
            read_failures: self.budget.read_failures,
            stalls: self.budget.stalls,
            commit_dropped: false,
            sent_without_recheck: false,
            sent_after_close: false,
            appended_after_close: false,
            two_requests: false,
        }]
    }

    fn actions(&self, s: &State, actions: &mut Vec<Step>) {
        for (i, w) in s.workers.iter().enumerate() {
            match w.pc {
                Pc::Idle => {
                    let can_submit = i == 0 && !w.submitted;
                    // Recovery runs on open effects only (`open_effects`); a closed one
                    // replays its outcome and writes nothing.
                    let open = s.journal.len > 0 && s.journal.terminal.is_none();
                    let submitted_or_recoverer = i != 0 || w.submitted;
                    // No limit on operations: each one ends the effect, advances the journal,
                    // loses a race to a worker that advanced it, or spends a fault of the
                    // environment's budget, so every behaviour is finite anyway.
                    if can_submit || (open && submitted_or_recoverer) {
                        actions.push(Step::Start(i));
                    }
                }
                Pc::Decide(op) => {
                    actions.push(Step::Decide(i));
                    // The environment may fail this worker's next read, if the table is
                    // about to ask for one.
                    let inputs = self.inputs(s, &op);
                    match (self.table)(inputs) {
                        Action::Query if s.lookup_failures > 0 => actions.push(Step::FailQuery(i)),
                        Action::Recheck if s.read_failures > 0 => {
                            actions.push(Step::FailRecheck(i))
                        }
                        _ => {}
                    }
                }
                Pc::WaitClaim { dispatches } => {
                    if s.claims_over >= dispatches {
                        actions.push(Step::Retry(i));
                    }
                }
                Pc::Sending { .. } => actions.push(Step::Send(i)),
                Pc::AwaitReply { .. } => {}
                Pc::Replied { .. } => actions.push(Step::Commit(i)),
            }
            match w.call {
                Some(Call::Request { .. }) => {
                    actions.push(Step::Deliver(i));
                    if s.losses > 0 {
                        actions.push(Step::LoseRequest(i));
                    }
                }
                Some(Call::Reply) => {
                    actions.push(Step::Reply(i));
                    if s.losses > 0 {
                        actions.push(Step::LoseReply(i));
                    }
                }
                None => {}
            }
            if w.pc != Pc::Idle && s.crashes > 0 {
                actions.push(Step::Crash(i));
            }
        }
        if s.claims_over < s.journal.dispatches
            && Self::nothing_in_flight(s)
            && (s.stalls > 0 || !Self::holding_reply(s))
        {
            actions.push(Step::ExpireClaims);
        }
        if self.tier.dedupes
            && !s.window_passed
            && s.journal.dispatches > 0
            && Self::no_send_inside_window(s)
        {
            actions.push(Step::PassWindow);
        }
        if !s.lease_revoked {
            actions.push(Step::RevokeLease);
        }
    }

    fn next_state(&self, last: &State, step: Step) -> Option<State> {
        let mut s = last.clone();
        match step {
            Step::Start(i) => {
                let w = &mut s.workers[i];
                w.submitted = true;
                let op = Op {
                    snap: s.journal,
                    lookup: Lookup::NotAsked,
                    recheck: Recheck::NotDone,
                };
                // A closed stream replays its outcome; nothing else happens.
                w.pc = if s.journal.terminal.is_some() {
                    Pc::Idle
                } else {
                    Pc::Decide(op)
                };
            }
            Step::Decide(i) => {
                let Pc::Decide(op) = s.workers[i].pc else {
                    return None;
                };
                self.decide_step(&mut s, i, op);
            }
            Step::FailQuery(i) => {
                let Pc::Decide(mut op) = s.workers[i].pc else {
                    return None;
                };
                s.lookup_failures -= 1;
                op.lookup = Lookup::Failed;
                s.workers[i].pc = Pc::Decide(op);
            }
            Step::FailRecheck(i) => {
                let Pc::Decide(mut op) = s.workers[i].pc else {
                    return None;
                };
                s.read_failures -= 1;
                op.recheck = Recheck::ReadFailed;
                s.workers[i].pc = Pc::Decide(op);
            }
            Step::Retry(i) => {
                s.workers[i].pc = if s.journal.terminal.is_some() {
                    Pc::Idle
                } else {
                    Pc::Decide(Op {
                        snap: s.journal,
                        lookup: Lookup::NotAsked,
                        recheck: Recheck::NotDone,
                    })
                };
            }
            Step::Send(i) => {
                let Pc::Sending { op, inside_window } = s.workers[i].pc else {
                    return None;
                };
                if s.journal.terminal.is_some() {
                    s.sent_after_close = true;
                }
                // A claim runs out only when no request is out, and a worker sends only
                // under a new claim: its slot can hold at most a stale reply here.
                if matches!(s.workers[i].call, Some(Call::Request { .. })) {
                    s.two_requests = true;
                }
                s.sends += 1;
                s.workers[i].call = Some(Call::Request { inside_window });
                s.workers[i].pc = Pc::AwaitReply { op };
            }
            Step::Deliver(i) => {
                let deduped = self.tier.dedupes && s.key_remembered && !s.window_passed;
                if !deduped {
                    s.applied += 1;
                    // A forgotten key is learned again by the new refund.
                    s.key_remembered = self.tier.dedupes;
                }
                s.workers[i].call = Some(Call::Reply);
            }
            Step::LoseRequest(i) | Step::LoseReply(i) => {
                s.losses -= 1;
                s.workers[i].call = None;
                // The host's call times out: the gate hears `unknown` and leaves the effect
                // open for recovery after the claim.
                if let Pc::AwaitReply { .. } = s.workers[i].pc {
                    s.workers[i].pc = Pc::Idle;
                }
            }
            Step::Reply(i) => {
                s.workers[i].call = None;
                if let Pc::AwaitReply { op } = s.workers[i].pc {
                    s.workers[i].pc = Pc::Replied { op };
                }
            }
            Step::Commit(i) => {
                let Pc::Replied { mut op } = s.workers[i].pc else {
                    return None;
                };
                // COMMITTED, non-durable. On a conflict the gate re-reads and writes
                // nothing (`close`), whatever the stream now ends with.
                if !Self::append(&mut s, &mut op, 1, false, Some(Terminal::Committed)) {
                    s.commit_dropped = true;
                }
                s.workers[i].pc = Pc::Idle;
            }
            Step::Crash(i) => {
                s.crashes -= 1;
                // The process is gone; an apply call it made may still land.
                s.workers[i].pc = Pc::Idle;
            }
            Step::ExpireClaims => {
                if Self::holding_reply(&s) {
                    s.stalls -= 1;
                }
                s.claims_over = s.journal.dispatches;
            }
            Step::PassWindow => {
                s.window_passed = true;
                s.key_remembered = false;
            }
            Step::RevokeLease => s.lease_revoked = true,
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut props = vec![
            Property::always("never applied twice", |_, s: &State| s.applied <= 1),
            Property::always(
                "never a send without a re-check that held",
                |_, s: &State| !s.sent_without_recheck,
            ),
            Property::always("never a send after the effect closed", |_, s: &State| {
                !s.sent_after_close
            }),
            Property::always("one request per worker", |_, s: &State| !s.two_requests),
            Property::always("one ending per stream", |_, s: &State| {
                !s.appended_after_close
            }),
            Property::always("tier 3 never resends", |m: &Protocol, s: &State| {
                m.tier.dedupes || m.tier.lookup || s.sends <= 1
            }),
            Property::always("COMMITTED was applied", |_, s: &State| {
                s.journal.terminal != Some(Terminal::Committed) || s.applied >= 1
            }),
            Property::always("REFUSED executed:no was not applied", |_, s: &State| {
                s.journal.terminal != Some(Terminal::Refused { executed_no: true })
                    || s.applied == 0
            }),
            Property::always(
                "quiescent means terminal or never recorded",
                |m: &Protocol, s: &State| {
                    !m.quiescent(s)
                        || s.journal.terminal.is_some()
                        || (s.journal.len == 0 && s.applied == 0)
                },
            ),
            Property::eventually("eventually terminal or never recorded", |_, s: &State| {
                s.journal.terminal.is_some() || (s.journal.len == 0 && s.applied == 0)
            }),
            // Reachability: the checker must see the interesting endings, or the model is
            // too weak to say anything about them.
            Property::sometimes("COMMITTED", |_, s: &State| {
                s.journal.terminal == Some(Terminal::Committed)
            }),
            // A worker paused past its claim after the service said `applied`: its COMMITTED
            // loses to the newer claim or ending, and its caller still hears COMMITTED.
            Property::sometimes("a COMMITTED dropped after a stall", |_, s: &State| {
                s.commit_dropped
            }),
            Property::sometimes("REFUSED after the lease was revoked", |_, s: &State| {
                matches!(s.journal.terminal, Some(Terminal::Refused { .. }))
            }),
        ];
        if self.tier.dedupes {
            props.push(Property::sometimes("a resend deduped", |_, s: &State| {
                s.sends >= 2 && s.applied == 1
            }));
        }
        if self.tier.lookup {
            props.push(Property::sometimes("found by lookup", |_, s: &State| {
                s.found_by_lookup
            }));
        }
        if !self.tier.lookup {
            props.push(Property::sometimes("AMBIGUOUS", |_, s: &State| {
                s.journal.terminal == Some(Terminal::Ambiguous)
            }));
        }
        props
    }
}
