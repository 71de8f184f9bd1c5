//! [`Stats`]: counters of a store's size and memory.

use crate::index::Totals;

/// A snapshot of a store's size and memory, from [`crate::Db::stats`].
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Stats {
    /// Keys in the index (see [`crate::Db::len`]).
    pub keys: usize,
    /// Those of them whose newest record carries an expiry time (set by
    /// [`crate::Db::insert_with_ttl`], [`crate::Db::expire`] and the like),
    /// including expired keys not yet touched or compacted, as
    /// [`crate::Db::len`] counts them. Redis calls this `expires`.
    pub expiring_keys: u64,
    /// Bytes of the keys and values of those keys: the logical size.
    pub logical_bytes: u64,
    /// Bytes of the records those keys point at (headers included).
    pub live_record_bytes: u64,
    /// Bytes of every file in the store's directory: segments, the index
    /// checkpoint, metadata; less the space allocated ahead of the writes
    /// in the active segment (up to 1 MiB, or 4 MiB of zeros with
    /// `sync_writes`; see `Options::segment_bytes`), and in the segment
    /// before it between a seal and the next write-out.
    pub disk_bytes: u64,
    /// `disk_bytes / logical_bytes` (0 for an empty store): the space
    /// amplification. Overwritten and removed records count on disk until
    /// compaction reclaims them.
    pub space_amplification: f64,
    /// Bytes of memory held by the hash index's tables.
    pub index_bytes: usize,
    /// `index_bytes / keys` (0 for an empty store).
    pub index_bytes_per_key: f64,
    /// Bytes of memory held by the hot tier's resident pages.
    pub hot_bytes: usize,
    /// Bytes of memory held by the read cache (records plus 64 bytes of
    /// bookkeeping each; at most [`crate::Options::read_cache_bytes`]).
    pub read_cache_bytes: usize,
    /// Gets of cold records answered by the read cache, since open.
    pub read_cache_hits: u64,
    /// Gets of cold records that read the disk, since open.
    pub read_cache_misses: u64,
    /// `read_cache_hits / (read_cache_hits + read_cache_misses)` (0 before
    /// the first cold get): the cache hit ratio. Gets answered by the hot
    /// tier count in neither.
    pub cache_hit_ratio: f64,
    /// Segments compacted since the store was opened.
    pub compactions: u64,
    /// Writes that waited for compaction since the store was opened, each
    /// up to 50 ms: the files had reached the space bound (see
    /// [`crate::Options::max_space_amplification`]).
    pub write_waits: u64,
    /// Expired keys the background thread's sweep of the index removed
    /// since the store was opened (each with a tombstone); keys a write
    /// met expired, and expired records compaction dropped, do not count.
    pub expired_keys_removed: u64,
    /// Records appended since the store was opened (writes, tombstones and
    /// compaction's copies).
    pub records_appended: u64,
    /// Writes since the store was opened that rewrote their key's record
    /// where it stood instead of appending one (an update in place: a
    /// value of the same length, whose record no write-out had reached
    /// yet; see docs/ARCHITECTURE.md, "Updates in place").
    pub records_updated_in_place: u64,
    /// fdatasyncs of the log since the store was opened; with
    /// `sync_writes`, `records_appended / fdatasyncs` is how many writes
    /// each group commit covered.
    pub fdatasyncs: u64,
    /// Bytes the open cut off the newest segment as a torn tail, up to the
    /// last byte that was not zero (the zeros allocated or written ahead of
    /// the records, which every crash leaves, do not count): a record torn
    /// by a crash, or damage past the segment's durable mark. 0 after a
    /// clean close. Those records are gone; see the README's "Durability
    /// contract" for what they can be. A read-only open
    /// ([`crate::Options::read_only`]) counts the bytes it read past and
    /// left in the file (the next writable open cuts them).
    pub torn_bytes_cut: u64,
    /// Segment files whose descriptor is open now: at most about the
    /// store's bound ([`crate::Options::max_open_files`]; by default one
    /// the process's stores share, so one store may hold all of it), which the segment being
    /// written, the one just opened and segments whose file holds room
    /// allocated ahead or whose cut is not yet durable can pass by a few.
    /// (A reader still reading through a descriptor the bound closed keeps
    /// it open a moment longer, uncounted.)
    pub open_files: usize,
    /// Segment files' descriptors opened again, after the bound closed
    /// them, since the store was opened: many a second say that
    /// iteration, `update` and the like (or gets, with `map_cold_reads`
    /// off) keep reading more segments than the bound keeps open, at
    /// about 3 µs each.
    pub files_reopened: u64,
}

impl Stats {
    pub(crate) fn new(
        totals: Totals,
        (disk_bytes, hot_bytes): (u64, usize),
        (read_cache_bytes, read_cache_hits, read_cache_misses): (usize, u64, u64),
        (compactions, write_waits, expired_keys_removed): (u64, u64, u64),
        (records_appended, records_updated_in_place, fdatasyncs): (u64, u64, u64),
        torn_bytes_cut: u64,
        (open_files, files_reopened): (usize, u64),
    ) -> Stats {
        let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
        Stats {
            keys: totals.keys,
            expiring_keys: totals.expiring,
            logical_bytes: totals.logical_bytes,
            live_record_bytes: totals.record_bytes,
            disk_bytes,
            space_amplification: ratio(disk_bytes as f64, totals.logical_bytes as f64),
            index_bytes: totals.index_bytes,
            index_bytes_per_key: ratio(totals.index_bytes as f64, totals.keys as f64),
            hot_bytes,
            read_cache_bytes,
            read_cache_hits,
            read_cache_misses,
            cache_hit_ratio: ratio(
                read_cache_hits as f64,
                (read_cache_hits + read_cache_misses) as f64,
            ),
            compactions,
            write_waits,
            expired_keys_removed,
            records_appended,
            records_updated_in_place,
            fdatasyncs,
            torn_bytes_cut,
            open_files,
            files_reopened,
        }
    }
}
