//! Shares of a cap: reserved before a send, released when the effect is proven unsent.
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use serde_json::Value;

use super::op::Ctx;
use super::streams::Plan;
use super::Gate;
use crate::authority::{self, cap_stream, effect_stream, Mark};
use crate::fields;
use crate::journal::Journal;
use crate::proposal::Cap;
use crate::types::GateError;

impl Gate {
    /// Some(cents reserved by others) when the cap holds this effect too, None when it would
    /// be exceeded. Compare-and-append makes two racing reservations see each other.
    pub(super) fn reserve_cap(
        &mut self,
        j: &mut dyn Journal,
        now_ms: u64,
        ctx: &Ctx,
        cap: &Cap,
    ) -> Result<Option<u64>, GateError> {
        let share = (ctx.id.clone(), ctx.proposal.payload_hash());
        let (reserved_by_others, s) = self.compare_and_append(
            j,
            &cap_stream(&cap.name),
            now_ms,
            // Not durable by itself: the effect's durable batch right after covers it.
            false,
            |gate, j, s| {
                let mut shares = authority::cap_shares(s);
                gate.drop_stale_shares(j, &mut shares)?;
                let mine = shares.remove(&share);
                let others: u64 = shares.values().sum();
                if mine.is_some() {
                    return Ok(Plan::Done(Some(others)));
                }
                if !authority::cap_fits(cap, others) {
                    return Ok(Plan::Done(None));
                }
                let f = fields!("effect_id" => share.0.clone(), "payload_hash" => share.1.clone(), "amount_cents" => cap.amount_cents, "limit_cents" => cap.limit_cents);
                Ok(Plan::Append(vec![(Mark::Reserved, f)], Some(others)))
            },
            || format!("cap {} kept changing under this reservation", cap.name),
        )?;
        self.remember(&s);
        Ok(reserved_by_others)
    }

    /// A share whose effect is recorded with another payload can never be sent (that key
    /// now refuses it as a conflicting payload): it no longer counts. Only effects holding
    /// shares under two payloads are looked up, which is rare.
    fn drop_stale_shares(
        &mut self,
        j: &mut dyn Journal,
        shares: &mut BTreeMap<(String, String), u64>,
    ) -> Result<(), GateError> {
        let mut ids: Vec<&String> = shares.keys().map(|(id, _)| id).collect();
        ids.sort();
        let contested: Vec<String> = ids
            .windows(2)
            .filter(|w| w[0] == w[1])
            .map(|w| w[0].clone())
            .collect();
        for id in contested {
            let stream = self.load(j, &effect_stream(&id))?;
            if let Some(recorded) = stream
                .entries
                .first()
                .and_then(|e| e.get("payload_hash"))
                .and_then(Value::as_str)
            {
                shares.retain(|(sid, p), _| *sid != id || p == recorded);
            }
        }
        Ok(())
    }

    pub(super) fn release_cap(
        &mut self,
        j: &mut dyn Journal,
        now_ms: u64,
        ctx: &Ctx,
    ) -> Result<(), GateError> {
        let Some(cap) = &ctx.proposal.cap else {
            return Ok(());
        };
        let share = (ctx.id.clone(), ctx.proposal.payload_hash());
        let ((), s) = self.compare_and_append(
            j,
            &cap_stream(&cap.name),
            now_ms,
            false,
            |_, _, s| {
                if !authority::cap_shares(s).contains_key(&share) {
                    return Ok(Plan::Done(()));
                }
                let f = fields!("effect_id" => share.0.clone(), "payload_hash" => share.1.clone());
                Ok(Plan::Append(vec![(Mark::Released, f)], ()))
            },
            || format!("cap {} kept changing under this release", cap.name),
        )?;
        self.remember(&s);
        Ok(())
    }
}
