//! WIT `proof` onto `interlock_core::proof` and the gate's log: keys in as text, parsed by
//! the core; documents out as the core wrote them. No rule here.
use alloc::string::String;
use alloc::vec::Vec;

use crate::exports::interlock::gate::gate as g;
use crate::exports::interlock::gate::proof as p;
use crate::{err, report, with_gate, Component};
use interlock_core::canonical;
use interlock_core::proof::{self as cp, ProofError, Signer, Verifier};

fn perr(e: ProofError) -> p::ProofError {
    match e {
        ProofError::BadKey(m) => p::ProofError::BadKey(m),
        ProofError::BadSignature(m) => p::ProofError::BadSignature(m),
        ProofError::Malformed(m) => p::ProofError::Malformed(m),
        ProofError::UnknownVersion(m) => p::ProofError::UnknownVersion(m),
        ProofError::ProofFailed(m) => p::ProofError::ProofFailed(m),
        ProofError::Gate(e) => p::ProofError::Gate(err(e)),
    }
}

fn signer(text: &str) -> Result<Signer, p::ProofError> {
    Signer::parse(text).map_err(perr)
}

fn verifier(text: &str) -> Result<Verifier, p::ProofError> {
    Verifier::parse(text).map_err(perr)
}

impl p::Guest for Component {
    fn generate_key(name: String, seed: Vec<u8>) -> Result<p::KeyPair, p::ProofError> {
        let s = Signer::generate(&name, &seed).map_err(perr)?;
        Ok(p::KeyPair {
            signer: s.text(),
            verifier: s.verifier().text(),
        })
    }

    fn verifier_key(key: String) -> Result<String, p::ProofError> {
        Ok(signer(&key)?.verifier().text())
    }

    fn receipt(effect: String, key: String) -> Result<String, p::ProofError> {
        let s = signer(&key)?;
        with_gate(|gate, j, _| gate.signed_receipt(j, &effect, &s)).map_err(perr)
    }

    fn check_receipt(receipt: String, key: String) -> Result<g::VerifyReport, p::ProofError> {
        let v = verifier(&key)?;
        with_gate(|gate, j, _| gate.check_signed_receipt(j, &receipt, &v))
            .map(report)
            .map_err(perr)
    }

    fn check_receipt_signature(receipt: String, key: String) -> Result<String, p::ProofError> {
        cp::check_receipt_signature(&receipt, &verifier(&key)?).map_err(perr)
    }

    fn checkpoint(key: String) -> Result<String, p::ProofError> {
        let s = signer(&key)?;
        with_gate(|gate, j, now| gate.checkpoint(j, now, &s))
            .map(|v| canonical(&v))
            .map_err(perr)
    }

    fn latest_checkpoint() -> Result<Option<String>, p::ProofError> {
        with_gate(|gate, j, _| gate.latest_checkpoint(j)).map_err(perr)
    }

    fn prove_inclusion(effect: String, tree_size: Option<u64>) -> Result<String, p::ProofError> {
        with_gate(|gate, j, _| gate.prove_inclusion(j, &effect, tree_size)).map_err(perr)
    }

    fn prove_consistency(old_size: u64, new_size: Option<u64>) -> Result<String, p::ProofError> {
        with_gate(|gate, j, _| gate.prove_consistency(j, old_size, new_size)).map_err(perr)
    }

    fn check_inclusion(
        proof: String,
        checkpoint: Option<String>,
        key: String,
    ) -> Result<String, p::ProofError> {
        cp::check_inclusion(&proof, checkpoint.as_deref(), &verifier(&key)?)
            .map(|i| canonical(&i.to_json()))
            .map_err(perr)
    }

    fn check_consistency(
        proof: String,
        old_checkpoint: String,
        key: String,
    ) -> Result<String, p::ProofError> {
        cp::check_consistency(&proof, &old_checkpoint, &verifier(&key)?)
            .map(|c| canonical(&c.to_json()))
            .map_err(perr)
    }

    fn bundle(from_ms: u64, to_ms: u64, key: String) -> Result<String, p::ProofError> {
        let s = signer(&key)?;
        with_gate(|gate, j, now| gate.bundle(j, now, from_ms, to_ms, &s)).map_err(perr)
    }

    fn check_bundle(bundle: String, key: String) -> Result<String, p::ProofError> {
        cp::check_bundle(&bundle, &verifier(&key)?)
            .map(|v| canonical(&v))
            .map_err(perr)
    }
}
