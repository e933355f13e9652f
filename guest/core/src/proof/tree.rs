//! The transparency log's Merkle tree: RFC 6962 / RFC 9162 hashing (leaf `H(0x00 || d)`,
//! node `H(0x01 || l || r)`), inclusion and consistency proofs, from `ct-merkle`. This file
//! only converts and guards (ct-merkle panics on an index out of range: every entry point
//! here checks first).
use alloc::format;
use alloc::vec::Vec;
use ct_merkle::mem_backed_tree::MemoryBackedTree;
use ct_merkle::{ConsistencyProof, InclusionProof, RootHash};
use sha2::{Digest, Sha256};

use super::ProofError;

pub type Hash = [u8; 32];

fn out(h: &Hash) -> ct_merkle::digest::Output<Sha256> {
    *ct_merkle::digest::generic_array::GenericArray::from_slice(h)
}

fn hash(o: &[u8]) -> Hash {
    o.try_into().expect("SHA-256 is 32 bytes")
}

fn failed(m: impl Into<alloc::string::String>) -> ProofError {
    ProofError::ProofFailed(m.into())
}

/// The root of the empty tree: SHA-256 of nothing (RFC 6962, 2.1).
pub fn empty_root() -> Hash {
    hash(&Sha256::digest(b""))
}

/// A tree of leaves (each leaf's data: 32 bytes, a receipt's SHA-256), kept in memory.
#[derive(Clone, Debug, Default)]
pub struct Tree(MemoryBackedTree<Sha256, Hash>);

impl Tree {
    pub fn new() -> Tree {
        Tree::default()
    }

    pub fn push(&mut self, leaf: Hash) {
        self.0.push(leaf);
    }

    pub fn len(&self) -> u64 {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn leaves(&self) -> &[Hash] {
        self.0.items()
    }

    pub fn root(&self) -> Hash {
        if self.0.is_empty() {
            return empty_root();
        }
        hash(self.0.root().as_bytes())
    }

    /// The tree of the first `size` leaves (a proof against an older checkpoint).
    pub fn prefix(&self, size: u64) -> Tree {
        let mut t = Tree::new();
        for l in &self.0.items()[..size.min(self.len()) as usize] {
            t.push(*l);
        }
        t
    }

    /// The audit path of leaf `index` in this tree.
    pub fn inclusion(&self, index: u64) -> Result<Vec<Hash>, ProofError> {
        if index >= self.len() {
            return Err(failed(format!(
                "leaf {index} is not in a tree of {} leaves",
                self.len()
            )));
        }
        Ok(split(self.0.prove_inclusion(index as usize).as_bytes()))
    }

    /// The proof that the tree of the first `old` leaves is a prefix of this one.
    pub fn consistency(&self, old: u64) -> Result<Vec<Hash>, ProofError> {
        if old > self.len() {
            return Err(failed(format!(
                "a tree of {old} leaves is not a prefix of one of {}",
                self.len()
            )));
        }
        if old == 0 {
            return Ok(Vec::new());
        }
        let added = (self.len() - old) as usize;
        Ok(split(self.0.prove_consistency(added).as_bytes()))
    }
}

fn split(bytes: &[u8]) -> Vec<Hash> {
    bytes.chunks(32).map(hash).collect()
}

fn joined(path: &[Hash]) -> Vec<u8> {
    path.iter().flatten().copied().collect()
}

/// The hash of a leaf whose data is `data` (RFC 6962: `H(0x00 || data)`).
pub fn leaf_hash(data: &[u8]) -> Hash {
    let mut h = Sha256::new();
    h.update([0u8]);
    h.update(data);
    hash(&h.finalize())
}

/// Check that leaf `data` is leaf `index` of the tree of `size` leaves whose root is `root`.
pub fn check_inclusion(
    data: &[u8],
    index: u64,
    size: u64,
    path: &[Hash],
    root: &Hash,
) -> Result<(), ProofError> {
    let r = RootHash::<Sha256>::new(out(root), size);
    let proof =
        InclusionProof::<Sha256>::from_digests(path.iter().map(out).collect::<Vec<_>>().iter());
    r.verify_inclusion(&data, index, &proof).map_err(|e| {
        failed(format!(
            "the inclusion proof of leaf {index} does not hold for the tree of {size} leaves with this root ({e:?}): another tree, another size, or a changed receipt"
        ))
    })
}

/// Check that the tree (`old_size`, `old_root`) is a prefix of (`new_size`, `new_root`).
pub fn check_consistency(
    old_size: u64,
    old_root: &Hash,
    new_size: u64,
    new_root: &Hash,
    path: &[Hash],
) -> Result<(), ProofError> {
    let fail = |why: &str| {
        failed(format!(
            "the log of {old_size} leaves is not a prefix of the log of {new_size}: {why} (a forked or rewritten log)"
        ))
    };
    if old_size > new_size {
        return Err(fail("the old tree is larger"));
    }
    if old_size == 0 {
        // Every tree extends the empty one (RFC 9162, 2.1.4: the proof is empty).
        return if path.is_empty() && *old_root == empty_root() {
            Ok(())
        } else {
            Err(fail("a proof from the empty tree is empty"))
        };
    }
    let proof = ConsistencyProof::<Sha256>::try_from_bytes(joined(path))
        .map_err(|_| fail("the proof is not whole hashes"))?;
    RootHash::<Sha256>::new(out(new_root), new_size)
        .verify_consistency(&RootHash::new(out(old_root), old_size), &proof)
        .map_err(|e| fail(&format!("{e:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    // The RFC 6962 test tree of the Certificate Transparency reference implementation
    // (transparency-dev/merkle testonly/reference_test.go, also the known-answer tests
    // ct-merkle passes): its 8 leaves and the roots of its first 1..8.
    const LEAVES: [&str; 8] = [
        "",
        "00",
        "10",
        "2021",
        "3031",
        "40414243",
        "5051525354555657",
        "606162636465666768696a6b6c6d6e6f",
    ];
    const ROOTS: [&str; 8] = [
        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
        "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
        "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
        "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
        "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
        "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
    ];

    fn h(s: &str) -> Hash {
        hex::decode(s).unwrap().try_into().unwrap()
    }

    fn reference(n: usize) -> MemoryBackedTree<Sha256, Vec<u8>> {
        let mut t = MemoryBackedTree::new();
        for l in &LEAVES[..n] {
            t.push(hex::decode(l).unwrap());
        }
        t
    }

    #[test]
    fn the_reference_roots_and_the_empty_root() {
        assert_eq!(
            hex::encode(empty_root()),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        for n in 1..=8 {
            assert_eq!(
                hex::encode(reference(n).root().as_bytes()),
                ROOTS[n - 1],
                "size {n}"
            );
        }
    }

    #[test]
    fn reference_proofs_verify_here() {
        // The reference's proofs: leaf 5 of 8; 2 -> 5 and 6 -> 8 (old trees that are
        // not a whole subtree).
        let t = reference(8);
        let path = split(t.prove_inclusion(5).as_bytes());
        assert_eq!(
            path,
            vec![
                h("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"),
                h("ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0"),
                h("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
            ]
        );
        let data = hex::decode(LEAVES[5]).unwrap();
        check_inclusion(&data, 5, 8, &path, &h(ROOTS[7])).unwrap();
        assert!(check_inclusion(&data, 4, 8, &path, &h(ROOTS[7])).is_err());
        // (Size 7 with this root would pass: the path is the same shape; a checkpoint signs
        // the size with the root, so a proof is checked against both.)
        assert!(check_inclusion(&data, 5, 6, &path, &h(ROOTS[7])).is_err());
        assert!(check_inclusion(&data, 5, 8, &path, &h(ROOTS[6])).is_err());
        assert!(check_inclusion(&data, 9, 8, &path, &h(ROOTS[7])).is_err());
        let p68 = split(t.prove_consistency(2).as_bytes());
        assert_eq!(
            p68,
            vec![
                h("0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a"),
                h("ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0"),
                h("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
            ]
        );
        let p25 = split(reference(5).prove_consistency(3).as_bytes());
        assert_eq!(
            p25,
            vec![
                h("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
                h("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"),
            ]
        );
        check_consistency(2, &h(ROOTS[1]), 5, &h(ROOTS[4]), &p25).unwrap();
        for old in 1..=8u64 {
            let proof = split(t.prove_consistency(8 - old as usize).as_bytes());
            check_consistency(old, &h(ROOTS[old as usize - 1]), 8, &h(ROOTS[7]), &proof).unwrap();
            // Against another old root: a fork.
            if old < 8 {
                let other = h(ROOTS[old as usize]);
                assert!(check_consistency(old, &other, 8, &h(ROOTS[7]), &proof).is_err());
            }
        }
    }

    #[test]
    fn our_tree_proves_what_it_holds() {
        let mut t = Tree::new();
        assert_eq!(t.root(), empty_root());
        let mut roots = vec![t.root()];
        for i in 0..37u8 {
            t.push([i; 32]);
            roots.push(t.root());
        }
        for size in 1..=t.len() {
            let p = t.prefix(size);
            for i in 0..size {
                let path = p.inclusion(i).unwrap();
                check_inclusion(&[i as u8; 32], i, size, &path, &roots[size as usize]).unwrap();
                assert!(
                    check_inclusion(&[i as u8 ^ 1; 32], i, size, &path, &roots[size as usize])
                        .is_err()
                );
            }
            for old in 0..=size {
                let proof = p.consistency(old).unwrap();
                check_consistency(
                    old,
                    &roots[old as usize],
                    size,
                    &roots[size as usize],
                    &proof,
                )
                .unwrap();
            }
        }
        assert!(t.inclusion(37).is_err());
        assert!(t.consistency(38).is_err());
    }
}
