//! Playing a built-in target's step against a scripted service, for the targets' tests.
use alloc::vec::Vec;
use serde_json::Value;

use super::{Context, Phase, ServiceAnswer, ServiceCall, Target, Turn};
use crate::types::Reply;

pub const ID: &str = "0123456789abcdef0123456789abcdef";

/// A step's context: `effect`, the premises `names`, a 30 s send, not the decision's read.
pub fn cx<'a>(effect: &'a Value, names: &'a [alloc::string::String]) -> Context<'a> {
    Context {
        effect,
        effect_id: ID,
        idempotency_key: ID,
        names,
        timeout_ms: Some(30_000),
        decision: false,
    }
}

/// Plays `phase` to its reply, each call answered by `service`: the calls made, the reply.
pub fn play(
    t: &dyn Target,
    phase: Phase,
    cx: &Context<'_>,
    mut service: impl FnMut(&ServiceCall) -> ServiceAnswer,
) -> (Vec<ServiceCall>, Reply) {
    let mut calls = Vec::new();
    let mut answers = Vec::new();
    loop {
        match t.turn(phase, cx, &answers) {
            Turn::Reply(r) => return (calls, r),
            Turn::Call(c) => {
                answers.push(service(&c));
                calls.push(c);
                assert!(calls.len() < 100, "a step that never ends");
            }
        }
    }
}
