//! The manifest: the segments retired, and the newest segment created.
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
//!
//! `NEWEST` names the newest segment the store created, written the same
//! way each time a segment is created, once its header and directory entry
//! are durable. The segment files alone cannot tell a newest segment
//! deleted or emptied (damage: its records are lost, and older values and
//! removed keys would come back) from one never created or left without a
//! sound header by a crash while it was created (which recovery creates
//! again): `NEWEST` can, since a crash leaves it naming at most a segment
//! whose header was durable. A store without it (an older build's store or
//! backup) is not checked so until a writable open writes it, naming the
//! newest segment its recovery left (`Db::open`). A backup writes one
//! naming the newest segment it copied with its header.
//!
//! | offset | size | field                                |
//! |-------:|-----:|--------------------------------------|
//! | 0      | 8    | magic `EMBERNEW`                     |
//! | 8      | 8    | store id (from the store's meta file) |
//! | 16     | 8    | the segment number                   |
//! | 24     | 4    | reserved, zero                       |
//! | 28     | 4    | CRC32C of bytes 0..28                |

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::storage::replace_durably;

const FILE: &str = "RETIRED";
const TMP: &str = "RETIRED.tmp";
const MAGIC: &[u8; 8] = b"EMBERRET";
const NEWEST_FILE: &str = "NEWEST";
const NEWEST_TMP: &str = "NEWEST.tmp";
const NEWEST_MAGIC: &[u8; 8] = b"EMBERNEW";
const NEWEST_BYTES: usize = 32;
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

/// Records durably that segment `seg` of the store `store_id` in `dir` is
/// the newest it created. Call once the segment's header and directory
/// entry are durable.
///
/// # Errors
/// I/O errors.
pub(crate) fn store_newest(dir: &Path, store_id: u64, seg: u64) -> Result<()> {
    let mut b = [0u8; NEWEST_BYTES];
    b[..8].copy_from_slice(NEWEST_MAGIC);
    b[8..16].copy_from_slice(&store_id.to_le_bytes());
    b[16..24].copy_from_slice(&seg.to_le_bytes());
    let crc = crate::checksum::crc32c(&b[..28]);
    b[28..].copy_from_slice(&crc.to_le_bytes());
    replace_durably(dir, NEWEST_TMP, NEWEST_FILE, &b)
}

/// The newest segment the store `store_id` in `dir` recorded creating
/// (`None` when it recorded none, see the module's docs).
///
/// # Errors
/// [`Error::Corruption`] when the file is damaged or another store's;
/// [`Error::Io`].
pub(crate) fn load_newest(dir: &Path, store_id: u64) -> Result<Option<u64>> {
    let b = match fs::read(dir.join(NEWEST_FILE)) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let bad = |reason: &str| Err(Error::corruption(0, format!("{NEWEST_FILE}: {reason}")));
    if b.len() != NEWEST_BYTES || &b[..8] != NEWEST_MAGIC {
        return bad("bad magic or length");
    }
    if crate::checksum::crc32c(&b[..28]).to_le_bytes() != b[28..] {
        return bad("checksum mismatch");
    }
    let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
    if u64_at(8) != store_id {
        return bad("belongs to another store");
    }
    Ok(Some(u64_at(16)))
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
    fn newest_round_trips_and_damage_or_another_store_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(load_newest(dir.path(), 7).unwrap(), None);
        store_newest(dir.path(), 7, 1234).unwrap();
        assert_eq!(load_newest(dir.path(), 7).unwrap(), Some(1234));
        assert!(matches!(
            load_newest(dir.path(), 8),
            Err(Error::Corruption { .. })
        ));
        let good = fs::read(dir.path().join(NEWEST_FILE)).unwrap();
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x01;
            fs::write(dir.path().join(NEWEST_FILE), &bad).unwrap();
            assert!(
                matches!(load_newest(dir.path(), 7), Err(Error::Corruption { .. })),
                "flip at {i} accepted"
            );
        }
        fs::write(dir.path().join(NEWEST_FILE), &good[..31]).unwrap();
        assert!(load_newest(dir.path(), 7).is_err());
        store_newest(dir.path(), 7, 1235).unwrap();
        assert_eq!(load_newest(dir.path(), 7).unwrap(), Some(1235));
    }

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
