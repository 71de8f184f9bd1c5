//! Reclaiming expired keys in the background.
//!
//! An expired key is never returned, but its index entry stays until a
//! write meets the key or compaction drops its record: until then it counts
//! in [`crate::Db::len`] and holds index memory (a server's `DBSIZE`
//! counted keys that had expired long before). The maintenance thread
//! sweeps the index for them, as Redis's active expiry cycle (`expire.c`)
//! samples its keys with a time to live: a budget of work per sweep,
//! sweeps at most every [`SWEEP_EVERY`] (repeated for up to [`SWEEP_FOR`]
//! while each finds many expired keys), each
//! resuming where the last stopped, and only in shards that hold keys
//! with an expiry, reading only the records in segments that hold some. An
//! expired key is removed as a `remove` of it is: under its shard's lock,
//! only if the key is still expired then, with a tombstone (the expired
//! record hides the key's older records only until compaction drops it,
//! which it does once the index no longer points at it).

use crate::clock;
use crate::db::Core;
use crate::error::Result;
use crate::index::SHARDS;
use crate::sync::atomic::Ordering;

/// Work one sweep may do per call, in slots visited (1 each), expiries
/// looked at ([`PEEK_COST`]) and records read ([`READ_COST`]): 65,536, so
/// at most 65,536 slots visited and about 6,000 expired keys removed
/// (shards with no key that has an expiry are skipped at no cost).
pub(crate) const SWEEP_BUDGET: usize = 1 << 16;

/// Least time between two sweeps (250 ms): the maintenance thread wakes at
/// every log milestone under heavy writes, and each sweep takes every
/// shard's lock once to learn whether it holds keys with an expiry.
pub(crate) const SWEEP_EVERY: std::time::Duration = std::time::Duration::from_millis(250);

/// Expired keys a sweep must remove for the maintenance thread to sweep
/// again at once (1,024), for at most [`SWEEP_FOR`].
pub(crate) const SWEEP_AGAIN: u64 = 1 << 10;

/// Longest the maintenance thread goes on sweeping at one wake (50 ms).
pub(crate) const SWEEP_FOR: std::time::Duration = std::time::Duration::from_millis(50);

/// What a slot visited costs of [`SWEEP_BUDGET`].
const SLOT_COST: usize = 1;

/// What a look at a record's expiry costs of [`SWEEP_BUDGET`] (a cold
/// record's first 24 bytes, or nothing for a resident one).
const PEEK_COST: usize = 2;

/// What a record read costs of [`SWEEP_BUDGET`]: a resident one's key, or
/// a cold one in full, checksummed (then removed if it has expired).
const READ_COST: usize = 8;

/// Where the next sweep resumes: a shard and a slot of its table (a table
/// replaced since, when the shard grew, is walked from the same slot: a
/// key skipped is met by the next round).
#[derive(Debug, Default)]
pub(crate) struct Sweep {
    shard: usize,
    slot: usize,
    /// The segments of `shard` holding records with an expiry, read when
    /// the sweep entered the shard.
    expiring_in: Vec<u64>,
}

impl Sweep {
    /// Visits index slots from where the last call stopped, within
    /// `budget` (see [`SWEEP_BUDGET`]), and removes the keys found expired
    /// (those still expired under their shard's lock); returns how many.
    /// Stops early at the end of a round over every shard.
    ///
    /// # Errors
    /// A record that cannot be read (damage, I/O): the sweep resumes past
    /// it at the next call. A record moved by compaction meanwhile is
    /// skipped until the next round.
    pub(crate) fn run(&mut self, core: &Core, budget: usize) -> Result<u64> {
        let now = clock::now_ms();
        let mut spent = 0;
        let mut expired = Vec::new();
        let mut scratch = Vec::new();
        while spent < budget {
            if self.slot == 0 {
                self.expiring_in = core.index.segments_with_expiring(self.shard);
            }
            let table = core.index.table(self.shard);
            if self.expiring_in.is_empty() {
                self.slot = table.len();
            }
            while self.slot < table.len() && spent < budget {
                let slot = self.slot;
                self.slot += 1;
                spent += SLOT_COST;
                let Some(addr) = core.index.address_at(&table, slot) else {
                    continue;
                };
                let seg = core.log.storage().segment_of(addr);
                if self.expiring_in.binary_search(&seg).is_err() {
                    continue;
                }
                spent += PEEK_COST;
                match core.log.peek_cold_expiry(addr) {
                    // A cold record without an expiry, or not yet expired:
                    // its value is neither read nor checksummed.
                    Ok(Some(expiry)) if expiry.is_none_or(|at| at > now) => continue,
                    Err(e) if e.is_missing_file() => continue,
                    _ => {}
                }
                spent += READ_COST;
                let key = core.log.with_record_key(addr, &mut scratch, |r| {
                    (r.expires_at.is_some() && !r.is_live(now)).then(|| r.key.to_vec())
                });
                match key {
                    Ok(key) => expired.extend(key),
                    Err(e) if e.is_missing_file() => {}
                    Err(e) => {
                        remove(core, &expired)?;
                        return Err(e);
                    }
                }
            }
            if self.slot >= table.len() {
                self.slot = 0;
                self.shard += 1;
                if self.shard == SHARDS {
                    self.shard = 0;
                    break;
                }
            }
        }
        remove(core, &expired)
    }
}

/// Removes each of `keys` that is still expired; returns how many were,
/// and counts them in `Core::expired_removed`.
fn remove(core: &Core, keys: &[Vec<u8>]) -> Result<u64> {
    let mut removed = 0;
    let result = keys.iter().try_for_each(|key| {
        removed += u64::from(core.remove_if_expired(key)?);
        Ok(())
    });
    core.expired_removed.fetch_add(removed, Ordering::Relaxed);
    result.map(|()| removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Db, Options};
    use std::time::Duration;

    /// A store whose maintenance thread is stopped, so that only the test
    /// sweeps.
    fn without_maintenance(dir: &std::path::Path) -> Db {
        let db = Db::open(dir, Options::default()).unwrap();
        db.stop_maintenance();
        db
    }

    /// Expired keys leave the index, a round at a time within the budget;
    /// keys without an expiry, not yet expired, or written again since they
    /// were found expired stay.
    #[test]
    fn a_sweep_removes_the_expired_keys_and_only_them() {
        let dir = tempfile::tempdir().unwrap();
        let db = without_maintenance(dir.path());
        for k in 0..3_000u32 {
            let key = k.to_le_bytes();
            match k % 3 {
                0 => db.insert(&key, b"kept").unwrap(),
                1 => db
                    .insert_with_ttl(&key, b"expires", Duration::from_millis(1))
                    .unwrap(),
                _ => db
                    .insert_with_ttl(&key, b"later", Duration::from_secs(3_600))
                    .unwrap(),
            }
        }
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(db.len(), 3_000, "expired keys count until swept");
        let core = db.core();
        let mut sweep = Sweep::default();
        let mut removed = 0;
        let mut calls = 0;
        while db.len() > 2_000 {
            removed += sweep.run(core, 4_096).unwrap();
            calls += 1;
            assert!(calls < 10_000, "the sweep makes no progress");
        }
        assert!(calls > 1, "a small budget takes several calls");
        assert_eq!(db.len(), 2_000);
        assert!(removed >= 1_000);
        for k in 0..3_000u32 {
            let expected: Option<&[u8]> = match k % 3 {
                0 => Some(b"kept"),
                1 => None,
                _ => Some(b"later"),
            };
            assert_eq!(db.get(&k.to_le_bytes()).unwrap().as_deref(), expected);
        }
        let stats = db.stats().unwrap();
        assert_eq!(stats.expiring_keys, 1_000);
        assert_eq!(stats.expired_keys_removed, removed);
    }

    /// Records out of the hot tier: the sweep looks at their expiry
    /// through the segment maps and reads in full only the expired ones.
    #[test]
    fn a_sweep_of_cold_records_removes_the_expired_ones() {
        let dir = tempfile::tempdir().unwrap();
        let options = Options::default().hot_bytes(4 << 20);
        let db = Db::open(dir.path(), options).unwrap();
        db.stop_maintenance();
        for k in 0..3_000u32 {
            let ttl = Duration::from_millis(if k % 2 == 0 { 1 } else { 3_600_000 });
            db.insert_with_ttl(&k.to_le_bytes(), &[k as u8; 4_000], ttl)
                .unwrap();
        }
        db.sync().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let expired = (0..3_000u64).filter(|&k| k % 2 == 0).count();
        assert!(
            db.core().log.resident_bytes() < 3_000 * 4_000,
            "the test needs cold records"
        );
        assert_eq!(
            Sweep::default().run(db.core(), usize::MAX).unwrap(),
            expired as u64
        );
        assert_eq!(db.len(), 1_500);
        for k in 0..3_000u32 {
            let got = db.get(&k.to_le_bytes()).unwrap();
            assert_eq!(got.is_some(), k % 2 == 1, "key {k}");
        }
    }

    /// With `sync_writes`, the sweep's tombstones are not fdatasynced one
    /// by one (a review counted 19,999 fdatasyncs for 20,000 expired keys,
    /// on the maintenance thread): compaction makes them durable before it
    /// retires the segment of a record they hide.
    #[test]
    fn a_sweep_does_not_sync_each_removal() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), Options::default().sync_writes(true)).unwrap();
        db.stop_maintenance();
        let mut batch = crate::WriteBatch::new();
        for k in 0..2_000u32 {
            let at = std::time::SystemTime::now() + Duration::from_millis(1);
            batch.insert_with_expiry(&k.to_le_bytes(), b"v", at);
        }
        db.apply_batch(&batch).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let before = db.stats().unwrap().fdatasyncs;
        assert_eq!(Sweep::default().run(db.core(), usize::MAX).unwrap(), 2_000);
        let synced = db.stats().unwrap().fdatasyncs - before;
        assert!(synced <= 2, "{synced} fdatasyncs for one sweep");
        assert_eq!(db.len(), 0);
        db.close().unwrap();
        let db = Db::open(dir.path(), Options::default()).unwrap();
        assert_eq!(db.len(), 0, "the tombstones outlived a close");
    }

    /// A key found expired but written again before its removal is kept:
    /// the removal checks again under the shard's lock.
    #[test]
    fn a_key_written_again_after_it_was_found_expired_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let db = without_maintenance(dir.path());
        db.insert_with_ttl(b"k", b"old", Duration::from_millis(1))
            .unwrap();
        std::thread::sleep(Duration::from_millis(20));
        db.insert(b"k", b"new").unwrap();
        assert!(!db.core().remove_if_expired(b"k").unwrap());
        assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"new"[..]));
        db.insert_with_ttl(b"k", b"gone", Duration::from_millis(1))
            .unwrap();
        std::thread::sleep(Duration::from_millis(20));
        assert!(db.core().remove_if_expired(b"k").unwrap());
        assert_eq!(db.len(), 0);
    }

    /// The maintenance thread sweeps on its own.
    #[test]
    fn the_maintenance_thread_removes_expired_keys() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), Options::default()).unwrap();
        for k in 0..500u32 {
            db.insert_with_ttl(&k.to_le_bytes(), b"v", Duration::from_millis(1))
                .unwrap();
        }
        db.insert(b"stays", b"v").unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while db.len() > 1 {
            assert!(
                std::time::Instant::now() < deadline,
                "{} keys left",
                db.len()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(db.get(b"stays").unwrap().as_deref(), Some(&b"v"[..]));
    }
}
