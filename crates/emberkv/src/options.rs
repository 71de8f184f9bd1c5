//! Options for [`crate::Db::open`].

use std::time::Duration;

use crate::compression::{self, Compression};
use crate::error::{Error, Result};

/// How a store is opened. `Options::default()` is valid; every field is
/// public and each setter below documents its default.
///
/// ```
/// use std::time::Duration;
/// let opts = emberkv::Options::default()
///     .key_capacity(1_000_000)
///     .sync_writes(true)
///     .flush_interval(Duration::from_millis(50));
/// assert!(opts.sync_writes);
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Options {
    /// Expected number of distinct keys; sizes the hash index up front so
    /// that it does not grow below this count (its tables, about 10 bytes
    /// a key, are allocated at open). Default 65,536; at most 2^34, and
    /// refused at open ([`Error::InvalidOptions`]) when the tables would
    /// exceed the machine's physical memory.
    pub key_capacity: usize,
    /// Memory for the hot tier (the in-memory tail of the log), in bytes:
    /// gets of the records in it make no system call. It is taken as the
    /// log grows, one 1 MiB page at a time, and flushed pages leave it,
    /// oldest first, once it is full. At most 64 MiB of it (or all of it,
    /// when smaller) waits unflushed: a writer past that writes the log
    /// out itself. Default 256 MiB; at least 4 pages (4 MiB). The pages
    /// live in one memory map per store, reserved at open (this many
    /// bytes rounded up to whole MiB, plus 6 MiB) and advised for
    /// transparent huge pages where the kernel has them; its memory is
    /// taken as pages are first used, and up to 8 MiB more is kept
    /// faulted in beside the hot tier for the next pages (the frames of
    /// pages that left, and ones the flusher readied ahead of the
    /// writes). All of it is given back at close.
    pub hot_bytes: usize,
    /// Memory for the read cache, in bytes: cold records (those no longer
    /// in the hot tier) that are read again, so that their next get costs
    /// no system call. Used only by gets that read by positioned reads:
    /// with [`Options::map_cold_reads`] (the default) they read through a
    /// memory map and the OS page cache plays this part. A record is admitted on its second miss within a
    /// window of recent misses and evicted by CLOCK (see the `cache`
    /// module, after S3-FIFO): a record read once costs its address in a
    /// queue only, so a scan does not flush what is read often. Each record costs its size plus 64 bytes
    /// of bookkeeping; a record costing more than a 640th of what is left
    /// of this after the address tables (about 49 KiB of the default) is
    /// not cached. 0 turns the cache off. Default 32 MiB; at
    /// most 2^40. Its address tables (a 26th to a 13th of it) are
    /// allocated at open, and refused ([`Error::InvalidOptions`]) when
    /// they would exceed the machine's physical memory or cannot be
    /// allocated.
    pub read_cache_bytes: usize,
    /// When `true` (the default), gets read cold records through a
    /// read-only memory map of each segment file: a record in the OS page
    /// cache costs a copy and its checksum, no system call (out of cache,
    /// uniform reads went from 0.66x to 2.11x LMDB in the benchmark harness;
    /// see `docs/PERFORMANCE.md`), and a page the kernel has to read in
    /// costs one 4 KiB read (read-ahead is turned off for the maps). The
    /// mapped pages the gets touch count in the process's resident set as
    /// file-backed pages (`RssFile`), which the kernel reclaims like any
    /// page cache; the memory this store allocates stays within
    /// `hot_bytes`, the index and a small constant. The cost of the choice:
    /// an I/O error while reading a mapped page (a failing disk) raises
    /// `SIGBUS`, which ends the process, where a positioned read returns an
    /// error, and so does a segment file shrunk by another program while
    /// the store is open. Each open segment reserves `segment_bytes` of
    /// address space and one of the process's maps (`vm.max_map_count`,
    /// 65,530 by default) until compaction retires it, however little it
    /// holds: under an address-space limit (`ulimit -v`), a store of
    /// thousands of segments can take the room the rest of the process
    /// needs (a segment that cannot be mapped falls back to positioned
    /// reads, but a thread spawn may then fail). Besides gets, three
    /// point reads of cold records go through the maps: a writer's (or
    /// compaction's) look at a key's newest record before replacing it, a
    /// growing index re-reading its keys, and recovery's re-reads of
    /// records it already replayed; so they share the `SIGBUS` exposure.
    /// So does compaction's scan of each segment it compacts, which loads
    /// 8 MiB of the map at a time (`MADV_POPULATE_READ`: when a page
    /// cannot be read then, the scan reads by pread, which returns the
    /// error; but a page the kernel drops and fails to read again before
    /// the scan reaches it raises `SIGBUS`). When `false`, all of them read by
    /// positioned reads (`pread`), gets through the read cache. The other
    /// scans (recovery's, [`crate::check()`]'s), iteration and the reads of
    /// `update` and the like read by positioned reads either way.
    pub map_cold_reads: bool,
    /// Most segment files whose file descriptor the store keeps open at once (a
    /// map, with [`Options::map_cold_reads`], needs none). Past it, opening one
    /// more descriptor (a positioned read of a segment whose descriptor is closed,
    /// recovery replaying the next segment, the log moving on to a new one) closes
    /// one not used since the last sweep, after CLOCK (Corbató, 1968: one reference
    /// bit per segment, as an OS page cache's second chance); its next use opens it
    /// again (an `open`: about 3.3 µs a record more when iterating a store of 50
    /// segments with 2 descriptors, docs/PERFORMANCE.md). Gets through the maps of
    /// segments already open never need one (a segment's first get opens it);
    /// iteration, [`crate::Db::update`]'s and the like's value reads, backups and,
    /// with `map_cold_reads(false)`, gets do. Only sealed segments' descriptors
    /// close (not the segment being written, nor one whose cut is not yet durable),
    /// so the bound can be passed by those few, and by readers still reading
    /// through one that closed. `None` (the default): the store shares one bound
    /// with the process's other stores at the default, half the process's soft
    /// `RLIMIT_NOFILE` as it was when a store (any, `check` and `salvage` too) was
    /// last opened in the process (512 under the common 1,024), at least 16, no
    /// bound where the limit is infinite; a store that opens
    /// a descriptor past it closes the other stores' unused ones first, then its
    /// own. `Some(n)`: a bound of the store's own, outside the shared one (a process
    /// that also opens many files of its own can give its stores that way a share
    /// it chooses). Until 2026-12-07 every segment's descriptor stayed open until
    /// compaction retired it, so a store of more segments than the limit (256 GiB
    /// of 256 MiB segments under 1,024 descriptors) failed to open, and a server's
    /// clients and segments ran out of descriptors together. Refused at open
    /// ([`Error::InvalidOptions`]) when 0.
    pub max_open_files: Option<usize>,
    /// When `true`, a write returns only after an fdatasync that covers it
    /// (writers waiting at the same moment share one fdatasync; when the
    /// last one covered several writers, the next waits up to half as long
    /// as it took, at most 200 µs, for as many to join). When `false` (the
    /// default), a write returns once it is in memory and the background
    /// flusher makes it durable within `flush_interval`.
    pub sync_writes: bool,
    /// The background group-commit window: the flusher writes and
    /// fdatasyncs everything appended at least this often. Default 100 ms;
    /// between 1 ms and 1 s.
    pub flush_interval: Duration,
    /// Size of one segment file, in bytes: a power of two between 1 MiB and
    /// 4 GiB, fixed when the store is created (reopening with another value
    /// is ignored: the store's own geometry wins). Default 256 MiB. A
    /// record never crosses a segment, so a value must fit in one; the unit
    /// of compaction is a segment. With segments of 64 MiB or more, the
    /// active segment's file is allocated 1 MiB ahead of its writes, so
    /// that an fdatasync seldom has to record a new file length, or, with
    /// `sync_writes`, written with zeros 4 MiB ahead of them by the
    /// flusher, so that a group commit's fdatasync writes data blocks
    /// alone (a closed store gives the space back).
    pub segment_bytes: u64,
    /// Background compaction: at least once a second, every sealed
    /// segment whose share of garbage bytes (overwritten, removed and
    /// expired records; not the padding at page ends) is at least this
    /// fraction is compacted; once writers have been quiet for half a
    /// second (appending under 1 MiB), so are the segments with two thirds
    /// of this share, one at a time while they stay quiet (cleaning put
    /// off to idle time: a busy store copies fewer records per record
    /// written). `None` turns background compaction off
    /// ([`crate::Db::compact`] still works).
    ///
    /// Default `Some(0.5)` (0.33 at rest). Under 50,000 uniform overwrites
    /// a second of 100,000 keys of 1 KiB, compaction appended 0.84 copies
    /// per write, against 1.75 with 0.33 busy or not, the files at 1.44
    /// times the logical bytes while the writes went on (1.22-1.30) and
    /// 1.13-1.17 three seconds after (docs/PERFORMANCE.md).
    pub compaction_garbage: Option<f64>,
    /// The space amplification that background compaction holds the
    /// store to: its files (segments and index checkpoint) over the
    /// logical bytes (keys and values), as
    /// [`crate::Stats::space_amplification`] reports it. The room this
    /// leaves for garbage is the bound times the logical bytes less the
    /// live record bytes (whose headers, 16 bytes a record and 24 with an
    /// expiry, use up part of it) and the checkpoint at its peak (the file
    /// and the next one, written beside it every 64 MiB appended: 8 bytes
    /// a key and a bit a slot of the index each, about 8.2 bytes a key),
    /// and at least 0.3 times the record bytes. Where the bound leaves
    /// less (at 1.5, keys and values of under about 190 bytes together),
    /// the store keeps that much room and reports above the
    /// bound: a 16-byte key and an 8-byte value make a record 1.67 times
    /// its logical bytes, and such a store is held near 1.3 times its
    /// record bytes and the checkpoint. At a bound of 1.3 every store is
    /// held so (a helper measured 1.32 at the end of bursts of 1 KiB
    /// values, 1.44 at most). With compression, records can take fewer
    /// bytes than their keys and values, and the room grows by the
    /// difference. The bound does not count the store's small files (its
    /// meta file, `NEWEST`, `RETIRED`, a compression dictionary). Of the
    /// room: past 85 %, compaction takes the segments with the most
    /// garbage whatever their share of it (at least 5 %); past 97 %, each
    /// write waits for it (up to 50 ms). For 16-byte keys and 1 KiB values,
    /// at the default of 1.5 those levels are about 1.43 and 1.49 times the
    /// logical bytes, counting the checkpoint twice; at 2.0, 1.85 and 1.97.
    /// Until 2026-12-06 the bound was on the segment files over the live
    /// record bytes, so the reported space amplification read higher (up
    /// to 1.53 at a bound of 1.5). Both levels count, beside the files, the
    /// live bytes of the segment compaction takes next (at most 16 MiB, or
    /// an eighth of the live bytes past 128 MiB live), which its pass
    /// copies before that segment's file goes, so that the copies stay
    /// under the bound too. Writers wait
    /// where the room under 97 % ends, counted
    /// from the files' size when compaction last looked, so they stop
    /// there however late it looks again; a compactor that finds nothing
    /// to take (the garbage is in the segment being written) lets them
    /// append 8 MiB more. Past the bound anyway: the last write before
    /// each wait (it is appended first), writers that outrun 50 ms waits,
    /// files kept for a live [`crate::Iter`] (not counted), and what
    /// writers append while [`crate::Db::backup`] holds compaction off
    /// (8 MiB at each check, so that they do not stall for the backup's
    /// length: a loop of backups let a 2 MiB store reach 62 to 353 MiB
    /// of files under 4 writers), and while
    /// compaction copies a segment
    /// large against the room, whose copies and file stand on disk
    /// together: a segment filled whole (up to `segment_bytes`) while
    /// background compaction was off. With it on, a bulk load is sealed
    /// every 8 MiB (or a sixteenth of the live bytes), and the first
    /// overwrites after loading 100 MiB put the files at about 1.51-1.54
    /// times the logical bytes at a bound of 1.5 (until 2026-12-06 a load
    /// filled whole segments, and the peaks were 2.2-2.3 times). Neither
    /// level acts before the files exceed the live bytes and the
    /// checkpoint by 16 MiB (the
    /// segment being written and one sealed): for stores of less than
    /// about 100 MiB of live records that margin, not the factor, bounds
    /// the space (2 MiB of live records under 4 writers on a 2-core
    /// machine peaked at 28 to 33 MiB of files and checkpoint, sampled
    /// every 10 ms). At least 1.3 (below it the segment being
    /// written, which cannot be compacted, and the pads use up the room);
    /// `f64::INFINITY` lets garbage grow as fast as writers make it (then
    /// only [`Options::compaction_garbage`] reclaims it, and writers never
    /// wait). No effect when background compaction is off.
    ///
    /// Default 1.5 (2.0 until updates in place made the update mixes fast
    /// enough at 1.5). A tighter bound costs write throughput under
    /// overwrites, since compaction must copy the live records of segments
    /// far from empty: greedy cleaning of uniformly overwritten data
    /// copies about u/(1-u) bytes per byte written when the segments it
    /// cleans are a share u live (Rosenblum and Ousterhout, LFS, 1992),
    /// about one record per record written at 1.5. Measured with the
    /// benchmark harness (8 threads, 100,000 keys of 1 KiB, one run each
    /// beside the peers; docs/PERFORMANCE.md, 2026-12-05), builds that
    /// differ only in this default: at 1.5, `overwrite` 368k operations per
    /// second, `ycsb-a` 612k and `ycsb-f` 565k (2.0x-2.1x sled, the fastest
    /// peer), the overwrite burst ending at 1.49 times the logical bytes;
    /// at 2.0, 453k, 758k and 664k, the burst ending at 1.88 (the bound
    /// then over record bytes). Over logical bytes, since 2026-12-06, it
    /// costs a few percent of those rates at 1 KiB values (within the
    /// spread of six alternated rounds), and about 35-40 % of the
    /// overwrites of 100-byte values (1,000,000 keys: 634k-687k a second,
    /// ending at 1.49-1.54, against 936k-1,119k ending at 1.71-1.76),
    /// whose headers and checkpoint take more of the room.
    /// Choose 2.0 when the rate of updates matters more than disk space.
    pub max_space_amplification: f64,
    /// How compaction stores the values of the records it copies (the
    /// cold records: those that outlived their segment; with
    /// [`Options::compress_cold_segments`], sealed segments too). Writes
    /// are never compressed on the writer's path, so reads of recent
    /// records never decompress. With zstd, a dictionary trained from the
    /// store's own values is adopted when it measures 15% better (small
    /// values that share structure, such as JSON documents). On values
    /// half random bytes and half a repeated pattern (the benchmark's
    /// default), 1 KiB is stored in about 580 bytes by LZ4 and 550 by zstd
    /// level 1, and a read of a compressed record spends about 0.08 µs
    /// (LZ4) or 0.3 µs (zstd) decompressing it (measured 2026-12-07).
    ///
    /// Default `Compression::Lz4`: under the space bound, smaller copies
    /// leave more room for garbage, so compaction runs less and copies
    /// fewer bytes. In the benchmark harness (2026-12-07, three alternated
    /// rounds against `Compression::None`) `overwrite` ran 1.45 times and
    /// `ycsb-a` and `ycsb-f` 1.7 times as fast, the files settled at 0.9
    /// of the logical bytes instead of 1.2, and gets of the compacted data
    /// afterwards cost the same CPU (`readrandom`) to 5 % more (`ycsb-c`);
    /// see `docs/PERFORMANCE.md`. Choose `Compression::None` for values
    /// that do not compress (each copy then spends about 1.1 µs a KiB
    /// finding that out, unless compaction is behind the writers), and
    /// `Compression::Zstd { level: 1 }` for a little more space saved, or
    /// a dictionary for small structured values, at about five times
    /// LZ4's CPU to compress and four times to decompress.
    pub compression: Compression,
    /// While writers are quiet (less than 1 MiB appended over half a
    /// second, and no compaction due), let the background thread rewrite
    /// one sealed segment a second whose rewrite (dropping records that
    /// are not their key's newest, compressing raw values) would shrink
    /// it by a quarter: values written once and never overwritten get compressed
    /// too (compaction compresses only what it copies). Off by default:
    /// reads of the rewritten records decompress and the rewriting takes
    /// CPU from readers (in the benchmark harness, on a freshly loaded
    /// store, resident `readrandom` went from 1.31x to 1.12x LMDB and
    /// `ycsb-c` from 1.40x to 1.04x, medians of 5 to 7 runs; see
    /// `docs/PERFORMANCE.md`). Worth it when the data is many times the
    /// memory and disk space matters more than read CPU. No effect when
    /// background compaction is off (`compaction_garbage(None)`): the
    /// same thread does both.
    pub compress_cold_segments: bool,
    /// When `true`, open an existing store for reading only. Gets,
    /// iteration, [`crate::Db::scan`], [`crate::Db::stats`] and
    /// [`crate::Db::backup`] work as on a writable handle; every write
    /// ([`crate::Db::insert`] and the others, [`crate::Db::apply_batch`],
    /// [`crate::Db::clear`], [`crate::Db::compact`]) fails with
    /// [`crate::Error::ReadOnly`], and [`crate::Db::sync`] has nothing to
    /// do. Nothing of the store changes: no file of it is created, written,
    /// cut or deleted (a torn tail the last crash left in the newest
    /// segment is read past, not cut, and [`crate::Stats::torn_bytes_cut`]
    /// counts it; an index checkpoint is read, never written; a store of an
    /// older format is not marked with this one), but for the empty `LOCK`
    /// file, made when a store has none (a backup) and the directory may be
    /// written, so that a writable open is kept out meanwhile. A backup
    /// hard-links the sealed segments where it can, which changes their
    /// files' link count and change time, not their bytes. Files are
    /// opened for reading only, so a read-only file system serves, and no
    /// background thread runs. The
    /// store's lock is taken shared: any number of read-only handles, in
    /// this process or others, may have the store open together, but not
    /// beside a writable one (the later open fails with
    /// [`crate::Error::Locked`], at once within a process, after 2 s across
    /// processes), so the store does not change
    /// while a read-only handle is open. A directory that holds no store
    /// fails with [`crate::Error::InvalidPath`] (none is created). Of the
    /// other options only `key_capacity`, `read_cache_bytes`,
    /// `map_cold_reads` and `max_open_files` apply (the hot tier, which holds nothing read-only,
    /// is 4 pages); all are still validated, as for a writable open. Default `false`.
    pub read_only: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            key_capacity: 1 << 16,
            hot_bytes: 256 << 20,
            read_cache_bytes: 32 << 20,
            map_cold_reads: true,
            max_open_files: None,
            sync_writes: false,
            flush_interval: Duration::from_millis(100),
            segment_bytes: 256 << 20,
            compaction_garbage: Some(0.5),
            max_space_amplification: 1.5,
            compression: Compression::Lz4,
            compress_cold_segments: false,
            read_only: false,
        }
    }
}

impl Options {
    /// Sets [`Options::key_capacity`] (default 65,536 keys).
    #[must_use]
    pub fn key_capacity(mut self, keys: usize) -> Self {
        self.key_capacity = keys;
        self
    }

    /// Sets [`Options::hot_bytes`] (default 256 MiB).
    #[must_use]
    pub fn hot_bytes(mut self, bytes: usize) -> Self {
        self.hot_bytes = bytes;
        self
    }

    /// Sets [`Options::map_cold_reads`] (default `true`).
    #[must_use]
    pub fn map_cold_reads(mut self, map: bool) -> Self {
        self.map_cold_reads = map;
        self
    }

    /// Sets [`Options::max_open_files`] to `files`: a bound of the store's
    /// own (default: a bound shared with the process's other stores, half
    /// the soft `RLIMIT_NOFILE`, at least 16).
    #[must_use]
    pub fn max_open_files(mut self, files: usize) -> Self {
        self.max_open_files = Some(files);
        self
    }

    /// Sets [`Options::read_cache_bytes`] (default 32 MiB; 0 turns the
    /// cache off).
    #[must_use]
    pub fn read_cache_bytes(mut self, bytes: usize) -> Self {
        self.read_cache_bytes = bytes;
        self
    }

    /// Sets [`Options::sync_writes`] (default `false`).
    #[must_use]
    pub fn sync_writes(mut self, on: bool) -> Self {
        self.sync_writes = on;
        self
    }

    /// Sets [`Options::flush_interval`] (default 100 ms).
    #[must_use]
    pub fn flush_interval(mut self, window: Duration) -> Self {
        self.flush_interval = window;
        self
    }

    /// Sets [`Options::compaction_garbage`] (default `Some(0.5)`).
    #[must_use]
    pub fn compaction_garbage(mut self, share: Option<f64>) -> Self {
        self.compaction_garbage = share;
        self
    }

    /// Sets [`Options::max_space_amplification`] (default 1.5).
    #[must_use]
    pub fn max_space_amplification(mut self, bound: f64) -> Self {
        self.max_space_amplification = bound;
        self
    }

    /// Sets [`Options::compression`] (default `Compression::Lz4`).
    #[must_use]
    pub fn compression(mut self, compression: Compression) -> Self {
        self.compression = compression;
        self
    }

    /// Sets [`Options::compress_cold_segments`] (default `false`).
    #[must_use]
    pub fn compress_cold_segments(mut self, on: bool) -> Self {
        self.compress_cold_segments = on;
        self
    }

    /// Sets [`Options::read_only`] (default `false`).
    #[must_use]
    pub fn read_only(mut self, on: bool) -> Self {
        self.read_only = on;
        self
    }

    /// Sets [`Options::segment_bytes`] (default 256 MiB).
    #[must_use]
    pub fn segment_bytes(mut self, bytes: u64) -> Self {
        self.segment_bytes = bytes;
        self
    }

    pub(crate) fn validate(&self) -> Result<()> {
        let bad = |msg: String| Err(Error::InvalidOptions(msg));
        if self.hot_bytes < 4 * crate::log::PAGE_BYTES {
            return bad(format!(
                "hot_bytes = {} is below the minimum of {} bytes (4 pages)",
                self.hot_bytes,
                4 * crate::log::PAGE_BYTES
            ));
        }
        if self.flush_interval < Duration::from_millis(1)
            || self.flush_interval > Duration::from_secs(1)
        {
            return bad(format!(
                "flush_interval = {:?} is outside 1 ms ..= 1 s",
                self.flush_interval
            ));
        }
        let seg = self.segment_bytes;
        if !seg.is_power_of_two() || seg < crate::log::PAGE_BYTES as u64 || seg > 1 << 32 {
            return bad(format!(
                "segment_bytes = {seg} is not a power of two between 1 MiB and 4 GiB"
            ));
        }
        if let Some(share) = self.compaction_garbage
            && !(share > 0.0 && share <= 1.0)
        {
            return bad(format!("compaction_garbage = {share} is outside (0, 1]"));
        }
        let bound = self.max_space_amplification;
        if bound.is_nan() || bound < 1.3 {
            return bad(format!(
                "max_space_amplification = {bound} is not at least 1.3"
            ));
        }
        if self.max_open_files == Some(0) {
            return bad("max_open_files = 0: the segment being written needs one".into());
        }
        if self.read_cache_bytes as u64 > 1 << 40 {
            return bad(format!(
                "read_cache_bytes = {} is above 2^40",
                self.read_cache_bytes
            ));
        }
        if let Compression::Zstd { level } = self.compression
            && !compression::LEVELS.contains(&level)
        {
            return bad(format!(
                "zstd compression level {level} is outside {}..={}",
                compression::LEVELS.start(),
                compression::LEVELS.end()
            ));
        }
        if self.key_capacity > 1 << 34 {
            return bad(format!(
                "key_capacity = {} is above 2^34",
                self.key_capacity
            ));
        }
        Ok(())
    }
}
