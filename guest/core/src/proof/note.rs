//! Signed notes (c2sp.org/signed-note) and the transparency log's checkpoints in them
//! (c2sp.org/tlog-checkpoint): `<origin>\n<tree size>\n<base64 root hash>\n`, a blank line,
//! then `— <key name> base64(key id || Ed25519 signature)\n` per signature.
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;

use super::keys::{Signer, Verifier};
use super::tree::Hash;
use super::ProofError;

const DASH: &str = "\u{2014} ";
/// Go's limits: a note of at most 1 MB, at most 100 signatures.
const MAX_NOTE: usize = 1 << 20;
const MAX_SIGNATURES: usize = 100;

fn malformed(m: impl Into<String>) -> ProofError {
    ProofError::Malformed(m.into())
}

/// Sign `text` (which ends in a newline, holds no control character but newlines): the
/// note with one signature line.
pub fn sign(text: &str, signer: &Signer) -> Result<String, ProofError> {
    if !text.ends_with('\n') || text.chars().any(|c| c.is_control() && c != '\n') {
        return Err(malformed(
            "a note's text ends in a newline and holds no other control character",
        ));
    }
    let mut sig = signer.id.to_vec();
    sig.extend_from_slice(&signer.sign(text.as_bytes()));
    Ok(format!(
        "{text}\n{DASH}{} {}\n",
        signer.name,
        B64.encode(sig)
    ))
}

/// The text of a note signed by `verifier`. Signatures of other keys are ignored (a
/// witness's cosignature, a rotated key); one of this key that fails, or none at all, is
/// `bad-signature`.
pub fn open<'a>(note: &'a str, verifier: &Verifier) -> Result<&'a str, ProofError> {
    if note.len() > MAX_NOTE {
        return Err(malformed("a note is at most 1 MB"));
    }
    if note.chars().any(|c| c.is_control() && c != '\n') {
        return Err(malformed("a note holds no control character but newlines"));
    }
    // The text ends at the last blank line; every line after it is a signature.
    let split = note
        .rfind("\n\n")
        .ok_or_else(|| malformed("not a signed note: no blank line before its signatures"))?;
    let (text, sigs) = (&note[..split + 1], &note[split + 2..]);
    if sigs.is_empty() || !sigs.ends_with('\n') {
        return Err(malformed(
            "not a signed note: its signature lines are missing or cut short (no final newline)",
        ));
    }
    let lines: Vec<&str> = sigs[..sigs.len() - 1].split('\n').collect();
    if lines.len() > MAX_SIGNATURES {
        return Err(malformed("a note carries at most 100 signatures"));
    }
    let mut found = false;
    for line in lines {
        let rest = line
            .strip_prefix(DASH)
            .ok_or_else(|| malformed("a signature line starts with an em dash and a space"))?;
        let (name, b64) = rest
            .split_once(' ')
            .ok_or_else(|| malformed("a signature line is `— <key name> <base64>`"))?;
        let sig = B64
            .decode(b64)
            .map_err(|_| malformed("a signature is standard base64"))?;
        if sig.len() < 5 || !super::keys::name_ok(name) {
            return Err(malformed(
                "a signature line names a key and carries its id and signature",
            ));
        }
        if name != verifier.name || sig[..4] != verifier.id {
            continue;
        }
        if !verifier.holds(text.as_bytes(), &sig[4..]) {
            return Err(ProofError::BadSignature(format!(
                "the note's signature by {} does not verify: its text was changed, or another key signed it",
                verifier.label()
            )));
        }
        found = true;
    }
    if !found {
        return Err(ProofError::BadSignature(format!(
            "the note is not signed by {} (the key given)",
            verifier.label()
        )));
    }
    Ok(text)
}

/// A checkpoint's text: a log's origin, its size and root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    pub origin: String,
    pub size: u64,
    pub root: Hash,
}

impl Checkpoint {
    pub fn text(&self) -> String {
        format!(
            "{}\n{}\n{}\n",
            self.origin,
            self.size,
            B64.encode(self.root)
        )
    }

    /// `{"origin", "tree_size", "root_hash"}` (base64, as in the note).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({"origin": self.origin, "tree_size": self.size, "root_hash": B64.encode(self.root)})
    }

    /// Read a checkpoint's text (extension lines are allowed and ignored).
    pub fn parse(text: &str) -> Result<Checkpoint, ProofError> {
        let bad = |m: &str| malformed(format!("not a checkpoint (c2sp.org/tlog-checkpoint): {m}"));
        let body = text
            .strip_suffix('\n')
            .ok_or_else(|| bad("its text ends in a newline"))?;
        let mut lines = body.split('\n');
        let (Some(origin), Some(size), Some(root)) = (lines.next(), lines.next(), lines.next())
        else {
            return Err(bad(
                "it has an origin, a tree size and a root hash, one a line",
            ));
        };
        if origin.is_empty() || lines.any(str::is_empty) {
            return Err(bad("its origin and extension lines are non-empty"));
        }
        let size_ok = !size.is_empty()
            && size.bytes().all(|b| b.is_ascii_digit())
            && (size == "0" || !size.starts_with('0'));
        let size = size
            .parse::<u64>()
            .ok()
            .filter(|_| size_ok)
            .ok_or_else(|| bad("its tree size is a decimal number without leading zeros"))?;
        let root: Hash = B64
            .decode(root)
            .ok()
            .and_then(|r| r.try_into().ok())
            .ok_or_else(|| bad("its root hash is 32 bytes in standard base64"))?;
        Ok(Checkpoint {
            origin: origin.to_string(),
            size,
            root,
        })
    }

    /// The checkpoint a note signed by `verifier` carries.
    pub fn open(note: &str, verifier: &Verifier) -> Result<Checkpoint, ProofError> {
        let c = Checkpoint::parse(open(note, verifier)?)?;
        if c.origin != verifier.name {
            return Err(ProofError::BadSignature(format!(
                "the checkpoint is of log {}, not of {} (the key given)",
                c.origin, verifier.name
            )));
        }
        Ok(c)
    }

    /// The checkpoint a note carries, its signature unchecked (for `verify`, which compares
    /// it with the journal's own tree).
    pub fn unsigned(note: &str) -> Result<Checkpoint, ProofError> {
        let split = note
            .rfind("\n\n")
            .ok_or_else(|| malformed("not a signed note: no blank line before its signatures"))?;
        Checkpoint::parse(&note[..split + 1])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GO_SIGNER: &str =
        "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz";
    const GO_VERIFIER: &str = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW";
    const GO_TEXT: &str = "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n";
    const GO_SIG: &str = "\u{2014} PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n";

    #[test]
    fn the_go_reference_note_is_signed_byte_for_byte() {
        let s = Signer::parse(GO_SIGNER).unwrap();
        let note = sign(GO_TEXT, &s).unwrap();
        assert_eq!(note, format!("{GO_TEXT}\n{GO_SIG}"));
        let v = Verifier::parse(GO_VERIFIER).unwrap();
        assert_eq!(open(&note, &v).unwrap(), GO_TEXT);
    }

    #[test]
    fn a_changed_note_or_another_key_is_refused() {
        let v = Verifier::parse(GO_VERIFIER).unwrap();
        let note = format!("{GO_TEXT}\n{GO_SIG}");
        let edited = note.replacen("problem,", "problem;", 1);
        assert!(matches!(
            open(&edited, &v),
            Err(ProofError::BadSignature(_))
        ));
        let other = Signer::generate("PeterNeumann", &[1; 32]).unwrap();
        assert!(matches!(
            open(&note, &other.verifier()),
            Err(ProofError::BadSignature(_))
        ));
        // Another key's signature beside ours is ignored.
        let cosigned = format!(
            "{note}{}",
            &sign(GO_TEXT, &other).unwrap()[GO_TEXT.len() + 1..]
        );
        assert_eq!(open(&cosigned, &v).unwrap(), GO_TEXT);
        // Cut short: the final newline of the signature line is gone.
        assert!(matches!(
            open(&note[..note.len() - 1], &v),
            Err(ProofError::Malformed(_))
        ));
    }

    #[test]
    fn checkpoints_read_back_and_refuse_bad_text() {
        let c = Checkpoint {
            origin: "shop.example/log".into(),
            size: 20852163,
            root: [9; 32],
        };
        assert_eq!(Checkpoint::parse(&c.text()).unwrap(), c);
        // The tlog-checkpoint spec's example text.
        let ex =
            "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n";
        assert_eq!(Checkpoint::parse(ex).unwrap().size, 20852163);
        for bad in [
            "o\n01\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n",
            "o\n1\nCsUY\n",
            "o\n1\n",
            "\n1\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n",
            "o\n-1\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n",
            "o\n1\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=",
        ] {
            assert!(Checkpoint::parse(bad).is_err(), "{bad:?}");
        }
    }
}
