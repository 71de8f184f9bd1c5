//! The manifest of retired segments.
//!
//! Compaction retires a segment once every live record in it has been
//! copied to the tail and made durable: it adds the segment to this set,
//! then deletes the file. Recovery reads the set to tell a retired segment
//! from a lost one, and deletes any retired file a crash left behind.
//!
//! `RETIRED` (little-endian), rewritten whole through a temporary file,
//! fsync, rename and directory fsync:
//!
//! | offset | size  | field                                            |
//! |-------:|------:|--------------------------------------------------|
//! | 0      | 8     | magic `EMBERRET`                                 |
//! | 8      | 8     | `below`: every segment below it is retired       |
//! | 16     | 4     | `n`: number of retired segments at or above it   |
//! | 20     | 8 * n | those segment numbers, ascending                 |
//! | 20+8n  | 4     | CRC32C of everything before it                   |

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::storage::replace_durably;

const FILE: &str = "RETIRED";
const TMP: &str = "RETIRED.tmp";
const MAGIC: &[u8; 8] = b"EMBERRET";
/// Most sparse entries a manifest may claim: bounds the allocation made
/// from a length read off the disk.
const MAX_SPARSE: usize = 1 << 24;

/// The set of retired segment numbers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Retired {
    below: u64,
    sparse: BTreeSet<u64>,
}

impl Retired {
    /// Every segment below `below` retired: a store whose log starts far
    /// into the address space (tests only).
    #[cfg(test)]
    pub(crate) fn all_below(below: u64) -> Retired {
        Retired {
            below,
            sparse: BTreeSet::new(),
        }
    }

    /// Whether segment `seg` is retired.
    pub(crate) fn contains(&self, seg: u64) -> bool {
        seg < self.below || self.sparse.contains(&seg)
    }

    /// The first segment in `from..to` that is not retired, if any (time
    /// linear in the retired segments of that range, not in its width).
    pub(crate) fn first_missing(&self, from: u64, to: u64) -> Option<u64> {
        let mut next = from.max(self.below);
        if next >= to {
            // A (damaged) manifest may retire segments past `to`.
            return None;
        }
        for &seg in self.sparse.range(next..to) {
            if seg != next {
                break;
            }
            next += 1;
        }
        (next < to).then_some(next)
    }

    /// Adds `seg`, folding the sparse set into `below` where it can.
    pub(crate) fn insert(&mut self, seg: u64) {
        self.sparse.insert(seg);
        while self.sparse.remove(&self.below) {
            self.below += 1;
        }
    }

    fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(24 + 8 * self.sparse.len());
        b.extend_from_slice(MAGIC);
        b.extend_from_slice(&self.below.to_le_bytes());
        b.extend_from_slice(&(self.sparse.len() as u32).to_le_bytes());
        for seg in &self.sparse {
            b.extend_from_slice(&seg.to_le_bytes());
        }
        let crc = crate::checksum::crc32c(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        b
    }

    fn decode(b: &[u8]) -> Result<Retired> {
        let bad = |reason: &str| Error::corruption(0, format!("{FILE}: {reason}"));
        if b.len() < 24 || &b[..8] != MAGIC {
            return Err(bad("bad magic or length"));
        }
        let n = u32::from_le_bytes(b[16..20].try_into().expect("4 bytes")) as usize;
        if n > MAX_SPARSE || b.len() != 24 + 8 * n {
            return Err(bad("length does not match its count"));
        }
        let (body, crc) = b.split_at(b.len() - 4);
        if crate::checksum::crc32c(body).to_le_bytes() != crc {
            return Err(bad("checksum mismatch"));
        }
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        Ok(Retired {
            below: u64_at(8),
            sparse: (0..n).map(|i| u64_at(20 + 8 * i)).collect(),
        })
    }
}

fn path(dir: &Path) -> PathBuf {
    dir.join(FILE)
}

/// Reads the manifest (empty when the store never retired a segment).
///
/// # Errors
/// [`Error::Corruption`] when the file is damaged; [`Error::Io`].
pub(crate) fn load(dir: &Path) -> Result<Retired> {
    match fs::read(path(dir)) {
        Ok(bytes) => Retired::decode(&bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Retired::default()),
        Err(e) => Err(e.into()),
    }
}

/// Replaces the manifest with `retired`, durably.
pub(crate) fn store(dir: &Path, retired: &Retired) -> Result<()> {
    replace_durably(dir, TMP, FILE, &retired.encode())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_folds_into_below_and_roundtrips() {
        let mut r = Retired::default();
        r.insert(2);
        r.insert(0);
        assert!(r.contains(0) && !r.contains(1) && r.contains(2));
        r.insert(1);
        assert_eq!(r.below, 3);
        assert!(r.sparse.is_empty());
        r.insert(7);
        r.insert(8);
        assert_eq!(r.first_missing(0, 3), None);
        assert_eq!(r.first_missing(0, 10), Some(3));
        assert_eq!(r.first_missing(7, 9), None);
        assert_eq!(r.first_missing(7, 10), Some(9));
        assert_eq!(r.first_missing(4, u64::MAX), Some(4));
        // Regression (fuzz, 2026-12-02): a manifest retiring everything
        // below a segment past `to` made the range empty and backwards,
        // and `BTreeSet::range` panicked.
        assert_eq!(Retired::all_below(1 << 50).first_missing(0, 1 << 44), None);
        assert_eq!(Retired::all_below(12).first_missing(3, 12), None);
        let b = r.encode();
        assert_eq!(Retired::decode(&b).unwrap(), r);
        for i in 0..b.len() {
            let mut bad = b.clone();
            bad[i] ^= 1;
            assert!(Retired::decode(&bad).is_err(), "flip at {i} accepted");
        }
        assert!(Retired::decode(&b[..b.len() - 1]).is_err());
    }

    #[test]
    fn store_and_load() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(load(dir.path()).unwrap(), Retired::default());
        let mut r = Retired::default();
        r.insert(4);
        store(dir.path(), &r).unwrap();
        assert_eq!(load(dir.path()).unwrap(), r);
    }
}
