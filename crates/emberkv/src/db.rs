//! [`Db`]: the public face of the store.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::batch::WriteBatch;
use crate::cache::ReadCache;
use crate::checkpoint;
use crate::compaction::{self, CompactionReport};
use crate::compression::Codec;
use crate::dictionary::Dictionary;
use crate::error::{Error, Result};
use crate::flusher::Flusher;
use crate::index::{Index, KeyHasher, ShardWriter, Slot, shard_of};
use crate::iter::Iter;
use crate::log::{Found, Log};
use crate::maintenance::Maintenance;
use crate::manifest::{self, Retired};
use crate::options::Options;
use crate::record::{EXPIRY_BYTES, Entry, FLAG_BATCH, FLAG_TOMBSTONE, HEADER_BYTES, Record};
use crate::recovery::Chunk;
use crate::stats::Stats;
use crate::storage::{Ahead, Segments};
use crate::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use crate::sync::{Condvar, Mutex};
use crate::{MAX_KEY_BYTES, MAX_VALUE_BYTES, clock, meta, recovery};

/// An open emberkv store: a hash index in memory over a log on disk.
///
/// `Db` is `Send + Sync`: share it between threads with an `Arc` (or
/// scoped threads). Reads take no lock; writes to keys in different index
/// shards proceed in parallel.
///
/// Dropping a `Db` flushes and fdatasyncs everything and releases the
/// store's lock; call [`Db::close`] instead to see an error.
pub struct Db {
    core: Arc<Core>,
    flusher: Mutex<Option<Flusher>>,
    maintenance: Mutex<Option<Maintenance>>,
    /// Holds the store's `flock`s (exclusive, or shared when read-only)
    /// until the `Db` is gone.
    _lock: meta::StoreLock,
}

const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Db>();
};

/// What a write does to its key, decided from the key's current value.
enum Action<'a> {
    /// Leave the key as it is.
    Keep,
    /// Leave the key as it is, its current record standing for the write
    /// asked for (an update to the value it already holds): as durable as
    /// that write would have been before the call returns.
    Same,
    /// Store this value with this expiry (Unix ms).
    Put {
        value: Cow<'a, [u8]>,
        expires_at: Option<u64>,
    },
    /// Remove the key.
    Remove,
}

/// Who writes through [`Core::modify_as`].
#[derive(Clone, Copy, PartialEq, Eq)]
enum By {
    /// A caller of the API.
    Writer,
    /// The maintenance thread.
    Maintenance,
}

/// A key's live value, as a write found it under the shard lock.
struct Old {
    value: Vec<u8>,
    expires_at: Option<u64>,
}

/// The record a key's index entry points at, as a write found it.
pub(crate) struct Current {
    pub(crate) addr: u64,
    pub(crate) record_bytes: u64,
    pub(crate) logical_bytes: u64,
    pub(crate) expires_at: Option<u64>,
}

impl Current {
    /// The record at `addr`, as the newest of its key.
    pub(crate) fn of(addr: u64, record: &Record<'_>) -> Current {
        Current {
            addr,
            record_bytes: record.header.total_len() as u64,
            logical_bytes: (record.key.len() + record.value_len()) as u64,
            expires_at: record.expires_at,
        }
    }

    fn is_live(&self) -> bool {
        self.expires_at.is_none_or(|at| at > clock::now_ms())
    }
}

/// What a record that failed its checksum is to a probe for a key (see
/// [`Core::judge_damaged`]).
enum Damaged {
    /// The key's own newest record: a write that does not read the old
    /// value replaces it; a read fails with the damage.
    Ours(Current),
    /// Another key's record: the probe goes on past it.
    Other,
    /// Cannot tell: the probe fails with the damage.
    Unknown,
}

/// The state shared by a [`Db`] and its background threads, and the read
/// and write paths over it.
pub(crate) struct Core {
    pub(crate) store_id: u64,
    /// The `covered` address of the last checkpoint written or loaded.
    pub(crate) checkpointed: AtomicU64,
    pub(crate) dir: PathBuf,
    pub(crate) index: Index,
    pub(crate) log: Arc<Log>,
    pub(crate) hasher: KeyHasher,
    pub(crate) sync_writes: bool,
    /// Opened with [`Options::read_only`]: every write fails.
    read_only: bool,
    /// The process's fork count when the store was opened
    /// ([`crate::fork::generation`]): a handle used where it differs is a
    /// forked child's copy.
    process: u64,
    /// This open among the process's opens (see [`WriteMark`]).
    open_id: u64,
    /// The manifest of retired segments, as last stored.
    pub(crate) retired: Mutex<Retired>,
    /// Held for a whole compaction pass: one at a time.
    pub(crate) compaction_lock: Mutex<()>,
    /// Segments compacted since the store was opened.
    pub(crate) compactions: AtomicU64,
    /// Bytes of a torn tail the open cut off the newest segment (see
    /// [`Stats::torn_bytes_cut`]).
    pub(crate) torn_bytes_cut: u64,
    /// Sealed segments in which compaction (or sampling) met a record that
    /// fails its checks since open: left in place, and skipped, so that
    /// one damaged record does not stop the reclaiming of every other
    /// segment (`emberkv::check` names the damage).
    pub(crate) damaged_segments: Mutex<BTreeSet<u64>>,
    /// Bytes of the tombstones compaction appended to each segment since
    /// open: not garbage while the segment is not the oldest (they would
    /// be carried again), so they do not make it a candidate.
    pub(crate) carried_tombstones: Mutex<HashMap<u64, u64>>,
    /// Logical bytes at which training a compression dictionary is tried
    /// (again): each try, with samples enough or not, doubles it.
    pub(crate) train_dictionary_at: AtomicU64,
    /// Live [`Iter`]s: retired segment files are kept while any is alive,
    /// since an iterator over a table snapshot may still read them.
    pub(crate) iterators: AtomicUsize,
    /// Retired segments whose files wait for the iterators to finish.
    pending_deletes: Mutex<Vec<u64>>,
    /// The [`Log::appended`] count past which writers wait for compaction
    /// (see [`Core::throttle`]), set by the maintenance thread from the
    /// room left under the space bound; `u64::MAX` when they need not.
    append_limit: AtomicU64,
    compaction_caught_up: (Mutex<()>, Condvar),
    /// Held while `maintenance::assess` sets where writers wait (by the
    /// maintenance thread, a foreground compaction, or a writer that
    /// reached the limit, see [`Core::throttle`]), and while the limit is
    /// raised or lifted ([`Core::raise_append_limit`],
    /// [`Core::lift_append_limit`]), so that no assessment overwrites a
    /// newer limit; holds [`Log::appended`] as of the last successful
    /// assessment.
    pub(crate) assessing: Mutex<u64>,
    /// Writes that waited in [`Core::throttle`] since open.
    write_waits: AtomicU64,
    /// Expired keys the maintenance thread's sweep removed since open.
    pub(crate) expired_removed: AtomicU64,
    /// [`Options::max_space_amplification`] while background compaction
    /// is on (see `maintenance::assess`): the maintenance thread holds the
    /// files to it, and a foreground compaction sets where writers wait
    /// by it as the background one does.
    pub(crate) space_bound: Option<f64>,
    /// [`Options::compress_cold_segments`]: the active segment is then
    /// sealed early without garbage too, so that its values get
    /// compressed (see `maintenance::SEAL_GARBAGE`).
    pub(crate) compress_cold: bool,
    /// Set while [`Db::backup`] holds compaction off.
    pub(crate) backing_up: AtomicBool,
}

/// Longest a write waits for compaction to catch up: 50 ms. A bound, not a
/// rate: writers keep going (slowly) even if compaction cannot catch up.
const THROTTLE_WAIT: Duration = Duration::from_millis(50);

/// Stores opened by this process so far: each open's [`WriteMark`]s name
/// it.
static OPENS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A place in a store's log from [`Db::write_mark`]: every write
/// acknowledged before the mark was taken lies below it, and
/// [`Db::is_durable`] tells when all of them are durable. A mark belongs
/// to the open that made it: marks of one open compare by their place in
/// its log (a later mark is never below an earlier one), and another
/// handle (another store, or this store opened again) refuses it with
/// [`Error::ForeignMark`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WriteMark {
    open_id: u64,
    address: u64,
}

/// The hot tier of a read-only handle, in bytes: the least
/// [`Options::hot_bytes`] allows (4 pages); nothing is appended to it.
const READ_ONLY_HOT_BYTES: usize = 4 * crate::log::PAGE_BYTES;

impl Core {
    /// Writes an index checkpoint covering everything durable now.
    pub(crate) fn checkpoint(&self) -> Result<()> {
        self.log.sync_all()?;
        let covered = self.log.durable();
        // Entries of records appended during the copy are in it too: the
        // second sync makes them durable before the checkpoint is published.
        checkpoint::write(&self.dir, self.store_id, &self.index, covered, || {
            self.log.sync_all()
        })?;
        self.checkpointed.store(covered, Ordering::Relaxed);
        Ok(())
    }

    /// Marks `seg` retired in the manifest, durably, then deletes its file
    /// (or schedules that, while iterators are alive).
    pub(crate) fn retire(&self, seg: u64) -> Result<()> {
        {
            let mut retired = self.retired.lock();
            let mut next = retired.clone();
            next.insert(seg);
            manifest::store(&self.dir, &next)?;
            *retired = next;
        }
        self.pending_deletes.lock().push(seg);
        self.delete_retired_files()
    }

    /// Deletes the files of retired segments, unless an iterator is alive.
    pub(crate) fn delete_retired_files(&self) -> Result<()> {
        let mut pending = self.pending_deletes.lock();
        if self.iterators.load(Ordering::SeqCst) > 0 {
            return Ok(());
        }
        while let Some(&seg) = pending.last() {
            self.log.storage().retire(seg)?;
            pending.pop();
        }
        Ok(())
    }

    /// Finds `key`, reading its value into `out`; returns its expiry when
    /// live.
    ///
    /// A lookup that raced with compaction may find its record's segment
    /// file deleted (the index already points at the copy); it then looks
    /// the key up again.
    pub(crate) fn lookup(&self, key: &[u8], out: &mut Vec<u8>) -> Result<Option<Option<u64>>> {
        self.in_its_process()?;
        let hash = self.hasher.hash(key);
        let mut tries = 0;
        loop {
            let mut now = None;
            let found = self.index.find(hash, |addr| {
                let now_ms = || *now.get_or_insert_with(clock::now_ms);
                Ok(match self.log.read_value(addr, key, out, now_ms) {
                    Ok(Found::Other) => None,
                    Ok(Found::Dead) => Some(None),
                    Ok(Found::Live { expires_at }) => Some(Some(expires_at)),
                    Err(e @ Error::Corruption { .. }) => {
                        match self.judge_damaged(addr, key, hash) {
                            Damaged::Other => None,
                            Damaged::Ours(_) | Damaged::Unknown => return Err(e),
                        }
                    }
                    Err(e) => return Err(e),
                })
            });
            match found {
                Err(e) if e.is_missing_file() && tries < 3 => tries += 1,
                found => return found.map(Option::flatten),
            }
        }
    }

    /// The one write path: finds the key's record under its shard lock,
    /// lets `decide` choose from the live value (read only when
    /// `read_value`), then appends and updates the index; a writer's
    /// (see [`Core::modify_as`]).
    fn modify<'a, R>(
        &self,
        key: &[u8],
        read_value: bool,
        decide: impl FnOnce(Option<Old>) -> Result<(Action<'a>, R)>,
    ) -> Result<R> {
        self.modify_as(key, read_value, By::Writer, decide)
    }

    /// [`Core::modify`] for a writer (made durable before it returns with
    /// `sync_writes`, and throttled while compaction is behind) or for the
    /// maintenance thread (neither: its own compaction makes the log
    /// durable before it retires a segment, and it must not wait for
    /// itself).
    fn modify_as<'a, R>(
        &self,
        key: &[u8],
        read_value: bool,
        by: By,
        decide: impl FnOnce(Option<Old>) -> Result<(Action<'a>, R)>,
    ) -> Result<R> {
        self.writable()?;
        let hash = self.hasher.hash(key);
        let durable_at;
        let result;
        {
            let mut writer = self.index.writer(shard_of(hash));
            let mut value = Vec::new();
            let (slot, current) =
                self.locate(&mut writer, hash, key, read_value.then_some(&mut value))?;
            let live = current.as_ref().is_some_and(Current::is_live);
            let old = live.then(|| Old {
                value,
                expires_at: current.as_ref().and_then(|c| c.expires_at),
            });
            let (action, r) = decide(old)?;
            result = r;
            let entry = match &action {
                Action::Keep => return Ok(result),
                Action::Remove if current.is_none() => return Ok(result),
                Action::Same => match &current {
                    // The record may be another writer's that is still
                    // waiting for its fdatasync: this caller waits for it
                    // too, or its acknowledged write could be lost.
                    Some(c) if by == By::Writer && self.sync_writes => {
                        let end = c.addr + c.record_bytes;
                        drop(writer);
                        self.log.make_durable(end)?;
                        return Ok(result);
                    }
                    _ => return Ok(result),
                },
                // Live, or expired: an expired record hides the key's older
                // records only while it exists, and once the index no
                // longer points at it compaction drops it as garbage, so
                // its removal needs a tombstone as much as a live key's
                // (without one a replay brought the older value back).
                Action::Remove => Entry::tombstone(key),
                Action::Put { value, expires_at } => {
                    self.check_write(key, value)?;
                    Entry {
                        flags: 0,
                        expires_at: *expires_at,
                        key,
                        value,
                    }
                }
            };
            // A value of the same length whose record no write-out has
            // reached yet is rewritten where it stands.
            let in_place = current.as_ref().filter(|c| {
                entry.flags & FLAG_TOMBSTONE == 0
                    && c.record_bytes == entry.len() as u64
                    && self.log.update_in_place(c.addr, &entry)
            });
            let addr = match in_place {
                Some(c) => c.addr,
                None => {
                    let addr = self.log.append(&entry)?;
                    #[cfg(test)]
                    run_after_append_hook();
                    addr
                }
            };
            // Counted again even in place: the expiry may have changed.
            if let Some(c) = &current {
                self.forget(&mut writer, c);
            }
            if entry.flags & FLAG_TOMBSTONE != 0 {
                writer.clear(slot);
            } else {
                if in_place.is_none() {
                    writer.set(hash, slot, addr);
                }
                self.count(&mut writer, addr, &entry);
            }
            durable_at = addr + entry.len() as u64;
        }
        if by == By::Writer {
            if self.sync_writes {
                self.log.make_durable(durable_at)?;
            }
            self.throttle();
        }
        Ok(result)
    }

    /// Fails with [`Error::Forked`] in a child process forked after the
    /// store was opened (see `fork.rs`): every call of a handle asks first.
    pub(crate) fn in_its_process(&self) -> Result<()> {
        if crate::fork::generation() != self.process {
            return Err(Error::Forked);
        }
        Ok(())
    }

    /// Fails with [`Error::ReadOnly`] on a read-only handle (and
    /// [`Error::Forked`] in a forked child): every write path asks first.
    fn writable(&self) -> Result<()> {
        self.in_its_process()?;
        if self.read_only {
            return Err(Error::ReadOnly);
        }
        Ok(())
    }

    /// Makes a writer wait (at most [`THROTTLE_WAIT`]) while compaction
    /// is behind: writers faster than the compactor would otherwise let
    /// garbage, and the disk, grow without bound. Behind means the log
    /// has grown past the limit the maintenance thread last set, so
    /// writers stop where the room under the space bound ends, not where
    /// the maintenance thread next looks.
    ///
    /// The limit is where that room ended when the maintenance thread last
    /// assessed it, at a log milestone; writes that add live bytes (a fill
    /// of new keys) move the room on meanwhile. So a writer that reaches
    /// the limit first assesses again itself (see
    /// `maintenance::reassess`; not while another thread assesses, nor
    /// before 1 MiB more was appended since the last assessment), and
    /// waits only if the limit still stands after that
    /// (waits for a maintenance thread that had yet to run cost a probe
    /// of 8 threads filling fresh stores a fifth of its inserts,
    /// docs/PERFORMANCE.md).
    fn throttle(&self) {
        if !self.compaction_is_behind() {
            return;
        }
        if let Some(bound) = self.space_bound {
            // A failed assessment leaves the limit as it was.
            let _ = crate::maintenance::reassess(self, bound);
        }
        let mut caught_up = self.compaction_caught_up.0.lock();
        if self.compaction_is_behind() {
            self.write_waits.fetch_add(1, Ordering::Relaxed);
            self.compaction_caught_up
                .1
                .wait_for(&mut caught_up, THROTTLE_WAIT);
        }
    }

    /// Whether compaction is behind (see [`Core::throttle`]).
    pub(crate) fn compaction_is_behind(&self) -> bool {
        self.log.appended() >= self.append_limit.load(Ordering::Relaxed)
    }

    /// Lets writers append until [`Log::appended`] reaches `limit` (see
    /// [`Core::throttle`]); `u64::MAX` lifts the limit. Wakes throttled
    /// writers when it rises.
    pub(crate) fn set_append_limit(&self, limit: u64) {
        if self.append_limit.swap(limit, Ordering::Relaxed) < limit {
            self.wake_throttled_writers();
        }
    }

    /// Raises the limit of [`Core::set_append_limit`] to `limit`, unless
    /// it is already higher. Under `assessing`, so that a writer's
    /// assessment in progress (`maintenance::reassess`) cannot lower it
    /// again once it is raised.
    pub(crate) fn raise_append_limit(&self, limit: u64) {
        let _assessing = self.assessing.lock();
        if self.append_limit.fetch_max(limit, Ordering::Relaxed) < limit {
            self.wake_throttled_writers();
        }
    }

    /// Lifts the limit of [`Core::set_append_limit`] for good (the
    /// maintenance thread is stopping or has ended), under `assessing`, as
    /// [`Core::raise_append_limit`].
    pub(crate) fn lift_append_limit(&self) {
        let _assessing = self.assessing.lock();
        self.set_append_limit(u64::MAX);
    }

    fn wake_throttled_writers(&self) {
        let _guard = self.compaction_caught_up.0.lock();
        self.compaction_caught_up.1.notify_all();
    }

    /// Removes `key` if it has expired (under the shard's lock, with a
    /// tombstone, as [`Db::remove`] does), for the maintenance thread (see
    /// [`Core::modify_as`]); a live key is kept. Returns whether the key is
    /// gone (it was expired, or absent already: removed meanwhile).
    pub(crate) fn remove_if_expired(&self, key: &[u8]) -> Result<bool> {
        self.modify_as(key, false, By::Maintenance, |old| {
            Ok(match old {
                None => (Action::Remove, true),
                Some(_) => (Action::Keep, false),
            })
        })
    }

    /// Finds the slot of `key` in a locked shard and the record its entry
    /// points at; copies that record's value into `value` when given.
    pub(crate) fn locate(
        &self,
        writer: &mut ShardWriter<'_>,
        hash: u64,
        key: &[u8],
        mut value: Option<&mut Vec<u8>>,
    ) -> Result<(Slot, Option<Current>)> {
        let mut current = None;
        let mut scratch = Vec::new();
        // A value read goes back to the caller: verify it.
        let verify_resident = value.is_some();
        let slot = writer.slot(
            hash,
            |addr| {
                let check = |r: &Record<'_>| {
                    if r.key != key {
                        return Ok(false);
                    }
                    current = Some(Current::of(addr, r));
                    if let Some(out) = value.as_deref_mut() {
                        r.value_into(self.log.codec(), out, addr)?;
                    }
                    Ok(true)
                };
                let found = self
                    .log
                    .with_record_locked(addr, &mut scratch, verify_resident, check);
                match found {
                    // A write that does not read the old value replaces a
                    // damaged record of its key; one that does cannot.
                    Err(e @ Error::Corruption { .. }) => {
                        match self.judge_damaged(addr, key, hash) {
                            Damaged::Ours(c) if !verify_resident => {
                                current = Some(c);
                                Ok(true)
                            }
                            Damaged::Other => Ok(false),
                            Damaged::Ours(_) | Damaged::Unknown => Err(e),
                        }
                    }
                    found => found?,
                }
            },
            |addrs, out| self.log.key_hashes(addrs, out, |key| self.hasher.hash(key)),
        )?;
        Ok((slot, current))
    }

    /// What the record at `addr`, which failed its checksum, is to a probe
    /// for `key` (of hash `hash`, whose probe met `addr`), judged from the
    /// key its bytes name, `named`:
    /// - `named` is `key` and no sound record of `key` is indexed beside
    ///   it: the key's own record ([`Damaged::Ours`]);
    /// - `named` is `key` but a sound record of `key` is indexed too: the
    ///   damaged one is another key's, whose key bytes the damage turned
    ///   into `key` ([`Damaged::Other`]);
    /// - `named` is another key whose hash shares the probe's shard and
    ///   entry tag, from whose home slot the probe reaches `addr`, and no
    ///   sound record of `named` is indexed beside it: that key's record,
    ///   met by a tag collision ([`Damaged::Other`]);
    /// - else, the damage lies in the key or the header
    ///   ([`Damaged::Unknown`]).
    ///
    /// Wrong only when damage turns a key into another whose hash shares
    /// 24 bits with it (shard and tag) and whose home slot lies in the
    /// same run of the table before the entry: about 2^-24 times the run's
    /// share of the table (2^-30 or less with the default 65,536-key
    /// index), near the 2^-32 of damage that passes the CRC32C itself.
    fn judge_damaged(&self, addr: u64, key: &[u8], hash: u64) -> Damaged {
        let mut scratch = Vec::new();
        let Some((named, current)) = self.log.with_unverified_record(addr, &mut scratch, |r| {
            let current = Current {
                // Unknown, as the rest of the record: live until replaced,
                // never expired by the sweep.
                expires_at: None,
                ..Current::of(addr, r)
            };
            (r.key.to_vec(), current)
        }) else {
            return Damaged::Unknown;
        };
        if named == key {
            return match self.probe_run(hash, key, addr) {
                Ok((_, false)) => Damaged::Ours(current),
                Ok((_, true)) => Damaged::Other,
                Err(_) => Damaged::Unknown,
            };
        }
        let named_hash = self.hasher.hash(&named);
        if !crate::index::share_entries(named_hash, hash) {
            return Damaged::Unknown;
        }
        match self.probe_run(named_hash, &named, addr) {
            Ok((true, false)) => Damaged::Other,
            _ => Damaged::Unknown,
        }
    }

    /// Walks the index's probe run of `hash` (a key's home slot up to the
    /// first empty one): whether it reaches the entry pointing at `addr`,
    /// and whether it holds another entry of the same tag whose record is
    /// sound and holds `key` (records failing their checks are passed by).
    ///
    /// # Errors
    /// I/O errors reading records.
    fn probe_run(&self, hash: u64, key: &[u8], addr: u64) -> Result<(bool, bool)> {
        let mut scratch = Vec::new();
        let mut reaches = false;
        let found = self.index.find(hash, |a| {
            if a == addr {
                reaches = true;
                return Ok(None);
            }
            match self.log.with_record_key(a, &mut scratch, |r| r.key == key) {
                Ok(true) => Ok(Some(())),
                Ok(false) | Err(Error::Corruption { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        })?;
        Ok((reaches, found.is_some()))
    }

    /// Counts the record just written at `addr` as live.
    pub(crate) fn count(&self, writer: &mut ShardWriter<'_>, addr: u64, entry: &Entry<'_>) {
        let seg = self.log.storage().segment_of(addr);
        let logical = entry.key.len() + entry.value_len();
        writer.add_live(seg, entry.len() as u64, logical as u64, entry.expires_at);
    }

    /// Stops counting a key's previous record as live.
    pub(crate) fn forget(&self, writer: &mut ShardWriter<'_>, old: &Current) {
        let seg = self.log.storage().segment_of(old.addr);
        writer.remove_live(
            seg,
            old.record_bytes,
            old.logical_bytes,
            old.expires_at.is_some(),
        );
    }

    /// Fails as a write of `value` under `key` would before anything is
    /// read or locked: [`Error::ReadOnly`] on a read-only handle (first, so
    /// an oversized argument there gets that error too), then
    /// [`Error::KeyTooLarge`] or [`Error::ValueTooLarge`].
    fn check_write(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.writable()?;
        if key.len() > MAX_KEY_BYTES {
            return Err(Error::KeyTooLarge {
                len: key.len(),
                max: MAX_KEY_BYTES,
            });
        }
        let room = self.log.max_record_bytes() - HEADER_BYTES - EXPIRY_BYTES - key.len();
        let max = MAX_VALUE_BYTES.min(room);
        if value.len() > max {
            return Err(Error::ValueTooLarge {
                len: value.len(),
                max,
            });
        }
        Ok(())
    }

    fn apply_batch(&self, batch: &WriteBatch) -> Result<()> {
        self.writable()?;
        // Every operation, also one a later one on its key overrides: the
        // batch is refused as written (found by a helper's attack: an
        // oversized value followed by a small one for its key was taken).
        for op in batch.ops() {
            self.check_write(op.key(), op.value().unwrap_or_default())?;
        }
        let ops = batch.last_per_key();
        let hashes: Vec<u64> = ops.iter().map(|op| self.hasher.hash(op.key())).collect();
        let mut shards: Vec<usize> = hashes.iter().map(|&h| shard_of(h)).collect();
        shards.sort_unstable();
        shards.dedup();
        let mut writers: Vec<ShardWriter<'_>> =
            shards.iter().map(|&s| self.index.writer(s)).collect();
        let writer_of = |hash: u64| shards.binary_search(&shard_of(hash)).expect("locked");

        // Phase 1: what each key holds now, and which records to write.
        let mut plan = Vec::with_capacity(ops.len());
        for (op, &hash) in ops.iter().zip(&hashes) {
            let (_, current) = self.locate(&mut writers[writer_of(hash)], hash, op.key(), None)?;
            // A removal of an expired key writes a tombstone too (see
            // `Core::modify_as`).
            let write = op.value().is_some() || current.is_some();
            plan.push((current, write));
        }
        // Room in each shard for the batch's new keys, made before the
        // append: a table that had to grow in phase 3 could fail (a damaged
        // record whose key cannot be rehashed) and leave the batch half
        // indexed.
        let mut new_keys = vec![0; shards.len()];
        for ((op, &hash), (current, _)) in ops.iter().zip(&hashes).zip(&plan) {
            if op.value().is_some() && current.is_none() {
                new_keys[writer_of(hash)] += 1;
            }
        }
        for (writer, &keys) in writers.iter_mut().zip(&new_keys) {
            writer.reserve(keys, |addrs, out| {
                self.log.key_hashes(addrs, out, |key| self.hasher.hash(key))
            })?;
        }
        let mut entries: Vec<Entry<'_>> = ops
            .iter()
            .zip(&plan)
            .filter(|(_, (_, write))| *write)
            .map(|(op, _)| Entry {
                flags: if op.value().is_some() {
                    0
                } else {
                    FLAG_TOMBSTONE
                } | FLAG_BATCH,
                expires_at: op.expires_at(),
                key: op.key(),
                value: op.value().unwrap_or_default(),
            })
            .collect();
        if let Some(last) = entries.last_mut() {
            last.flags &= !FLAG_BATCH;
        }
        let total: usize = entries.iter().map(Entry::len).sum();
        if total > self.log.max_record_bytes() {
            return Err(Error::BatchTooLarge {
                len: total,
                max: self.log.max_record_bytes(),
            });
        }

        // Phase 2: append the batch as one contiguous run of records.
        let mut addrs = vec![0; entries.len()];
        if !entries.is_empty() {
            self.log.append_all(&entries, &mut addrs)?;
        }

        // Phase 3: point the index at the new records.
        let mut written = entries.iter().zip(addrs.iter().copied());
        for ((op, &hash), (current, write)) in ops.iter().zip(&hashes).zip(plan) {
            let writer = &mut writers[writer_of(hash)];
            if let Some(c) = &current {
                self.forget(writer, c);
            }
            let (slot, _) = self.locate(writer, hash, op.key(), None)?;
            let placed = if write { written.next() } else { None };
            match (op.value(), placed) {
                (Some(_), Some((entry, addr))) => {
                    writer.set(hash, slot, addr);
                    self.count(writer, addr, entry);
                }
                _ => writer.clear(slot),
            }
        }
        drop(writers);
        if self.sync_writes
            && let (Some(addr), Some(entry)) = (addrs.last(), entries.last())
        {
            self.log.make_durable(addr + entry.len() as u64)?;
        }
        self.throttle();
        Ok(())
    }
}

impl Db {
    /// Opens the store in directory `path`, creating it if missing, and
    /// recovers it: the index is loaded from its checkpoint when a valid one
    /// exists and rebuilt by replaying the segment files after it (all of
    /// them without one), and a torn tail of the newest segment (damage
    /// past its durable mark) met by that replay is cut off (records a
    /// checkpoint covers are read
    /// only when the newest segment must be walked to find where its
    /// records end, or the replay after the checkpoint meets damage and
    /// falls back to all of the log: damage there that open does not read
    /// shows as
    /// [`Error::Corruption`] when its key is read; see the README's
    /// "Durability contract").
    ///
    /// The store is held by its directory's absolute path, resolved at open
    /// (symlinks and `..` included): the process may change its working
    /// directory afterwards, but the directory must not be renamed or
    /// moved while the store is open (the files made later would be
    /// looked for where it was).
    ///
    /// # Errors
    /// - [`Error::Locked`] when another handle has the store open: at once
    ///   for one of this process, after 2 s of retries for one of another
    ///   process (a child process that another thread forked holds a lock
    ///   released since until it execs, and the wait lets it go);
    /// - [`Error::InvalidPath`] when `path` exists and is not a directory;
    /// - [`Error::InvalidOptions`] for options out of their documented range;
    /// - [`Error::Corruption`] for damage recovery cannot cut off (in a
    ///   sealed segment, below the newest segment's durable mark or what
    ///   the index checkpoint records as durable, a missing segment, a log
    ///   that ends before the checkpoint's `covered`, the meta file, the
    ///   compression dictionary);
    /// - [`Error::IncompatibleFormat`] for a store of a format version this
    ///   build does not read (newer than [`crate::FORMAT_VERSION`]);
    /// - [`Error::Io`] for failed system calls, among them reading an index
    ///   checkpoint that is there (one that fails its checks is ignored,
    ///   one that cannot be read is not: what it records as durable could
    ///   not be checked).
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        Self::open_with(path.as_ref(), options, KeyHasher::new)
    }

    pub(crate) fn open_with(
        dir: &Path,
        options: Options,
        hasher: impl FnOnce(u64) -> KeyHasher,
    ) -> Result<Db> {
        options.validate()?;
        let process = crate::fork::generation();
        let read_only = options.read_only;
        let hot_bytes = if read_only {
            READ_ONLY_HOT_BYTES
        } else {
            options.hot_bytes
        };
        let cache = ReadCache::new(options.read_cache_bytes)?;
        let lock = if read_only {
            meta::lock_shared(dir)?
        } else {
            meta::lock(dir)?
        };
        // Held by its absolute path from here on: every file the store
        // makes or opens later (segments, checkpoints, `RETIRED`) is named
        // from it, and a process that changes its working directory after
        // opening a store by a relative path (a daemon) would otherwise
        // look for them in the wrong place.
        let dir = &dir.canonicalize()?;
        // Before any segment is opened and mapped (see `Log::page_pool`),
        // and after the lock: an open it refuses maps nothing.
        let page_pool = Log::page_pool(hot_bytes);
        let (mut meta, mut storage);
        if read_only {
            meta = meta::load(dir)?;
            storage = Segments::read_only(dir, meta.segment_bits, meta.store_id)
                .mapping_reads(options.map_cold_reads);
        } else {
            meta = meta::load_or_create(dir, options.segment_bytes.trailing_zeros())?;
            storage = Segments::for_store(
                dir,
                meta.segment_bits,
                meta.store_id,
                options.map_cold_reads,
                if options.sync_writes {
                    Ahead::Zeros
                } else {
                    Ahead::Allocate
                },
            );
        }
        if let Some(most) = options.max_open_files {
            storage = storage.max_open(most);
        }
        let hasher = hasher(meta.hash_seed);
        let retired = manifest::load(dir)?;
        if !read_only {
            // The log goes on in the newest segment, and recovery may cut
            // its torn tail: when another store shares its file (a
            // backup's hard link, see `Db::backup`), it first gets a copy
            // of its own.
            let newest = storage.list()?.into_iter().rfind(|&s| !retired.contains(s));
            if let Some(newest) = newest {
                storage.unshare(newest)?;
            }
            Dictionary::remove_leftover(dir);
            checkpoint::remove_leftover(dir);
        }
        let dictionary = Dictionary::load(dir, meta.store_id, options.compression.level())?;
        let codec = Arc::new(Codec::new(
            options.compression,
            dictionary,
            storage.segment_size(),
        ));
        // A checkpoint that fails its checks is ignored; one that cannot be
        // read (out of descriptors, say) fails the open, since what it
        // records as durable could not be checked.
        let checkpoint = checkpoint::load_sound(dir, meta.store_id)?;
        // What a sound checkpoint of this store records as durable: the log
        // must hold at least that much, whether the checkpoint is used.
        let claimed = checkpoint.as_ref().map_or(0, |c| c.covered);
        let restored = match checkpoint {
            Some(c) if checkpoint_applies(&storage, &retired, c.covered)? => {
                let present = storage.list()?;
                let gone = |seg| retired.contains(seg) || present.binary_search(&seg).is_err();
                Index::from_images(c.images, c.covered, |a| storage.segment_of(a), gone)
                    .ok()
                    .map(|index| (index, c.covered))
            }
            _ => None,
        };
        // Bytes of a torn tail cut off, by whichever replay cut them.
        let torn = std::cell::Cell::new(0);
        let replay = |index: &Index, from| {
            let mut found = recovery::Replayed::default();
            let mode = if read_only {
                recovery::Mode::Read
            } else {
                recovery::Mode::Repair
            };
            let span = recovery::Span { from, claimed };
            let tail = recovery::replay(&storage, &retired, index, &hasher, mode, span, &mut found);
            torn.set(torn.get() + found.torn_bytes);
            tail.map(|tail| (tail, found.pads))
        };
        let from_checkpoint = match restored {
            Some((index, from)) => match replay(&index, from) {
                Ok((tail, pads)) if !index.points_at_or_past(tail) => {
                    Some((index, from, tail, pads))
                }
                Err(e) if !matches!(e, Error::Corruption { .. }) => return Err(e),
                // Damage met from a checkpoint, or an index pointing past
                // the recovered log (which only a crafted checkpoint can
                // do: its records are durable before it is published): the
                // checkpoint is not trusted, and the replay of the whole
                // log decides what is damage.
                _ => None,
            },
            None => None,
        };
        // No checkpoint, one that fails a check, or one not trusted after
        // its replay: replay everything.
        let (index, from, tail, pads) = match from_checkpoint {
            Some(restored) => restored,
            None => {
                let index = Index::with_capacity(options.key_capacity)?;
                index.track_homes(true);
                let (tail, pads) = replay(&index, 0)?;
                index.track_homes(false);
                (index, 0, tail, pads)
            }
        };
        if !read_only {
            // Recovered: mark an older store with this format before
            // anything can write a record an older build would misread.
            meta::upgrade(dir, &mut meta)?;
            // A store without `NEWEST` (an older build's, or its backup's)
            // gets one naming the newest segment recovery left, whose
            // header is sound: a newest segment lost after this is then
            // told from one a crash left while creating it (see
            // `manifest.rs`), as it is in a store that created it. Best
            // effort: without it the store is as it was (a full disk
            // must not stop an open).
            if matches!(manifest::load_newest(dir, meta.store_id), Ok(None))
                && let Some(newest) = storage.list()?.into_iter().rfind(|&s| !retired.contains(s))
            {
                let _ = manifest::store_newest(dir, meta.store_id, newest);
            }
        }
        let log = Arc::new(Log::new(
            storage, hot_bytes, cache, codec, tail, pads, page_pool,
        )?);
        let flusher = if read_only {
            None
        } else {
            Some(Flusher::spawn(Arc::clone(&log), options.flush_interval)?)
        };
        let core = Arc::new(Core {
            store_id: meta.store_id,
            checkpointed: AtomicU64::new(from),
            dir: dir.to_path_buf(),
            index,
            log,
            hasher,
            sync_writes: options.sync_writes,
            read_only,
            process,
            open_id: OPENS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            retired: Mutex::new(retired),
            compaction_lock: Mutex::new(()),
            compactions: AtomicU64::new(0),
            torn_bytes_cut: torn.get(),
            damaged_segments: Mutex::new(BTreeSet::new()),
            carried_tombstones: Mutex::new(HashMap::new()),
            train_dictionary_at: AtomicU64::new(0),
            iterators: AtomicUsize::new(0),
            pending_deletes: Mutex::new(Vec::new()),
            append_limit: AtomicU64::new(u64::MAX),
            write_waits: AtomicU64::new(0),
            expired_removed: AtomicU64::new(0),
            space_bound: options
                .compaction_garbage
                .map(|_| options.max_space_amplification),
            compress_cold: options.compress_cold_segments,
            backing_up: AtomicBool::new(false),
            compaction_caught_up: (Mutex::new(()), Condvar::new()),
            assessing: Mutex::new(0),
        });
        let maintenance = if read_only {
            None
        } else {
            Some(Maintenance::spawn(
                Arc::clone(&core),
                options.compaction_garbage,
            )?)
        };
        Ok(Db {
            core,
            flusher: Mutex::new(flusher),
            maintenance: Mutex::new(maintenance),
            _lock: lock,
        })
    }

    /// Inserts `value` under `key`, replacing any previous value and
    /// clearing any expiry.
    ///
    /// With `sync_writes` it returns after an fdatasync covering the record;
    /// otherwise once the record is in the hot tier (durable within the
    /// flush window, see the crate docs).
    ///
    /// # Errors
    /// [`Error::KeyTooLarge`] above [`MAX_KEY_BYTES`], [`Error::ValueTooLarge`]
    /// above [`MAX_VALUE_BYTES`] (or what one segment holds); nothing is
    /// written then, nor when the key's index shard must grow and its
    /// larger table cannot be allocated ([`Error::Io`] of kind
    /// `OutOfMemory`). [`Error::Io`] when writing the log fails: for lack of
    /// disk space or file descriptors (`ENOSPC`, `EDQUOT`, `EMFILE`,
    /// `ENFILE`) writes fail while it lasts and succeed again once there is
    /// room; after any other failure, or a failed fdatasync, the store
    /// refuses writes with [`Error::Closed`] until it is reopened. A write
    /// that returned an I/O error may still have taken effect: it is
    /// visible, and the next successful flush makes it durable (a crash or
    /// failed close before that loses it). [`Error::Corruption`] when a
    /// damaged record on disk (one open did not read) cannot be told to be
    /// this key's or another's: damage in its key or header. A record
    /// damaged elsewhere (its value) is replaced, or passed by when it is
    /// another key's.
    pub fn insert(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.put(key, value, None)
    }

    /// Inserts `value` under `key` to expire `ttl` from now (resolution
    /// 1 ms, wall clock; see [`Db::ttl`]). An expired key is never returned.
    ///
    /// # Errors
    /// As for [`Db::insert`].
    pub fn insert_with_ttl(&self, key: &[u8], value: &[u8], ttl: Duration) -> Result<()> {
        self.put(key, value, Some(clock::deadline(ttl)))
    }

    /// Inserts `value` under `key` to expire at `at` (already expired if
    /// `at` is not in the future).
    ///
    /// # Errors
    /// As for [`Db::insert`].
    pub fn insert_with_expiry(&self, key: &[u8], value: &[u8], at: SystemTime) -> Result<()> {
        self.put(key, value, Some(clock::to_ms(at)))
    }

    fn put(&self, key: &[u8], value: &[u8], expires_at: Option<u64>) -> Result<()> {
        self.core.check_write(key, value)?;
        self.core.modify(key, false, |_| {
            Ok((
                Action::Put {
                    value: Cow::Borrowed(value),
                    expires_at,
                },
                (),
            ))
        })
    }

    /// Removes `key`; returns whether it was present (and not expired). A
    /// present key gets a tombstone record, durable as an insert is. A key
    /// whose record is damaged in its value (see [`Db::insert`]) counts as
    /// present, whatever expiry the record held: the tombstone replaces it
    /// and `true` is returned.
    ///
    /// # Errors
    /// As for [`Db::insert`].
    pub fn remove(&self, key: &[u8]) -> Result<bool> {
        self.core.check_write(key, b"")?;
        self.core
            .modify(key, false, |old| Ok((Action::Remove, old.is_some())))
    }

    /// Atomically replaces the value of `key` with `f(current)`: `f` sees
    /// the current value (`None` when absent) and returns the new one
    /// (`None` removes the key). Returns the new value. The key's expiry, if
    /// any, is kept. Concurrent updates of one key are serialised, so none
    /// is lost.
    ///
    /// When `f` returns the value the key holds, nothing is written (no
    /// record is appended; with `sync_writes`, the call still returns only
    /// once the key's current record is durable).
    ///
    /// `f` runs exactly once, under the lock of the key's index shard: it
    /// must not call into this `Db` (that could deadlock).
    ///
    /// # Errors
    /// As for [`Db::insert`], for the value `f` returns (nothing is written
    /// then).
    pub fn update<F>(&self, key: &[u8], f: F) -> Result<Option<Vec<u8>>>
    where
        F: FnOnce(Option<&[u8]>) -> Option<Vec<u8>>,
    {
        self.core.check_write(key, b"")?;
        self.core.modify(key, true, |old| {
            let expires_at = old.as_ref().and_then(|o| o.expires_at);
            let current = old.as_ref().map(|o| o.value.as_slice());
            Ok(match f(current) {
                Some(new) if current == Some(new.as_slice()) => (Action::Same, Some(new)),
                Some(new) => (
                    Action::Put {
                        value: Cow::Owned(new.clone()),
                        expires_at,
                    },
                    Some(new),
                ),
                None => (Action::Remove, None),
            })
        })
    }

    /// Atomically sets `key` to `new` (`None` removes it) if its current
    /// value equals `expected` (`None`: the key is absent). Returns whether
    /// the swap happened. A swap clears any expiry.
    ///
    /// A swap to the value the key holds, when it has no expiry to clear,
    /// writes nothing; with `sync_writes`, it still returns only once the
    /// key's current record is durable, as [`Db::update`].
    ///
    /// # Errors
    /// As for [`Db::insert`].
    pub fn compare_and_swap(
        &self,
        key: &[u8],
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> Result<bool> {
        self.core.check_write(key, new.unwrap_or_default())?;
        self.core.modify(key, true, |old| {
            let current = old.as_ref().map(|o| o.value.as_slice());
            if current != expected {
                return Ok((Action::Keep, false));
            }
            // Present with no expiry to clear, and handed its own value.
            let unexpiring = old.as_ref().is_some_and(|o| o.expires_at.is_none());
            if unexpiring && new == current {
                return Ok((Action::Same, true));
            }
            Ok(match new {
                Some(value) => (
                    Action::Put {
                        value: Cow::Borrowed(value),
                        expires_at: None,
                    },
                    true,
                ),
                None => (Action::Remove, true),
            })
        })
    }

    /// Sets `key` to expire `ttl` from now; returns whether the key exists.
    ///
    /// # Errors
    /// As for [`Db::insert`].
    pub fn expire(&self, key: &[u8], ttl: Duration) -> Result<bool> {
        self.set_expiry(key, Some(clock::deadline(ttl)))
    }

    /// Sets `key` to expire at `at`; returns whether the key exists.
    ///
    /// # Errors
    /// As for [`Db::insert`].
    pub fn expire_at(&self, key: &[u8], at: SystemTime) -> Result<bool> {
        self.set_expiry(key, Some(clock::to_ms(at)))
    }

    /// Clears the expiry of `key`; returns whether it had one.
    ///
    /// # Errors
    /// As for [`Db::insert`].
    pub fn persist(&self, key: &[u8]) -> Result<bool> {
        self.core.check_write(key, b"")?;
        self.core.modify(key, true, |old| match old {
            Some(Old {
                value,
                expires_at: Some(_),
            }) => Ok((
                Action::Put {
                    value: Cow::Owned(value),
                    expires_at: None,
                },
                true,
            )),
            _ => Ok((Action::Keep, false)),
        })
    }

    fn set_expiry(&self, key: &[u8], expires_at: Option<u64>) -> Result<bool> {
        self.core.check_write(key, b"")?;
        self.core.modify(key, true, |old| match old {
            Some(old) => Ok((
                Action::Put {
                    value: Cow::Owned(old.value),
                    expires_at,
                },
                true,
            )),
            None => Ok((Action::Keep, false)),
        })
    }

    /// The time `key` has left: `None` when the key is absent (or expired),
    /// `Some(None)` when it has no expiry, `Some(Some(left))` otherwise.
    ///
    /// # Errors
    /// As for [`Db::get`].
    pub fn ttl(&self, key: &[u8]) -> Result<Option<Option<Duration>>> {
        Ok(self
            .expiry(key)?
            .map(|at| at.map(|t| clock::remaining(clock::to_ms(t)))))
    }

    /// When `key` expires: `None` when absent (or expired), `Some(None)`
    /// when it has no expiry.
    ///
    /// # Errors
    /// As for [`Db::get`].
    pub fn expiry(&self, key: &[u8]) -> Result<Option<Option<SystemTime>>> {
        let mut scratch = Vec::new();
        Ok(self
            .core
            .lookup(key, &mut scratch)?
            .map(|at| at.map(clock::to_system_time)))
    }

    /// Applies every operation of `batch` atomically: after a crash either
    /// all of them are in the store or none is. (Concurrent readers may see
    /// the batch's keys change one by one while it is applied.) Later
    /// operations on a key in the batch override earlier ones.
    ///
    /// # Errors
    /// [`Error::KeyTooLarge`] / [`Error::ValueTooLarge`] for any operation,
    /// and [`Error::BatchTooLarge`] when the batch's records do not fit in
    /// one segment; nothing is written then. Otherwise as for
    /// [`Db::insert`].
    pub fn apply_batch(&self, batch: &WriteBatch) -> Result<()> {
        self.core.apply_batch(batch)
    }

    /// Returns a copy of the value of `key`, or `None`.
    ///
    /// # Errors
    /// [`Error::Corruption`] when the record fails its checksum (a wrong
    /// value is never returned); [`Error::Io`].
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut out = Vec::new();
        Ok(self.get_into(key, &mut out)?.then_some(out))
    }

    /// Reads the value of `key` into `out` (replacing its contents) and
    /// returns `true`, or returns `false` when the key is absent (`out` is
    /// then unspecified). Allocates nothing for a key in the hot tier when
    /// `out` has the capacity; a cold read also reuses `out` as its buffer.
    ///
    /// # Errors
    /// As for [`Db::get`].
    pub fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        Ok(self.core.lookup(key, out)?.is_some())
    }

    /// Whether `key` is present.
    ///
    /// # Errors
    /// As for [`Db::get`].
    pub fn contains_key(&self, key: &[u8]) -> Result<bool> {
        let mut scratch = Vec::new();
        Ok(self.core.lookup(key, &mut scratch)?.is_some())
    }

    /// Number of keys. Keys whose expiry has passed count until a write
    /// touches them, compaction reclaims them, or the background thread's
    /// sweep of the index removes them (bounded sweeps, at least one a
    /// second: 100,000 keys that expired together were gone 2 s later in
    /// a measurement; see `expiry.rs`).
    pub fn len(&self) -> usize {
        self.core.index.len()
    }

    /// Whether [`Db::len`] is zero.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Iterates over the live `(key, value)` pairs in no order, while
    /// writes go on: every key present for the whole iteration is returned
    /// exactly once; keys inserted or removed meanwhile may or may not be.
    /// A value returned is one its key held at some moment during the
    /// iteration, not always its newest (a key overwritten or removed after
    /// its index shard grew can come with its value from before). Each item
    /// is read from the log (one positioned read for a cold key). Once it
    /// has returned `None`, it keeps returning `None`.
    ///
    /// An item is an error where a get would fail: [`Error::Corruption`]
    /// for a record that fails its checksum (the iteration goes on past
    /// it; a damaged record met again, by the lookup of another key whose
    /// entry had expired, is reported again), [`Error::Io`]; in a forked
    /// child, [`Error::Forked`] once, then `None`.
    ///
    /// While any iterator is alive, the files of segments that compaction
    /// retires stay on disk (an iterator may still read them) and are
    /// deleted once the last one is dropped: under overwrites, a
    /// long-lived iterator lets the store's files grow past
    /// [`crate::Options::max_space_amplification`] (an attack helper saw
    /// 39 times the logical bytes while one lived through 40 rounds of
    /// overwrites). One leaked with `std::mem::forget` keeps them until
    /// the next open deletes them.
    pub fn iter(&self) -> Iter<'_> {
        Iter::new(self)
    }

    /// Iterates over the live keys, with the guarantees of [`Db::iter`].
    pub fn keys(&self) -> impl Iterator<Item = Result<Vec<u8>>> + '_ {
        self.iter().map(|item| item.map(|(k, _)| k))
    }

    /// One step of a resumable scan over the live keys, for a server's
    /// `SCAN`: starts from `cursor` (0 for a new scan), visits about `count`
    /// index slots, and returns the keys found and the cursor to pass next
    /// (0 when the scan is complete). As with Redis's SCAN, a key present
    /// for the whole scan is returned at least once (twice only if its
    /// index shard was rebuilt meanwhile); an invalid cursor restarts a
    /// shard rather than failing.
    ///
    /// # Errors
    /// As for [`Db::get`].
    pub fn scan(&self, cursor: u64, count: usize) -> Result<(Vec<Vec<u8>>, u64)> {
        self.core.in_its_process()?;
        crate::iter::scan(self, cursor, count)
    }

    /// Removes every key, expired ones included (so [`Db::len`] is 0
    /// after), and returns how many were live. Shard by shard: each shard
    /// is cleared under its lock (its writers wait), with one append of its
    /// tombstones, or one per group of them that fits a segment when they
    /// would not fit one together; the store as a whole is not cleared
    /// atomically, so a concurrent reader may see some keys gone and others
    /// not yet, and keys written meanwhile may survive. Durable as any
    /// write.
    ///
    /// # Errors
    /// As for [`Db::insert`]; shards (and groups of a shard's tombstones)
    /// cleared before an error stay cleared.
    pub fn clear(&self) -> Result<u64> {
        let core = &*self.core;
        core.writable()?;
        let mut live = 0;
        let mut scratch = Vec::new();
        for shard in 0..crate::index::SHARDS {
            let mut writer = core.index.writer(shard);
            let mut found = Vec::new();
            for (slot, addr) in writer.occupied() {
                let (key, current) = core.log.with_record(addr, &mut scratch, |r| {
                    (r.key.to_vec(), Current::of(addr, r))
                })?;
                live += u64::from(current.is_live());
                found.push((slot, key, current));
            }
            // A shard's tombstones may outgrow a segment (many keys, small
            // segments): each append must fit a page of a fresh segment.
            let max = core.log.max_record_bytes();
            let tombstones: Vec<Entry<'_>> = found
                .iter()
                .map(|(_, key, _)| Entry::tombstone(key))
                .collect();
            let mut done = 0;
            let mut durable_at = None;
            let mut appended = Ok(());
            while done < found.len() {
                let mut bytes = 0;
                let fit = tombstones[done..]
                    .iter()
                    .take_while(|entry| {
                        bytes += entry.len();
                        bytes <= max
                    })
                    .count()
                    .max(1);
                let group = done..done + fit;
                let mut addrs = vec![0; fit];
                appended = core.log.append_all(&tombstones[group.clone()], &mut addrs);
                if appended.is_err() {
                    break;
                }
                for (slot, _, current) in &found[group.clone()] {
                    writer.clear(*slot);
                    core.forget(&mut writer, current);
                }
                durable_at = Some(addrs[fit - 1] + tombstones[group.end - 1].len() as u64);
                done = group.end;
            }
            drop(writer);
            // Groups cleared before an error are made durable too; the
            // append's error, if any, is the one reported.
            let synced = match durable_at.filter(|_| core.sync_writes) {
                Some(end) => core.log.make_durable(end),
                None => Ok(()),
            };
            appended?;
            synced?;
        }
        Ok(live)
    }

    /// Counters of the store's size and memory (see [`Stats`]).
    ///
    /// # Errors
    /// [`Error::Io`] when a segment file's size cannot be read.
    pub fn stats(&self) -> Result<Stats> {
        self.core.in_its_process()?;
        let totals = self.core.index.totals();
        let disk_bytes = files_bytes(&self.core.dir)?;
        let disk_bytes = disk_bytes.saturating_sub(self.core.log.storage().allocated_ahead());
        Ok(Stats::new(
            totals,
            (disk_bytes, self.core.log.resident_bytes()),
            self.core.log.cache.counters(),
            (
                self.core.compactions.load(Ordering::Relaxed),
                self.core.write_waits.load(Ordering::Relaxed),
                self.core.expired_removed.load(Ordering::Relaxed),
            ),
            self.core.log.commit_counts(),
            self.core.torn_bytes_cut,
            self.core.log.storage().open_files(),
        ))
    }

    /// Runs one compaction pass now: seals the segment being written (when
    /// it holds garbage) and compacts every sealed segment that holds any
    /// garbage (overwritten, removed or expired records), and any that
    /// starts more than 64 TiB of log behind the tail whatever its garbage
    /// (so that the log's span stays within what index entries address),
    /// deleting its file.
    /// Reads and writes go on meanwhile. Background compaction (see
    /// [`Options::compaction_garbage`]) does the same for segments past a
    /// garbage threshold, once a second.
    ///
    /// A segment in which a record fails its checks is left in place (its
    /// other records stay readable) and named in
    /// [`CompactionReport::damaged`]; compaction skips it until the store
    /// is reopened, and goes on with the others.
    ///
    /// # Errors
    /// [`Error::Io`]; as for [`Db::sync`].
    pub fn compact(&self) -> Result<CompactionReport> {
        self.core.writable()?;
        let storage = self.core.log.storage();
        let active = storage.segment_of(self.core.log.tail());
        let live = self
            .core
            .index
            .live_by_segment()
            .get(&active)
            .copied()
            .unwrap_or(0);
        self.core.log.sync_all()?;
        let written = storage.written_len(active).unwrap_or(0);
        if written > live + crate::storage::SEGMENT_HEADER_BYTES {
            self.core.log.seal_segment()?;
        }
        let report = compaction::run(
            &self.core,
            0.0,
            usize::MAX,
            compaction::Wait::Yes,
            &mut Chunk::mapping(),
            // Where writers wait, after each segment retired, as the
            // background compaction sets it (which it cannot meanwhile).
            &mut || match self.core.space_bound {
                Some(bound) => crate::maintenance::assess(&self.core, bound).map(drop),
                None => Ok(()),
            },
        )?;
        Ok(report.unwrap_or_default())
    }

    /// Writes out and fdatasyncs every write acknowledged so far, and every
    /// value a get has returned so far (a write is visible to gets from
    /// the moment its record is in the log, which may be before its call
    /// returns). Returns at once, after two atomic loads, when that is
    /// durable already; otherwise it shares a group commit's fdatasync.
    ///
    /// # Errors
    /// [`Error::Io`] when the write or fdatasync fails (the store then
    /// refuses further writes, unless a write failed for lack of space or
    /// file descriptors, see [`Db::insert`]), [`Error::Closed`] after such
    /// a failure.
    pub fn sync(&self) -> Result<()> {
        self.core.in_its_process()?;
        self.core.log.sync_all()
    }

    /// A mark past every write acknowledged so far, and every value a get
    /// has returned so far (what [`Db::sync`] would make durable), for
    /// [`Db::is_durable`]: to learn when writes are durable without
    /// forcing an fdatasync, say before acknowledging them to another
    /// system. One atomic load.
    ///
    /// # Errors
    /// [`Error::Forked`] in a child forked after the open.
    pub fn write_mark(&self) -> Result<WriteMark> {
        self.core.in_its_process()?;
        Ok(WriteMark {
            open_id: self.core.open_id,
            address: self.core.log.tail(),
        })
    }

    /// Whether every write below `mark` is durable now: written to its
    /// segment file and fdatasynced, so that it survives a crash of the
    /// process or of the machine. Never waits and never syncs (one atomic
    /// load); [`Db::sync`] forces it. By default a write becomes durable
    /// within `flush_interval` plus one write-out and fdatasync (see
    /// [`Options::flush_interval`]); with [`Options::sync_writes`], before
    /// its call returns.
    ///
    /// A read-only handle writes nothing and answers `true`: the files it
    /// reads may still hold bytes that a writer killed before its
    /// fdatasync left in the page cache (the next writable open syncs
    /// them).
    ///
    /// # Errors
    /// [`Error::Closed`] when a write or fdatasync failed (as
    /// [`Db::sync`] would return) and the writes below `mark` are not
    /// durable: nothing will make them so before the store is reopened;
    /// [`Error::ForeignMark`] for a mark another handle made;
    /// [`Error::Forked`] in a child forked after the open.
    pub fn is_durable(&self, mark: WriteMark) -> Result<bool> {
        self.core.in_its_process()?;
        if mark.open_id != self.core.open_id {
            return Err(Error::ForeignMark);
        }
        self.core.log.is_durable(mark.address)
    }

    /// Writes an online, consistent copy of the store to directory `dest`
    /// (created; it must not exist or be empty): every write acknowledged
    /// before the call, as a store that opens on its own. Writes go on
    /// meanwhile.
    ///
    /// On the same file system the sealed segments are hard-linked, not
    /// copied (no store writes a sealed segment again, and an open gives
    /// its newest segment a file of its own if the file is shared): the backup then
    /// costs a directory entry per segment plus a copy of the newest
    /// segment, compaction is held off only while the links are made, and
    /// the two stores share the linked segments' disk blocks until each
    /// retires its own. Elsewhere every segment is copied, from files
    /// taken while compaction is held off (the store's own, or one opened
    /// for a segment whose descriptor the store has not open: about one
    /// file descriptor per segment in all; when they run out, those taken so far are copied
    /// with compaction held off, and writers go on past the space bound if
    /// need be): a
    /// segment compaction retires meanwhile keeps its disk blocks until
    /// its copy is done.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] when `dest` is not empty or lies inside the
    /// store's directory (nothing is created then); [`Error::Io`];
    /// [`Error::Corruption`] when a segment's file is shorter than its
    /// records (changed behind the store's back). A backup that fails
    /// before its segments are all copied does not open as a store: the
    /// meta file, which makes `dest` one, is copied last.
    pub fn backup(&self, dest: impl AsRef<Path>) -> Result<()> {
        self.core.in_its_process()?;
        let last = {
            // Hold compaction off, so no segment is retired while it is
            // linked or copied.
            let _no_compaction = self.core.compaction_lock.lock();
            // Writers go on meanwhile, past the space bound if need be (see
            // `maintenance::pass`).
            self.core.backing_up.store(true, Ordering::Relaxed);
            let started = (|| {
                self.core.log.sync_all()?;
                let retired = self.core.retired.lock().clone();
                crate::backup::start(
                    &self.core.dir,
                    dest.as_ref(),
                    &self.core.log,
                    &retired,
                    self.core.log.durable(),
                )
            })();
            self.core.backing_up.store(false, Ordering::Relaxed);
            started?
        };
        last.copy()
    }

    /// Flushes, fdatasyncs and closes the store, releasing its lock.
    ///
    /// # Errors
    /// As for [`Db::sync`].
    pub fn close(self) -> Result<()> {
        self.shutdown()
    }

    /// Stops the maintenance thread (at shutdown, and in tests that do its
    /// work by hand); nothing when it is stopped already.
    pub(crate) fn stop_maintenance(&self) {
        if let Some(mut maintenance) = self.maintenance.lock().take() {
            maintenance.stop();
        }
    }

    fn shutdown(&self) -> Result<()> {
        self.core.in_its_process()?;
        if self.core.read_only {
            return Ok(());
        }
        self.stop_maintenance();
        if let Some(mut flusher) = self.flusher.lock().take() {
            flusher.stop();
            // A clean close leaves a checkpoint covering the whole log, so
            // the next open replays nothing.
            if self.core.log.tail() != self.core.checkpointed.load(Ordering::Relaxed) {
                self.core.checkpoint()?;
            }
        }
        self.core.log.sync_all()?;
        self.core.log.mark_idle(true)?;
        // Nothing is written after a close: the active segment's file
        // gives back what was allocated ahead of the writes (the sync
        // above created the tail's segment, which cut the one before it).
        let storage = self.core.log.storage();
        storage.trim(storage.segment_of(self.core.log.tail()))
    }

    pub(crate) fn core(&self) -> &Core {
        &self.core
    }
}

/// The length of every file in `dir` (not in its subdirectories), in
/// bytes. A file deleted after the listing counts nothing: compaction
/// deletes segment files while this runs (found by a newcomer polling
/// `Db::stats` under overwrites: 118 `NotFound` errors in 165,871 calls).
///
/// # Errors
/// [`Error::Io`] when the directory cannot be listed or a file's size read.
fn files_bytes(dir: &Path) -> Result<u64> {
    let mut bytes = 0;
    for entry in std::fs::read_dir(dir)? {
        bytes += file_bytes(&entry?)?;
    }
    Ok(bytes)
}

/// The length of the file `entry` names, in bytes; 0 for a directory or a
/// file deleted since it was listed.
fn file_bytes(entry: &std::fs::DirEntry) -> Result<u64> {
    match entry.metadata() {
        Ok(meta) if meta.is_file() => Ok(meta.len()),
        Ok(_) => Ok(0),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(e.into()),
    }
}

/// Whether a checkpoint covering the log below `covered` fits the log on
/// disk: its segment is retired (replay then starts at the next one) or
/// holds at least that many bytes.
fn checkpoint_applies(storage: &Segments, retired: &Retired, covered: u64) -> Result<bool> {
    let seg = storage.segment_of(covered);
    if retired.contains(seg) {
        return Ok(true);
    }
    if covered < storage.segment_start(seg) + crate::storage::SEGMENT_HEADER_BYTES {
        return Ok(false);
    }
    Ok(storage.list()?.binary_search(&seg).is_ok()
        && storage.file_len(seg)? >= covered - storage.segment_start(seg))
}

impl Drop for Db {
    fn drop(&mut self) {
        if self.core.in_its_process().is_err() {
            // A forked child's copy: the threads are the parent's, not
            // here to stop or join, and the files are the parent's to
            // write. Their handles are let go without a word.
            std::mem::forget(self.flusher.get_mut().take());
            std::mem::forget(self.maintenance.get_mut().take());
            return;
        }
        // Errors cannot be returned from drop; `close` reports them.
        let _ = self.shutdown();
    }
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db")
            .field("dir", &self.core.dir)
            .field("len", &self.len())
            .field("tail", &self.core.log.tail())
            .field("durable", &self.core.log.durable())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
thread_local! {
    /// Test hook: run by this thread's writes between appending a record
    /// and pointing the index at it (see [`set_after_append_hook`]).
    static AFTER_APPEND: std::cell::RefCell<Option<Box<dyn FnMut()>>> =
        const { std::cell::RefCell::new(None) };
}

/// Makes the calling thread's writes run `hook` after appending their
/// record and before setting its index entry, with the shard lock held.
#[cfg(test)]
pub(crate) fn set_after_append_hook(hook: Box<dyn FnMut()>) {
    AFTER_APPEND.with(|h| *h.borrow_mut() = Some(hook));
}

#[cfg(test)]
fn run_after_append_hook() {
    AFTER_APPEND.with(|h| {
        if let Some(hook) = h.borrow_mut().as_mut() {
            hook();
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Options of 1 MiB segments without background compaction, and a
    /// store in `dir` opened with them that holds keys `0..keys` (their
    /// `u32` bytes) with values of 1,000 bytes.
    fn small_segments_holding(dir: &Path, keys: u32) -> (Options, Db) {
        let options = Options::default()
            .segment_bytes(1 << 20)
            .compaction_garbage(None);
        let db = Db::open(dir, options.clone()).unwrap();
        for k in 0..keys {
            db.insert(&k.to_le_bytes(), &[7; 1000]).unwrap();
        }
        (options, db)
    }

    /// A newest segment holding only its header, covered by a checkpoint,
    /// whose header is then damaged in a store without `NEWEST` (an older
    /// build's): recovery creates it again, and must record the previous
    /// segment's true length. Found in review: the checkpoint's replay
    /// had not read that segment's records, so it created the newest with
    /// a previous length of 0, and the creation cut the previous segment's
    /// file to 0 bytes.
    #[test]
    fn a_newest_segment_created_again_after_a_checkpoint_keeps_the_one_before() {
        let dir = tempfile::tempdir().unwrap();
        let (options, db) = small_segments_holding(dir.path(), 200);
        db.core().log.seal_segment().unwrap();
        db.sync().unwrap();
        let storage = db.core().log.storage();
        let newest = storage.segment_of(db.core().log.tail());
        let before = storage.file_name(newest - 1);
        let newest_name = storage.file_name(newest);
        db.close().unwrap();
        let len_before = std::fs::metadata(dir.path().join(&before)).unwrap().len();
        let path = dir.path().join(&newest_name);
        let mut header = std::fs::read(&path).unwrap();
        assert_eq!(
            header.len(),
            64,
            "the newest segment holds its header alone"
        );
        assert!(dir.path().join("CHECKPOINT").exists());
        header[20] ^= 0x04;
        std::fs::write(&path, &header).unwrap();
        std::fs::remove_file(dir.path().join("NEWEST")).unwrap();
        let db = Db::open(dir.path(), options.clone()).unwrap();
        assert_eq!(
            std::fs::metadata(dir.path().join(&before)).unwrap().len(),
            len_before
        );
        assert_eq!(db.len(), 200);
        for k in 0..200u32 {
            assert_eq!(db.get(&k.to_le_bytes()).unwrap().unwrap(), [7; 1000]);
        }
        db.close().unwrap();
        std::fs::remove_file(dir.path().join("CHECKPOINT")).unwrap();
        let db = Db::open(dir.path(), options).unwrap();
        assert_eq!(db.len(), 200);
        db.close().unwrap();
        assert!(crate::check::check(dir.path()).unwrap().is_clean());
    }

    /// A writable open gives a store without `NEWEST` (an older build's,
    /// or its backup's) one, naming its newest segment; a read-only open
    /// writes nothing.
    #[test]
    fn a_writable_open_writes_newest_for_a_store_without_it() {
        let dir = tempfile::tempdir().unwrap();
        let (options, db) = small_segments_holding(dir.path(), 3_000);
        db.close().unwrap();
        let newest = dir.path().join("NEWEST");
        let written = std::fs::read(&newest).unwrap();
        std::fs::remove_file(&newest).unwrap();
        Db::open(dir.path(), options.clone().read_only(true))
            .unwrap()
            .close()
            .unwrap();
        assert!(!newest.exists(), "a read-only open wrote NEWEST");
        let db = Db::open(dir.path(), options).unwrap();
        assert_eq!(std::fs::read(&newest).unwrap(), written);
        assert!(db.core().log.storage().segment_of(db.core().log.tail()) >= 2);
        db.close().unwrap();
        assert!(crate::check::check(dir.path()).unwrap().is_clean());
    }

    /// An update in place that reaches the file without the records
    /// appended before it (a write-out cut short, or blocks that reached
    /// the disk out of order) must not survive alone: what survives stays
    /// a prefix of the writes. Replay holds the rewritten record back to
    /// the end of its span and cuts the log at it.
    #[test]
    fn an_update_in_place_survives_only_with_the_records_before_it() {
        let dir = tempfile::tempdir().unwrap();
        let options = Options::default()
            .segment_bytes(1 << 20)
            .flush_interval(Duration::from_secs(1))
            .compaction_garbage(None);
        let db = Db::open(dir.path(), options.clone()).unwrap();
        // A write-out by the flusher between the writes leaves nothing to
        // rewrite: try again with other keys until the third write goes
        // in place.
        let (key, other, a, b) = (0..100)
            .find_map(|i| {
                let (key, other) = (format!("k{i}"), format!("j{i}"));
                let a = db.core().log.tail();
                db.insert(key.as_bytes(), b"first").unwrap();
                let b = db.core().log.tail();
                db.insert(other.as_bytes(), b"between").unwrap();
                let before = db.stats().unwrap().records_updated_in_place;
                db.insert(key.as_bytes(), b"again").unwrap();
                (db.stats().unwrap().records_updated_in_place > before)
                    .then_some((key, other, a, b))
            })
            .expect("an update in place");
        assert_eq!(
            db.get(key.as_bytes()).unwrap().as_deref(),
            Some(&b"again"[..])
        );
        // A crash image: the records written to the file, not synced, and
        // the record written between them lost.
        db.core().log.write_out().unwrap();
        let image = tempfile::tempdir().unwrap();
        for entry in std::fs::read_dir(dir.path()).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), image.path().join(entry.file_name())).unwrap();
        }
        let storage = &db.core().log.storage();
        let seg = storage.segment_of(b);
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(image.path().join(storage.file_name(seg)))
            .unwrap();
        let offset = b - storage.segment_start(seg);
        std::os::unix::fs::FileExt::write_all_at(&file, &[0; 16], offset).unwrap();
        drop(file);
        assert!(a < b);
        let recovered = Db::open(image.path(), options).unwrap();
        assert_eq!(recovered.get(other.as_bytes()).unwrap(), None);
        assert_eq!(
            recovered.get(key.as_bytes()).unwrap(),
            None,
            "the rewritten record came back without the one written before it"
        );
        assert!(recovered.stats().unwrap().torn_bytes_cut > 0);
    }

    /// A writer that reaches an append limit set before its writes added
    /// live bytes (a fill of new keys) assesses again and goes on, with
    /// no maintenance thread (stopped here) to do it; one that reaches a
    /// limit less than `REASSESS_BYTES` after the last assessment waits,
    /// and so does one that finds the files past the space bound
    /// (overwrites with no compaction).
    #[test]
    fn a_writer_at_a_stale_append_limit_assesses_again_instead_of_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), Options::default()).unwrap();
        db.maintenance.lock().take().unwrap().stop();
        let core = &db.core;
        let value = vec![7u8; 1000];
        let waits = || db.stats().unwrap().write_waits;
        for k in 0..4_000u32 {
            db.insert(&k.to_le_bytes(), &value).unwrap();
        }
        core.set_append_limit(core.log.appended());
        db.insert(&4_000u32.to_le_bytes(), &value).unwrap();
        assert_eq!(waits(), 0);
        assert!(!core.compaction_is_behind());

        core.set_append_limit(core.log.appended());
        db.insert(&4_001u32.to_le_bytes(), &value).unwrap();
        assert_eq!(waits(), 1);

        // The room left under the bound: about 16 MiB (`MIN_SLACK`).
        core.set_append_limit(core.log.appended() + (2 << 20));
        let mut k = 0u32;
        while waits() == 1 && k < 40_000 {
            db.insert(&(k % 4_000).to_le_bytes(), &value).unwrap();
            k += 1;
        }
        assert_eq!(waits(), 2, "after {k} overwrites");
        // Well past the 2,000-odd records of the stale limit's 2 MiB (the
        // room is about 16,000; half of it leaves a margin for the records'
        // overhead and the slack's exact size).
        assert!(k > 8_000, "waited after {k} overwrites");
        assert!(core.compaction_is_behind());
    }

    /// Regression (a newcomer's stats poller, 2026-12-02): a segment file
    /// compaction deleted between the listing of the store's directory and
    /// its `stat` failed `Db::stats` with `NotFound`. It counts 0 bytes.
    #[test]
    fn files_deleted_after_the_listing_count_nothing() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("kept"), [1u8; 1000]).unwrap();
        std::fs::write(dir.path().join("deleted"), [1u8; 500]).unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let entries: Vec<std::fs::DirEntry> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap())
            .collect();
        std::fs::remove_file(dir.path().join("deleted")).unwrap();
        let bytes: Vec<u64> = entries.iter().map(|e| file_bytes(e).unwrap()).collect();
        assert_eq!(bytes.iter().sum::<u64>(), 1000, "{entries:?} {bytes:?}");
        assert_eq!(files_bytes(dir.path()).unwrap(), 1000);
    }

    #[test]
    fn keys_sharing_hash_tag_and_slot_stay_apart_across_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let open = || {
            Db::open_with(dir.path(), Options::default(), |s| {
                KeyHasher::colliding(s, 0)
            })
        };
        let db = open().unwrap();
        for i in 0..50u32 {
            db.insert(format!("key{i}").as_bytes(), &i.to_le_bytes())
                .unwrap();
        }
        assert!(db.remove(b"key7").unwrap());
        db.insert(b"key8", b"eight").unwrap();
        let mut batch = WriteBatch::new();
        batch.insert(b"key9", b"nine");
        batch.remove(b"key10");
        db.apply_batch(&batch).unwrap();
        let check = |db: &Db| {
            assert_eq!(db.len(), 48);
            assert_eq!(db.get(b"key7").unwrap(), None);
            assert_eq!(db.get(b"key10").unwrap(), None);
            assert_eq!(db.get(b"key8").unwrap().unwrap(), b"eight");
            assert_eq!(db.get(b"key9").unwrap().unwrap(), b"nine");
            assert_eq!(db.get(b"key11").unwrap().unwrap(), 11u32.to_le_bytes());
            assert_eq!(db.get(b"key50").unwrap(), None);
        };
        check(&db);
        db.close().unwrap();
        check(&open().unwrap());
    }

    /// Makes `dir` a store whose log starts at segment `first` of 1 MiB
    /// segments, as if every segment below had been written and retired.
    fn store_starting_at(dir: &Path, first: u64) -> Options {
        let options = Options::default()
            .segment_bytes(1 << 20)
            .hot_bytes(4 << 20)
            .compaction_garbage(None);
        Db::open(dir, options.clone()).unwrap().close().unwrap();
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "seg") || path.ends_with("CHECKPOINT") {
                std::fs::remove_file(path).unwrap();
            }
        }
        manifest::store(dir, &manifest::Retired::all_below(first)).unwrap();
        options
    }

    /// Overwrites and removes 200 keys for about 6 MiB of log, compacting
    /// as it goes, and checks the store against a model on the way, after
    /// a clean reopen (checkpoint) and after a full replay.
    fn churn_from_segment(first: u64) -> Vec<String> {
        let dir = tempfile::tempdir().unwrap();
        let options = store_starting_at(dir.path(), first);
        let mut model = std::collections::HashMap::new();
        let check = |db: &Db, model: &std::collections::HashMap<Vec<u8>, Vec<u8>>| {
            assert_eq!(db.len(), model.len());
            for i in 0..200u32 {
                let key = format!("key{i}").into_bytes();
                assert_eq!(db.get(&key).unwrap().as_ref(), model.get(&key), "key{i}");
            }
        };
        let db = Db::open(dir.path(), options.clone()).unwrap();
        assert_eq!(
            db.core().log.tail() >> 20,
            first,
            "the log starts at the first segment not retired"
        );
        for round in 0..15u32 {
            for i in 0..200u32 {
                let key = format!("key{i}").into_bytes();
                if (i + round) % 7 == 0 {
                    assert_eq!(db.remove(&key).unwrap(), model.remove(&key).is_some());
                    continue;
                }
                // A length of its own each round: every write appends
                // (none goes in place), so the log moves on.
                let value =
                    format!("{i}:{round}:").repeat(200 + (i as usize * 13) % 300 + round as usize);
                db.insert(&key, value.as_bytes()).unwrap();
                model.insert(key, value.into_bytes());
            }
            if round % 4 == 3 {
                db.compact().unwrap();
            }
            check(&db, &model);
        }
        assert!(db.core().log.tail() >> 20 >= first + 5);
        db.close().unwrap();
        let db = Db::open(dir.path(), options.clone()).unwrap();
        check(&db, &model);
        db.close().unwrap();
        std::fs::remove_file(dir.path().join("CHECKPOINT")).unwrap();
        let db = Db::open(dir.path(), options).unwrap();
        check(&db, &model);
        drop(db);
        let report = crate::check::check(dir.path()).unwrap();
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.ends_with(".seg"))
            .collect();
        names.sort();
        names
    }

    #[test]
    fn log_addresses_cross_a_multiple_of_2_48_and_the_index_follows() {
        // Segment 2^28 of 1 MiB starts at log address 2^48: index entries
        // keep the low 48 bits, which wrap to 0 there.
        let names = churn_from_segment((1 << 28) - 3);
        assert!(names.iter().any(|n| n == "000268435460.seg"), "{names:?}");
    }

    #[test]
    fn segment_numbers_past_twelve_digits_name_their_files() {
        let names = churn_from_segment(1_000_000_000_000 - 3);
        assert!(
            names.iter().all(|n| n.len() == "1000000000000.seg".len()),
            "{names:?}"
        );
    }

    #[test]
    fn the_end_of_the_log_address_space_is_a_clear_error_that_loses_nothing() {
        let dir = tempfile::tempdir().unwrap();
        // The last segment of 1 MiB is 2^44 - 1 and is never used.
        let options = store_starting_at(dir.path(), (1 << 44) - 3);
        let db = Db::open(dir.path(), options.clone()).unwrap();
        let value = vec![7u8; 10_000];
        let mut written = 0u32;
        let err = loop {
            match db.insert(&written.to_le_bytes(), &value) {
                Ok(()) => written += 1,
                Err(e) => break e,
            }
            assert!(
                written < 1000,
                "2 MiB of address space holds under 210 records"
            );
        };
        assert!(err.to_string().contains("exhausted"), "{err}");
        assert!(written > 150, "{written}");
        let check = |db: &Db| {
            for i in 0..written {
                assert_eq!(db.get(&i.to_le_bytes()).unwrap().unwrap(), value);
            }
        };
        check(&db);
        db.close().unwrap();
        let db = Db::open(dir.path(), options).unwrap();
        check(&db);
        let err = db.insert(b"one more", &value).unwrap_err();
        assert!(err.to_string().contains("exhausted"), "{err}");
        check(&db);
    }

    #[test]
    fn a_published_checkpoint_points_only_at_durable_records() {
        // Records appended while the shards are copied are in the copy;
        // a crash right after the checkpoint must not leave entries
        // pointing past the log (found by the recovery fuzz target's
        // review). A writer keeps appending while checkpoints are taken.
        let dir = tempfile::tempdir().unwrap();
        let options = Options::default()
            .flush_interval(Duration::from_secs(1))
            .compaction_garbage(None);
        let db = Db::open(dir.path(), options).unwrap();
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    db.insert(&(i % 5_000).to_le_bytes(), &i.to_le_bytes())
                        .unwrap();
                    i += 1;
                }
            });
            // Stops the writer however this thread leaves the scope, so a
            // failed assertion fails the test instead of hanging it.
            struct StopOnDrop<'a>(&'a AtomicBool);
            impl Drop for StopOnDrop<'_> {
                fn drop(&mut self) {
                    self.0.store(true, Ordering::Relaxed);
                }
            }
            let _stop = StopOnDrop(&stop);
            for _ in 0..30 {
                db.core().checkpoint().unwrap();
                let durable = db.core().log.durable();
                let loaded = checkpoint::load(dir.path(), db.core().store_id)
                    .unwrap()
                    .unwrap();
                let storage = db.core().log.storage();
                let segment_of = |a| storage.segment_of(a);
                let index =
                    Index::from_images(loaded.images, loaded.covered, segment_of, |_| false)
                        .unwrap();
                assert!(
                    !index.points_at_or_past(durable),
                    "an entry at or past the durable {durable}"
                );
            }
        });
    }

    #[test]
    fn a_checkpoint_pointing_past_the_recovered_log_is_not_trusted() {
        // The checkpoint the old maintenance thread could publish: covered
        // at k0..k99 durable, entries of k100..k199 whose records a crash
        // then loses. Before the check after replay, every get of
        // k100..k199 failed with Corruption.
        let dir = tempfile::tempdir().unwrap();
        let options = Options::default().compaction_garbage(None);
        let key = |i: u32| format!("k{i}").into_bytes();
        let db = Db::open(dir.path(), options.clone()).unwrap();
        for i in 0..100 {
            db.insert(&key(i), b"durable").unwrap();
        }
        db.core().log.sync_all().unwrap();
        let covered = db.core().log.durable();
        let segment = db.core().log.storage().path(0);
        for i in 100..200 {
            db.insert(&key(i), b"lost").unwrap();
        }
        let (core, checkpoint) = (db.core(), dir.path().join("CHECKPOINT"));
        checkpoint::write(dir.path(), core.store_id, &core.index, covered, || Ok(())).unwrap();
        let crafted = std::fs::read(&checkpoint).unwrap();
        db.close().unwrap();
        // The crash: the log cut back to what was durable (segment 0 starts
        // at address 0; its file's length says nothing of that, since it is
        // allocated ahead of the records), with a durable mark no further
        // (the clean close marked the whole segment), and that checkpoint.
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(&segment)
            .unwrap();
        file.set_len(covered).unwrap();
        for slot in 0..2 {
            crate::storage::write_mark_to(&file, 0, covered, slot).unwrap();
        }
        std::fs::write(&checkpoint, crafted).unwrap();
        let db = Db::open(dir.path(), options).unwrap();
        assert_eq!(db.len(), 100);
        for i in 0..100 {
            assert_eq!(db.get(&key(i)).unwrap().unwrap(), b"durable");
        }
        for i in 100..200 {
            assert_eq!(db.get(&key(i)).unwrap(), None);
        }
        db.insert(&key(150), b"new").unwrap();
        assert_eq!(db.get(&key(150)).unwrap().unwrap(), b"new");
    }

    /// Compacting a segment looks keys up, and with colliding hashes a
    /// lookup reads other keys' records: one damaged in another segment
    /// marks and names that segment too (a review: the pass used to blame
    /// only the segment it compacted). Every key here has the same hash;
    /// segment 0 holds the damaged record and no garbage, segment 1 a
    /// removed key's tombstone, which compaction looks up. The damage is
    /// in the record's header, so that its key cannot be read (a damaged
    /// value leaves a key that tells the lookup the record is another's).
    #[test]
    fn compaction_names_the_segment_whose_record_a_lookup_found_damaged() {
        let dir = tempfile::tempdir().unwrap();
        let open = || open_hashed(dir.path(), KeyHasher::colliding(7, 0));
        // Three of these fill a 1 MiB segment.
        let big = vec![7u8; 300 << 10];
        let db = open();
        for key in [&b"victim"[..], b"f1", b"f2", b"b", b"f3"] {
            db.insert(key, &big).unwrap();
        }
        assert!(db.remove(b"b").unwrap());
        for key in [&b"f4"[..], b"f5"] {
            db.insert(key, &big).unwrap();
        }
        let storage = db.core().log.storage();
        assert_eq!(storage.segment_of(db.core().log.tail()), 2);
        let seg0 = storage.path(0);
        db.close().unwrap();
        // A reserved byte of the victim's header (the first record of
        // segment 0), which must be zero.
        let mut bytes = std::fs::read(&seg0).unwrap();
        bytes[64 + 5] ^= 0x01;
        std::fs::write(&seg0, &bytes).unwrap();
        let db = open();
        let report = db.compact().unwrap();
        assert_eq!(report.damaged, vec![1, 0], "{report:?}");
        assert_eq!(report.segments, 0, "{report:?}");
        assert!(db.compact().unwrap().damaged.is_empty());
    }

    /// A probe for one key reads the records of keys whose hashes share
    /// its entry tag; one of them damaged in its value names its key, so
    /// gets, writes and compaction's lookups of the other keys go past it
    /// (they failed with `Corruption` before). Every key here has the same
    /// hash, and the damaged record is probed first.
    #[test]
    fn a_damaged_record_of_another_key_is_passed_by() {
        let dir = tempfile::tempdir().unwrap();
        let open = || open_hashed(dir.path(), KeyHasher::colliding(7, 0));
        let big = vec![7u8; 300 << 10];
        let db = open();
        for key in [&b"victim"[..], b"f1", b"f2", b"b", b"f3"] {
            db.insert(key, &big).unwrap();
        }
        assert!(db.remove(b"b").unwrap());
        let seg0 = db.core().log.storage().path(0);
        db.close().unwrap();
        // A byte of the victim's value: the first record of segment 0.
        let mut bytes = std::fs::read(&seg0).unwrap();
        bytes[64 + 16 + 6 + 1000] ^= 0x01;
        std::fs::write(&seg0, &bytes).unwrap();
        let db = open();
        assert!(corrupt(db.get(b"victim")));
        assert_eq!(db.get(b"f1").unwrap().unwrap(), big);
        assert_eq!(db.get(b"b").unwrap(), None);
        assert_eq!(db.get(b"absent").unwrap(), None);
        db.insert(b"f2", b"two").unwrap();
        db.insert(b"new", b"new").unwrap();
        assert!(db.remove(b"f3").unwrap());
        // Only segment 0's own scan meets the damage.
        let report = db.compact().unwrap();
        assert_eq!((report.segments, report.damaged.clone()), (1, vec![0]));
        assert!(corrupt(db.get(b"victim")));
        assert_eq!(db.get(b"f1").unwrap().unwrap(), big);
        assert_eq!(db.get(b"f2").unwrap().unwrap(), b"two");
        assert_eq!(db.get(b"f3").unwrap(), None);
        assert_eq!(db.get(b"new").unwrap().unwrap(), b"new");
        assert_eq!(db.len(), 4);
    }

    /// A store of `first` and `second` (values `b"value-of-" + key`),
    /// then four values of 300 KiB, so that segment 0 is sealed below the
    /// checkpoint of the clean close; then the bytes of `first`'s key (the
    /// first record of segment 0) overwritten with `damage`. Opened with
    /// `hasher`.
    fn store_with_a_damaged_key(
        dir: &Path,
        hasher: KeyHasher,
        first: &[u8],
        second: &[u8],
        damage: &[u8],
    ) -> Db {
        let db = open_hashed(dir, hasher);
        for key in [first, second] {
            db.insert(key, &[&b"value-of-"[..], key].concat()).unwrap();
        }
        for i in 0..4u8 {
            db.insert(&[b'f', i], &vec![i; 300 << 10]).unwrap();
        }
        let seg0 = db.core().log.storage().path(0);
        db.close().unwrap();
        let mut bytes = std::fs::read(&seg0).unwrap();
        assert_eq!(&bytes[64 + 16..][..first.len()], first);
        bytes[64 + 16..][..damage.len()].copy_from_slice(damage);
        std::fs::write(&seg0, &bytes).unwrap();
        open_hashed(dir, hasher)
    }

    /// Whether `r` is an [`Error::Corruption`].
    fn corrupt<T>(r: Result<T>) -> bool {
        matches!(r, Err(Error::Corruption { .. }))
    }

    /// Opens `dir` with 1 MiB segments, no background compaction, and
    /// `hasher` whatever the store's seed.
    fn open_hashed(dir: &Path, hasher: KeyHasher) -> Db {
        let options = Options::default()
            .segment_bytes(1 << 20)
            .compaction_garbage(None);
        Db::open_with(dir, options, |_| hasher).unwrap()
    }

    /// Damage that turns one key (`k1`) into another that is indexed with
    /// a sound record (`k2`): the damaged record is told apart from
    /// `k2`'s own (found by a review: gets of `k2` failed, `k1` read as
    /// absent, an insert of `k2` replaced `k1`'s entry, and after `k2` was
    /// removed its old value came back). Every key here has the same hash.
    #[test]
    fn a_key_damaged_into_another_indexed_key_is_not_taken_for_it() {
        let dir = tempfile::tempdir().unwrap();
        let hasher = KeyHasher::colliding(7, 0);
        let db = store_with_a_damaged_key(dir.path(), hasher, b"k1", b"k2", b"k2");
        assert_eq!(db.get(b"k2").unwrap().unwrap(), b"value-of-k2");
        assert!(corrupt(db.get(b"k1")));
        db.insert(b"k2", b"k2-new").unwrap();
        assert_eq!(db.get(b"k2").unwrap().unwrap(), b"k2-new");
        assert!(corrupt(db.get(b"k1")), "k1's entry was replaced");
        assert!(corrupt(db.insert(b"k1", b"k1-new")));
        assert!(db.remove(b"k2").unwrap());
        // The damaged record now reads as k2's, the one sound record of
        // its key: an error, never a value of k2's.
        let check = |db: &Db| {
            assert!(corrupt(db.get(b"k2")), "{:?}", db.get(b"k2"));
            assert_eq!(db.get(b"f\x01").unwrap().unwrap(), vec![1; 300 << 10]);
        };
        check(&db);
        db.close().unwrap();
        check(&open_hashed(dir.path(), hasher));
    }

    /// Damage that turns a key into one whose hash shares its shard and
    /// tag but whose home slot lies elsewhere: the record is not taken for
    /// that key's (a tag collision), so the damaged key reads as
    /// `Corruption`, not as absent. Every key here has the same shard and
    /// tag (a hasher keeping the 32 low bits: the home slot's).
    #[test]
    fn a_key_damaged_into_one_homed_elsewhere_reads_as_damaged() {
        let dir = tempfile::tempdir().unwrap();
        let hasher = KeyHasher::colliding(7, 32);
        let (k1, other) = (b"victim-key", b"another-key");
        let db = store_with_a_damaged_key(dir.path(), hasher, k1, other, b"vixtim-key");
        assert!(corrupt(db.get(k1)), "{:?}", db.get(k1));
        assert!(corrupt(db.insert(k1, b"new")));
        assert_eq!(db.get(other).unwrap().unwrap(), b"value-of-another-key");
    }

    /// A batch whose shard must grow to take its new keys, over a record
    /// whose key cannot be read (damage in its header), fails before it
    /// appends anything (found by a review: the growth came between the
    /// batch's first and second key, after the append, and the batch was
    /// left half applied). Every key here falls in shard 0, with its own
    /// tag (a hasher keeping the 48 low bits).
    #[test]
    fn a_batch_whose_shard_cannot_grow_writes_nothing() {
        let template = tempfile::tempdir().unwrap();
        let hasher = KeyHasher::colliding(7, 48);
        // The key left as it is; then a reserved byte of its header, which
        // must be zero.
        drop(store_with_a_damaged_key(
            template.path(),
            hasher,
            b"victim",
            b"other",
            b"victim",
        ));
        let seg0 = template.path().join("000000000000.seg");
        let mut bytes = std::fs::read(&seg0).unwrap();
        bytes[64 + 5] ^= 1;
        std::fs::write(&seg0, &bytes).unwrap();
        let copy = || {
            let dir = tempfile::tempdir().unwrap();
            for file in std::fs::read_dir(template.path()).unwrap() {
                let file = file.unwrap();
                std::fs::copy(file.path(), dir.path().join(file.file_name())).unwrap();
            }
            let db = open_hashed(dir.path(), hasher);
            (dir, db)
        };
        let key = |i: usize| format!("new/{i}").into_bytes();
        // How many new keys the shard takes before it must grow.
        let (_dir, db) = copy();
        let room = (0..10_000)
            .position(|i| db.insert(&key(i), b"x").is_err())
            .unwrap();
        assert!(room > 2, "{room}");
        let (dir, db) = copy();
        for i in 0..room - 1 {
            db.insert(&key(i), b"x").unwrap();
        }
        let before = db.len();
        let mut batch = WriteBatch::new();
        batch.insert(b"batch-a", b"a").insert(b"batch-b", b"b");
        let err = db.apply_batch(&batch).unwrap_err();
        assert!(matches!(err, Error::Corruption { .. }), "{err}");
        let check = |db: &Db| {
            assert_eq!(db.get(b"batch-a").unwrap(), None);
            assert_eq!(db.get(b"batch-b").unwrap(), None);
            assert_eq!(db.len(), before);
        };
        check(&db);
        db.close().unwrap();
        check(&open_hashed(dir.path(), hasher));
    }

    /// Regression (a review, 2026-12-02): `clear` appended a shard's
    /// tombstones in one append, which with 1 MiB segments and about 1 MiB
    /// of tombstones in one shard made a page cross into the next segment
    /// (the page list's debug assertion caught it). Every key here falls
    /// in shard 0 (a hasher keeping 16 low bits), 1,100 keys of 1,000
    /// bytes: their tombstones need about 1.1 MB.
    #[test]
    fn clearing_a_shard_whose_tombstones_outgrow_a_segment_loses_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let key = |i: u32| format!("{i:01000}").into_bytes();
        let open = |sync_writes| {
            let options = Options::default()
                .segment_bytes(1 << 20)
                .sync_writes(sync_writes);
            Db::open_with(dir.path(), options, |s| KeyHasher::colliding(s, 16)).unwrap()
        };
        for sync_writes in [false, true] {
            let db = open(sync_writes);
            for i in 0..1_100u32 {
                db.insert(&key(i), b"v").unwrap();
            }
            assert_eq!(db.clear().unwrap(), 1_100);
            assert_eq!(db.len(), 0);
            db.insert(&key(7), b"after").unwrap();
            drop(db);
            let db = open(sync_writes);
            assert_eq!(db.len(), 1);
            assert_eq!(db.get(&key(7)).unwrap().unwrap(), b"after");
            assert_eq!(db.get(&key(8)).unwrap(), None);
            assert!(db.remove(&key(7)).unwrap());
            drop(db);
            assert!(crate::check::check(dir.path()).unwrap().is_clean());
        }
    }

    /// An `update` or `compare_and_swap` to the value a key holds appends
    /// nothing, but on a `sync_writes` store it returns only once the key's
    /// current record is durable: that record may be another write's whose
    /// fdatasync is still to come. Here the maintenance thread's path wrote
    /// it (that path waits for no fdatasync); the flusher's sync, once a
    /// second, could come first, so a record it made durable is written
    /// again under another key.
    #[test]
    fn a_write_of_the_value_held_waits_until_the_current_record_is_durable() {
        let dir = tempfile::tempdir().unwrap();
        let options = Options::default()
            .sync_writes(true)
            .flush_interval(Duration::from_secs(1));
        let db = Db::open(dir.path(), options).unwrap();
        db.maintenance.lock().take().unwrap().stop();
        let core = &db.core;
        for swap in [false, true] {
            let name: &[u8] = if swap { b"swapped" } else { b"updated" };
            let mut attempt = 0u32;
            let (key, end) = loop {
                let key = [name, &attempt.to_le_bytes()].concat();
                core.modify_as(&key, false, By::Maintenance, |_| {
                    Ok((
                        Action::Put {
                            value: Cow::Borrowed(b"held"),
                            expires_at: None,
                        },
                        (),
                    ))
                })
                .unwrap();
                let end = core.log.tail();
                if core.log.durable() < end {
                    break (key, end);
                }
                attempt += 1;
            };
            let appended = db.stats().unwrap().records_appended;
            if swap {
                assert!(
                    db.compare_and_swap(&key, Some(b"held"), Some(b"held"))
                        .unwrap()
                );
            } else {
                let v = db.update(&key, |old| old.map(<[u8]>::to_vec)).unwrap();
                assert_eq!(v.as_deref(), Some(&b"held"[..]));
            }
            assert_eq!(db.stats().unwrap().records_appended, appended, "{key:?}");
            assert!(
                core.log.durable() >= end,
                "{key:?}: returned before durable"
            );
        }
    }
}

#[cfg(all(test, shuttle))]
mod shuttle_tests {
    use super::*;
    use shuttle::thread;

    /// Five records per 1 MiB page and segment.
    const VALUE_BYTES: usize = 200 << 10;

    fn value(key: [u8; 2], version: u8) -> Vec<u8> {
        let mut v = vec![version; VALUE_BYTES];
        v[..2].copy_from_slice(&key);
        v
    }

    /// One schedule over a whole store (its flusher and maintenance
    /// thread are shuttle's threads too): two writers each write three
    /// versions of four keys of their own and remove the first (4.8 MB),
    /// in 1 MiB segments and a 4 MiB hot tier (the smallest), so that
    /// segments fill, seal and turn to garbage and pages leave memory
    /// while the maintenance thread seals, compacts (at 10 %
    /// garbage) and checkpoints as it will; a third thread runs `compact`,
    /// a checkpoint and `compact` again. Then each key holds its writer's
    /// last value (the removed ones none), before and after a close and a
    /// reopen from the checkpoint, and `check` finds the files sound.
    fn schedule() {
        let dir = tempfile::tempdir_in("/dev/shm")
            .or_else(|_| tempfile::tempdir())
            .unwrap();
        let options = Options::default()
            .segment_bytes(1 << 20)
            .hot_bytes(4 << 20)
            .compaction_garbage(Some(0.1))
            .flush_interval(Duration::from_millis(1));
        let db = Arc::new(Db::open(dir.path(), options.clone()).unwrap());
        let writers: Vec<_> = (0..2u8)
            .map(|w| {
                let db = Arc::clone(&db);
                thread::spawn(move || {
                    for version in 0..3 {
                        for k in 0..4 {
                            db.insert(&[w, k], &value([w, k], version)).unwrap();
                        }
                    }
                    assert!(db.remove(&[w, 0]).unwrap());
                })
            })
            .collect();
        let compactor = {
            let db = Arc::clone(&db);
            thread::spawn(move || {
                db.compact().unwrap();
                db.core.checkpoint().unwrap();
                db.compact().unwrap();
            })
        };
        for writer in writers {
            writer.join().unwrap();
        }
        compactor.join().unwrap();
        let expect = |db: &Db| {
            for w in 0..2u8 {
                for k in 0..4u8 {
                    let got = db.get(&[w, k]).unwrap();
                    let want = (k != 0).then(|| value([w, k], 2));
                    assert!(got == want, "key {w}/{k}: {:?}", got.map(|v| v[2]));
                }
            }
            assert_eq!(db.len(), 6);
        };
        expect(&db);
        Arc::into_inner(db).expect("one handle").close().unwrap();
        let db = Db::open(dir.path(), options).unwrap();
        expect(&db);
        db.close().unwrap();
        assert!(crate::check::check(dir.path()).unwrap().is_clean());
    }

    #[test]
    fn shuttle_random_schedules_of_writers_compaction_and_checkpoints() {
        crate::sync::check_random(schedule, 60);
    }

    #[test]
    fn shuttle_pct_schedules_of_writers_compaction_and_checkpoints() {
        crate::sync::check_pct(schedule, 60);
    }
}
