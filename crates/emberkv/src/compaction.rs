//! Compaction: reclaim the space of overwritten, removed and expired
//! records.
//!
//! A sealed segment (one the appender has moved past) is compacted by
//! reading it sequentially and, under each key's shard lock:
//! - a record the index still points at is copied to the tail (with its
//!   expiry) and the index moved to the copy; if it has expired, a
//!   tombstone is appended instead and the key leaves the index (so that
//!   the log itself says so, for replay from a checkpoint);
//! - a tombstone whose key is still absent is copied to the tail, unless
//!   the segment is the oldest (then no older record of the key exists
//!   anywhere, so it is dropped);
//! - everything else is garbage and left behind.
//!
//! The copies are then fdatasynced, the segment is added to the manifest of
//! retired segments (`manifest.rs`), and its file is deleted: at once when no
//! [`crate::Iter`] is alive, else when the last one is dropped. A crash
//! before the manifest is written leaves both the segment and the copies,
//! and replay's later-wins rule gives the same state; a crash after it
//! leaves a retired file that recovery deletes. Removed keys never come
//! back: a tombstone (or expired record) is only dropped when no older
//! record of its key can survive it.

use std::ops::Range;
use std::sync::atomic::Ordering;

use crate::clock;
use crate::compression::MIN_COMPRESS_BYTES;
use crate::db::{Core, Current};
use crate::dictionary::{self, Dictionary};
use crate::error::{Error, Result};
use crate::index::{MAX_LOG_SPAN, ShardWriter, Slot, shard_of};
use crate::record::{Entry, Record, VALUE_FLAGS};
use crate::recovery::{Chunk, for_each_record, for_each_record_ahead};
use crate::storage::SEGMENT_HEADER_BYTES;

/// What one compaction pass did, from [`crate::Db::compact`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CompactionReport {
    /// Segments compacted and retired.
    pub segments: usize,
    /// Segments left in place because a record failed its checks while one
    /// was compacted: the segment being compacted (its records before the
    /// damage may have been copied; every live record stays readable but a
    /// damaged one), and, when the damaged record was another segment's
    /// (an older record of a key that a lookup read), that segment too.
    /// Later passes skip them until the store is reopened; `emberkv::check`
    /// names the damage.
    pub damaged: Vec<u64>,
    /// Records copied to the tail (values and tombstones).
    pub records_copied: u64,
    /// Bytes of those copies appended to the log.
    pub bytes_copied: u64,
    /// Bytes of segment files deleted (or scheduled for deletion while an
    /// iterator is alive), less the bytes of the copies appended.
    pub bytes_reclaimed: u64,
}

/// Log address bytes a sealed segment may fall behind `written` before
/// [`candidates`] takes it whatever its garbage: 2^46 (64 TiB), half of
/// [`MAX_LOG_SPAN`]. Index entries name their records only while every
/// segment file lies within that span of the tail (see the index's module
/// docs), and the log refuses to grow past it; a segment compaction never
/// took (all live, or under every garbage threshold: cold data, written
/// once) would otherwise stop every write after 128 TiB more of log
/// addresses, and with this one its live records move to the tail once in
/// every 64 TiB of addresses. Addresses, not bytes written: each seal
/// skips the rest of its segment's address range, and the appender seals
/// every 8 MiB (or a sixteenth of the live bytes) of a 256 MiB segment, so
/// a store of small segments can advance its addresses up to 32 times as
/// fast as it writes (64 TiB of addresses in 2 TiB written, about 35
/// minutes at 1 GiB/s; 512 times with 4 GiB segments). Until 2026-12-06
/// only segments with garbage were taken (found by a helper's audit of
/// issue 4).
pub(crate) const REWRITE_BEHIND: u64 = MAX_LOG_SPAN / 2;

/// Sealed segments to compact: first every segment that starts more than
/// [`REWRITE_BEHIND`] bytes before `written`, oldest first, whatever its
/// garbage; then those whose share of dead record bytes (overwritten,
/// removed or expired records; not pads) is at least `min_garbage` (0.0
/// ..= 1.0), most garbage first. A damaged segment is never taken (its
/// damaged record cannot be copied). Only segments wholly below `written`
/// (an address the files hold everything below, from
/// [`crate::log::Log::write_out`]) count as sealed: compaction reads the
/// file, and a segment the appender left after the write-out may still
/// have records only in memory.
pub(crate) fn candidates(core: &Core, min_garbage: f64, written: u64) -> Result<Vec<u64>> {
    candidates_behind(core, min_garbage, written, REWRITE_BEHIND)
}

/// [`candidates`], with segments taken whatever their garbage when they
/// start more than `behind` bytes before `written`.
fn candidates_behind(core: &Core, min_garbage: f64, written: u64, behind: u64) -> Result<Vec<u64>> {
    let storage = core.log.storage();
    let active = storage.segment_of(written);
    let live = core.index.live_by_segment();
    let mut far_behind = Vec::new();
    let mut picked = Vec::new();
    let mut oldest = true;
    for seg in storage.list()?.into_iter().filter(|&s| s < active) {
        if core.retired.lock().contains(seg) {
            continue;
        }
        let damaged = core.damaged_segments.lock().contains(&seg);
        // The records' length: until the next segment's creation cuts it,
        // the file may be allocated ahead of them.
        let len = storage.written_len(seg)?;
        let live = live.get(&seg).copied().unwrap_or(0);
        let garbage = garbage_share(core, seg, len, live, oldest);
        oldest = false;
        if damaged {
            continue;
        }
        if storage.segment_start(seg) < written.saturating_sub(behind) {
            far_behind.push(seg);
        } else if garbage > 0.0 && garbage >= min_garbage {
            picked.push((garbage, seg));
        }
    }
    picked.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    far_behind.extend(picked.into_iter().map(|(_, seg)| seg));
    Ok(far_behind)
}

/// The share of segment `seg`'s `len` bytes that [`dead_bytes`] counts
/// dead (0 for an empty file): what [`candidates`] orders segments by,
/// and what the space bound uses to tell which segment compaction takes
/// next (`maintenance::footprint`).
pub(crate) fn garbage_share(core: &Core, seg: u64, len: u64, live: u64, oldest: bool) -> f64 {
    dead_bytes(core, seg, len, live, oldest) as f64 / len.max(1) as f64
}

/// Bytes of dead records (overwritten, removed or expired) in segment
/// `seg` of `len` bytes, `live` of them live records: only those are
/// reclaimable. The header and the pads come back with the copies, and so
/// do tombstones compaction carried there, unless the segment is the
/// `oldest` (then they are dropped).
pub(crate) fn dead_bytes(core: &Core, seg: u64, len: u64, live: u64, oldest: bool) -> u64 {
    let carried = if oldest {
        0
    } else {
        core.carried_tombstones
            .lock()
            .get(&seg)
            .copied()
            .unwrap_or(0)
    };
    let overhead = SEGMENT_HEADER_BYTES + core.log.pad_bytes(seg) + carried;
    len.saturating_sub(overhead + live)
}

/// Compacts the segments whose garbage share is at least `min_garbage`,
/// at most `most` of them, most garbage first, reading them through
/// `chunk` (kept by a caller that compacts again and again, so that its
/// buffer is allocated once). Calls `on_progress` after each segment it
/// retires, and between groups of records when the log reached a
/// milestone since the last call. `None` when it would have to wait for
/// another pass or a backup and `wait` says not to.
pub(crate) fn run(
    core: &Core,
    min_garbage: f64,
    most: usize,
    wait: Wait,
    chunk: &mut Chunk,
    on_progress: &mut dyn FnMut() -> Result<()>,
) -> Result<Option<CompactionReport>> {
    let _one_at_a_time = match wait {
        Wait::Yes => core.compaction_lock.lock(),
        Wait::No => match core.compaction_lock.try_lock() {
            Some(guard) => guard,
            None => return Ok(None),
        },
    };
    core.delete_retired_files()?;
    // Make sure every sealed segment is whole in its file before reading it.
    let written = core.log.write_out()?;
    let mut picked = candidates(core, min_garbage, written)?;
    picked.truncate(most);
    if !picked.is_empty() {
        // Compaction is about to compress: with a dictionary if one pays.
        maybe_train_dictionary(core, written)?;
    }
    compact_segments(core, &picked, chunk, on_progress).map(Some)
}

/// Whether [`run`] waits while compaction is held off.
#[derive(Clone, Copy)]
pub(crate) enum Wait {
    /// It waits (a foreground [`crate::Db::compact`]).
    Yes,
    /// It returns at once (the maintenance thread, which must go on
    /// setting where writers wait).
    No,
}

/// Share of a sealed segment's sampled bytes (its first 256 KiB) that
/// rewriting it with [`recompress`] must reclaim: a quarter.
const RECOMPRESS_GAIN: f64 = 0.25;

/// Bytes sampled from the front of a segment to estimate what rewriting
/// it would reclaim: 256 KiB.
const SAMPLE_BYTES: u64 = 256 << 10;

/// Bytes of each segment's front whose live values are samples for
/// training a dictionary: 1 MiB.
const TRAINING_SAMPLE_BYTES: u64 = 1 << 20;

/// Rewrites, with compression, the first sealed segment numbered `from` or
/// above whose rewrite would reclaim at least [`RECOMPRESS_GAIN`] of its
/// bytes (dead records, plus what compressing its live raw values saves,
/// estimated from a sample); segments below it are only sampled. Returns
/// what was done and the segment number to go on from. Does nothing when
/// the store does not compress, nor while another thread holds the
/// compaction lock (a foreground compaction, or a backup linking or
/// copying the sealed segments): the maintenance thread, its caller, goes
/// on checking where writers wait, as its compaction passes do
/// ([`Wait::No`]; until 2026-12-07 it waited for the lock here).
///
/// Compaction compresses only what it copies, and it copies only segments
/// with garbage: this is how values written once and never overwritten get
/// compressed (with [`crate::Options::compress_cold_segments`], the
/// maintenance thread calls it while writers are quiet).
pub(crate) fn recompress(core: &Core, from: u64) -> Result<(CompactionReport, u64)> {
    if !core.log.codec().compresses() {
        return Ok((CompactionReport::default(), from));
    }
    let Some(_one_at_a_time) = core.compaction_lock.try_lock() else {
        return Ok((CompactionReport::default(), from));
    };
    core.delete_retired_files()?;
    let storage = core.log.storage();
    let written = core.log.write_out()?;
    maybe_train_dictionary(core, written)?;
    let active = storage.segment_of(written);
    for seg in storage
        .list()?
        .into_iter()
        .filter(|&s| s >= from && s < active)
    {
        if core.retired.lock().contains(seg) || core.damaged_segments.lock().contains(&seg) {
            continue;
        }
        let Some(gain) = unless_damaged(core, seg, rewrite_gain(core, seg))? else {
            continue;
        };
        if gain >= RECOMPRESS_GAIN {
            let mut chunk = Chunk::mapping();
            let report = compact_segments(core, &[seg], &mut chunk, &mut || Ok(()))?;
            return Ok((report, seg + 1));
        }
    }
    Ok((CompactionReport::default(), active))
}

/// Trains a dictionary (see [`train_dictionary`]) when the store
/// compresses with zstd, has none, and its logical bytes reached the point set by
/// the last try (each try, with samples enough or not, doubles it). The
/// caller holds the compaction lock and wrote the log out to `written`.
///
/// # Errors
/// As [`train_dictionary`].
fn maybe_train_dictionary(core: &Core, written: u64) -> Result<()> {
    let codec = core.log.codec();
    if codec.zstd_level().is_none() || codec.has_dictionary() {
        return Ok(());
    }
    let logical = core.index.totals().logical_bytes;
    if logical < core.train_dictionary_at.load(Ordering::Relaxed) {
        return Ok(());
    }
    core.train_dictionary_at
        .store(logical.max(1 << 20).saturating_mul(2), Ordering::Relaxed);
    train_dictionary(core, written).map(|_| ())
}

/// Trains a dictionary on live values sampled from the segments wholly
/// below `written` (up to [`dictionary::MAX_SAMPLE_BYTES`] of values
/// between [`MIN_COMPRESS_BYTES`] and [`dictionary::MAX_SAMPLE_VALUE`]
/// long, from the first MiB of each segment, oldest first) and, when it
/// measures better (see [`Dictionary::train`]), stores it durably and
/// compresses with it from then on. Returns whether there were samples
/// enough to try. The caller holds the compaction lock.
///
/// # Errors
/// I/O errors and corruption met reading the segments or storing the
/// dictionary.
fn train_dictionary(core: &Core, written: u64) -> Result<bool> {
    let Some(level) = core.log.codec().zstd_level() else {
        return Ok(false);
    };
    let storage = core.log.storage();
    let active = storage.segment_of(written);
    let mut samples: Vec<Vec<u8>> = Vec::new();
    let mut total = 0;
    for seg in storage.list()?.into_iter().filter(|&s| s < active) {
        if total >= dictionary::MAX_SAMPLE_BYTES {
            break;
        }
        if core.retired.lock().contains(seg) || core.damaged_segments.lock().contains(&seg) {
            continue;
        }
        let mut chunk = Chunk::reading(TRAINING_SAMPLE_BYTES as usize / 4);
        let sampled = for_each_record(
            storage,
            seg,
            TRAINING_SAMPLE_BYTES,
            &mut chunk,
            |addr, record| {
                let value = record.stored_value;
                if total < dictionary::MAX_SAMPLE_BYTES
                    && !record.header.is_compressed()
                    && (MIN_COMPRESS_BYTES..=dictionary::MAX_SAMPLE_VALUE).contains(&value.len())
                    && is_newest(core, core.hasher.hash(record.key), addr)
                {
                    total += value.len();
                    samples.push(value.to_vec());
                }
                Ok(())
            },
        );
        // The samples read before a damaged record are kept.
        unless_damaged(core, seg, sampled)?;
    }
    if samples.len() < dictionary::MIN_SAMPLES || total < dictionary::MIN_SAMPLE_BYTES {
        return Ok(false);
    }
    if let Some(trained) = Dictionary::train(&samples, level) {
        trained.store(&core.dir, core.store_id)?;
        core.log.codec().set_dictionary(trained);
    }
    Ok(true)
}

/// Whether the index points at `addr` for a key of hash `hash`: the
/// record there is its key's newest. Lock-free, so it may race with a
/// writer: a record found newest may be garbage a moment later (then
/// compressing it was wasted), never the other way round (an index entry
/// never returns to an older address).
fn is_newest(core: &Core, hash: u64, addr: u64) -> bool {
    matches!(
        core.index.find(hash, |a| Ok((a == addr).then_some(()))),
        Ok(Some(()))
    )
}

/// Share of the first [`SAMPLE_BYTES`] of segment `seg` that rewriting it
/// would reclaim: records that are not their key's newest, and what
/// compression saves on the live values stored raw.
fn rewrite_gain(core: &Core, seg: u64) -> Result<f64> {
    let (mut sampled, mut kept) = (0u64, 0u64);
    let mut compressed = Vec::new();
    let now = clock::now_ms();
    let mut chunk = Chunk::reading(SAMPLE_BYTES as usize / 4);
    for_each_record(
        core.log.storage(),
        seg,
        SAMPLE_BYTES,
        &mut chunk,
        |addr, record| {
            let len = record.header.total_len() as u64;
            sampled += len;
            if record.header.is_tombstone() {
                // Carried again unless the segment is the oldest: not counted
                // as reclaimable, or an idle store would rewrite its
                // tombstones forever.
                kept += len;
                return Ok(());
            }
            if !is_newest(core, core.hasher.hash(record.key), addr) {
                return Ok(());
            }
            let value = record.stored_value.len() as u64;
            let stored = if !record.header.is_compressed()
                && record.is_live(now)
                && core
                    .log
                    .codec()
                    .compress(record.stored_value, &mut compressed)
                    .is_some()
            {
                compressed.len() as u64
            } else {
                value
            };
            kept += len - value + stored;
            Ok(())
        },
    )?;
    Ok(if sampled == 0 {
        0.0
    } else {
        1.0 - kept as f64 / sampled as f64
    })
}

/// Compacts `segments`, in order; the caller holds the compaction lock
/// and has written out every sealed segment.
fn compact_segments(
    core: &Core,
    segments: &[u64],
    chunk: &mut Chunk,
    on_progress: &mut dyn FnMut() -> Result<()>,
) -> Result<CompactionReport> {
    let mut report = CompactionReport::default();
    let storage = core.log.storage();
    let mut copied_bytes = 0;
    let mut deleted = 0;
    // The segments are sealed: nothing is appended to them any more. A
    // writer may still hold its shard lock between appending a record to
    // one of them and pointing the index at it; the scan's lock-free check
    // would take that record for garbage. Wait for such writers first.
    core.index.wait_for_writers();
    for &seg in segments {
        if core.damaged_segments.lock().contains(&seg) {
            // Marked by a lookup while compacting one before it.
            continue;
        }
        let oldest = storage
            .list()?
            .into_iter()
            .find(|&s| !core.retired.lock().contains(s))
            == Some(seg);
        let mut copied = (0, 0);
        let compacted = compact_segment(core, seg, oldest, chunk, &mut copied, on_progress);
        report.records_copied += copied.0;
        copied_bytes += copied.1;
        if let Err(found) = damage_in(core, seg, compacted)? {
            for seg in [seg, found] {
                if !report.damaged.contains(&seg) {
                    report.damaged.push(seg);
                }
            }
            continue;
        }
        // Every live record was moved, so the index counts none left in
        // the segment; if it does, the scan missed one (a bug, or bytes
        // that misled it), and the segment stays: deleting it would lose
        // that record.
        if core.index.live_keys_in(seg) > 0 {
            core.damaged_segments.lock().insert(seg);
            report.damaged.push(seg);
            continue;
        }
        // The copies, and the records that made the rest garbage, are made
        // durable before the segment goes; it goes at once, so the pass
        // needs free space for one segment's copies, not for all of them
        // (on a full disk, all of them may not fit).
        core.log.sync_all()?;
        deleted += storage.file_len(seg)?;
        core.retire(seg)?;
        core.log.forget_pads(seg);
        core.carried_tombstones.lock().remove(&seg);
        report.segments += 1;
        core.compactions.fetch_add(1, Ordering::Relaxed);
        on_progress()?;
    }
    report.bytes_copied = copied_bytes;
    report.bytes_reclaimed = deleted.saturating_sub(copied_bytes);
    Ok(report)
}

/// How far ahead of the record it judges compaction's scan hashes keys and
/// prefetches their index slots, in bytes (4 KiB: four records of 1 KiB,
/// forty of 100 bytes).
const LOOKAHEAD_BYTES: u64 = 4 << 10;

/// Records gathered from a segment before they are judged and copied
/// together: up to this many bytes (256 KiB) per group.
const GROUP_BYTES: usize = 256 << 10;

/// A record of the segment being compacted, copied out of the scan buffer
/// into its [`Group`]'s buffer.
struct Found {
    addr: u64,
    hash: u64,
    tombstone: bool,
    expires_at: Option<u64>,
    record_bytes: u64,
    /// Length of the value the user wrote, in bytes.
    value_len: usize,
    /// Where the key is in [`Group::bytes`]; the value as it will be
    /// stored in the copy follows it (compressed as `value_flags` say),
    /// up to `end`.
    key: Range<usize>,
    end: usize,
    /// The [`VALUE_FLAGS`] that say how the value is stored.
    value_flags: u8,
    /// The record's flags byte and checksum (verified by the scan) when
    /// its value is copied as stored: a copy with the same flags is the
    /// same bytes, and takes the checksum instead of computing it again.
    source: Option<(u8, u32)>,
}

/// Records gathered from a segment to be judged and copied together, with
/// their keys and values in one buffer (kept from group to group: no
/// allocation per record).
#[derive(Default)]
struct Group {
    found: Vec<Found>,
    bytes: Vec<u8>,
    /// Scratch for a value being compressed.
    compressed: Vec<u8>,
    /// Bytes of the gathered records in the segment.
    record_bytes: usize,
}

impl Group {
    /// Copies the record at `addr`, of key hash `hash`, out of the scan
    /// buffer, compressing its value if the store compresses, the value is
    /// stored raw and unexpired at `now_ms`, and compaction is not behind
    /// the writers (then every cycle goes to reclaiming space: compressing
    /// would slow the copying that the throttled writers wait for). The
    /// caller found the record to be its key's newest (or a tombstone):
    /// garbage is never copied out. Runs before the group takes any shard
    /// lock: compressing 1 KiB takes microseconds.
    fn push(&mut self, core: &Core, addr: u64, hash: u64, record: &Record<'_>, now_ms: u64) {
        let codec = core.log.codec();
        let compressed_now = (codec.compresses()
            && !record.header.is_compressed()
            && !core.compaction_is_behind()
            && record.is_live(now_ms)
            && record.stored_value.len() >= MIN_COMPRESS_BYTES)
            .then(|| codec.compress(record.stored_value, &mut self.compressed))
            .flatten();
        let start = self.bytes.len();
        self.bytes.extend_from_slice(record.key);
        let (value_flags, source) = match compressed_now {
            Some(flags) => {
                self.bytes.extend_from_slice(&self.compressed);
                (flags, None)
            }
            None => {
                self.bytes.extend_from_slice(record.stored_value);
                let flags = record.header.flags & VALUE_FLAGS;
                // A record rewritten in place carries a span, which its
                // copy (appended) does not: their bytes differ.
                let source =
                    (record.header.span == 0).then_some((record.header.flags, record.header.crc));
                (flags, source)
            }
        };
        self.found.push(Found {
            addr,
            hash,
            tombstone: record.header.is_tombstone(),
            expires_at: record.expires_at,
            record_bytes: record.header.total_len() as u64,
            value_len: record.value_len(),
            key: start..start + record.key.len(),
            end: self.bytes.len(),
            value_flags,
            source,
        });
        self.record_bytes += record.header.total_len();
    }

    fn key(&self, f: &Found) -> &[u8] {
        &self.bytes[f.key.clone()]
    }

    /// The value as it will be stored in the copy.
    fn value(&self, f: &Found) -> &[u8] {
        &self.bytes[f.key.end..f.end]
    }

    fn clear(&mut self) {
        self.found.clear();
        self.bytes.clear();
        self.record_bytes = 0;
    }
}

/// `Ok(None)` for an [`Error::Corruption`] met in segment `seg`, which is
/// then marked damaged (see `Core::damaged_segments`); other results as
/// they are.
fn unless_damaged<T>(core: &Core, seg: u64, result: Result<T>) -> Result<Option<T>> {
    Ok(damage_in(core, seg, result)?.ok())
}

/// As [`unless_damaged`], with the segment that holds the damaged record
/// as the inner error: a lookup while compacting `seg` may read another
/// segment's older record of a key. Both are marked: `seg`'s pass would
/// meet the same damage again.
fn damage_in<T>(core: &Core, seg: u64, result: Result<T>) -> Result<Result<T, u64>> {
    match result {
        Ok(value) => Ok(Ok(value)),
        Err(Error::Corruption { offset, .. }) => {
            let found = core.log.storage().segment_of(offset);
            let mut damaged = core.damaged_segments.lock();
            damaged.insert(seg);
            damaged.insert(found);
            Ok(Err(found))
        }
        Err(e) => Err(e),
    }
}

/// Copies the live records (and needed tombstones) of `seg` to the tail,
/// adding how many were copied, and their bytes, to `copied` (so that a
/// pass that fails midway still counts what it copied). Calls
/// `on_progress` between groups when the log reached a milestone since
/// the last call.
///
/// Records are judged and copied in groups, each under the locks of the
/// shards its keys fall in and under one hold of the append lock
/// (`Log::append_each`): appending record by record, the compactor would
/// queue for the append lock behind every writer and fall far behind them.
/// The group's records go on in the next page when the current one is
/// full: one append of the whole group would pad the rest of the page
/// instead, a quarter of every page compaction filled.
fn compact_segment(
    core: &Core,
    seg: u64,
    oldest: bool,
    chunk: &mut Chunk,
    copied: &mut (u64, u64),
    on_progress: &mut dyn FnMut() -> Result<()>,
) -> Result<()> {
    let mut group = Group::default();
    let mut milestones = *core.log.milestones.lock();
    let now = clock::now_ms();
    // Each record's index slot is prefetched a few records before its
    // lookup: the lookups' cache misses were a third of compaction's time
    // (docs/PERFORMANCE.md). The key is hashed again for the lookup, from
    // the verified record: a hash is a few nanoseconds.
    let mut prefetcher = core.index.prefetcher();
    let ahead = |key: &[u8]| prefetcher.prefetch(core.hasher.hash(key));
    for_each_record_ahead(
        core.log.storage(),
        seg,
        u64::MAX,
        chunk,
        LOOKAHEAD_BYTES,
        ahead,
        |addr, record| {
            #[cfg(test)]
            if tests::SKIPPED.with(|s| s.get()) == addr {
                return Ok(());
            }
            let hash = core.hasher.hash(record.key);
            // A value the index no longer points at is garbage for good (an
            // entry never returns to an older address, and no other pass runs):
            // it is left behind without being copied out or locked for. The
            // group's check under the shard locks still decides for the rest.
            if !record.header.is_tombstone() && !is_newest(core, hash, addr) {
                return Ok(());
            }
            group.push(core, addr, hash, record, now);
            if group.record_bytes >= GROUP_BYTES {
                let (records, bytes) = compact_group(core, &group, oldest)?;
                *copied = (copied.0 + records, copied.1 + bytes);
                group.clear();
                let now = *core.log.milestones.lock();
                if now != milestones {
                    milestones = now;
                    on_progress()?;
                }
            }
            Ok(())
        },
    )?;
    let (records, bytes) = compact_group(core, &group, oldest)?;
    *copied = (copied.0 + records, copied.1 + bytes);
    Ok(())
}

/// What compaction does with one record of a group.
enum Fate {
    /// Garbage: left behind.
    Drop,
    /// The key's newest value: copied, and the index moved to the copy.
    Move(Slot),
    /// The key's newest record, expired: a tombstone is appended and the
    /// key leaves the index.
    Expire(Slot),
    /// A tombstone still needed: appended again.
    Carry,
}

/// Judges and copies one group; returns the records copied and their
/// bytes.
fn compact_group(core: &Core, group: &Group, oldest: bool) -> Result<(u64, u64)> {
    let found = &group.found;
    if found.is_empty() {
        return Ok((0, 0));
    }
    let hashes: Vec<u64> = found.iter().map(|f| f.hash).collect();
    let mut shards: Vec<usize> = hashes.iter().map(|&h| shard_of(h)).collect();
    shards.sort_unstable();
    shards.dedup();
    let mut writers: Vec<ShardWriter<'_>> = shards.iter().map(|&s| core.index.writer(s)).collect();
    let writer_of = |hash: u64| shards.binary_search(&shard_of(hash)).expect("locked");
    let now = clock::now_ms();

    // Tombstones first: looking a key up may grow its shard's table, which
    // would move the slots found for the other records.
    let mut fates: Vec<Fate> = Vec::with_capacity(found.len());
    for (f, &hash) in found.iter().zip(&hashes) {
        fates.push(if f.tombstone && !oldest {
            let writer = &mut writers[writer_of(hash)];
            let (_, current) = core.locate(writer, hash, group.key(f), None)?;
            if current.is_none() {
                Fate::Carry
            } else {
                Fate::Drop
            }
        } else {
            Fate::Drop
        });
    }
    for ((f, &hash), fate) in found.iter().zip(&hashes).zip(fates.iter_mut()) {
        if f.tombstone {
            continue;
        }
        // Garbage unless the key's entry points at exactly this record.
        if let Some(slot) = writers[writer_of(hash)].slot_pointing_at(hash, f.addr) {
            let live = f.expires_at.is_none_or(|at| at > now);
            *fate = if live {
                Fate::Move(slot)
            } else {
                Fate::Expire(slot)
            };
        }
    }

    // A moved record's copy is its bytes unchanged unless its flags differ
    // (a batch's record loses FLAG_BATCH): it then takes the checksum the
    // scan verified; any other copy has its checksum computed.
    let (entries, crcs): (Vec<Entry<'_>>, Vec<u32>) = found
        .iter()
        .zip(&fates)
        .filter_map(|(f, fate)| {
            let (entry, source) = match fate {
                Fate::Drop => return None,
                Fate::Move(_) => {
                    let entry = Entry {
                        flags: f.value_flags,
                        expires_at: f.expires_at,
                        key: group.key(f),
                        value: group.value(f),
                    };
                    (entry, f.source)
                }
                Fate::Expire(_) | Fate::Carry => (Entry::tombstone(group.key(f)), None),
            };
            let crc = match source {
                Some((flags, crc)) if flags == entry.flags() => {
                    debug_assert_eq!(crc, entry.checksum());
                    crc
                }
                _ => entry.checksum(),
            };
            Some((entry, crc))
        })
        .unzip();
    if entries.is_empty() {
        return Ok((0, 0));
    }
    let copied = (
        entries.len() as u64,
        entries.iter().map(|e| e.len() as u64).sum(),
    );
    let mut addrs = vec![0; entries.len()];
    core.log.append_each(&entries, &crcs, &mut addrs)?;
    let mut written = entries.iter().zip(addrs);
    for ((f, &hash), fate) in found.iter().zip(&hashes).zip(fates) {
        let writer = &mut writers[writer_of(hash)];
        let old = Current {
            addr: f.addr,
            record_bytes: f.record_bytes,
            logical_bytes: (f.key.len() + f.value_len) as u64,
            expires_at: f.expires_at,
        };
        match fate {
            Fate::Drop => continue,
            Fate::Carry => {}
            Fate::Move(slot) => {
                let (entry, new) = written.next().expect("one entry per copy");
                core.forget(writer, &old);
                writer.set(hash, slot, new);
                core.count(writer, new, entry);
                continue;
            }
            Fate::Expire(slot) => {
                writer.clear(slot);
                core.forget(writer, &old);
            }
        }
        if let Some((entry, at)) = written.next() {
            let seg = core.log.storage().segment_of(at);
            *core.carried_tombstones.lock().entry(seg).or_default() += entry.len() as u64;
        }
    }
    Ok(copied)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compression::tests::noise;
    use crate::{Compression, Db, Options};

    fn open(dir: &std::path::Path) -> Db {
        open_with(dir, Compression::Zstd { level: 1 })
    }

    /// 1 MiB segments, no background compaction.
    fn open_with(dir: &std::path::Path, compression: Compression) -> Db {
        let opts = Options::default()
            .segment_bytes(1 << 20)
            .compaction_garbage(None)
            .compression(compression);
        Db::open(dir, opts).unwrap()
    }

    fn segment_of_tail(db: &Db) -> u64 {
        let log = &db.core().log;
        log.storage().segment_of(log.tail())
    }

    /// Regression (attack review, 2026-12-01): the scan skips a value the
    /// index does not point at without taking the shard lock, so a record a
    /// writer has appended but not yet indexed (the writer preempted between
    /// the two, holding its shard lock) would be taken for garbage and its
    /// segment retired, leaving the index pointing into a deleted file.
    /// `run` and `Db::compact` happened to wait for such writers (their
    /// live-byte count locks every shard after the segments are sealed);
    /// `recompress` did not. `compact_segments` now waits itself. The
    /// writer here pauses at that point while compaction has half a second
    /// to run into it: a slow machine may miss the bug, it cannot fail a
    /// correct build.
    #[test]
    fn a_record_appended_but_not_yet_indexed_is_not_garbage() {
        let dir = tempfile::tempdir().unwrap();
        let db = std::sync::Arc::new(open_with(dir.path(), Compression::None));
        db.insert(b"key", b"first").unwrap();
        fill_to(&db, 1);
        let (appended_tx, appended) = std::sync::mpsc::channel::<()>();
        let (go, go_rx) = std::sync::mpsc::channel::<()>();
        let writer = {
            let db = std::sync::Arc::clone(&db);
            std::thread::spawn(move || {
                crate::db::set_after_append_hook(Box::new(move || {
                    appended_tx.send(()).unwrap();
                    go_rx.recv().unwrap();
                }));
                db.insert(b"key", b"second, in segment 1").unwrap();
            })
        };
        appended.recv().unwrap();
        let core = db.core();
        core.log.seal_segment().unwrap();
        core.log.write_out().unwrap();
        let compactor = {
            let db = std::sync::Arc::clone(&db);
            std::thread::spawn(move || {
                compact_segments(db.core(), &[1], &mut Chunk::default(), &mut || Ok(())).unwrap();
            })
        };
        std::thread::sleep(std::time::Duration::from_millis(500));
        go.send(()).unwrap();
        writer.join().unwrap();
        compactor.join().unwrap();
        let second = Some(&b"second, in segment 1"[..]);
        assert_eq!(db.get(b"key").unwrap().as_deref(), second);
        drop(db);
        let db = open_with(dir.path(), Compression::None);
        assert_eq!(db.get(b"key").unwrap().as_deref(), second);
    }

    thread_local! {
        /// The address of a record this thread's compaction scans pass by
        /// as if they had not seen it (`u64::MAX`: none).
        pub(super) static SKIPPED: std::cell::Cell<u64> = const { std::cell::Cell::new(u64::MAX) };
    }

    /// A segment whose scan missed a live record (here by the hook above;
    /// in life a bug, or bytes that mislead the scan) is kept and reported
    /// damaged, not retired: deleting it lost the record.
    #[test]
    fn a_segment_still_holding_a_live_record_after_its_scan_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let db = open_with(dir.path(), Compression::None);
        fill_to(&db, 1);
        db.insert(b"kept", b"live in segment 1").unwrap();
        db.insert(b"moved", b"also live there").unwrap();
        fill_to(&db, 2);
        let core = db.core();
        core.log.write_out().unwrap();
        let hash = core.hasher.hash(b"kept");
        let addr = core.index.find(hash, |a| Ok(Some(a))).unwrap().unwrap();
        assert_eq!(core.log.storage().segment_of(addr), 1);
        SKIPPED.with(|s| s.set(addr));
        let report = compact_segments(core, &[1], &mut Chunk::default(), &mut || Ok(())).unwrap();
        SKIPPED.with(|s| s.set(u64::MAX));
        assert_eq!((report.segments, report.damaged.clone()), (0, vec![1]));
        assert!(core.log.storage().path(1).exists());
        assert_eq!(
            db.get(b"kept").unwrap().as_deref(),
            Some(&b"live in segment 1"[..])
        );
        assert_eq!(
            db.get(b"moved").unwrap().as_deref(),
            Some(&b"also live there"[..])
        );
        drop(db);
        let db = open_with(dir.path(), Compression::None);
        assert_eq!(
            db.get(b"kept").unwrap().as_deref(),
            Some(&b"live in segment 1"[..])
        );
        let report = db.compact().unwrap();
        assert!(report.damaged.is_empty(), "{report:?}");
        assert_eq!(
            db.get(b"kept").unwrap().as_deref(),
            Some(&b"live in segment 1"[..])
        );
    }

    /// Inserts filler until the tail is in segment `seg`.
    fn fill_to(db: &Db, seg: u64) {
        let mut i = 0u32;
        while segment_of_tail(db) < seg {
            db.insert(format!("fill{seg}:{i}").as_bytes(), &[9u8; 50_000])
                .unwrap();
            i += 1;
        }
    }

    fn compact_only(db: &Db, seg: u64, oldest: bool) -> u64 {
        let core = db.core();
        core.log.sync_all().unwrap();
        let mut copied = (0, 0);
        compact_segment(
            core,
            seg,
            oldest,
            &mut Chunk::default(),
            &mut copied,
            &mut || Ok(()),
        )
        .unwrap();
        core.log.sync_all().unwrap();
        core.retire(seg).unwrap();
        copied.0
    }

    /// Whether the newest record of `key` stores its value compressed.
    fn stored_compressed(db: &Db, key: &[u8]) -> bool {
        let core = db.core();
        let hash = core.hasher.hash(key);
        let mut scratch = Vec::new();
        core.index
            .find(hash, |addr| {
                core.log.with_record(addr, &mut scratch, |r| {
                    (r.key == key).then(|| r.header.is_compressed())
                })
            })
            .unwrap()
            .expect("key present")
    }

    #[test]
    fn compaction_compresses_the_values_it_copies_and_every_read_decodes_them() {
        let zstd = Compression::Zstd { level: 1 };
        compaction_compresses_with(zstd, Compression::Lz4);
        compaction_compresses_with(Compression::Lz4, zstd);
        compaction_compresses_with(Compression::Lz4, Compression::None);
    }

    /// Compaction with `compression`, then reads of every kind, and a
    /// full replay of the store reopened with `reopened`.
    fn compaction_compresses_with(compression: Compression, reopened: Compression) {
        let dir = tempfile::tempdir().unwrap();
        let opts = Options::default()
            .segment_bytes(1 << 20)
            .hot_bytes(4 << 20)
            .read_cache_bytes(0)
            .compaction_garbage(None)
            .compression(compression);
        let db = Db::open(dir.path(), opts.clone()).unwrap();
        let mut want: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        for i in 0..300u32 {
            let value = match i % 3 {
                0 => format!("value {i} of a key; ").repeat(60).into_bytes(),
                1 => noise(i.into(), 1000),
                _ => format!("tiny{i}").into_bytes(),
            };
            want.push((format!("key{i}").into_bytes(), value));
        }
        for (k, v) in &want {
            db.insert(k, v).unwrap();
        }
        fill_to(&db, 1);
        let before = db.stats().unwrap();
        compact_only(&db, 0, true);
        let after = db.stats().unwrap();
        assert_eq!(after.logical_bytes, before.logical_bytes);
        assert!(after.live_record_bytes < before.live_record_bytes);
        for (i, (k, v)) in want.iter().enumerate() {
            let compressible = i % 3 == 0;
            assert_eq!(stored_compressed(&db, k), compressible, "key {i}");
            assert_eq!(db.get(k).unwrap().as_ref(), Some(v), "hot read of key {i}");
        }
        // Push the copies out of the hot tier: gets now read the files.
        fill_to(&db, 12);
        let log = &db.core().log;
        assert!(
            log.tail() - log.resident_bytes() as u64 >= 2 << 20,
            "segment 1 cold"
        );
        let mut out = Vec::new();
        for (k, v) in &want {
            assert!(db.get_into(k, &mut out).unwrap());
            assert_eq!(&out, v, "cold read");
        }
        let pairs: std::collections::HashMap<Vec<u8>, Vec<u8>> =
            db.iter().map(|p| p.unwrap()).collect();
        for (k, v) in &want {
            assert_eq!(pairs.get(k), Some(v), "iteration");
        }
        let (k0, v0) = &want[0];
        db.update(k0, |old| {
            assert_eq!(old, Some(&v0[..]), "update sees the decoded value");
            Some(b"replaced".to_vec())
        })
        .unwrap();
        db.close().unwrap();
        assert!(crate::check(dir.path()).unwrap().is_clean());
        // Full replay counts the compressed records' decoded lengths.
        std::fs::remove_file(dir.path().join("CHECKPOINT")).unwrap();
        let db = Db::open(dir.path(), opts.compression(reopened)).unwrap();
        assert_eq!(db.get(k0).unwrap().as_deref(), Some(&b"replaced"[..]));
        for (k, v) in &want[1..] {
            assert_eq!(db.get(k).unwrap().as_ref(), Some(v), "after replay");
        }
    }

    #[test]
    fn recompress_rewrites_cold_compressible_segments_only() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path());
        // Segment 0: compressible values written once (no garbage);
        // segment 1: incompressible ones.
        let mut i = 0u32;
        while segment_of_tail(&db) < 1 {
            db.insert(
                format!("text{i}").as_bytes(),
                &format!("{i} ").repeat(200).into_bytes(),
            )
            .unwrap();
            i += 1;
        }
        let mut j = 0u32;
        while segment_of_tail(&db) < 2 {
            db.insert(format!("noise{j}").as_bytes(), &noise(j.into(), 900))
                .unwrap();
            j += 1;
        }
        let before = db.stats().unwrap();
        let (report, next) = recompress(db.core(), 0).unwrap();
        assert_eq!((report.segments, next), (1, 1), "segment 0 rewritten");
        // About half the live bytes were in segment 0, and they shrink.
        assert!(db.stats().unwrap().live_record_bytes < before.live_record_bytes * 3 / 4);
        assert!(!dir.path().join("000000000000.seg").exists());
        // Segment 1 is sampled and left; the copies of segment 0 are in
        // the active segment, not yet sealed.
        let (report, next) = recompress(db.core(), next).unwrap();
        assert_eq!(report.segments, 0);
        assert_eq!(next, segment_of_tail(&db));
        assert!(dir.path().join("000000000001.seg").exists());
        for k in 0..i {
            let key = format!("text{k}");
            // The last one opened segment 1.
            assert_eq!(stored_compressed(&db, key.as_bytes()), k + 1 < i, "text{k}");
            assert_eq!(
                db.get(key.as_bytes()).unwrap(),
                Some(format!("{k} ").repeat(200).into_bytes())
            );
        }
        for k in 0..j {
            let key = format!("noise{k}");
            assert!(!stored_compressed(&db, key.as_bytes()));
            assert_eq!(db.get(key.as_bytes()).unwrap(), Some(noise(k.into(), 900)));
        }
        // Once sealed, the compressed copies are not worth rewriting again.
        db.core().log.seal_segment().unwrap();
        let (report, _) = recompress(db.core(), next).unwrap();
        assert_eq!(report.segments, 0);
    }

    /// Regression (an audit of ARCHITECTURE, 2026-12-07): the maintenance
    /// thread waited in `recompress` for a backup holding the compaction
    /// lock, and stopped setting where writers wait meanwhile.
    #[test]
    fn recompress_returns_at_once_while_the_compaction_lock_is_held() {
        let dir = tempfile::tempdir().unwrap();
        let db = std::sync::Arc::new(open(dir.path()));
        let mut i = 0u32;
        while segment_of_tail(&db) < 1 {
            db.insert(format!("text{i}").as_bytes(), &b"text ".repeat(200))
                .unwrap();
            i += 1;
        }
        let held = db.core().compaction_lock.lock();
        let (done, finished) = std::sync::mpsc::channel();
        let thread = {
            let db = std::sync::Arc::clone(&db);
            std::thread::spawn(move || {
                let _ = done.send(recompress(db.core(), 0).map(|(r, next)| (r.segments, next)));
            })
        };
        let outcome = finished.recv_timeout(std::time::Duration::from_secs(10));
        drop(held);
        thread.join().unwrap();
        assert_eq!(
            outcome.expect("recompress waited for the lock").unwrap(),
            (0, 0)
        );
        let (report, _) = recompress(db.core(), 0).unwrap();
        assert_eq!(
            report.segments, 1,
            "segment 0 rewritten once the lock is free"
        );
    }

    #[test]
    fn recompress_does_nothing_without_compression() {
        let dir = tempfile::tempdir().unwrap();
        let db = open_with(dir.path(), Compression::None);
        fill_to(&db, 2);
        let (report, next) = recompress(db.core(), 0).unwrap();
        assert_eq!((report.segments, next), (0, 0));
    }

    #[test]
    fn without_compression_copies_stay_raw() {
        let dir = tempfile::tempdir().unwrap();
        let db = open_with(dir.path(), Compression::None);
        let value = b"compressible ".repeat(100);
        db.insert(b"k", &value).unwrap();
        fill_to(&db, 1);
        compact_only(&db, 0, true);
        assert!(!stored_compressed(&db, b"k"));
        assert_eq!(db.get(b"k").unwrap(), Some(value));
    }

    /// A segment whose records are all live (cold data, written once) is
    /// taken once it starts `behind` bytes before the tail, ahead of the
    /// segments with garbage, and its records move to the tail. Taken
    /// only for garbage (until 2026-12-06), it stayed until the log's span
    /// (2^47 bytes) stopped every write.
    #[test]
    fn a_segment_far_behind_the_tail_is_taken_whatever_its_garbage() {
        let dir = tempfile::tempdir().unwrap();
        let db = open_with(dir.path(), Compression::None);
        db.insert(b"cold", b"written once").unwrap();
        fill_to(&db, 1);
        let mut i = 0u32;
        while segment_of_tail(&db) < 5 {
            db.insert(b"hot", &i.to_le_bytes().repeat(10_000)).unwrap();
            i += 1;
        }
        let core = db.core();
        let written = core.log.write_out().unwrap();
        let by_garbage = candidates(core, 0.0, written).unwrap();
        assert!(!by_garbage.contains(&0), "{by_garbage:?}");
        assert_eq!(by_garbage.len(), 4, "{by_garbage:?}");
        // Segments 0 and 1 start more than 3 MiB before the tail.
        let behind = candidates_behind(core, 0.0, written, 3 << 20).unwrap();
        assert_eq!(behind[..2], [0, 1], "{behind:?}");
        assert_eq!(behind.len(), 5, "{behind:?}");
        let report = compact_segments(core, &[0], &mut Chunk::default(), &mut || Ok(())).unwrap();
        assert_eq!(report.segments, 1);
        assert!(!dir.path().join("000000000000.seg").exists());
        assert_eq!(db.get(b"cold").unwrap().unwrap(), b"written once");
        db.close().unwrap();
        std::fs::remove_file(dir.path().join("CHECKPOINT")).unwrap();
        let db = open_with(dir.path(), Compression::None);
        assert_eq!(db.get(b"cold").unwrap().unwrap(), b"written once");
        assert_eq!(db.get(b"fill1:0").unwrap().unwrap(), [9u8; 50_000]);
    }

    #[test]
    fn a_tombstone_is_carried_while_an_older_value_survives_elsewhere() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path());
        db.insert(b"k", b"old value in segment 0").unwrap();
        fill_to(&db, 2);
        assert!(db.remove(b"k").unwrap());
        fill_to(&db, 3);
        compact_only(&db, 2, false);
        db.close().unwrap();
        // Replay the log itself: the clean close's checkpoint would hide a
        // resurrection.
        std::fs::remove_file(dir.path().join("CHECKPOINT")).unwrap();
        let db = open(dir.path());
        assert_eq!(db.get(b"k").unwrap(), None, "removed key came back");
        assert!(!dir.path().join("000000000002.seg").exists());
    }

    use std::time::Duration;

    /// An expired key whose older value lies in an older segment stays
    /// hidden after compaction of its expired record's segment and a full
    /// replay: left alone (compaction replaces the expired record by a
    /// tombstone) or removed first (by `remove`, which returns false for
    /// it, by a batch, or by the maintenance thread's sweep: the removal
    /// writes a tombstone, since compaction drops the expired record as
    /// garbage once the index no longer points at it). Found by the sweep's
    /// first run of this module's tests: a removal cleared the entry and
    /// wrote nothing, and a replay brought the older value back.
    #[test]
    fn a_removed_expired_key_stays_hidden_after_its_record_is_compacted() {
        // "nothing": compaction meets the expired record itself (and
        // replaces it by a tombstone).
        for by in ["nothing", "remove", "sweep", "batch"] {
            let dir = tempfile::tempdir().unwrap();
            let db = open(dir.path());
            db.stop_maintenance();
            db.insert(b"k", b"old value in segment 0").unwrap();
            fill_to(&db, 2);
            db.insert_with_ttl(b"k", b"short-lived", Duration::from_millis(1))
                .unwrap();
            std::thread::sleep(Duration::from_millis(5));
            match by {
                "sweep" => {
                    let mut sweep = crate::expiry::Sweep::default();
                    assert_eq!(sweep.run(db.core(), usize::MAX).unwrap(), 1, "one round");
                }
                // The server's EXEC removes keys in a batch (a review found
                // this path still wrote nothing).
                "batch" => {
                    let mut batch = crate::WriteBatch::new();
                    batch.remove(b"k");
                    db.apply_batch(&batch).unwrap();
                }
                "remove" => assert!(!db.remove(b"k").unwrap(), "an expired key is absent"),
                _ => {}
            }
            fill_to(&db, 3);
            compact_only(&db, 2, false);
            assert_eq!(db.get(b"k").unwrap(), None);
            db.close().unwrap();
            std::fs::remove_file(dir.path().join("CHECKPOINT")).unwrap();
            let db = open(dir.path());
            assert_eq!(
                db.get(b"k").unwrap(),
                None,
                "removed by {by}: the expired key's old value came back"
            );
        }
    }

    #[test]
    fn the_oldest_segment_drops_tombstones_and_moves_live_records() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path());
        db.insert(b"gone", b"x").unwrap();
        db.insert(b"kept", b"y").unwrap();
        assert!(db.remove(b"gone").unwrap());
        fill_to(&db, 1);
        // Every key lives in segment 0 but the last filler, which opened
        // segment 1.
        let live_in_0 = db.len() - 1;
        let copied = compact_only(&db, 0, true);
        assert_eq!(
            copied as usize, live_in_0,
            "live records only, no tombstone"
        );
        db.close().unwrap();
        // Replay the log itself: the clean close's checkpoint would hide a
        // resurrection.
        std::fs::remove_file(dir.path().join("CHECKPOINT")).unwrap();
        let db = open(dir.path());
        assert_eq!(db.get(b"gone").unwrap(), None);
        assert_eq!(db.get(b"kept").unwrap().as_deref(), Some(&b"y"[..]));
        assert!(!dir.path().join("000000000000.seg").exists());
    }

    #[test]
    fn a_long_compaction_reports_the_milestones_it_passes_and_each_segment_retired() {
        // 32 MiB segments, 20 MiB of live records in segment 0: their
        // copies alone cross two 8 MiB milestones, and the maintenance
        // thread must get to look at the log between groups (values kept
        // raw: compressed, these would shrink to nothing).
        let dir = tempfile::tempdir().unwrap();
        let options = Options::default()
            .segment_bytes(32 << 20)
            .compaction_garbage(None)
            .compression(Compression::None);
        let db = Db::open(dir.path(), options).unwrap();
        for i in 0..400u32 {
            db.insert(&i.to_le_bytes(), &[i as u8; 50_000]).unwrap();
        }
        // One dead record, so that the segment has garbage to reclaim.
        db.insert(&0u32.to_le_bytes(), &[0; 50_000]).unwrap();
        db.core().log.seal_segment().unwrap();
        let mut calls = 0;
        let report = run(
            db.core(),
            0.0,
            usize::MAX,
            Wait::Yes,
            &mut Chunk::default(),
            &mut || {
                calls += 1;
                Ok(())
            },
        )
        .unwrap()
        .expect("a waiting pass runs");
        assert_eq!(report.segments, 1);
        assert_eq!(report.records_copied, 400);
        // Two milestones and the segment retired.
        assert!(calls >= 3, "{calls} calls");
        for i in 0..400u32 {
            assert_eq!(
                db.get(&i.to_le_bytes()).unwrap().unwrap(),
                [i as u8; 50_000]
            );
        }
    }
}
