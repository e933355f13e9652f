//! Authority as the operator records it: leases granted and revoked, approvals given and
//! revoked. Each is durable before the call returns.
use alloc::format;
use alloc::string::String;
use alloc::vec;
use serde_json::{Map, Value};

use super::streams::Plan;
use super::Gate;
use crate::authority::{approval_stream, lease_stream, Mark};
use crate::canon::{canonical, effect_id_for, sha256_hex};
use crate::defaults;
use crate::fields;
use crate::journal::{Journal, JournalError};
use crate::proposal::{self, field_err, parse_input};
use crate::schema::Obj;

const APPROVAL_FIELDS: &[&str] = &[
    "approval",
    "approver",
    "request",
    "premises_seen",
    "expires_at_ms",
];
use crate::types::GateError;

impl Gate {
    pub fn grant_lease(
        &mut self,
        j: &mut dyn Journal,
        now_ms: u64,
        lease: &str,
        expires_at_ms: u64,
    ) -> Result<(), GateError> {
        proposal::check_name(lease, "/lease")?;
        self.append_authority(
            j,
            now_ms,
            &lease_stream(lease),
            Mark::Granted,
            fields!("lease" => lease, "expires_at_ms" => expires_at_ms),
        )
    }

    pub fn revoke_lease(
        &mut self,
        j: &mut dyn Journal,
        now_ms: u64,
        lease: &str,
    ) -> Result<(), GateError> {
        proposal::check_name(lease, "/lease")?;
        self.append_authority(
            j,
            now_ms,
            &lease_stream(lease),
            Mark::Revoked,
            fields!("lease" => lease),
        )
    }

    /// Grants `agent`'s standing lease (`<agent>-standing`, for `STANDING_LEASE_MS`) if it
    /// was never granted, and returns its name. Only ever granted once: a standing lease
    /// that was revoked (or ran out) stays so, and the call then writes nothing. `submit`
    /// calls it for a proposal that names no authority (unless authority is strict).
    pub fn grant_standing_lease(
        &mut self,
        j: &mut dyn Journal,
        now_ms: u64,
        agent: &str,
    ) -> Result<String, GateError> {
        let lease = defaults::standing_lease_name(agent)?;
        let expires_at_ms = now_ms.saturating_add(defaults::STANDING_LEASE_MS);
        self.compare_and_append(
            j,
            &lease_stream(&lease),
            now_ms,
            true,
            |_, _, s| {
                Ok(if s.entries.is_empty() {
                    Plan::Append(
                        vec![(
                            Mark::Granted,
                            fields!("lease" => lease.as_str(), "expires_at_ms" => expires_at_ms),
                        )],
                        (),
                    )
                } else {
                    Plan::Done(())
                })
            },
            || format!("lease {lease} kept changing"),
        )?;
        Ok(lease)
    }

    pub fn approve(
        &mut self,
        j: &mut dyn Journal,
        now_ms: u64,
        approval: &str,
    ) -> Result<(), GateError> {
        let v = parse_input(approval, "")?;
        let m = Obj::strict(&v, "", "an approval", APPROVAL_FIELDS)?;
        let id = m.name("approval", "the approval's id, which a proposal names")?;
        let approver = m.name("approver", "who approves")?;
        let request = Obj::strict(
            m.required("request", "the approved request ({\"key\", \"effect\"})")?,
            "/request",
            "the approved request",
            &["key", "effect"],
        )?;
        let effect = request.required(
            "effect",
            "the approved effect, as the proposal will give it",
        )?;
        Obj::any(effect, "/request/effect", "the approved effect")?;
        let effect_id = effect_id_for(request.get_some("key"), effect);
        let seen = match m.get("premises_seen") {
            None => Value::Object(Map::new()),
            Some(p) => Value::Object(
                Obj::any(p, "/premises_seen", "the premises the approver saw")?
                    .map()
                    .clone(),
            ),
        };
        // The approved effect itself, not only its id: the id comes from the key, and an
        // approval of $20 must not authorize $30 under the same key.
        let effect_sha256 = sha256_hex(canonical(effect).as_bytes());
        let mut f = fields!("approval" => id.clone(), "approver" => approver, "effect_id" => effect_id, "effect_sha256" => effect_sha256, "premises_seen" => seen);
        if let Some(x) = m.opt_u64("expires_at_ms")? {
            f.insert("expires_at_ms".into(), x.into());
        }
        let name = approval_stream(&id);
        let mut s = self.load(j, &name)?;
        if let Some(first) = s.entries.first() {
            // Approving the same thing twice is harmless; approving something else under an
            // existing id would silently widen authority.
            let same = [
                "approver",
                "effect_id",
                "effect_sha256",
                "premises_seen",
                "expires_at_ms",
            ]
            .iter()
            .all(|k| first.get(*k) == f.get(*k));
            return if same {
                Ok(())
            } else {
                Err(field_err(
                    "/approval",
                    "this approval id already approves another request",
                ))
            };
        }
        match s.append(j, vec![(Mark::Approved, f)], now_ms, true, false) {
            Ok(()) => Ok(()),
            Err(JournalError::Conflict(_)) => Err(GateError::Contention(format!(
                "approval {id} was recorded concurrently"
            ))),
            Err(e) => Err(e.into()),
        }
    }

    pub fn revoke_approval(
        &mut self,
        j: &mut dyn Journal,
        now_ms: u64,
        approval: &str,
    ) -> Result<(), GateError> {
        proposal::check_name(approval, "/approval")?;
        let name = approval_stream(approval);
        if j.length(&name)? == 0 {
            return Err(field_err("/approval", "no such approval"));
        }
        self.append_authority(
            j,
            now_ms,
            &name,
            Mark::Revoked,
            fields!("approval" => approval),
        )
    }

    fn append_authority(
        &mut self,
        j: &mut dyn Journal,
        now_ms: u64,
        name: &str,
        mark: Mark,
        f: Map<String, Value>,
    ) -> Result<(), GateError> {
        self.compare_and_append(
            j,
            name,
            now_ms,
            true,
            |_, _, _| Ok(Plan::Append(vec![(mark, f.clone())], ())),
            || format!("{name} kept changing"),
        )?;
        Ok(())
    }
}
