//! The files behind the log: one segment file per `segment_bytes` of log
//! address space, read and written by offset.
//!
//! A segment file is named by its segment number in decimal, zero-padded to
//! at least 12 digits (`{:012}.seg`; 14 digits at most), and starts
//! with a 64-byte header:
//!
//! | offset | size | field                                   |
//! |-------:|-----:|-----------------------------------------|
//! | 0      | 8    | magic `EMBERSEG`                        |
//! | 8      | 4    | format version                          |
//! | 12     | 4    | log2 of the segment size                |
//! | 16     | 8    | segment number                          |
//! | 24     | 8    | store id (from the store's meta file)   |
//! | 32     | 8    | length of the previous segment's file   |
//! | 40     | 8    | durable mark, first slot                |
//! | 48     | 8    | durable mark, second slot               |
//! | 56     | 4    | reserved, zero                          |
//! | 60     | 4    | CRC32C of bytes 0..60, the slots as zeros |
//!
//! The byte at file offset `o` of segment `s` holds log address
//! `s << segment_bits | o`. The previous segment's length (0 for the
//! first) is known when a segment is created, since the appender never
//! writes to a segment again once it moved on; recovery checks it, so a
//! sealed segment cut at a record boundary is detected.
//!
//! The durable mark (format version 3) does the same for the segment being
//! written, which no successor describes yet: a length of the file whose
//! bytes were all fdatasynced before the mark was written
//! ([`Segments::write_mark`]), so that recovery can tell damage in bytes
//! made durable (rot, or a file cut short: never cut off, since acknowledged
//! records follow) from a torn tail past them. Each slot is the length
//! (u32, little-endian) and the CRC32C of the segment number and that
//! length; the writer alternates slots, so that a torn write of one leaves
//! the other, and the mark is the larger length of the slots that check
//! (0 without one: headers of versions 1 and 2 hold zeros there).
//!
//! Gets read cold records through a read-only shared memory map of each
//! segment ([`Segments::with_mapped`]): a record already in the OS page
//! cache is then a copy, not a system call (a probe on this project's
//! machine read 1 KiB records 5x faster through a map than with `pread`;
//! docs/PERFORMANCE.md); so do a writer's look at a key's newest cold
//! record and the re-reads of keys by a growing index, in recovery too
//! (`log::fetch_cold`). Scans (recovery, compaction, checks), iteration and
//! value reads for `update` and the like use positioned reads
//! ([`Segments::read_at`]), so that scanning a segment does not map its
//! pages into the process. A map covers the segment's whole
//! address range but is read only below the bytes written to the file,
//! since touching a mapped page wholly past the end of a file raises
//! `SIGBUS`; the store never cuts an open segment file below the bytes
//! written while a mapped read may reach past the cut (only recovery cuts a
//! torn tail, lowering `written` first, on its one thread, after the
//! records below the cut, the only ones it re-reads, were replayed; the
//! cuts below give back only what was allocated ahead of the writes), and
//! it holds the directory's lock against other emberkv
//! processes. A map that cannot
//! be made (address space or the map count limit, `vm.max_map_count`)
//! leaves that segment to positioned reads.
//!
//! Writes allocate the active segment's file 1 MiB ahead of them
//! (`fallocate`; segments of 64 MiB or more only), so that most
//! fdatasyncs find the file's length unchanged: on this project's machine
//! (ext4) an fdatasync after a 1 KiB append took 136-178 µs when it grew
//! the file and 103-131 µs when it did not (the blocks still turn from
//! allocated to written, which the fdatasync records too). The allocated tail reads
//! as zeros, which is not a record: recovery cuts it from the newest
//! segment as it cuts a torn tail. A segment is cut to its records'
//! length, durably, before the segment after it is created (the next
//! header records that length, and recovery checks it), and a clean close
//! cuts the active one ([`Segments::trim`]). A store with `sync_writes`
//! instead has the flusher write zeros 4 MiB ahead of the writes, and
//! fdatasync them ([`Ahead::Zeros`]): over blocks already written, an
//! fdatasync of a group commit's 8 KiB took 109-127 µs, against
//! 210-275 µs over `fallocate`d ones and 174-208 µs appended (the 1 KiB
//! figures above are for one record, mostly rewriting the block the one
//! before wrote).

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use memmap2::{Advice, Mmap, MmapOptions};

use crate::descriptors::{self, Bound};
use crate::error::{Error, Result};
use crate::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use crate::sync::{ArcSwap, Mutex};

/// How the active segment's file is made ready ahead of its writes, for
/// segments of 64 MiB or more (the default is 256 MiB; for smaller ones
/// the room made ahead would be a large share of the segment, and nothing
/// is done).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ahead {
    /// Writes `fallocate` the file 1 MiB ahead of them: for stores whose
    /// fdatasyncs cover large batches (the flusher's), so that these
    /// seldom change the file's length.
    Allocate,
    /// The flusher keeps the file written with zeros, and fdatasynced,
    /// [`ZEROS_AHEAD`] bytes ahead of the writes ([`Segments::write_zeros_ahead`]):
    /// for stores that fdatasync every small group of writes
    /// (`sync_writes`), whose fdatasyncs then write data blocks alone.
    Zeros,
}

/// Bytes of zeros the flusher keeps written ahead of the writes of a
/// segment with [`Ahead::Zeros`] (4 MiB), topped up once 1 MiB of it is
/// used ([`ZEROS_AT_ONCE`]). The flusher wakes at each sealed page (1 MiB),
/// so writes seldom catch up with the zeros; when they do, they append as
/// without them.
pub(crate) const ZEROS_AHEAD: u64 = 4 << 20;

/// Bytes of zeros written at once (1 MiB), under the flush lock: a group
/// commit waits at most for one such write.
pub(crate) const ZEROS_AT_ONCE: u64 = 1 << 20;

/// Zeros for [`Segments::write_zeros_ahead`] to write from.
static ZEROS: [u8; 64 << 10] = [0; 64 << 10];

/// Bytes by which writes `fallocate` a segment's file ahead of them, and
/// bytes of zeros the flusher keeps written ahead of them, for `ahead`.
fn ahead_bytes(segment_size: u64, ahead: Ahead) -> (u64, u64) {
    match ahead {
        _ if segment_size < 64 << 20 => (0, 0),
        Ahead::Allocate => (1 << 20, 0),
        Ahead::Zeros => (0, ZEROS_AHEAD),
    }
}

/// Size of a segment file's header, in bytes.
pub(crate) const SEGMENT_HEADER_BYTES: u64 = 64;
/// Offset of the durable mark's first slot in the header; each slot is 8
/// bytes.
const MARK_AT: usize = 40;
const SEGMENT_MAGIC: &[u8; 8] = b"EMBERSEG";
pub(crate) const SEGMENT_SUFFIX: &str = ".seg";

/// What a segment's header records besides its identity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SegmentHeader {
    /// Length of the previous segment's file, in bytes (0 for the first).
    pub(crate) prev_len: u64,
    /// Bytes of this segment's file known to have been fdatasynced when
    /// its durable mark was last written (0 if never).
    pub(crate) durable_len: u64,
    /// Mark slots holding neither zeros nor a valid mark. Slots are
    /// written 8 bytes at a time, each whole, so no crash leaves one so:
    /// it is damage, which `check` reports (the mark then falls back to
    /// the other slot, or to 0).
    pub(crate) damaged_marks: usize,
}

/// The 8 bytes of a durable mark's slot recording `len`: the length and
/// the CRC32C of the segment number and the length.
pub(crate) fn mark_slot(seg: u64, len: u32) -> [u8; 8] {
    let mut covered = [0u8; 12];
    covered[..8].copy_from_slice(&seg.to_le_bytes());
    covered[8..].copy_from_slice(&len.to_le_bytes());
    let mut slot = [0u8; 8];
    slot[..4].copy_from_slice(&len.to_le_bytes());
    slot[4..].copy_from_slice(&crate::checksum::crc32c(&covered).to_le_bytes());
    slot
}

/// Whether the 64-byte segment header `bytes` has the magic and a
/// checksum that holds (its mark slots aside), whatever store or segment
/// it names: a header that fails [`Segments::check_header`] with this true
/// is another store's, or another segment's, not a damaged one.
pub(crate) fn header_checksum_ok(bytes: &[u8]) -> bool {
    let mut unmarked = [0u8; 60];
    unmarked.copy_from_slice(&bytes[..60]);
    unmarked[MARK_AT..MARK_AT + 16].fill(0);
    bytes[..8] == *SEGMENT_MAGIC
        && crate::checksum::crc32c(&unmarked).to_le_bytes() == bytes[60..64]
}

/// Writes a durable mark of `len` bytes to slot `slot` (0 or 1) of the
/// header of `file`, the file of segment `seg` (see
/// [`Segments::write_mark`]); a backup writes both slots of the copy of
/// its last segment, whose header it copied with a mark that may lie past
/// the bytes it copied.
pub(crate) fn write_mark_to(file: &File, seg: u64, len: u64, slot: usize) -> io::Result<()> {
    debug_assert!(slot < 2);
    let len = u32::try_from(len).unwrap_or(u32::MAX);
    file.write_all_at(&mark_slot(seg, len), (MARK_AT + 8 * slot) as u64)
}

/// One open segment: its file's descriptor while that is open, its map.
pub(crate) struct Segment {
    /// The file, while its descriptor is open: taken (closed) by the sweep
    /// that keeps the store (or the process's pool) within its bound on
    /// descriptors ([`OpenSegments::sweep`]), and opened again by the next use
    /// ([`Segments::file_of`]). Reads through the map need none.
    file: Mutex<Option<Arc<File>>>,
    /// A read-only map of the segment's whole address range, if one could
    /// be made.
    map: Option<Mmap>,
    /// Bytes of the file known to be written (its length when opened, then
    /// raised after each write, lowered by a cut): the map is read only
    /// below it. After recovery, the length of the segment's records.
    written: AtomicU64,
    /// The file's length: `written` plus what was allocated (or written
    /// with zeros) ahead of the writes. Changed only by the flushing writer (under the log's flush
    /// lock) and by cuts (the next segment's creation, `trim`,
    /// `truncate`).
    allocated: AtomicU64,
    /// Set while a cut of the file is not known to be durable (from just
    /// before its truncation until an fsync after it succeeds), so that a
    /// cut retried after a failed fsync syncs even though it finds the file
    /// already short.
    cut_unsynced: AtomicBool,
    /// Set at open and by each use of the file's descriptor, cleared by
    /// the sweep (CLOCK's reference bit): a descriptor used since the
    /// sweep last passed it stays open.
    referenced: AtomicBool,
    /// Set, under the file's slot lock, when the segment is retired: a
    /// reader still holding the segment then gets `NotFound` instead of
    /// opening the file again, which would put back a descriptor counted
    /// open for a segment no sweep can reach.
    retired: AtomicBool,
}

impl Segment {
    fn new(file: File, map_bytes: Option<u64>) -> Result<Segment> {
        let written = file.metadata()?.len();
        // SAFETY: the map is only ever read (by gets, point reads and
        // compaction's scans of sealed segments, `MappedSegment`), and
        // only below `written` bytes, which the file holds for as long as
        // it is open: the store shrinks an open segment's file only in
        // `cut`, which lowers `written` first; it cuts below the bytes
        // written only in `truncate`, in recovery, whose mapped reads
        // (re-reads of keys of records already replayed) all lie below the
        // cut, and otherwise only what was allocated ahead of them (the
        // module's docs say what lies outside the store's control).
        let map = map_bytes
            .and_then(|len| usize::try_from(len).ok())
            .and_then(|len| unsafe { MmapOptions::new().len(len).map(&file) }.ok());
        if let Some(map) = &map {
            // A get reads one record: no read-ahead around a page fault
            // (the positioned read it replaces reads only the record).
            let _ = map.advise(Advice::Random);
        }
        Ok(Segment {
            file: Mutex::new(Some(Arc::new(file))),
            map,
            written: AtomicU64::new(written),
            allocated: AtomicU64::new(written),
            cut_unsynced: AtomicBool::new(false),
            // Opened to be used: it stays open for one turn of the sweep.
            referenced: AtomicBool::new(true),
            retired: AtomicBool::new(false),
        })
    }

    /// Marks the descriptor used since the last sweep (a load alone when
    /// it already is, so that readers of one segment do not write its line
    /// over and over).
    fn mark_referenced(&self) {
        if !self.referenced.load(Ordering::Relaxed) {
            self.referenced.store(true, Ordering::Relaxed);
        }
    }

    /// Whether the segment's descriptor can be closed: its file holds its
    /// records and nothing past them (nothing allocated ahead, which only
    /// writes through this descriptor extend), and no cut of it waits to
    /// be made durable (its fsync goes through the descriptor).
    fn closable(&self) -> bool {
        !self.cut_unsynced.load(Ordering::Acquire)
            && self.allocated.load(Ordering::Relaxed) == self.written.load(Ordering::Acquire)
    }
}

/// A segment's file read through its map by a scan of the whole segment
/// (compaction's; see `recovery::Chunk`), instead of copied by pread into
/// a buffer: the kernel's copy out of the page cache was a quarter to a
/// third of compaction's CPU (docs/PERFORMANCE.md). It holds the segment
/// open, so a scan must let it go before the segment is retired.
pub(crate) struct MappedSegment {
    seg: u64,
    segment: Arc<Segment>,
}

impl MappedSegment {
    /// The segment's number.
    pub(crate) fn seg(&self) -> u64 {
        self.seg
    }

    /// The file's first `len` bytes; `len` at most what
    /// [`MappedSegment::load`] returned `true` for.
    pub(crate) fn bytes(&self, len: usize) -> &[u8] {
        &self.segment.map.as_ref().expect("mapped")[..len]
    }

    /// Faults the file's bytes `from..to` into the map at once
    /// (`MADV_POPULATE_READ`, Linux 5.14: one system call for the range
    /// where page faults would take one per 64 KiB, and the disk's
    /// errors come back as an error, where a mapped read of a page that
    /// cannot be read raises `SIGBUS`). Returns whether the range lies in
    /// the bytes written and was loaded; when not, the caller reads with
    /// pread, which reports why.
    pub(crate) fn load(&self, from: usize, to: usize) -> bool {
        let Some(map) = &self.segment.map else {
            return false;
        };
        let written = self.segment.written.load(Ordering::Acquire);
        from <= to
            && (to as u64) <= written
            && to <= map.len()
            && map
                .advise_range(Advice::PopulateRead, from, to - from)
                .is_ok()
    }
}

/// A segment's file as [`Segments::file_for_backup`] gives it.
pub(crate) enum SegmentFile {
    /// The store's own, shared.
    Store(Arc<File>),
    /// One the store does not hold.
    Own(File),
}

impl SegmentFile {
    /// The file (positioned reads only: the store's is shared).
    pub(crate) fn file(&self) -> &File {
        match self {
            SegmentFile::Store(f) => f,
            SegmentFile::Own(f) => f,
        }
    }
}

/// The open segments, by segment number.
type Table = BTreeMap<u64, Arc<Segment>>;

/// A store's open segments and the count of their open descriptors: what
/// a sweep of the descriptor bound works on (`crate::descriptors`), held
/// by the store and, weakly, by the process's pool when the store shares
/// its bound.
pub(crate) struct OpenSegments {
    /// Read without a lock by gets; replaced whole, under
    /// [`Segments::opening`], when a segment is opened, created or retired.
    table: ArcSwap<Table>,
    /// Segments whose descriptor is open (slots holding a file).
    files: AtomicUsize,
    /// The sweep's clock. Taken before any segment's file slot, never
    /// while one is held.
    clock: Mutex<Clock>,
    bound: Bound,
}

/// What the sweep goes round: the segments whose descriptor may be open,
/// so that a sweep costs steps in the descriptors open, not in the
/// segments (an attack helper measured a reopen in a store beside ten idle
/// ones of 100 segments each at 36 µs when each sweep walked every
/// segment of the idle stores, against 6 µs with the idle stores out of
/// the pool).
#[derive(Default)]
struct Clock {
    /// The segment number the hand looks at next.
    hand: u64,
    /// Segments given a descriptor since the sweep last found theirs
    /// closed: every segment whose slot holds a file, and for a moment
    /// segments whose file was just taken (a sweep or a retirement takes
    /// the file first; the sweep drops such entries as it meets them).
    with_files: BTreeSet<u64>,
}

impl OpenSegments {
    /// No segments yet, held to `bound` (and joined to the process's pool
    /// when it is [`Bound::Shared`]).
    fn new(bound: Bound) -> Arc<OpenSegments> {
        let open = Arc::new(OpenSegments {
            table: ArcSwap::from_pointee(Table::new()),
            files: AtomicUsize::new(0),
            clock: Mutex::new(Clock::default()),
            bound,
        });
        if bound == Bound::Shared {
            descriptors::join(&open);
        }
        open
    }

    /// Counts a descriptor opened for segment `seg`, and puts the segment
    /// in the sweep's round. Called with no file slot held.
    fn opened(&self, seg: u64) {
        self.count_opened();
        self.enter_round(seg);
    }

    /// Counts a descriptor opened: under the segment's slot lock when it
    /// goes into a slot others can already reach, so that a close, which
    /// takes it under that lock, is counted after it.
    fn count_opened(&self) {
        self.files.fetch_add(1, Ordering::Relaxed);
        if self.bound == Bound::Shared {
            descriptors::opened();
        }
    }

    /// Puts segment `seg` in the sweep's round. Called with no file slot
    /// held.
    fn enter_round(&self, seg: u64) {
        self.clock.lock().with_files.insert(seg);
    }

    /// Counts a descriptor closed.
    fn closed(&self) {
        self.files.fetch_sub(1, Ordering::Relaxed);
        if self.bound == Bound::Shared {
            descriptors::closed(1);
        }
    }

    /// Whether more descriptors are open than the bound allows (this
    /// store's, or the pool's).
    fn over(&self) -> bool {
        match self.bound {
            Bound::Own(most) => self.files.load(Ordering::Relaxed) > most,
            Bound::Shared => descriptors::over(),
        }
    }

    /// Takes segment `seg` out of the sweep's round (it was retired).
    /// Called with no file slot held.
    fn forget(&self, seg: u64) {
        self.clock.lock().with_files.remove(&seg);
    }

    /// Closes descriptors of these segments while [`OpenSegments::over`],
    /// by CLOCK (Corbató, 1968): the hand goes round the segments with a
    /// descriptor ([`Clock::with_files`]) in number order, clearing the
    /// reference bit of those whose descriptor was used since it last
    /// passed, and closing the first it finds unused; it passes over
    /// `opened` (just opened for its caller), the newest segment (the one
    /// written) and segments not [`Segment::closable`]. The segments stay in the table with their
    /// maps: gets read through those without a descriptor. Two turns at
    /// most: when every descriptor it may close was used in between, or
    /// none may be closed, more stay open until the next sweep. A reader
    /// that took a file before its close keeps the descriptor until it is
    /// done.
    pub(crate) fn sweep(&self, opened: Option<u64>) {
        if !self.over() {
            return;
        }
        let mut clock = self.clock.lock();
        let clock = &mut *clock;
        let table = self.table.load();
        let Some(&newest) = table.keys().next_back() else {
            return;
        };
        let mut steps = 2 * clock.with_files.len();
        while self.over() && steps > 0 {
            steps -= 1;
            let Some(&seg) = (clock.with_files.range(clock.hand..).next())
                .or_else(|| clock.with_files.iter().next())
            else {
                break;
            };
            clock.hand = seg + 1;
            let Some(segment) = table.get(&seg) else {
                // Retired: its descriptor went with it (a retirement
                // forgets it too, but a reader's reopen just before it may
                // have put it back in the round).
                clock.with_files.remove(&seg);
                continue;
            };
            if Some(seg) == opened || seg == newest || !segment.closable() {
                continue;
            }
            let mut slot = segment.file.lock();
            if slot.is_none() {
                drop(slot);
                clock.with_files.remove(&seg);
                continue;
            }
            if segment.referenced.swap(false, Ordering::Relaxed) {
                continue;
            }
            let closed = slot.take();
            drop(slot);
            clock.with_files.remove(&seg);
            self.closed();
            drop(closed);
        }
    }
}

impl Drop for OpenSegments {
    fn drop(&mut self) {
        if self.bound == Bound::Shared {
            descriptors::closed(self.files.load(Ordering::Relaxed));
        }
    }
}

/// The segment files of one store.
pub(crate) struct Segments {
    dir: PathBuf,
    segment_bits: u32,
    store_id: u64,
    open: Arc<OpenSegments>,
    opening: Mutex<()>,
    /// Descriptors opened again after the sweep closed them.
    reopened: AtomicU64,
    /// Whether files are opened for reading only ([`Segments::read_only`]).
    read_only: bool,
    /// Whether segments are mapped for [`Segments::with_mapped`].
    map_reads: bool,
    /// Bytes by which writes allocate files ahead of them (0: none).
    allocate_ahead: u64,
    /// Bytes of zeros the flusher keeps written ahead of the writes (0:
    /// none; see [`Ahead::Zeros`]).
    zeros_ahead: u64,
    /// Test hook: the segment whose fdatasyncs fail with `EIO`.
    #[cfg(test)]
    pub(crate) fail_sync_of: std::sync::atomic::AtomicU64,
    /// Test hook: the segment whose file's deletion fails with `EPERM`
    /// (as for an immutable file).
    #[cfg(test)]
    pub(crate) fail_unlink_of: std::sync::atomic::AtomicU64,
    /// Test hook: the error number [`Segments::start_writeback`] fails
    /// with (0: none).
    #[cfg(test)]
    pub(crate) fail_writeback_with: std::sync::atomic::AtomicI32,
    /// Test hook: writes reaching past this log address fail with
    /// `ENOSPC`, as on a full disk.
    #[cfg(test)]
    pub(crate) full_from: std::sync::atomic::AtomicU64,
    /// Test hook: the next write sends on the first channel, then waits
    /// (up to 60 s) for the second before it writes.
    #[cfg(test)]
    pub(crate) pause_next_write: Mutex<Option<WritePause>>,
}

/// A pause of [`Segments::write_at`]: it tells that it has begun, then
/// waits to be let go.
#[cfg(test)]
pub(crate) type WritePause = (std::sync::mpsc::Sender<()>, std::sync::mpsc::Receiver<()>);

impl Segments {
    /// The segments of the store in `dir`, with neither maps nor
    /// allocation ahead of writes (see [`Segments::for_store`]).
    pub(crate) fn new(dir: &Path, segment_bits: u32, store_id: u64) -> Segments {
        Segments {
            dir: dir.to_path_buf(),
            segment_bits,
            store_id,
            open: OpenSegments::new(Bound::Shared),
            opening: Mutex::new(()),
            reopened: AtomicU64::new(0),
            read_only: false,
            map_reads: false,
            allocate_ahead: 0,
            zeros_ahead: 0,
            #[cfg(test)]
            fail_sync_of: std::sync::atomic::AtomicU64::new(u64::MAX),
            #[cfg(test)]
            fail_unlink_of: std::sync::atomic::AtomicU64::new(u64::MAX),
            #[cfg(test)]
            fail_writeback_with: std::sync::atomic::AtomicI32::new(0),
            #[cfg(test)]
            full_from: std::sync::atomic::AtomicU64::new(u64::MAX),
            #[cfg(test)]
            pause_next_write: Mutex::new(None),
        }
    }

    /// The segments of a store that is only read (`check`, `salvage`): files
    /// are opened for reading alone, so that a read-only file system does
    /// not stop them, and a write would fail.
    pub(crate) fn read_only(dir: &Path, segment_bits: u32, store_id: u64) -> Segments {
        Segments {
            read_only: true,
            ..Segments::new(dir, segment_bits, store_id)
        }
    }

    /// These segments, keeping at most about `max_open` descriptors of
    /// their files open (at least 1; see `Options::max_open_files`), by a
    /// bound of their own instead of the process's shared one: past it,
    /// opening one more closes one not used since the sweep last passed
    /// it ([`OpenSegments::sweep`]). Called before any segment is opened.
    pub(crate) fn max_open(self, max_open: usize) -> Segments {
        debug_assert!(self.open.table.load().is_empty());
        Segments {
            open: OpenSegments::new(Bound::Own(max_open.max(1))),
            ..self
        }
    }

    /// These segments, mapped for gets when `map_reads` (a read-only
    /// [`crate::Db`]: its maps are read-only, as every store's are).
    pub(crate) fn mapping_reads(self, map_reads: bool) -> Segments {
        Segments { map_reads, ..self }
    }

    /// The segments of an open store: mapped for gets when `map_reads`,
    /// and made ready ahead of writes as `ahead` says.
    pub(crate) fn for_store(
        dir: &Path,
        segment_bits: u32,
        store_id: u64,
        map_reads: bool,
        ahead: Ahead,
    ) -> Segments {
        let (allocate_ahead, zeros_ahead) = ahead_bytes(1 << segment_bits, ahead);
        Segments {
            map_reads,
            allocate_ahead,
            zeros_ahead,
            ..Segments::new(dir, segment_bits, store_id)
        }
    }

    /// Whether the flusher keeps zeros written ahead of the writes
    /// ([`Ahead::Zeros`], on segments large enough).
    pub(crate) fn writes_zeros_ahead(&self) -> bool {
        self.zeros_ahead > 0
    }

    /// log2 of the segment size.
    pub(crate) fn segment_bits(&self) -> u32 {
        self.segment_bits
    }

    /// Size of a segment, in bytes.
    pub(crate) fn segment_size(&self) -> u64 {
        1 << self.segment_bits
    }

    /// The segment number holding log address `addr`.
    pub(crate) fn segment_of(&self, addr: u64) -> u64 {
        addr >> self.segment_bits
    }

    /// The log address of segment `seg`'s first byte.
    pub(crate) fn segment_start(&self, seg: u64) -> u64 {
        seg << self.segment_bits
    }

    fn offset_in_segment(&self, addr: u64) -> u64 {
        addr & ((1 << self.segment_bits) - 1)
    }

    /// The file name of segment `seg`.
    pub(crate) fn file_name(&self, seg: u64) -> String {
        format!("{seg:012}{SEGMENT_SUFFIX}")
    }

    /// The store's directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The store's id (from its meta file).
    pub(crate) fn store_id(&self) -> u64 {
        self.store_id
    }

    pub(crate) fn path(&self, seg: u64) -> PathBuf {
        self.dir.join(self.file_name(seg))
    }

    /// Segment numbers of the segment files in the directory, ascending.
    pub(crate) fn list(&self) -> Result<Vec<u64>> {
        let mut found = Vec::new();
        for entry in std::fs::read_dir(&self.dir)? {
            let name = entry?.file_name();
            let Some(name) = name.to_str() else { continue };
            if let Some(num) = name.strip_suffix(SEGMENT_SUFFIX)
                && num.len() >= 12
                && num.bytes().all(|b| b.is_ascii_digit())
                && let Ok(seg) = num.parse::<u64>()
            {
                if seg >= self.segment_of(u64::MAX) {
                    return Err(Error::corruption(
                        0,
                        format!("segment file {name} lies beyond the log address space"),
                    ));
                }
                found.push(seg);
            }
        }
        found.sort_unstable();
        Ok(found)
    }

    /// Opens an existing segment file for reading and writing.
    pub(crate) fn open(&self, seg: u64) -> Result<Arc<Segment>> {
        if let Some(s) = self.open.table.load().get(&seg) {
            return Ok(Arc::clone(s));
        }
        let _opening = self.opening.lock();
        if let Some(s) = self.open.table.load().get(&seg) {
            return Ok(Arc::clone(s));
        }
        let file = OpenOptions::new()
            .read(true)
            .write(!self.read_only)
            .open(self.path(seg))?;
        self.publish(seg, file)
    }

    /// Creates segment `seg` (or resets a file holding less than a header)
    /// with a fresh header recording `prev_len`, the previous segment's
    /// length, and makes the file and its directory entry durable.
    ///
    /// # Errors
    /// I/O errors; [`Error::Corruption`] when the file already holds
    /// records, or when the previous segment is open and `prev_len` is
    /// shorter than a segment header (a length the caller never learned:
    /// cutting the file to it would wipe the segment's records, as a
    /// recovery path did until `2f51e74`).
    pub(crate) fn create(&self, seg: u64, prev_len: u64) -> Result<Arc<Segment>> {
        let _opening = self.opening.lock();
        if let Some(prev) = seg
            .checked_sub(1)
            .and_then(|p| self.open.table.load().get(&p).cloned())
        {
            if prev_len < SEGMENT_HEADER_BYTES {
                return Err(Error::corruption(
                    self.segment_start(seg),
                    format!(
                        "segment to be created would record {prev_len} bytes for the segment \
                         before it, less than that segment's header: the segment before \
                         is left as it is"
                    ),
                ));
            }
            // The new header records `prev_len`: the previous segment's
            // file must be that long, durably, before it exists.
            let file = self.file_of(seg - 1, &prev)?;
            cut(&prev, &file, prev_len, false)?;
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(self.path(seg))?;
        if file.metadata()?.len() > SEGMENT_HEADER_BYTES {
            return Err(Error::corruption(
                self.segment_start(seg),
                "segment file to be created already holds records",
            ));
        }
        let written = (|| {
            file.set_len(0)?;
            file.write_all_at(&self.header(seg, prev_len, crate::FORMAT_VERSION), 0)?;
            file.sync_all()?;
            sync_dir(&self.dir)
        })();
        if let Err(e) = written {
            // Leave no file without a sound header for a retry to open as
            // it is (a full disk can fail the header's write).
            let _ = std::fs::remove_file(self.path(seg));
            return Err(e);
        }
        // Only now: `NEWEST` never names a segment whose header a crash
        // could still lose. (On failure the file is left with its sound
        // header and no records, which a retry creates again.)
        crate::manifest::store_newest(&self.dir, self.store_id, seg)?;
        self.publish(seg, file)
    }

    /// Adds `file` as segment `seg` to the open table (the caller holds
    /// `opening`), closing other segments' descriptors past the bound
    /// ([`Segments::close_past_bound`]).
    fn publish(&self, seg: u64, file: File) -> Result<Arc<Segment>> {
        let map_bytes = self.map_reads.then(|| self.segment_size());
        let segment = Arc::new(Segment::new(file, map_bytes)?);
        let mut table = Table::clone(&self.open.table.load());
        table.insert(seg, Arc::clone(&segment));
        self.open.table.store(Arc::new(table));
        self.open.opened(seg);
        self.close_past_bound(seg);
        Ok(segment)
    }

    /// Segment `seg`'s file (`segment`'s), opening its descriptor again
    /// when the sweep closed it, and marking it used.
    ///
    /// # Errors
    /// The open's: `NotFound` once the segment is retired (for callers,
    /// as for a segment not open), `EMFILE` when out of descriptors.
    fn file_of(&self, seg: u64, segment: &Segment) -> io::Result<Arc<File>> {
        segment.mark_referenced();
        let mut slot = segment.file.lock();
        if let Some(file) = &*slot {
            return Ok(Arc::clone(file));
        }
        if segment.retired.load(Ordering::Relaxed) {
            return Err(io::ErrorKind::NotFound.into());
        }
        let file = Arc::new(
            OpenOptions::new()
                .read(true)
                .write(!self.read_only)
                .open(self.path(seg))?,
        );
        *slot = Some(Arc::clone(&file));
        self.open.count_opened();
        drop(slot);
        self.open.enter_round(seg);
        self.reopened.fetch_add(1, Ordering::Relaxed);
        self.close_past_bound(seg);
        Ok(file)
    }

    /// Closes descriptors past the bound after `opened` was opened. Under
    /// the process's shared bound, the other sharing stores are swept
    /// first ([`descriptors::sweep_others`]): a store read only through its
    /// maps opens no descriptor, so it would otherwise keep what it holds,
    /// and the store that opens them would take its own back at each open.
    /// Then this store's own, sparing `opened`.
    fn close_past_bound(&self, opened: u64) {
        if !self.open.over() {
            return;
        }
        if self.open.bound == Bound::Shared {
            descriptors::sweep_others(&self.open);
        }
        self.open.sweep(Some(opened));
    }

    /// Opens segment `seg`, creating it with `prev_len()` as the previous
    /// segment's length if it does not exist yet.
    pub(crate) fn open_or_create(
        &self,
        seg: u64,
        prev_len: impl FnOnce() -> u64,
    ) -> Result<Arc<Segment>> {
        match self.open(seg) {
            Ok(f) => Ok(f),
            Err(Error::Io(e)) if e.kind() == io::ErrorKind::NotFound => {
                self.create(seg, prev_len())
            }
            Err(e) => Err(e),
        }
    }

    fn header(&self, seg: u64, prev_len: u64, version: u32) -> [u8; SEGMENT_HEADER_BYTES as usize] {
        let mut h = [0u8; SEGMENT_HEADER_BYTES as usize];
        h[0..8].copy_from_slice(SEGMENT_MAGIC);
        h[8..12].copy_from_slice(&version.to_le_bytes());
        h[12..16].copy_from_slice(&self.segment_bits.to_le_bytes());
        h[16..24].copy_from_slice(&seg.to_le_bytes());
        h[24..32].copy_from_slice(&self.store_id.to_le_bytes());
        h[32..40].copy_from_slice(&prev_len.to_le_bytes());
        let crc = crate::checksum::crc32c(&h[..60]);
        h[60..64].copy_from_slice(&crc.to_le_bytes());
        h
    }

    /// Checks the header of segment `seg` read from `bytes` and returns
    /// what it records.
    ///
    /// # Errors
    /// [`Error::Corruption`] naming the segment's first address when the
    /// header does not belong to this segment of this store.
    pub(crate) fn check_header(&self, seg: u64, bytes: &[u8]) -> Result<SegmentHeader> {
        let at = self.segment_start(seg);
        if bytes.len() < SEGMENT_HEADER_BYTES as usize {
            return Err(Error::corruption(at, "segment header truncated"));
        }
        let prev_len = u64::from_le_bytes(bytes[32..40].try_into().expect("8 bytes"));
        let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
        let readable = (crate::OLDEST_READABLE_VERSION..=crate::FORMAT_VERSION).contains(&version);
        let mut unmarked = [0u8; SEGMENT_HEADER_BYTES as usize];
        unmarked.copy_from_slice(&bytes[..SEGMENT_HEADER_BYTES as usize]);
        unmarked[MARK_AT..MARK_AT + 16].fill(0);
        if !readable || unmarked != self.header(seg, prev_len, version) {
            if header_checksum_ok(bytes) && !readable {
                return Err(Error::IncompatibleFormat {
                    found: version,
                    expected: crate::FORMAT_VERSION,
                });
            }
            return Err(Error::corruption(
                at,
                "segment header is damaged or belongs to another store",
            ));
        }
        let slots = (0..2).map(|slot| {
            let at = MARK_AT + 8 * slot;
            let len = u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
            let valid = bytes[at..at + 8] == mark_slot(seg, len);
            let empty = bytes[at..at + 8] == [0; 8];
            (valid.then_some(u64::from(len)), !valid && !empty)
        });
        let (durable_len, damaged_marks) = slots.fold((0, 0), |(len, damaged), (valid, bad)| {
            (len.max(valid.unwrap_or(0)), damaged + usize::from(bad))
        });
        Ok(SegmentHeader {
            prev_len,
            durable_len,
            damaged_marks,
        })
    }

    /// Records in segment `seg`'s header, in slot `slot` (0 or 1), that its
    /// first `len` bytes are durable: they must have been fdatasynced
    /// before this call (the mark itself is durable after the next
    /// fdatasync of the segment; until then the header holds the older
    /// mark, which is lower). Lengths past 4 GiB - 1 (the end of the
    /// largest segment) are recorded as that.
    ///
    /// # Errors
    /// I/O errors of the write.
    pub(crate) fn write_mark(&self, seg: u64, len: u64, slot: usize) -> Result<()> {
        let segment = self.open(seg)?;
        let file = self.file_of(seg, &segment)?;
        Ok(write_mark_to(&file, seg, len, slot)?)
    }

    /// Reads into `buf` from log address `addr`; returns the bytes read,
    /// fewer than `buf.len()` only at the end of the segment file.
    pub(crate) fn read_at(&self, addr: u64, buf: &mut [u8]) -> Result<usize> {
        let seg = self.segment_of(addr);
        let segment = self.open(seg)?;
        let file = self.file_of(seg, &segment)?;
        let mut off = self.offset_in_segment(addr);
        let mut done = 0;
        while done < buf.len() {
            match file.read_at(&mut buf[done..], off) {
                Ok(0) => break,
                Ok(n) => {
                    done += n;
                    off += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(done)
    }

    /// Calls `f` with the bytes of segment file from log address `addr` to
    /// the end of what was written, read through the segment's memory map,
    /// opening the segment when maps are on and it is not open (never
    /// opened yet, or closed past the bound); `None` (without calling `f`)
    /// when `addr` lies past that end, or its segment cannot be opened
    /// (retired by compaction) or is not mapped: the caller then reads with
    /// [`Segments::read_at`], which reports why.
    pub(crate) fn with_mapped<T>(&self, addr: u64, f: impl FnOnce(&[u8]) -> T) -> Option<T> {
        let table = self.open.table.load();
        if let Some(bytes) = self.mapped_in(&table, addr) {
            return Some(f(bytes));
        }
        let seg = self.segment_of(addr);
        if !self.map_reads || table.contains_key(&seg) {
            return None;
        }
        drop(table);
        let segment = self.open(seg).ok()?;
        Some(f(self.mapped_from(&segment, addr)?))
    }

    /// The bytes of the segment of `table` holding `addr`, from `addr` to
    /// the end of what was written, through its map; `None` when it is not
    /// in `table` or as for [`Segments::with_mapped`].
    fn mapped_in<'t>(&self, table: &'t Table, addr: u64) -> Option<&'t [u8]> {
        self.mapped_from(table.get(&self.segment_of(addr))?, addr)
    }

    /// The bytes of `segment`, the one holding `addr`, from `addr` to the
    /// end of what was written, through its map.
    fn mapped_from<'s>(&self, segment: &'s Segment, addr: u64) -> Option<&'s [u8]> {
        let map = segment.map.as_ref()?;
        let written = segment.written.load(Ordering::Acquire);
        let start = usize::try_from(self.offset_in_segment(addr)).ok()?;
        let end = usize::try_from(written).ok()?.min(map.len());
        map.get(start..end)
    }

    /// Segment `seg`, to be read through its map ([`MappedSegment`]);
    /// `None` when it has none (maps are off, or the map could not be made)
    /// or cannot be opened (the caller's pread reports why).
    pub(crate) fn mapped_segment(&self, seg: u64) -> Option<MappedSegment> {
        let segment = self.open(seg).ok()?;
        segment.map.as_ref()?;
        Some(MappedSegment { seg, segment })
    }

    /// Reads the first byte at each of `addrs` through the segment maps in
    /// one tight loop of independent loads, so that their cache misses
    /// overlap instead of following one another; for callers about to read
    /// the records there one by one. The table of segments is loaded once:
    /// an `arc-swap` load per address (as [`Segments::with_mapped`] does) is
    /// a locked instruction, which would wait for the miss before it. A
    /// hint: addresses that cannot be read through a map (past the bytes
    /// written, in no open segment) are skipped.
    pub(crate) fn touch_mapped(&self, addrs: impl IntoIterator<Item = u64>) {
        let table = self.open.table.load();
        let mut touched = 0u8;
        for addr in addrs {
            if let Some(&byte) = self.mapped_in(&table, addr).and_then(<[u8]>::first) {
                touched ^= byte;
            }
        }
        std::hint::black_box(touched);
    }

    /// Cuts what was allocated ahead of the writes off segment `seg`'s
    /// file, durably; for a clean close. Nothing to do for a segment not
    /// open.
    pub(crate) fn trim(&self, seg: u64) -> Result<()> {
        let _opening = self.opening.lock();
        match self.open.table.load().get(&seg) {
            Some(segment) => {
                let file = self.file_of(seg, segment)?;
                cut(
                    segment,
                    &file,
                    segment.written.load(Ordering::Acquire),
                    false,
                )
            }
            None => Ok(()),
        }
    }

    /// Segments whose file's descriptor is open now, and descriptors
    /// opened again since these segments were opened.
    pub(crate) fn open_files(&self) -> (usize, u64) {
        (
            self.open.files.load(Ordering::Relaxed),
            self.reopened.load(Ordering::Relaxed),
        )
    }

    /// Bytes written to segment `seg`'s file (its length, less what was
    /// allocated ahead of the writes).
    pub(crate) fn written_len(&self, seg: u64) -> Result<u64> {
        Ok(self.open(seg)?.written.load(Ordering::Acquire))
    }

    /// Bytes of the open segments' files allocated (or written with zeros)
    /// ahead of their writes, in all: the active segment's, and those of
    /// the segments before it that the flusher has not yet written out to
    /// their end (each keeps its allocation until its successor's file is
    /// created). 0 for segments opened only to be read.
    pub(crate) fn allocated_ahead(&self) -> u64 {
        self.open
            .table
            .load()
            .values()
            .map(|s| {
                let written = s.written.load(Ordering::Acquire);
                s.allocated.load(Ordering::Relaxed).saturating_sub(written)
            })
            .sum()
    }

    /// Writes `bytes` at log address `addr` (the segment must exist).
    pub(crate) fn write_at(&self, addr: u64, bytes: &[u8]) -> Result<()> {
        #[cfg(test)]
        if let Some((begun, go)) = self.pause_next_write.lock().take() {
            let _ = begun.send(());
            let _ = go.recv_timeout(std::time::Duration::from_secs(60));
        }
        #[cfg(test)]
        if addr + bytes.len() as u64 > self.full_from.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(io::Error::from_raw_os_error(28).into());
        }
        let seg = self.segment_of(addr);
        let segment = self.open(seg)?;
        let file = self.file_of(seg, &segment)?;
        let off = self.offset_in_segment(addr);
        let end = off + bytes.len() as u64;
        if self.allocate_ahead > 0 && end > segment.allocated.load(Ordering::Relaxed) {
            let to = end.saturating_add(self.allocate_ahead);
            allocate(&segment, &file, to.min(self.segment_size()));
        }
        file.write_all_at(bytes, off)?;
        segment.written.fetch_max(end, Ordering::Release);
        segment.allocated.fetch_max(end, Ordering::Relaxed);
        Ok(())
    }

    /// Writes zeros to segment `seg`'s file, from its length on, for
    /// [`Ahead::Zeros`]: [`ZEROS_AT_ONCE`] bytes (fewer at the segment's
    /// end), when at least that many of the [`ZEROS_AHEAD`] bytes it keeps
    /// past the bytes written are missing. Returns whether it wrote any.
    /// Nothing to do for a segment not open.
    ///
    /// The caller (the flusher, through `Log::write_zeros_ahead`) holds the
    /// log's flush lock, so that no record is written and no segment
    /// created at the same time, and names the segment the records go to:
    /// zeros go only past the bytes written, so they never cover a record,
    /// and only into the newest open segment, whose successor's creation
    /// cuts them off (a segment that has a successor was cut to its
    /// records for good: nothing for it).
    ///
    /// No zeros go at or past byte `end` of the segment (where the
    /// appender will have sealed it; `u64::MAX`: its end).
    ///
    /// A failed write (a full disk, say) is no error: it writes no more
    /// zeros, and the records' writes that follow append as without them
    /// and report a real lack of room.
    pub(crate) fn write_zeros_ahead(&self, seg: u64, end: u64) -> bool {
        if self.zeros_ahead == 0 {
            return false;
        }
        let table = self.open.table.load();
        // Only into the newest segment: creating a successor cut this one
        // to its records for good.
        if table.range(seg + 1..).next().is_some() {
            return false;
        }
        let Some(segment) = table.get(&seg).map(Arc::clone) else {
            return false;
        };
        drop(table);
        let Ok(file) = self.file_of(seg, &segment) else {
            return false;
        };
        let written = segment.written.load(Ordering::Acquire);
        let from = segment.allocated.load(Ordering::Relaxed).max(written);
        let wanted = written + self.zeros_ahead;
        if wanted < from + ZEROS_AT_ONCE {
            return false;
        }
        let to = (from + ZEROS_AT_ONCE).min(self.segment_size()).min(end);
        if to <= from {
            return false;
        }
        let mut at = from;
        while at < to {
            let len = ZEROS.len().min((to - at) as usize);
            if file.write_all_at(&ZEROS[..len], at).is_err() {
                // A failed write may have written part of the range.
                let len = file.metadata().map_or(at, |m| m.len());
                segment.allocated.store(len.max(from), Ordering::Relaxed);
                return false;
            }
            at += len as u64;
        }
        segment.allocated.store(to, Ordering::Relaxed);
        at > from
    }

    /// fdatasyncs segment `seg`'s file through a handle of its own, after
    /// [`Segments::write_zeros_ahead`] and outside the flush lock: the
    /// zeros' blocks are then allocated, written and recorded, and a group
    /// commit's fdatasync that later writes records over them changes no
    /// metadata (on this project's ext4, 104-127 µs for 1-8 KiB against
    /// 147-275 µs appended or over `fallocate`d blocks; docs/PERFORMANCE.md).
    /// A handle of its own, and not a clone of the writers' descriptor, so
    /// that a write-back error this fdatasync meets (on a record's page as
    /// well as a zero's) is reported to the writers' next fdatasync too:
    /// Linux (4.13 and later) reports a write-back error once to each open
    /// file description.
    ///
    /// # Errors
    /// The fdatasync's error. A file that cannot be opened (gone, or out of
    /// file descriptors) is no error: the zeros stay unsynced, and the next
    /// group commit's fdatasync writes them.
    pub(crate) fn sync_zeros(&self, seg: u64) -> Result<()> {
        #[cfg(test)]
        if self.fail_sync_of.load(std::sync::atomic::Ordering::Relaxed) == seg {
            return Err(io::Error::from_raw_os_error(5).into());
        }
        match OpenOptions::new().write(true).open(self.path(seg)) {
            Ok(file) => Ok(file.sync_data()?),
            Err(_) => Ok(()),
        }
    }

    /// Starts writing the bytes at log addresses `from..to` of one
    /// segment (`from` is raised to the segment's first byte) from the page
    /// cache to the disk, and returns without waiting for the writes:
    /// `sync_file_range(2)` with `SYNC_FILE_RANGE_WRITE` alone, as
    /// RocksDB's `bytes_per_sync` does. The fdatasync that later makes the
    /// range durable then waits for little more than the last page. Writes
    /// that fail once started set the file's write-back error, which that
    /// fdatasync reports (`SYNC_FILE_RANGE_WAIT_AFTER` would take the
    /// error for this open file and is not used); a failure to start them
    /// is this call's error alone, and the file system may have dropped
    /// the pages it could not place (ext4 gives up on delayed allocations
    /// that fail), so the caller must treat it as a failed fdatasync.
    /// Nothing is done for an empty range, a segment not open, or one whose
    /// descriptor is closed.
    ///
    /// # Errors
    /// The call's error, unchanged (`EINVAL` or `ENOSYS` where the file or
    /// the kernel does not support it; see [`writeback_unsupported`]).
    pub(crate) fn start_writeback(&self, from: u64, to: u64) -> io::Result<()> {
        let seg = self.segment_of(to.saturating_sub(1));
        let from = from.max(self.segment_start(seg));
        // A length of 0 would mean "to the end of the file".
        if to <= from {
            return Ok(());
        }
        let Some(segment) = self.open.table.load().get(&seg).cloned() else {
            return Ok(());
        };
        // A descriptor the sweep closed is that of a segment made durable
        // before its successor was created: nothing to start, and no
        // descriptor to open (a failure here would count as a failed
        // fdatasync).
        let Some(file) = segment.file.lock().clone() else {
            return Ok(());
        };
        #[cfg(test)]
        match self
            .fail_writeback_with
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            0 => {}
            errno => return Err(io::Error::from_raw_os_error(errno)),
        }
        let (Ok(offset), Ok(len)) = (
            libc::off64_t::try_from(self.offset_in_segment(from)),
            libc::off64_t::try_from(to - from),
        ) else {
            return Ok(());
        };
        // SAFETY: `sync_file_range` on a file descriptor that `file` keeps
        // open (the `Arc` is held across the call); it touches no memory
        // of this process.
        let rc = unsafe {
            libc::sync_file_range(file.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE)
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// fdatasyncs segment `seg`.
    pub(crate) fn sync(&self, seg: u64) -> Result<()> {
        #[cfg(test)]
        self.injected_sync_failure(seg)?;
        let segment = self.open(seg)?;
        self.file_of(seg, &segment)?.sync_data()?;
        Ok(())
    }

    /// Makes segment `seg`, sealed at `len` bytes, durable for the next
    /// segment's creation: cuts the room allocated ahead of its records
    /// off its file and fsyncs it, records and length in one sync, where
    /// [`Segments::sync`] and then the cut of [`Segments::create`] took two
    /// (the cut then finds nothing to do).
    ///
    /// # Errors
    /// I/O errors; after a failed one the caller must take the records for
    /// lost, as after a failed [`Segments::sync`].
    pub(crate) fn sync_sealed(&self, seg: u64, len: u64) -> Result<()> {
        #[cfg(test)]
        self.injected_sync_failure(seg)?;
        let segment = self.open(seg)?;
        let file = self.file_of(seg, &segment)?;
        let _opening = self.opening.lock();
        cut(&segment, &file, len, true)
    }

    /// Test hook: `EIO` for a sync of segment `seg` when it is
    /// `fail_sync_of`.
    #[cfg(test)]
    fn injected_sync_failure(&self, seg: u64) -> Result<()> {
        if self.fail_sync_of.load(std::sync::atomic::Ordering::Relaxed) == seg {
            return Err(io::Error::from_raw_os_error(5).into());
        }
        Ok(())
    }

    /// Length of segment `seg`'s file, in bytes (through its name when its
    /// descriptor is closed: no descriptor is opened for it).
    pub(crate) fn file_len(&self, seg: u64) -> Result<u64> {
        let segment = self.open(seg)?;
        let file = segment.file.lock().clone();
        Ok(match file {
            Some(file) => file.metadata()?.len(),
            None => fs::metadata(self.path(seg))?.len(),
        })
    }

    /// Segment `seg`'s file for a backup to copy with positioned reads,
    /// with the length of its records and of the file: the store's own
    /// open file (no new descriptor), or, for a segment the store has not
    /// opened or whose descriptor it closed, a read-only file of the
    /// caller's that the store does not keep (so a backup needs about one
    /// descriptor per segment, store and backup together, as the store
    /// would with every segment open; two when the store closes a
    /// descriptor the backup holds and then opens it again).
    /// A file outlives its names: compaction may retire the segment while
    /// the backup reads it.
    ///
    /// # Errors
    /// I/O errors of the open or `fstat` (`EMFILE` when out of
    /// descriptors).
    pub(crate) fn file_for_backup(&self, seg: u64) -> io::Result<(SegmentFile, u64, u64)> {
        if let Some(s) = self.open.table.load().get(&seg) {
            let written = s.written.load(Ordering::Acquire);
            // Its descriptor if open; else one of the caller's (below),
            // which the store does not count or keep.
            if let Some(file) = s.file.lock().clone() {
                let len = file.metadata()?.len();
                return Ok((SegmentFile::Store(file), written, len));
            }
        }
        // As `Segment::new` would take it: the file's length is its
        // records'.
        let file = File::open(self.path(seg))?;
        let len = file.metadata()?.len();
        Ok((SegmentFile::Own(file), len, len))
    }

    /// Gives segment `seg`'s file a copy of its own when the file has other
    /// names (hard links: a backup's linked segments, or a store copied
    /// with `cp -al`), so that the writes an open makes to its newest
    /// segment (records, marks, a torn tail's cut) cannot change another
    /// store's file: the bytes are copied to `<name>.tmp`, fsynced and
    /// renamed over the name, then the directory is fsynced (a crash
    /// leaves the shared file or the copy, each whole). Returns whether it
    /// copied. For a segment not yet opened by this store.
    ///
    /// # Errors
    /// I/O errors (no space for the copy, say); the file is then left
    /// shared and untouched.
    pub(crate) fn unshare(&self, seg: u64) -> Result<bool> {
        use std::os::unix::fs::MetadataExt;
        debug_assert!(!self.open.table.load().contains_key(&seg));
        let path = self.path(seg);
        if fs::metadata(&path)?.nlink() <= 1 {
            return Ok(false);
        }
        let tmp = self.dir.join(format!("{}.tmp", self.file_name(seg)));
        fs::copy(&path, &tmp)?;
        File::open(&tmp)?.sync_all()?;
        fs::rename(&tmp, &path)?;
        sync_dir(&self.dir)?;
        Ok(true)
    }

    /// Forgets segment `seg` and deletes its file. Readers that already
    /// hold its handle finish their reads; later ones get `NotFound`.
    ///
    /// The deletion is not made durable (no directory fsync): the caller
    /// has recorded the segment retired first (`RETIRED`), and recovery
    /// deletes a retired segment's file that a crash left behind. Until
    /// 2026-12-06 every retirement fsynced the directory after the unlink,
    /// one more wait for the disk per segment compacted.
    pub(crate) fn retire(&self, seg: u64) -> Result<()> {
        // Held until the file is gone: an `open` of this segment between
        // the two (a get falling back to `pread` with an old address, the
        // maintenance thread's `file_len`) would publish the file again,
        // and keep its descriptor, its map and its deleted blocks until
        // the store closes.
        let _opening = self.opening.lock();
        let mut table = Table::clone(&self.open.table.load());
        let segment = table.remove(&seg);
        self.open.table.store(Arc::new(table));
        // The descriptor is given up before the deletion, so that it is
        // counted closed and out of the sweep's round even when the
        // deletion fails (until 2026-12-07 a failed one returned first, and
        // the store counted the descriptor open until it closed).
        let taken = segment.map(|segment| {
            // Taken under its slot's lock, so that a sweep holding an older
            // table cannot count it closed a second time, and marked
            // retired there, so that no reader opens it again.
            let file = {
                let mut slot = segment.file.lock();
                segment.retired.store(true, Ordering::Relaxed);
                slot.take()
            };
            if file.is_some() {
                self.open.closed();
            }
            (segment, file)
        });
        self.open.forget(seg);
        let unlinked = match self.remove_file(seg) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e.into()),
        };
        if let Some(taken) = taken {
            close_in_background(taken);
        }
        unlinked
    }

    /// Deletes segment `seg`'s file.
    fn remove_file(&self, seg: u64) -> io::Result<()> {
        #[cfg(test)]
        if self
            .fail_unlink_of
            .load(std::sync::atomic::Ordering::Relaxed)
            == seg
        {
            return Err(io::Error::from_raw_os_error(1));
        }
        std::fs::remove_file(self.path(seg))
    }

    /// Cuts segment `seg` at log address `addr` (dropping a torn tail) and
    /// makes the cut durable. `addr` may be the segment's end (not masked
    /// to offset 0 of the next segment).
    pub(crate) fn truncate(&self, seg: u64, addr: u64) -> Result<()> {
        debug_assert!(self.segment_of(addr) == seg || addr == self.segment_start(seg + 1));
        let segment = self.open(seg)?;
        let file = self.file_of(seg, &segment)?;
        let _opening = self.opening.lock();
        cut(&segment, &file, addr - self.segment_start(seg), false)
    }
}

/// Drops a retired segment's handle (its descriptor and map) on a thread
/// of its own. Its file was unlinked while still open, so the unlink only
/// removed the name; the kernel frees the file's cached pages when the
/// last descriptor closes, which took about 8 ms for a 33 MB segment here
/// (docs/PERFORMANCE.md): compaction, which retires one segment after
/// another, need not wait for it. Readers that still hold the handle keep
/// it until they are done, as before. When no thread can be started, the
/// handle is dropped here, as it is under `--cfg shuttle` (the handle's
/// atomics are shuttle's there, which a thread outside the schedule must
/// not touch).
fn close_in_background(segment: (Arc<Segment>, Option<Arc<File>>)) {
    #[cfg(not(shuttle))]
    // A failed spawn drops the closure, and with it the handle, at once.
    let _ = std::thread::Builder::new()
        .name("emberkv-close".into())
        .spawn(move || drop(segment));
    #[cfg(shuttle)]
    drop(segment);
}

/// Whether `e`, from [`Segments::start_writeback`], says only that the
/// file or the kernel cannot start write-backs (`EINVAL`, `ENOSYS`,
/// `EOPNOTSUPP`, `ESPIPE`): nothing was started, and the next fdatasync
/// writes the range itself.
pub(crate) fn writeback_unsupported(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP | libc::ESPIPE)
    )
}

/// Allocates `segment`'s `file` from its length up to `to` bytes. A failure
/// (a full disk, a file system without `fallocate`) is no error: the write
/// that follows extends the file itself, and reports a real lack of room.
fn allocate(segment: &Segment, file: &File, to: u64) {
    let from = segment.allocated.load(Ordering::Relaxed);
    let (Ok(offset), Ok(len)) = (
        libc::off_t::try_from(from),
        libc::off_t::try_from(to - from),
    ) else {
        return;
    };
    // SAFETY: `fallocate` on a file descriptor that `file` keeps open; it
    // touches no memory of this process.
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, offset, len) };
    let allocated = if rc == 0 {
        to
    } else {
        // A failed call may have allocated part of the range.
        file.metadata().map_or(from, |m| m.len().max(from))
    };
    segment.allocated.store(allocated, Ordering::Relaxed);
}

/// Cuts `segment`'s `file` to `len` bytes when it is longer, and makes the
/// cut durable (also one an earlier call made but failed to sync), with an
/// fsync that, with `sync` set, runs even when there is nothing to cut. The
/// caller holds `Segments::opening`, so cuts never overlap (two could
/// otherwise clear each other's `cut_unsynced`).
fn cut(segment: &Segment, file: &File, len: u64, sync: bool) -> Result<()> {
    let file_len = file.metadata()?.len();
    if file_len > len {
        // Lowered first: a get reads the map only below it.
        segment.written.fetch_min(len, Ordering::Release);
        segment.cut_unsynced.store(true, Ordering::Release);
        file.set_len(len)?;
    }
    if sync || segment.cut_unsynced.load(Ordering::Acquire) {
        sync_cut(file)?;
        segment.cut_unsynced.store(false, Ordering::Release);
    }
    segment
        .allocated
        .store(file_len.min(len), Ordering::Relaxed);
    Ok(())
}

/// fsyncs a cut file. Under test, counts the fsyncs that succeed, and
/// fails once after `tests::fail_next_cut_sync`, as a full disk's or a
/// failed write-back's fsync would.
fn sync_cut(file: &File) -> io::Result<()> {
    #[cfg(test)]
    if tests::FAIL_NEXT_CUT_SYNC.take() {
        return Err(io::ErrorKind::StorageFull.into());
    }
    file.sync_all()?;
    #[cfg(test)]
    tests::CUT_SYNCS.set(tests::CUT_SYNCS.get() + 1);
    Ok(())
}

/// Replaces file `name` in `dir` with `bytes`, durably and atomically:
/// written to `tmp` (a name in the same directory), fsynced, renamed over
/// `name`, and the directory fsynced. A crash leaves the old file or the
/// new one, never a mix.
///
/// # Errors
/// I/O errors.
pub(crate) fn replace_durably(dir: &Path, tmp: &str, name: &str, bytes: &[u8]) -> Result<()> {
    let tmp = dir.join(tmp);
    let mut f = File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    fs::rename(&tmp, dir.join(name))?;
    sync_dir(dir)
}

/// fsyncs a directory, making the creation or renaming of its entries
/// durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)?.sync_all()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    const BITS: u32 = 20;

    thread_local! {
        /// Makes this thread's next [`sync_cut`] fail.
        pub(super) static FAIL_NEXT_CUT_SYNC: Cell<bool> = const { Cell::new(false) };
        /// This thread's successful [`sync_cut`]s.
        pub(super) static CUT_SYNCS: Cell<u32> = const { Cell::new(0) };
    }

    /// Makes this thread's next fsync of a cut fail.
    fn fail_next_cut_sync() {
        FAIL_NEXT_CUT_SYNC.set(true);
    }

    /// Mapped segments of `BITS` bits in `dir`, with segment 0 created.
    fn first_segment(dir: &Path) -> Segments {
        let segments = Segments::for_store(dir, BITS, 7, true, Ahead::Allocate);
        segments.create(0, 0).unwrap();
        segments
    }

    fn mapped(segments: &Segments, addr: u64) -> Option<Vec<u8>> {
        segments.with_mapped(addr, <[u8]>::to_vec)
    }

    /// Segments of [`BIG`] bits in `dir` (allocated 1 MiB ahead of the
    /// writes), with segment 0 created and 1,000 bytes written after its
    /// header.
    fn big_first_segment(dir: &Path) -> Segments {
        let segments = Segments::for_store(dir, BIG, 7, true, Ahead::Allocate);
        segments.create(0, 0).unwrap();
        segments.write_at(SEGMENT_HEADER_BYTES, &[5; 1000]).unwrap();
        segments
    }

    /// 64 MiB segments, whose files are allocated ahead of the writes.
    const BIG: u32 = 26;

    #[test]
    fn a_cut_whose_fsync_failed_is_synced_when_retried() {
        let dir = tempfile::tempdir().unwrap();
        let segments = big_first_segment(dir.path());
        let at = SEGMENT_HEADER_BYTES;
        // Creating segment 1 cuts segment 0 to the length its header will
        // record; the cut's fsync fails, so segment 1 is not created.
        fail_next_cut_sync();
        assert!(segments.create(1, at + 1000).is_err());
        assert!(!segments.path(1).exists());
        assert_eq!(
            std::fs::metadata(segments.path(0)).unwrap().len(),
            at + 1000
        );
        // The retry finds the file already cut, and still syncs it before
        // the new header records the length.
        let synced = CUT_SYNCS.get();
        segments.create(1, at + 1000).unwrap();
        assert_eq!(CUT_SYNCS.get(), synced + 1);
        // As does `trim` at a close.
        segments.write_at((1 << BIG) + at, &[7; 10]).unwrap();
        fail_next_cut_sync();
        assert!(segments.trim(1).is_err());
        segments.trim(1).unwrap();
        assert_eq!(CUT_SYNCS.get(), synced + 2);
        // A cut that is durable is not synced again.
        segments.trim(1).unwrap();
        segments.trim(0).unwrap();
        assert_eq!(CUT_SYNCS.get(), synced + 2);
    }

    /// A seal's segment change fsyncs the segment it leaves once: its
    /// records and its cut together, and the next segment's creation
    /// finds nothing left to cut or sync in it.
    #[test]
    fn a_sealed_segment_is_cut_and_synced_in_one_fsync() {
        let dir = tempfile::tempdir().unwrap();
        let segments = big_first_segment(dir.path());
        let at = SEGMENT_HEADER_BYTES;
        assert!(std::fs::metadata(segments.path(0)).unwrap().len() > at + 1000);
        let synced = CUT_SYNCS.get();
        segments.sync_sealed(0, at + 1000).unwrap();
        assert_eq!(CUT_SYNCS.get(), synced + 1);
        assert_eq!(
            std::fs::metadata(segments.path(0)).unwrap().len(),
            at + 1000
        );
        segments.create(1, at + 1000).unwrap();
        assert_eq!(CUT_SYNCS.get(), synced + 1, "the creation synced it again");
        // With nothing to cut, the records are synced all the same.
        segments.write_at((1 << BIG) + at, &[7; 10]).unwrap();
        segments.trim(1).unwrap();
        let synced = CUT_SYNCS.get();
        segments.sync_sealed(1, at + 10).unwrap();
        assert_eq!(CUT_SYNCS.get(), synced + 1);
    }

    /// A previous segment's length shorter than its header is refused,
    /// and the file keeps its records (a recovery path passed 0 here and
    /// cut a 1 MiB segment to nothing, fixed in `2f51e74`).
    #[test]
    fn creating_a_segment_never_cuts_the_one_before_below_its_header() {
        let dir = tempfile::tempdir().unwrap();
        let segments = first_segment(dir.path());
        let at = SEGMENT_HEADER_BYTES;
        segments.write_at(at, &[5; 1000]).unwrap();
        for short in [0, 1, at - 1] {
            let Err(err) = segments.create(1, short) else {
                panic!("created with the previous segment's length {short}");
            };
            assert!(matches!(err, Error::Corruption { .. }), "{err}");
            assert!(!segments.path(1).exists());
            assert!(std::fs::metadata(segments.path(0)).unwrap().len() >= at + 1000);
        }
        segments.create(1, at + 1000).unwrap();
        assert_eq!(
            std::fs::metadata(segments.path(0)).unwrap().len(),
            at + 1000
        );
    }

    /// Touching records ahead through the maps takes any address without
    /// a panic: ones past the bytes written, in no open segment, or at the
    /// end of the address space are skipped, and the bytes stay as they
    /// were.
    #[test]
    fn touching_ahead_skips_what_no_map_holds() {
        let dir = tempfile::tempdir().unwrap();
        let segments = first_segment(dir.path());
        let at = SEGMENT_HEADER_BYTES;
        segments.write_at(at, &[9; 100]).unwrap();
        segments.touch_mapped([
            0,
            at,
            at + 99,
            at + 100,
            at + 5000,
            (1 << BITS) - 1,
            1 << BITS,
            7 << BITS,
            u64::MAX,
        ]);
        assert_eq!(mapped(&segments, at + 99), Some(vec![9]));
    }

    #[test]
    fn a_map_is_read_only_below_the_bytes_written() {
        let dir = tempfile::tempdir().unwrap();
        let segments = first_segment(dir.path());
        let at = SEGMENT_HEADER_BYTES;
        // Nothing past the header yet: the page holding it exists, but
        // the map answers only for written bytes.
        assert_eq!(mapped(&segments, at), Some(Vec::new()));
        assert_eq!(mapped(&segments, 1 << 16), None);
        segments.write_at(at, b"record one").unwrap();
        assert_eq!(mapped(&segments, at).unwrap(), b"record one");
        // A write a page further on extends what the map answers with.
        segments.write_at(at + 8192, b"two").unwrap();
        let after = mapped(&segments, at).unwrap();
        assert_eq!((after.len(), &after[8192..]), (8195, &b"two"[..]));
        // The next segment's addresses are another map's.
        segments.create(1, at + 8195).unwrap();
        let next = (1 << BITS) + SEGMENT_HEADER_BYTES;
        assert_eq!(mapped(&segments, next), Some(Vec::new()));
        assert_eq!(mapped(&segments, 1 << BITS).unwrap()[..8], *b"EMBERSEG");
    }

    #[test]
    fn a_reopened_segment_is_mapped_up_to_its_length_and_a_cut_lowers_it() {
        let dir = tempfile::tempdir().unwrap();
        let segments = first_segment(dir.path());
        segments.write_at(SEGMENT_HEADER_BYTES, &[9; 100]).unwrap();
        drop(segments);
        let segments = Segments::for_store(dir.path(), BITS, 7, true, Ahead::Allocate);
        // Not open yet: the mapped read opens it.
        assert!(open_segments(&segments).is_empty());
        assert_eq!(mapped(&segments, SEGMENT_HEADER_BYTES).unwrap(), [9; 100]);
        assert_eq!(open_segments(&segments), [0]);
        segments.truncate(0, SEGMENT_HEADER_BYTES + 40).unwrap();
        assert_eq!(mapped(&segments, SEGMENT_HEADER_BYTES).unwrap(), [9; 40]);
    }

    /// Dirty pages among bytes `off..off + len` of `file`
    /// (`cachestat(2)`, Linux 6.5), or why they cannot be counted.
    fn dirty_pages(file: &File, off: u64, len: u64) -> std::result::Result<u64, String> {
        /// `struct cachestat_range` of the kernel's UAPI.
        #[repr(C)]
        struct Range {
            off: u64,
            len: u64,
        }
        /// `struct cachestat`: cached, dirty, under write-back, evicted,
        /// recently evicted pages.
        #[repr(C)]
        #[derive(Default)]
        struct Stat([u64; 5]);
        /// The same on every architecture (asm-generic/unistd.h).
        const SYS_CACHESTAT: libc::c_long = 451;
        let range = Range { off, len };
        let mut stat = Stat::default();
        // SAFETY: the kernel reads `range` and writes `stat`, both alive
        // across the call and laid out as its UAPI structs; the descriptor
        // is `file`'s, open across the call.
        let rc = unsafe {
            libc::syscall(
                SYS_CACHESTAT,
                file.as_raw_fd(),
                &range as *const Range,
                &mut stat as *mut Stat,
                0,
            )
        };
        if rc != 0 {
            return Err(format!("cachestat: {}", io::Error::last_os_error()));
        }
        Ok(stat.0[1])
    }

    /// Regression (review of `e3584bd`): a started write-back cleans the
    /// pages of its range and only those (a length of 0 would have cleaned
    /// the whole file), a range reaching below its segment is cut at the
    /// segment's first byte, an empty range or one of a segment not open
    /// asks nothing, and the bytes and lengths the store sees do not
    /// change. Where dirty pages cannot be counted (`cachestat` missing, or
    /// a file system that keeps none, such as tmpfs) the page counts are
    /// skipped with a note.
    #[test]
    fn a_started_write_back_cleans_its_range_alone() {
        const MIB: u64 = 1 << 20;
        let dir = tempfile::tempdir().unwrap();
        let segments = big_first_segment(dir.path());
        let at = SEGMENT_HEADER_BYTES;
        let one = 1 << BIG;
        segments.create(1, at + 1000).unwrap();
        segments
            .write_at(one + at, &vec![6; 2 * MIB as usize])
            .unwrap();
        let file = File::open(segments.path(1)).unwrap();
        let dirty_before = dirty_pages(&file, 0, 2 * MIB);
        segments.start_writeback(one - 4096, one + MIB).unwrap();
        segments.start_writeback(one + MIB, one + MIB).unwrap();
        segments.start_writeback(2 * one, 2 * one + 4096).unwrap();
        match dirty_before {
            Ok(0) => println!("skipped page counts: the file system keeps no dirty pages"),
            Err(why) => println!("skipped page counts: {why}"),
            Ok(_) => {
                // Waits for the writes started, through a descriptor of its
                // own: a write-back error it takes is not the store's.
                // SAFETY: `sync_file_range` on `file`'s open descriptor; it
                // touches no memory of this process.
                let rc = unsafe {
                    libc::sync_file_range(
                        file.as_raw_fd(),
                        0,
                        MIB as libc::off64_t,
                        libc::SYNC_FILE_RANGE_WAIT_BEFORE,
                    )
                };
                assert_eq!(rc, 0, "{}", io::Error::last_os_error());
                assert_eq!(dirty_pages(&file, 0, MIB), Ok(0));
                assert!(dirty_pages(&file, MIB, MIB).unwrap() > 0);
            }
        }
        assert!(!segments.path(2).exists());
        assert_eq!(segments.list().unwrap(), [0, 1]);
        assert_eq!(segments.written_len(1).unwrap(), at + 2 * MIB);
        assert_eq!(mapped(&segments, at).unwrap(), [5; 1000]);
        assert_eq!(
            mapped(&segments, one + at).unwrap(),
            vec![6; 2 * MIB as usize]
        );
    }

    /// Regression (review of `bf5ca61`, 2026-12-06): `Db::stats` took off
    /// the allocations of the segment at the log's tail and the one before
    /// it only, so while the flusher wrote out a segment further behind
    /// (the appender seals every 8 MiB, so the hot tier can hold several),
    /// that segment's allocation was counted as space on disk.
    #[test]
    fn the_space_allocated_ahead_is_summed_over_every_open_segment() {
        let dir = tempfile::tempdir().unwrap();
        let segments = big_first_segment(dir.path());
        let at = SEGMENT_HEADER_BYTES;
        // Segment 1's file is not created yet: segment 2's creation leaves
        // segment 0 as it is.
        segments.create(2, at).unwrap();
        segments.write_at((2 << BIG) + at, &[6; 10]).unwrap();
        assert_eq!(segments.allocated_ahead(), 2 << 20);
        segments.trim(0).unwrap();
        assert_eq!(segments.allocated_ahead(), 1 << 20);
    }

    #[test]
    fn writes_allocate_ahead_and_creating_the_next_segment_cuts_the_previous_back() {
        let dir = tempfile::tempdir().unwrap();
        let segments = big_first_segment(dir.path());
        let len = |seg| std::fs::metadata(segments.path(seg)).unwrap().len();
        let at = SEGMENT_HEADER_BYTES;
        assert_eq!(len(0), at + 1000 + (1 << 20));
        assert_eq!(segments.written_len(0).unwrap(), at + 1000);
        assert_eq!(segments.allocated_ahead(), 1 << 20);
        // The map answers for the records only, not the zeros after them.
        assert_eq!(mapped(&segments, at).unwrap(), [5; 1000]);
        // A write inside the allocation leaves the file's length alone.
        segments.write_at(at + 1000, &[6; 1000]).unwrap();
        assert_eq!(len(0), at + 1000 + (1 << 20));
        // The next segment's header records segment 0's length: segment 0
        // is cut to it first.
        segments.create(1, at + 2000).unwrap();
        assert_eq!(len(0), at + 2000);
        assert_eq!(segments.allocated_ahead(), 0);
        assert_eq!(mapped(&segments, at).unwrap().len(), 2000);
        // A clean close gives the active segment's allocation back.
        segments.write_at((1 << BIG) + at, &[7; 10]).unwrap();
        assert!(len(1) > at + 10);
        segments.trim(1).unwrap();
        assert_eq!(len(1), at + 10);
        // Without allocation ahead (as `check` and the fuzzer open
        // segments), a write grows the file by itself.
        let plain = Segments::new(dir.path(), BIG, 7);
        plain.create(2, at + 10).unwrap();
        plain.write_at((2 << BIG) + at, &[8; 10]).unwrap();
        assert_eq!(len(2), at + 10);
    }

    /// Zeros stop where the appender will seal the segment: past it, the
    /// next segment's creation cut them off again (with a seal every 8
    /// MiB, 3-4 MiB of zeros written and synced for each, by a review's
    /// count).
    #[test]
    fn zeros_stop_where_the_segment_will_be_sealed() {
        let dir = tempfile::tempdir().unwrap();
        let segments = Segments::for_store(dir.path(), 26, 7, true, Ahead::Zeros);
        let len = || std::fs::metadata(segments.path(0)).unwrap().len();
        segments.create(0, 0).unwrap();
        let records_end = SEGMENT_HEADER_BYTES + 1000;
        segments.write_at(SEGMENT_HEADER_BYTES, &[5; 1000]).unwrap();
        let end = records_end + 3000;
        assert!(segments.write_zeros_ahead(0, end));
        assert_eq!(len(), end);
        assert!(!segments.write_zeros_ahead(0, end));
        assert_eq!(len(), end);
    }

    #[test]
    fn zeros_are_written_ahead_of_the_writes_and_never_over_them() {
        // 64 MiB segments: zeros 4 MiB ahead.
        let dir = tempfile::tempdir().unwrap();
        let segments = Segments::for_store(dir.path(), BIG, 7, true, Ahead::Zeros);
        let file = |seg| std::fs::read(segments.path(seg)).unwrap();
        // Tops up as the flusher does: a megabyte at a time.
        let top_up = |seg| {
            let mut wrote = false;
            while segments.write_zeros_ahead(seg, u64::MAX) {
                wrote = true;
            }
            segments.sync_zeros(seg).unwrap();
            wrote
        };
        let at = SEGMENT_HEADER_BYTES;
        // Nothing for a segment not open.
        assert!(!segments.write_zeros_ahead(0, u64::MAX));
        segments.create(0, 0).unwrap();
        // Records' writes allocate nothing ahead by themselves.
        segments.write_at(at, &[5; 1000]).unwrap();
        assert_eq!(file(0).len() as u64, at + 1000);
        assert!(segments.write_zeros_ahead(0, u64::MAX));
        assert_eq!(file(0).len() as u64, at + 1000 + ZEROS_AT_ONCE);
        assert!(top_up(0));
        let bytes = file(0);
        assert_eq!(bytes.len() as u64, at + 1000 + ZEROS_AHEAD);
        assert_eq!(bytes[at as usize..][..1000], [5; 1000]);
        assert!(bytes[(at + 1000) as usize..].iter().all(|&b| b == 0));
        assert_eq!(segments.written_len(0).unwrap(), at + 1000);
        assert_eq!(segments.allocated_ahead(), ZEROS_AHEAD);
        assert_eq!(mapped(&segments, at).unwrap(), [5; 1000]);
        // Less than a megabyte used: nothing to top up.
        segments.write_at(at + 1000, &[6; 1000]).unwrap();
        assert!(!top_up(0));
        // A record written over the zeros and past them (1.5 MiB, then
        // 3 MiB more) keeps its bytes; the zeros are topped up past it.
        let big = vec![7; 3 << 19];
        segments.write_at(at + 2000, &big).unwrap();
        assert!(top_up(0));
        let past = at + 2000 + big.len() as u64;
        segments.write_at(past, &vec![8; 3 << 20]).unwrap();
        let written = past + (3 << 20);
        assert!(top_up(0));
        let bytes = file(0);
        // Topped up a megabyte at a time: 3 to 4 MiB of zeros past it.
        let ahead = bytes.len() as u64 - written;
        assert!(
            ahead > ZEROS_AHEAD - ZEROS_AT_ONCE && ahead <= ZEROS_AHEAD,
            "{ahead}"
        );
        assert_eq!(bytes[at as usize..][..1000], [5; 1000]);
        assert_eq!(bytes[(at + 1000) as usize..][..1000], [6; 1000]);
        assert_eq!(bytes[(at + 2000) as usize..past as usize], big[..]);
        assert!(
            bytes[past as usize..written as usize]
                .iter()
                .all(|&b| b == 8)
        );
        assert!(bytes[written as usize..].iter().all(|&b| b == 0));
        // Never past the segment's end.
        segments.write_at((1 << BIG) - (2 << 20), &[9; 10]).unwrap();
        assert!(top_up(0));
        assert_eq!(file(0).len() as u64, 1 << BIG);
        // The next segment's creation cuts the zeros off, as it cuts an
        // allocation, for good: no zeros go to a segment with a successor
        // (regression, torture seed 9705 of `tests/crash.rs`: the flusher
        // named the tail's segment before it took the flush lock, a
        // write-out created the successor meanwhile, and the zeros went
        // after the sealed segment's records, where recovery refuses them).
        let end = (1 << BIG) - (2 << 20) + 10;
        segments.create(1, end).unwrap();
        assert_eq!(file(0).len() as u64, end);
        assert!(!segments.write_zeros_ahead(0, u64::MAX));
        assert_eq!(file(0).len() as u64, end);
        // A store that allocates ahead writes no zeros.
        let allocating = Segments::for_store(dir.path(), BIG, 7, true, Ahead::Allocate);
        allocating.write_at((1 << BIG) + at, &[1; 10]).unwrap();
        assert!(!allocating.write_zeros_ahead(1, u64::MAX));
    }

    #[test]
    fn a_retired_or_unmapped_segment_leaves_reads_to_positioned_reads() {
        let dir = tempfile::tempdir().unwrap();
        let segments = first_segment(dir.path());
        segments.write_at(SEGMENT_HEADER_BYTES, b"gone").unwrap();
        segments.retire(0).unwrap();
        assert_eq!(mapped(&segments, SEGMENT_HEADER_BYTES), None);
        let err = segments
            .read_at(SEGMENT_HEADER_BYTES, &mut [0; 4])
            .unwrap_err();
        assert!(err.is_missing_file(), "{err}");

        let unmapped = Segments::for_store(dir.path(), BITS, 7, false, Ahead::Allocate);
        unmapped.create(1, 0).unwrap();
        let at = (1 << BITS) + SEGMENT_HEADER_BYTES;
        unmapped.write_at(at, b"kept").unwrap();
        assert_eq!(mapped(&unmapped, at), None);
        let mut buf = [0; 4];
        assert_eq!(unmapped.read_at(at, &mut buf).unwrap(), 4);
        assert_eq!(&buf, b"kept");
    }

    #[test]
    fn a_handle_held_across_retirement_still_reads_and_the_name_goes_at_once() {
        use std::os::unix::fs::FileExt;
        let dir = tempfile::tempdir().unwrap();
        let segments = first_segment(dir.path());
        segments.write_at(SEGMENT_HEADER_BYTES, b"held").unwrap();
        let held = segments.open(0).unwrap();
        let file = segments.file_of(0, &held).unwrap();
        segments.retire(0).unwrap();
        assert!(!segments.path(0).exists());
        assert!(segments.list().unwrap().is_empty());
        // A file taken before, and the map, still read; the segment's
        // descriptor went with the retirement, and cannot be opened again.
        let mut buf = [0; 4];
        file.read_exact_at(&mut buf, SEGMENT_HEADER_BYTES).unwrap();
        assert_eq!(&buf, b"held");
        let map = held.map.as_ref().expect("mapped");
        let at = SEGMENT_HEADER_BYTES as usize;
        assert_eq!(&map[at..at + 4], b"held");
        let gone = segments.file_of(0, &held).unwrap_err();
        assert_eq!(gone.kind(), io::ErrorKind::NotFound);
        assert_eq!(segments.open_files().0, 0);
    }

    /// Segment files of `dir` this process has open: `(descriptors, maps)`.
    fn open_in(dir: &Path) -> (usize, usize) {
        let dir = dir.to_str().unwrap();
        let descriptors = std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
            .filter(|target| target.starts_with(dir))
            .count();
        let maps = std::fs::read_to_string("/proc/self/maps")
            .unwrap()
            .lines()
            .filter(|line| line.contains(dir))
            .count();
        (descriptors, maps)
    }

    /// Writes `seg`'s number after its header and creates the next segment
    /// (which cuts this one to its records, durably).
    fn write_and_move_on(segments: &Segments, seg: u64) {
        let start = segments.segment_start(seg);
        segments
            .write_at(start + SEGMENT_HEADER_BYTES, &seg.to_le_bytes())
            .unwrap();
        segments.create(seg + 1, SEGMENT_HEADER_BYTES + 8).unwrap();
    }

    /// Mapped segments in `dir` with a bound of `max_open` descriptors:
    /// segments 0 to 3 written and sealed, 4 the newest.
    fn four_sealed(dir: &Path, max_open: usize) -> Segments {
        let segments = Segments::for_store(dir, BITS, 7, true, Ahead::Allocate).max_open(max_open);
        segments.create(0, 0).unwrap();
        for seg in 0..4 {
            write_and_move_on(&segments, seg);
        }
        segments
    }

    fn open_segments(segments: &Segments) -> Vec<u64> {
        segments.open.table.load().keys().copied().collect()
    }

    /// The segments the sweep goes round.
    fn in_round(segments: &Segments) -> Vec<u64> {
        let clock = segments.open.clock.lock();
        clock.with_files.iter().copied().collect()
    }

    /// Segments whose descriptor is open.
    fn with_files(segments: &Segments) -> Vec<u64> {
        let table = segments.open.table.load();
        table
            .iter()
            .filter(|(_, s)| s.file.lock().is_some())
            .map(|(&seg, _)| seg)
            .collect()
    }

    #[test]
    fn past_the_bound_descriptors_not_used_since_the_last_sweep_close_first() {
        let dir = tempfile::tempdir().unwrap();
        let segments = Segments::for_store(dir.path(), BITS, 7, true, Ahead::Allocate).max_open(3);
        segments.create(0, 0).unwrap();
        write_and_move_on(&segments, 0);
        write_and_move_on(&segments, 1);
        assert_eq!(with_files(&segments), [0, 1, 2]);
        // Each was used since its open: the first turn clears their bits,
        // the second closes the first it meets; the newest never closes.
        write_and_move_on(&segments, 2);
        assert_eq!(with_files(&segments), [1, 2, 3]);
        assert_eq!(segments.open_files().0, 3);
        // Every segment stays open, with its map.
        assert_eq!(open_segments(&segments), [0, 1, 2, 3]);
        assert_eq!(open_in(dir.path()), (3, 4));
        // Segment 1's descriptor is used, 2's is not: reading 0 by pread
        // opens its descriptor again and closes 2's.
        let mut buf = [0; 8];
        let at = |seg: u64| (seg << BITS) + SEGMENT_HEADER_BYTES;
        assert_eq!(segments.read_at(at(1), &mut buf).unwrap(), 8);
        assert_eq!(buf, 1u64.to_le_bytes());
        assert_eq!(segments.open_files().1, 0);
        assert_eq!(segments.read_at(at(0), &mut buf).unwrap(), 8);
        assert_eq!(buf, 0u64.to_le_bytes());
        assert_eq!(with_files(&segments), [0, 1, 3]);
        assert_eq!(segments.open_files(), (3, 1));
        // Closed means closed: no descriptor left behind.
        assert_eq!(open_in(dir.path()), (3, 4));
        // Reads through the map need no descriptor.
        assert_eq!(mapped(&segments, at(2)).unwrap(), 2u64.to_le_bytes());
        assert_eq!(with_files(&segments), [0, 1, 3]);
        assert_eq!(segments.written_len(2).unwrap(), SEGMENT_HEADER_BYTES + 8);
        assert_eq!(segments.file_len(2).unwrap(), SEGMENT_HEADER_BYTES + 8);
        // Nor does a write-back hint for a segment already durable.
        segments.start_writeback(at(2), at(2) + 8).unwrap();
        assert_eq!(with_files(&segments), [0, 1, 3]);
    }

    #[test]
    fn descriptors_closed_past_the_bound_open_again_for_every_use() {
        let dir = tempfile::tempdir().unwrap();
        for map_reads in [true, false] {
            let segments =
                Segments::for_store(dir.path(), BITS, 7, map_reads, Ahead::Allocate).max_open(1);
            let first = segments.list().unwrap().last().map_or(0, |&s| s + 1);
            segments.create(first, 0).unwrap();
            for seg in first..first + 20 {
                write_and_move_on(&segments, seg);
                // The newest, and the one just opened when it is another.
                assert!(segments.open_files().0 <= 2);
            }
            for round in 0..2 {
                for seg in first..first + 20 {
                    let at = segments.segment_start(seg) + SEGMENT_HEADER_BYTES;
                    let mut buf = [0; 16];
                    assert_eq!(segments.read_at(at, &mut buf).unwrap(), 8, "{seg}, {round}");
                    assert_eq!(buf[..8], seg.to_le_bytes());
                    if map_reads {
                        assert_eq!(mapped(&segments, at).unwrap(), seg.to_le_bytes());
                    }
                    segments.sync(seg).unwrap();
                    assert!(segments.open_files().0 <= 2);
                    // The sweep goes round these 2 at most, not the 21
                    // segments.
                    assert_eq!(in_round(&segments), with_files(&segments));
                }
            }
            let (descriptors, maps) = open_in(dir.path());
            assert!(descriptors <= 2, "{descriptors} descriptors");
            assert_eq!(maps, if map_reads { 21 } else { 0 });
            assert_eq!(with_files(&segments).len(), descriptors);
        }
    }

    #[test]
    fn a_retired_segment_is_counted_closed_once() {
        let dir = tempfile::tempdir().unwrap();
        let segments = four_sealed(dir.path(), 2);
        assert_eq!(segments.open_files().0, 2);
        for seg in 0..4 {
            segments.retire(seg).unwrap();
        }
        assert_eq!(with_files(&segments), [4]);
        assert_eq!(in_round(&segments), [4]);
        assert_eq!(segments.open_files().0, 1);
    }

    /// Found by an attack helper: a retirement whose deletion failed
    /// (an immutable file, `EPERM`) returned before it gave up the
    /// segment's descriptor, which stayed counted open, and in the sweep's
    /// round, until the store closed.
    #[test]
    fn a_retirement_whose_deletion_fails_still_gives_up_the_descriptor() {
        let dir = tempfile::tempdir().unwrap();
        let segments = four_sealed(dir.path(), 8);
        assert_eq!(with_files(&segments), [0, 1, 2, 3, 4]);
        let held = segments.open(1).unwrap();
        segments.fail_unlink_of.store(1, Ordering::Relaxed);
        let err = segments.retire(1).unwrap_err();
        assert!(
            matches!(&err, Error::Io(e) if e.raw_os_error() == Some(1)),
            "{err:?}"
        );
        assert!(segments.path(1).exists());
        assert_eq!(segments.open_files().0, 4);
        assert_eq!(in_round(&segments), [0, 2, 3, 4]);
        // A reader that held the segment across its retirement does not
        // open the file, still there, again.
        let reopen = segments.file_of(1, &held).unwrap_err();
        assert_eq!(reopen.kind(), io::ErrorKind::NotFound);
        assert_eq!(segments.open_files(), (4, 0));
        assert_eq!(with_files(&segments), in_round(&segments));
    }

    #[test]
    fn a_segment_with_room_allocated_ahead_is_not_closable() {
        let dir = tempfile::tempdir().unwrap();
        let segments = big_first_segment(dir.path());
        let segment = segments.open(0).unwrap();
        assert!(!segment.closable());
        segments.trim(0).unwrap();
        assert!(segment.closable());
    }
}
