//! The read cache: cold records that are read again, kept in memory so
//! that their next get costs no system call.
//!
//! Entries are whole records (header, key, value) keyed by log address.
//! A record never changes at its address and addresses are never reused
//! (the log only grows, see the index's module docs), so an entry never
//! goes stale: a record overwritten, removed or moved by compaction simply
//! stops being asked for, and ages out. A hit is verified again by the
//! caller like any other read.
//!
//! Admission and eviction with FIFO queues only, after S3-FIFO (Juncheng
//! Yang et al., "FIFO queues are all you need for cache eviction", SOSP
//! 2023):
//! - a record read from disk for the first time leaves only its address,
//!   in a ghost table of the addresses of recent misses; a second miss on
//!   an address still there admits the record. This is S3-FIFO's small
//!   queue holding addresses instead of records (the "doorkeeper" of
//!   TinyLFU, Einziger, Friedman and Manes, 2017, plays the same part): a
//!   read of a record never read again, as uniform reads over data far
//!   larger than the cache mostly are, costs a table slot and no copy;
//! - admitted records sit in a main queue per shard, a FIFO with
//!   reinsertion (CLOCK): a record leaving it with a hit count above zero
//!   goes back in with the count lowered by one.
//!
//! A miss takes no lock: a table of the addresses cached (buckets of four,
//! set at admission and cleared at eviction) says whether a lookup can
//! hit, and the ghost table is direct-mapped (a newer miss overwrites an
//! older one in its slot, a random-replacement FIFO). Both are hints: the
//! shard's map is the truth, and a wrong hint costs a disk read or a lock,
//! never a wrong record. Readers never wait for a shard's lock (see
//! [`ReadCache::get`]).

use std::collections::HashMap;
use std::collections::VecDeque;
use std::collections::hash_map::Entry;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::error::{Error, Result};

/// Shards, each with its own lock, map and main queue: 64.
const SHARDS: usize = 64;

/// Bytes counted per entry beyond its record, for the map slot, the queue
/// slot and the allocation's header: 64.
const ENTRY_OVERHEAD: usize = 64;

/// The highest hit count kept (two bits, as in S3-FIFO).
const MAX_FREQ: u8 = 3;

/// The record size the ghost table is sized for (1 KiB): it holds about as
/// many addresses as the cache holds records of that size, as S3-FIFO's
/// ghost queue holds as many as its main queue.
const GHOST_RECORD_BYTES: usize = 1024;

/// One slot of the table of cached addresses per this many bytes of the
/// cache (256), in buckets of [`BUCKET`]: few collisions for records of
/// 256 bytes and more.
const PRESENT_BYTES_PER_SLOT: usize = 256;

/// Slots per bucket of the table of cached addresses (4: 32 bytes).
const BUCKET: usize = 4;

/// The folded multiplication of `x` by the 64-bit golden ratio: the high
/// and low halves of the 128-bit product XORed (as foldhash and aHash do),
/// good in both its high and low bits.
fn mix(x: u64) -> u64 {
    let product = u128::from(x) * 0x9E37_79B9_7F4A_7C15;
    (product as u64) ^ ((product >> 64) as u64)
}

/// Hashes log addresses for the shards' maps with [`mix`]: the maps hold
/// only addresses, nothing an outsider chooses, so SipHash's flood
/// resistance buys nothing and its cost is paid on every cold read.
#[derive(Default)]
struct AddressHasher(u64);

impl Hasher for AddressHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    fn write_u64(&mut self, x: u64) {
        self.0 = mix(x ^ self.0);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type Addresses = BuildHasherDefault<AddressHasher>;

/// What [`ReadCache::get`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lookup {
    /// The record was cached, and is copied out.
    Hit,
    /// It was not; `admit` when this is its second miss in a while.
    Miss { admit: bool },
}

struct Cached {
    record: Box<[u8]>,
    freq: u8,
}

/// One shard: its records, and their addresses in insertion order.
#[derive(Default)]
struct Shard {
    map: HashMap<u64, Cached, Addresses>,
    main: VecDeque<u64>,
    bytes: usize,
    /// Counted under the lock: one counter shared by every reader would
    /// bounce its cache line between cores on every cold get.
    hits: u64,
}

/// A counter on a cache line of its own.
#[derive(Default)]
#[repr(align(64))]
struct Stripe(AtomicU64);

/// A sharded cache of records, bounded in bytes.
pub(crate) struct ReadCache {
    shards: Box<[Mutex<Shard>]>,
    /// Bytes each shard may hold, records plus [`ENTRY_OVERHEAD`] each.
    shard_bytes: usize,
    /// Addresses of cached records, in buckets of [`BUCKET`] (0: empty).
    present: Box<[AtomicU64]>,
    /// Addresses of recent misses, direct-mapped (0: empty).
    ghost: Box<[AtomicU64]>,
    /// Misses, striped by shard.
    misses: Box<[Stripe]>,
}

fn cost(record: &[u8]) -> usize {
    record.len() + ENTRY_OVERHEAD
}

/// A table of `len` empty slots, or `None` when the memory cannot be had.
fn table(len: usize) -> Option<Box<[AtomicU64]>> {
    crate::memory::try_filled(len, || AtomicU64::new(0)).map(Vec::into_boxed_slice)
}

impl ReadCache {
    /// A cache of at most `bytes` bytes: records plus 64 bytes of
    /// bookkeeping each, and the two address tables (a 26th to a 13th of
    /// `bytes`, allocated at once and taken out of it); 0 disables it.
    ///
    /// # Errors
    /// [`Error::InvalidOptions`] when the address tables exceed the
    /// machine's memory or cannot be allocated.
    pub(crate) fn new(bytes: usize) -> Result<ReadCache> {
        if bytes == 0 {
            return Ok(ReadCache {
                shards: Box::new([]),
                shard_bytes: 0,
                present: Box::new([]),
                ghost: Box::new([]),
                misses: Box::new([]),
            });
        }
        let present = (bytes / PRESENT_BYTES_PER_SLOT).next_power_of_two().max(64);
        let ghost = (bytes / (GHOST_RECORD_BYTES + ENTRY_OVERHEAD))
            .next_power_of_two()
            .max(64);
        let tables = (present + ghost) * size_of::<AtomicU64>();
        crate::memory::check_fits(
            &format!("read_cache_bytes = {bytes}: its address tables"),
            tables as u64,
        )?;
        let unallocatable = || {
            Error::InvalidOptions(format!(
                "read_cache_bytes = {bytes}: its address tables ({tables} bytes) \
                 cannot be allocated"
            ))
        };
        Ok(ReadCache {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            shard_bytes: bytes.saturating_sub(tables) / SHARDS,
            present: table(present).ok_or_else(unallocatable)?,
            ghost: table(ghost).ok_or_else(unallocatable)?,
            misses: (0..SHARDS).map(|_| Stripe::default()).collect(),
        })
    }

    /// The shard of a mixed address (its top 6 bits).
    fn shard_of(h: u64) -> usize {
        (h >> 58) as usize
    }

    /// The bucket of the table of cached addresses for a mixed address.
    fn bucket(&self, h: u64) -> &[AtomicU64] {
        let buckets = self.present.len() / BUCKET;
        let b = (h as usize) & (buckets - 1);
        &self.present[b * BUCKET..(b + 1) * BUCKET]
    }

    /// Copies the record cached at `addr` into `out` (replacing its
    /// contents) and returns [`Lookup::Hit`]; else notes the miss: the
    /// address takes its slot in the ghost table, or, when it is already
    /// there (a second miss), leaves it and the caller is told to
    /// [`ReadCache::admit`] the record once it has read it.
    ///
    /// A miss takes no lock, and a hit never waits for one: a shard whose
    /// lock is held answers as a miss. With more threads than cores, a
    /// thread preempted while holding the lock would otherwise stall every
    /// reader of the shard for a time slice; a disk read costs a
    /// microsecond or two.
    pub(crate) fn get(&self, addr: u64, out: &mut Vec<u8>) -> Lookup {
        if self.shard_bytes == 0 {
            return Lookup::Miss { admit: false };
        }
        let h = mix(addr);
        let shard = Self::shard_of(h);
        if self
            .bucket(h)
            .iter()
            .any(|s| s.load(Ordering::Relaxed) == addr)
            && let Some(mut q) = self.shards[shard].try_lock()
            && let Some(cached) = q.map.get_mut(&addr)
        {
            cached.freq = (cached.freq + 1).min(MAX_FREQ);
            out.clear();
            out.extend_from_slice(&cached.record);
            q.hits += 1;
            return Lookup::Hit;
        }
        self.misses[shard].0.fetch_add(1, Ordering::Relaxed);
        let ghost = &self.ghost[(h >> 20) as usize & (self.ghost.len() - 1)];
        if ghost.load(Ordering::Relaxed) == addr {
            ghost.store(0, Ordering::Relaxed);
            Lookup::Miss { admit: true }
        } else {
            ghost.store(addr, Ordering::Relaxed);
            Lookup::Miss { admit: false }
        }
    }

    /// Admits `record`, read from disk at `addr` after [`ReadCache::get`]
    /// said so, evicting as needed. Not when the record is larger than a
    /// tenth of a shard, nor when the shard's lock is held. The copy is
    /// allocated, and evicted records freed, outside the lock.
    pub(crate) fn admit(&self, addr: u64, record: &[u8]) {
        if cost(record) > self.shard_bytes / 10 {
            return;
        }
        let h = mix(addr);
        let copy: Box<[u8]> = record.into();
        let Some(mut q) = self.shards[Self::shard_of(h)].try_lock() else {
            return;
        };
        let evicted = self.admit_locked(&mut q, addr, copy);
        drop(q);
        drop(evicted);
    }

    /// Adds `record` at `addr` to the shard's main queue (unless there is
    /// one), then evicts until the shard holds at most its bytes. Returns
    /// the evicted records, to be freed once the lock is let go.
    fn admit_locked(&self, q: &mut Shard, addr: u64, record: Box<[u8]>) -> Vec<Box<[u8]>> {
        let bytes = cost(&record);
        match q.map.entry(addr) {
            Entry::Occupied(_) => return vec![record],
            Entry::Vacant(slot) => {
                slot.insert(Cached { record, freq: 0 });
            }
        }
        q.main.push_back(addr);
        q.bytes += bytes;
        let bucket = self.bucket(mix(addr));
        let slot = bucket
            .iter()
            .find(|s| s.load(Ordering::Relaxed) == 0)
            .unwrap_or(&bucket[(addr as usize >> 4) % BUCKET]);
        slot.store(addr, Ordering::Relaxed);
        let mut evicted = Vec::new();
        while q.bytes > self.shard_bytes {
            let Some(old) = q.main.pop_front() else {
                break;
            };
            let cached = q.map.get_mut(&old).expect("queued entries are mapped");
            if cached.freq > 0 {
                cached.freq -= 1;
                q.main.push_back(old);
                continue;
            }
            q.bytes -= cost(&cached.record);
            evicted.extend(q.map.remove(&old).map(|c| c.record));
            for s in self.bucket(mix(old)) {
                let _ = s.compare_exchange(old, 0, Ordering::Relaxed, Ordering::Relaxed);
            }
        }
        evicted
    }

    /// Bytes held (records plus bookkeeping), hits and misses since open
    /// (lookups that found their shard busy count as misses).
    pub(crate) fn counters(&self) -> (usize, u64, u64) {
        let mut totals = (0, 0, 0);
        for (shard, misses) in self.shards.iter().zip(self.misses.iter()) {
            let q = shard.lock();
            totals.0 += q.bytes;
            totals.1 += q.hits;
            totals.2 += misses.0.load(Ordering::Relaxed);
        }
        totals
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shard(cache: &ReadCache, addr: u64) -> &Mutex<Shard> {
        &cache.shards[ReadCache::shard_of(mix(addr))]
    }

    fn record(addr: u64) -> Vec<u8> {
        addr.to_le_bytes().repeat(12)
    }

    /// A read as the log does it: the cache, else the disk (and the
    /// record admitted when the cache says so).
    fn read(cache: &ReadCache, addr: u64) -> bool {
        let mut out = Vec::new();
        match cache.get(addr, &mut out) {
            Lookup::Hit => {
                assert_eq!(out, record(addr));
                true
            }
            Lookup::Miss { admit } => {
                if admit {
                    cache.admit(addr, &record(addr));
                }
                false
            }
        }
    }

    #[test]
    fn the_second_miss_admits_and_the_third_read_hits() {
        let cache = ReadCache::new(1 << 20).unwrap();
        assert!(!read(&cache, 4096));
        assert!(!read(&cache, 4096));
        assert!(read(&cache, 4096));
        assert!(!read(&cache, 8192));
        assert_eq!(cache.counters(), (96 + ENTRY_OVERHEAD, 1, 3));
    }

    #[test]
    fn a_disabled_cache_holds_nothing() {
        let cache = ReadCache::new(0).unwrap();
        for _ in 0..3 {
            assert!(!read(&cache, 4096));
        }
        assert_eq!(cache.counters(), (0, 0, 0));
    }

    #[test]
    fn the_cache_stays_within_its_bytes() {
        let cache = ReadCache::new(1 << 20).unwrap();
        for addr in (0..50_000u64).map(|i| i * 4096) {
            read(&cache, addr);
            read(&cache, addr);
            assert!(cache.counters().0 <= 1 << 20);
        }
        assert!(cache.counters().0 > 900 << 10, "{:?}", cache.counters());
    }

    #[test]
    fn records_read_again_survive_a_scan_of_records_read_once() {
        // 1,000 hot records, each read three times, then 100,000 records
        // read once: a FIFO or LRU cache of this size admitting every miss
        // would keep none of the hot ones.
        let cache = ReadCache::new(SHARDS * (64 << 10)).unwrap();
        let hot: Vec<u64> = (0..1_000u64).map(|i| i * 8).collect();
        for _ in 0..3 {
            for &addr in &hot {
                read(&cache, addr);
            }
        }
        for i in 0..100_000u64 {
            read(&cache, (1 << 40) + i * 8);
        }
        let kept = hot.iter().filter(|&&a| read(&cache, a)).count();
        assert!(kept > 900, "{kept} of 1,000 hot records kept");
    }

    #[test]
    fn a_record_hit_since_it_was_admitted_outlives_one_that_was_not() {
        // One shard's worth: fill it, hit one record, then push admissions
        // through; the hit one goes round once more.
        let cache = ReadCache::new(SHARDS * 3_200).unwrap();
        let fit = cache.shard_bytes / cost(&record(0));
        let addrs: Vec<u64> = (1..)
            .map(|i| i * 8)
            .filter(|&a| std::ptr::eq(shard(&cache, a), shard(&cache, 8)))
            .take(fit + 2)
            .collect();
        for &a in &addrs[..fit] {
            read(&cache, a);
            read(&cache, a);
        }
        assert_eq!(shard(&cache, 8).lock().map.len(), fit);
        assert!(read(&cache, addrs[1]));
        for &a in &addrs[fit..] {
            read(&cache, a);
            read(&cache, a);
        }
        let q = shard(&cache, 8).lock();
        assert!(q.map.contains_key(&addrs[1]), "the hit record was kept");
        assert!(!q.map.contains_key(&addrs[0]), "the oldest unhit one went");
    }

    #[test]
    fn a_busy_shard_answers_as_a_miss_and_skips_the_admission() {
        let cache = ReadCache::new(1 << 20).unwrap();
        let mut out = Vec::new();
        let same_shard = (2..)
            .map(|i| i * 64)
            .find(|&a| std::ptr::eq(shard(&cache, a), shard(&cache, 64)))
            .unwrap();
        read(&cache, 64);
        read(&cache, 64);
        let held = shard(&cache, 64).lock();
        assert_eq!(cache.get(64, &mut out), Lookup::Miss { admit: false });
        cache.admit(same_shard, &record(same_shard));
        drop(held);
        assert_eq!(cache.get(64, &mut out), Lookup::Hit);
        let q = shard(&cache, 64).lock();
        assert!(!q.map.contains_key(&same_shard), "not admitted while busy");
    }

    #[test]
    fn an_evicted_record_leaves_the_table_of_cached_addresses() {
        let cache = ReadCache::new(SHARDS * 3_200).unwrap();
        let fit = cache.shard_bytes / cost(&record(0));
        let addrs: Vec<u64> = (1..)
            .map(|i| i * 8)
            .filter(|&a| std::ptr::eq(shard(&cache, a), shard(&cache, 8)))
            .take(fit + 1)
            .collect();
        for &a in &addrs {
            read(&cache, a);
            read(&cache, a);
        }
        let listed = |a: u64| {
            cache
                .bucket(mix(a))
                .iter()
                .any(|s| s.load(Ordering::Relaxed) == a)
        };
        assert!(!listed(addrs[0]), "evicted");
        assert!(addrs[1..].iter().all(|&a| listed(a)));
    }
}
