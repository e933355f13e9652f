//! The component's `proof` interface on a [`GateHost`]: keys cross as the text the caller
//! read from a file or the environment; every check is the component's.

use crate::bindings::exports::interlock::gate::gate::VerifyReport;
pub use crate::bindings::exports::interlock::gate::proof::{KeyPair, ProofError};
use crate::gate::{proved, Error, GateHost};

impl GateHost {
    fn proof(&self) -> crate::bindings::exports::interlock::gate::proof::Guest {
        self.gate.proof.clone()
    }

    /// A key pair named `name` from 32 bytes of the operating system's randomness.
    pub fn generate_key(&mut self, name: &str, seed: &[u8]) -> Result<KeyPair, Error> {
        let p = self.proof();
        proved(p.call_generate_key(&mut self.store, name, seed))
    }

    pub fn verifier_key(&mut self, signer: &str) -> Result<String, Error> {
        let p = self.proof();
        proved(p.call_verifier_key(&mut self.store, signer))
    }

    /// The effect's receipt signed with Ed25519.
    pub fn signed_receipt(&mut self, effect: &str, signer: &str) -> Result<String, Error> {
        let p = self.proof();
        proved(p.call_receipt(&mut self.store, &effect.to_owned(), signer))
    }

    /// An Ed25519 receipt checked with the public key and against the journal.
    pub fn check_signed_receipt(
        &mut self,
        receipt: &str,
        verifier: &str,
    ) -> Result<VerifyReport, Error> {
        let p = self.proof();
        proved(p.call_check_receipt(&mut self.store, &receipt.to_owned(), verifier))
    }

    /// An Ed25519 receipt's signature alone (no journal): its effect id.
    pub fn check_receipt_signature(
        &mut self,
        receipt: &str,
        verifier: &str,
    ) -> Result<String, Error> {
        let p = self.proof();
        proved(p.call_check_receipt_signature(&mut self.store, &receipt.to_owned(), verifier))
    }

    /// Log the receipts of what closed since, and sign a checkpoint (JSON).
    pub fn checkpoint(&mut self, signer: &str) -> Result<String, Error> {
        let p = self.proof();
        proved(p.call_checkpoint(&mut self.store, signer))
    }

    pub fn latest_checkpoint(&mut self) -> Result<Option<String>, Error> {
        let p = self.proof();
        proved(p.call_latest_checkpoint(&mut self.store))
    }

    pub fn prove_inclusion(
        &mut self,
        effect: &str,
        tree_size: Option<u64>,
    ) -> Result<String, Error> {
        let p = self.proof();
        proved(p.call_prove_inclusion(&mut self.store, &effect.to_owned(), tree_size))
    }

    pub fn prove_consistency(
        &mut self,
        old_size: u64,
        new_size: Option<u64>,
    ) -> Result<String, Error> {
        let p = self.proof();
        proved(p.call_prove_consistency(&mut self.store, old_size, new_size))
    }

    pub fn check_inclusion(
        &mut self,
        proof: &str,
        checkpoint: Option<&str>,
        verifier: &str,
    ) -> Result<String, Error> {
        let p = self.proof();
        proved(p.call_check_inclusion(&mut self.store, &proof.to_owned(), checkpoint, verifier))
    }

    pub fn check_consistency(
        &mut self,
        proof: &str,
        old: &str,
        verifier: &str,
    ) -> Result<String, Error> {
        let p = self.proof();
        proved(p.call_check_consistency(&mut self.store, &proof.to_owned(), old, verifier))
    }

    pub fn bundle(&mut self, from_ms: u64, to_ms: u64, signer: &str) -> Result<String, Error> {
        let p = self.proof();
        proved(p.call_bundle(&mut self.store, from_ms, to_ms, signer))
    }

    pub fn check_bundle(&mut self, bundle: &str, verifier: &str) -> Result<String, Error> {
        let p = self.proof();
        proved(p.call_check_bundle(&mut self.store, &bundle.to_owned(), verifier))
    }
}
