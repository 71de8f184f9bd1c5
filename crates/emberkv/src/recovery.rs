//! Recovery: rebuild the index by replaying the segment files.
//!
//! The segment files alone are enough to recover. Replay reads every
//! segment in order, in large sequential chunks, applies each record to the
//! index (a tombstone removes its key), skips pads, and stops at the first
//! record that fails a check:
//! - in the newest segment, past its durable mark, that is a torn or
//!   corrupt tail: the file is cut there (and the cut fdatasynced), and the
//!   log resumes from that address;
//! - below the newest segment's durable mark (bytes fdatasynced before the
//!   mark was written, see [`crate::storage`]), and in an older segment, it
//!   is [`Error::Corruption`] naming the address, since a segment is
//!   fdatasynced before its successor gets any byte: records written after
//!   the damage were acknowledged, and cutting would lose them. A newest
//!   segment whose file ends below its mark is damage too.
//!
//! A newest segment that holds no more than a damaged header (a crash while
//! creating it) is re-created empty, unless the store recorded creating it
//! (`NEWEST`, see [`crate::manifest`]): then, as when the newest segment
//! it recorded is missing, its records were lost, and that is
//! [`Error::Corruption`].

use std::collections::HashMap;

use crate::check::CheckReport;
use crate::error::{Error, Result};
use crate::index::{Index, KeyHasher, shard_of};
use crate::log::{PAGE_BYTES, REHASH_GROUP, fetch_cold, read_cold};
use crate::manifest::Retired;
use crate::record::{HEADER_BYTES, Header, Record};
use crate::storage::{MappedSegment, SEGMENT_HEADER_BYTES, SegmentHeader, Segments};

/// Bytes read per sequential read during replay.
const CHUNK_BYTES: usize = 8 << 20;

/// A window of a segment file held in memory during replay.
pub(crate) struct Chunk {
    addr: u64,
    /// Read buffer: only grows, so that reading into it again zeroes
    /// nothing; the first `len` bytes hold the file's bytes from `addr`.
    bytes: Vec<u8>,
    len: usize,
    /// Bytes read at a time (more for a longer record).
    window: usize,
    /// Whether the chunk reads through segment maps where it can.
    maps: bool,
    /// The segment the chunk reads through its map, if it does now: then
    /// `addr` is the segment's start, `len` the bytes loaded into the map
    /// so far, and `bytes` is not used.
    mapped: Option<MappedSegment>,
}

impl Default for Chunk {
    /// Reads [`CHUNK_BYTES`] at a time: for whole segments.
    fn default() -> Self {
        Chunk::reading(CHUNK_BYTES)
    }
}

impl Chunk {
    /// A chunk that reads `window` bytes at a time (or a whole record, if
    /// longer): for a scan of a segment's first bytes, which would
    /// otherwise read (and allocate) [`CHUNK_BYTES`]. The record that
    /// crosses a window's end is read again with the next window, so a
    /// scan of `n` bytes reads about `n` plus one window: a quarter of `n`
    /// is a good window.
    pub(crate) fn reading(window: usize) -> Self {
        Chunk {
            addr: 0,
            bytes: Vec::new(),
            len: 0,
            window,
            maps: false,
            mapped: None,
        }
    }

    /// A chunk for scans of whole segments that reads through a segment's
    /// map when it has one ([`MappedSegment`], loading [`CHUNK_BYTES`] at a
    /// time), and otherwise as [`Chunk::default`]. For compaction, whose
    /// scans [`for_each_record_ahead`] ends by letting the map go.
    pub(crate) fn mapping() -> Self {
        Chunk {
            maps: true,
            ..Chunk::default()
        }
    }

    /// Lets go of the segment read through its map, if any.
    fn release(&mut self) {
        if self.mapped.take().is_some() {
            self.len = 0;
        }
    }

    fn holds(&self, addr: u64, len: usize) -> bool {
        addr >= self.addr && addr + len as u64 <= self.addr + self.len as u64
    }

    pub(crate) fn slice(&self, addr: u64, len: usize) -> &[u8] {
        let off = (addr - self.addr) as usize;
        let held = match &self.mapped {
            Some(mapped) => mapped.bytes(self.len),
            None => &self.bytes[..self.len],
        };
        &held[off..off + len]
    }

    /// Loads `addr..addr + want` through its segment's map, the chunk then
    /// holding the segment from its start; `false` when that cannot be
    /// done, the chunk then holding no segment through a map.
    fn load_mapped(&mut self, storage: &Segments, addr: u64, want: usize) -> bool {
        let seg = storage.segment_of(addr);
        if self.mapped.as_ref().is_none_or(|m| m.seg() != seg) {
            self.release();
            self.mapped = storage.mapped_segment(seg);
        }
        let Some(mapped) = &self.mapped else {
            return false;
        };
        let start = storage.segment_start(seg);
        let (from, to) = ((addr - start) as usize, (addr - start) as usize + want);
        if !mapped.load(from, to) {
            self.release();
            return false;
        }
        self.addr = start;
        self.len = to;
        true
    }

    /// The length of the record at `addr` and its key (`None` for a pad),
    /// if the chunk holds the whole record and its header parses; read
    /// from the bytes as they are, unverified.
    fn peek_record(&self, addr: u64) -> Option<(u64, Option<&[u8]>)> {
        if !self.holds(addr, HEADER_BYTES) {
            return None;
        }
        let header = Header::parse(self.slice(addr, HEADER_BYTES), addr).ok()?;
        let len = header.total_len();
        if !self.holds(addr, len) {
            return None;
        }
        let key = (!header.is_pad()).then(|| &self.slice(addr, len)[header.key_range()]);
        Some((len as u64, key))
    }

    /// Makes the chunk cover `addr..addr + len`, reading at most up to
    /// `end`. Returns `false` when the file ends first.
    pub(crate) fn cover(
        &mut self,
        storage: &Segments,
        addr: u64,
        len: usize,
        end: u64,
    ) -> Result<bool> {
        if self.holds(addr, len) {
            return Ok(true);
        }
        if addr + len as u64 > end {
            return Ok(false);
        }
        let want = len.max(self.window).min((end - addr) as usize);
        // A failed `load_mapped` has let its segment go.
        if self.maps && self.load_mapped(storage, addr, want) {
            return Ok(self.holds(addr, len));
        }
        if self.bytes.len() < want {
            self.bytes.resize(want, 0);
        }
        self.len = 0;
        let n = storage.read_at(addr, &mut self.bytes[..want])?;
        self.len = n;
        self.addr = addr;
        Ok(n >= len)
    }
}

/// How replay treats damage.
pub(crate) enum Mode<'a> {
    /// Open: cut a torn tail off (truncating the file), fail on other
    /// damage.
    Repair,
    /// A read-only open: as `Repair`, but change nothing: a torn tail is
    /// left in its file and the log ends before it, and no file is
    /// created, deleted, cut or synced.
    Read,
    /// Check: change nothing; note every problem (and every repair an open
    /// would make) in the report and go on.
    Check(&'a mut CheckReport),
}

impl Mode<'_> {
    /// Fails with `err` when repairing; notes it when checking, unless
    /// it is the process's want of file descriptors, memory, disk space or
    /// quota (`Error::is_out_of_resources`), which says nothing of the
    /// store.
    pub(crate) fn problem(&mut self, err: Error) -> Result<()> {
        match self {
            Mode::Repair | Mode::Read => Err(err),
            Mode::Check(_) if err.is_out_of_resources() => Err(err),
            Mode::Check(report) => {
                report.problems.push(err.to_string());
                Ok(())
            }
        }
    }
}

/// Where a replay starts, and how much log it must find.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Span {
    /// The log address replay starts at: 0 for the whole log, else a
    /// checkpoint's `covered` (a record boundary).
    pub(crate) from: u64,
    /// The log address below which a sound index checkpoint of this store
    /// records every record as durable (it is written only once they
    /// are), whether or not replay starts from it; 0 without one. The log
    /// must reach it, and damage below it is not a torn tail: a newcomer
    /// deleted the newest segment file, and open ignored the checkpoint as
    /// stale and replayed the shorter log, losing 1,691 acknowledged keys
    /// without a word.
    pub(crate) claimed: u64,
}

/// What a replay found besides the index and the tail.
#[derive(Debug, Default)]
pub(crate) struct Replayed {
    /// Bytes of pad records in each segment passed (from a checkpoint on,
    /// the pads before it are missed: compaction then overestimates those
    /// segments' garbage, once).
    pub(crate) pads: HashMap<u64, u64>,
    /// Bytes a repairing replay cut off the newest segment as a torn tail
    /// (a read-only one left in place and ignored),
    /// up to the last byte that is not zero (zeros are room allocated or
    /// written ahead of the records, which every crash leaves): a record
    /// torn by a crash, or damage past the durable mark.
    pub(crate) torn_bytes: u64,
}

/// Replays the store's segments into `index`, from log address
/// `span.from` on (0: the whole log; else a checkpoint's `covered`, a
/// record boundary), notes what it found besides in `found`, and
/// returns the log tail (the address the next record goes to). When
/// repairing, the newest segment is fdatasynced at the end: everything
/// below the tail is durable then.
///
/// # Errors
/// When repairing: [`Error::Corruption`] for damage outside the newest
/// segment's tail past its durable mark (and past `span.claimed`), a log
/// that ends below `span.claimed`, or a missing segment, and, from a
/// checkpoint, when no
/// valid record starts at `from` in a segment with bytes past it (then
/// nothing is truncated: only a replay of the whole log can tell a torn
/// tail from a `covered` that is no record boundary), unless `from` is in
/// the newest segment and its records end exactly there (then the bytes
/// from `from` on are cut, as a torn tail);
/// [`Error::IncompatibleFormat`]; I/O errors. When checking, only I/O
/// errors.
pub(crate) fn replay(
    storage: &Segments,
    retired: &Retired,
    index: &Index,
    hasher: &KeyHasher,
    mut mode: Mode<'_>,
    span: Span,
    found: &mut Replayed,
) -> Result<u64> {
    let Span { from, claimed } = span;
    let mut segments = storage.list()?;
    // A crash between retiring a segment and deleting its file leaves it.
    for &seg in segments.iter().filter(|&&s| retired.contains(s)) {
        if let Mode::Repair = mode {
            storage.retire(seg)?;
        }
    }
    segments.retain(|&s| !retired.contains(s));
    // The newest segment the store recorded creating: a crash leaves no
    // later one without a sound header, so one missing, emptied or with a
    // damaged header up to it was lost (`manifest`). A damaged `NEWEST`
    // is only reported by a check: open goes on without it.
    let created = match crate::manifest::load_newest(storage.dir(), storage.store_id()) {
        Ok(created) => created,
        Err(e @ Error::Corruption { .. }) => {
            if let Mode::Check(_) = mode {
                mode.problem(e)?;
            }
            None
        }
        Err(e) => return Err(e),
    };
    if let Some(lost) = created
        .filter(|&c| !retired.contains(c) && segments.last().is_none_or(|&newest| newest < c))
    {
        mode.problem(Error::corruption(
            storage.segment_start(lost),
            format!(
                "segment file {lost} is missing, though the store created it (NEWEST): its \
                 records are lost (salvage gets the other keys out)"
            ),
        ))?;
    }
    let Some(&newest) = segments.last() else {
        // The first segment the manifest leaves, found in time linear in
        // the retired set: a damaged manifest may retire them all.
        let next = retired.first_missing(0, storage.segment_of(u64::MAX));
        let Some(next) = next else {
            mode.problem(Error::corruption(
                0,
                "RETIRED retires every segment of the log address space",
            ))?;
            return Ok(0);
        };
        if !reaches(storage, storage.segment_start(next), claimed) {
            mode.problem(lost_below_checkpoint(storage.segment_start(next), claimed))?;
            return Ok(0);
        }
        if let Mode::Repair = mode {
            storage.create(next, 0)?;
        }
        return Ok(storage.segment_start(next) + SEGMENT_HEADER_BYTES);
    };
    // Every segment below the newest is present or retired.
    let gaps =
        std::iter::once((0, segments[0])).chain(segments.windows(2).map(|w| (w[0] + 1, w[1])));
    for (from, to) in gaps {
        if let Some(seg) = retired.first_missing(from, to) {
            // Named with the file after the gap: a stray file (a segment
            // of another store copied in) is then found by its name.
            mode.problem(Error::corruption(
                storage.segment_start(seg),
                format!(
                    "segment file {seg} is missing below {} (deleted, or RETIRED, which \
                     lists the segments compaction deleted, was lost; salvage gets the \
                     other keys out)",
                    storage.file_name(to)
                ),
            ))?;
        }
    }
    let mut chunk = Chunk::default();
    let mut scratch = Vec::new();
    let mut tail = 0;
    // The last segment replayed and what is known of its length (nothing
    // after damage in it). It counts for the next segment only when it is
    // the one just before (`segments` holds no retired one): past a
    // retired or missing segment (the latter reported above) nothing is
    // measured against an older one.
    let mut previous: Option<(u64, Previous)> = None;
    for seg in segments {
        let start = storage.segment_start(seg);
        let prev = previous
            .take()
            .filter(|&(p, _)| p + 1 == seg)
            .map(|(_, known)| known);
        if start + storage.segment_size() <= from {
            // Below the checkpoint its records are not read again, but its
            // header is: a segment file of another store or another place
            // is refused here as in a full replay (else its records, whose
            // checksums hold, were served as this store's), and so is the
            // previous segment's file when cut short of the length this
            // header says it was sealed at.
            let mut header = [0u8; SEGMENT_HEADER_BYTES as usize];
            let read = storage.read_at(start, &mut header)?;
            match storage.check_header(seg, &header[..read]) {
                Ok(SegmentHeader { prev_len, .. }) => {
                    check_previous(storage, &mut mode, seg, prev, prev_len)?;
                }
                Err(e) => mode.problem(e)?,
            }
            previous = Some((seg, Previous::FileLen(storage.file_len(seg)?)));
            continue;
        }
        // A record never crosses the segment's end: bytes past it (in a
        // file longer than a segment) are damage, and the log must not
        // resume past it.
        let file_len = storage.file_len(seg)?;
        let end = start + file_len.min(storage.segment_size());
        if let Mode::Check(report) = &mut mode {
            report.segments += 1;
        }
        let header_ok = chunk.cover(storage, start, SEGMENT_HEADER_BYTES as usize, end)?;
        let checked = if header_ok {
            storage.check_header(seg, chunk.slice(start, SEGMENT_HEADER_BYTES as usize))
        } else {
            Err(Error::corruption(start, "segment header truncated"))
        };
        // Below the durable mark the bytes were fdatasynced: damage there
        // is no torn tail.
        let marked = match (checked, &mode) {
            (
                Ok(SegmentHeader {
                    prev_len,
                    durable_len,
                    damaged_marks,
                }),
                _,
            ) => {
                check_previous(storage, &mut mode, seg, prev, prev_len)?;
                if let (Mode::Check(report), 1..) = (&mut mode, damaged_marks) {
                    report.problems.push(
                        Error::corruption(
                            start,
                            format!(
                                "segment {seg}'s header holds {damaged_marks} damaged durable \
                                 mark slot(s): the mark falls back to {durable_len} bytes (the \
                                 other slot's, or none), and bytes past it count as not durable"
                            ),
                        )
                        .to_string(),
                    );
                }
                start + durable_len
            }
            (Err(Error::Corruption { .. }), _)
                if seg == newest
                    && end <= start + SEGMENT_HEADER_BYTES
                    && created.is_some_and(|c| c >= seg) =>
            {
                mode.problem(Error::corruption(
                    start,
                    format!(
                        "segment file {seg} is empty or its header damaged, though the store \
                         created it (NEWEST): its records are lost (salvage gets the other \
                         keys out)"
                    ),
                ))?;
                continue;
            }
            // What a crash while the segment was created leaves: an open
            // creates it again, and a check says so (a problem when no
            // `NEWEST` tells that from a segment emptied or damaged after
            // it held records, unless it is the store's first: segment 0,
            // not merely the first left after compaction retired those
            // before it, found in review).
            (Err(Error::Corruption { .. }), _)
                if seg == newest
                    && end <= start + SEGMENT_HEADER_BYTES
                    && claimed <= start + SEGMENT_HEADER_BYTES =>
            {
                match &mut mode {
                    // The previous segment's records' length, or below the
                    // checkpoint its file's (a sealed segment's file was
                    // cut to its records when this one was first created):
                    // the creation cuts that file to it.
                    Mode::Repair => {
                        storage.create(seg, prev.map_or(0, Previous::len))?;
                    }
                    Mode::Read => {}
                    Mode::Check(report) if created.is_some() || seg == 0 => {
                        report.repairs.push(format!(
                            "segment file {seg} holds {} bytes and no sound header, as a crash \
                             while it was created leaves it (an open creates it again)",
                            end - start
                        ))
                    }
                    Mode::Check(report) => report.problems.push(format!(
                        "segment file {seg} holds {} bytes and no sound header: a crash while \
                         it was created leaves it so, but with no NEWEST file (an older build's \
                         store or backup) it cannot be told from a segment whose \
                         records were lost (an open creates it again; salvage gets the other \
                         keys out)",
                        end - start
                    )),
                }
                return Ok(start + SEGMENT_HEADER_BYTES);
            }
            (Err(e), _) => {
                mode.problem(e)?;
                continue;
            }
        };
        let mut pos = (start + SEGMENT_HEADER_BYTES).max(from);
        // Records held back: those of a batch whose last record has not
        // been read yet, and those of an update in place's span that has
        // not been read to its end (`hold_until`). They are applied all
        // together, or cut from `batch_start` on.
        let mut batch: Vec<u64> = Vec::new();
        let mut batch_start = pos;
        let mut in_batch = false;
        let mut hold_until = pos;
        let checkpointed = claimed.min(start + storage.segment_size());
        // Below it, bytes of the newest segment were made durable.
        let floor = marked.max(checkpointed);
        let torn = loop {
            if pos >= end {
                break !batch.is_empty() || file_len > storage.segment_size();
            }
            match next_record(storage, &mut chunk, pos, end)? {
                // A batch lies in one page; a span may cross pages.
                Next::Pad(_) if in_batch => break true,
                Next::Pad(len) => {
                    *found.pads.entry(seg).or_default() += len;
                    pos += len;
                }
                Next::Record(header) => {
                    if batch.is_empty() {
                        batch_start = pos;
                    }
                    batch.push(pos);
                    hold_until = hold_until.max(pos + u64::from(header.span));
                    in_batch = header.continues_batch();
                    pos += header.total_len() as u64;
                    if let Mode::Check(report) = &mut mode {
                        report.records += 1;
                        report.tombstones += u64::from(header.is_tombstone());
                        report.bytes_checked += header.total_len() as u64;
                    }
                    if !in_batch && pos >= hold_until {
                        for addr in batch.drain(..) {
                            apply(storage, index, hasher, &chunk, &mut scratch, addr)?;
                        }
                    }
                }
                Next::Invalid
                    if matches!(mode, Mode::Check(_)) && (seg != newest || pos < floor) =>
                {
                    // Check names every damaged record that open would
                    // refuse: it goes on past one where salvage would.
                    let at = if batch.is_empty() { pos } else { batch_start };
                    mode.problem(if seg == newest {
                        below_floor(at, marked, checkpointed, "invalid record")
                    } else {
                        Error::corruption(
                            at,
                            "invalid record before the end of a sealed segment (salvage gets \
                             the other keys out)",
                        )
                    })?;
                    batch.clear();
                    (in_batch, hold_until) = (false, 0);
                    pos = crate::salvage::resume_after(storage, &mut chunk, pos, end)?.0;
                }
                Next::Invalid => break true,
            }
        };
        let cut = if batch.is_empty() { pos } else { batch_start };
        if seg == newest && cut < floor {
            // Rot in synced bytes, or a file cut short: acknowledged
            // records may follow, so nothing is cut, in either mode.
            let what = if torn {
                "invalid record"
            } else {
                "end of the file"
            };
            mode.problem(below_floor(cut, marked, checkpointed, what))?;
            pos = cut;
        } else if torn {
            if matches!(mode, Mode::Repair | Mode::Read)
                && cut == from
                && from > start + SEGMENT_HEADER_BYTES
                && !(seg == newest && ends_records(storage, &mut chunk, seg, from, end)?)
            {
                // Nothing valid at a checkpoint's `covered`: a torn tail
                // right there, or a `covered` that is no record boundary
                // (a crafted file). Cutting here could destroy records, so
                // the caller replays the whole log instead, which finds
                // where the valid records end. In the newest segment, a
                // walk over the segment's records first tells a boundary
                // (a store that crashed idle after a checkpoint, with the
                // room allocated or zeroed ahead of its records after it)
                // from the rest, at the cost of reading that segment.
                return Err(Error::corruption(
                    from,
                    "no valid record at the checkpoint's covered address",
                ));
            }
            match &mut mode {
                Mode::Repair | Mode::Read if seg == newest => {
                    found.torn_bytes = nonzero_bytes(storage, &mut chunk, cut, end)?;
                    if let Mode::Repair = mode {
                        storage.truncate(seg, cut)?;
                    }
                }
                // Past the durable mark, where a crash leaves the records
                // written last cut (the mark lags the syncs: writes synced
                // since it was last written may lie there too). A file
                // longer than a segment, or records that verify after the
                // cut, no process crash leaves (a power cut may, since the
                // disk writes back unsynced bytes in any order): those are
                // problems.
                Mode::Check(report) if seg == newest => {
                    let cut_bytes = start + file_len - cut;
                    if file_len > storage.segment_size() {
                        report.problems.push(format!(
                            "segment file {seg} holds {file_len} bytes, more than a segment \
                             ({}): damage; an open cuts {cut_bytes} bytes at offset {cut}",
                            storage.segment_size()
                        ));
                    } else if let Some(at) = verified_record_after(storage, &mut chunk, pos, end)? {
                        report.problems.push(format!(
                            "invalid record at offset {cut} in the newest segment, past its \
                             durable mark, with records that verify after it (the first at \
                             {at}): damage, or a power cut since the last fdatasync, not what \
                             a process crash leaves; an open cuts {cut_bytes} bytes there \
                             (salvage gets the other keys out)"
                        ));
                    } else {
                        report.repairs.push(format!(
                            "torn tail of {cut_bytes} bytes at offset {cut} in the newest \
                             segment, past its durable mark (an open cuts it off)"
                        ));
                    }
                }
                _ => mode.problem(Error::corruption(
                    cut,
                    "invalid record before the end of a sealed segment (salvage gets the \
                     other keys out)",
                ))?,
            }
            pos = cut;
        }
        // After damage in a sealed segment its length says nothing more.
        previous = (!torn || seg == newest).then_some((seg, Previous::Records(pos - start)));
        tail = pos;
    }
    if !reaches(storage, tail, claimed) {
        // The newest segment ends exactly at its end, and the segment the
        // checkpoint reaches into is gone.
        mode.problem(lost_below_checkpoint(tail, claimed))?;
    }
    if let Mode::Repair = mode {
        // A crashed process's last records may be in the page cache only:
        // replay read them, and the log takes them for durable (the first
        // durable mark after open records them), so they are made so.
        storage.sync(newest)?;
    }
    Ok(tail)
}

/// What replay knows of the segment before the one it is at: the length
/// that segment's successor's header must record.
#[derive(Clone, Copy)]
enum Previous {
    /// Its records were read and end this many bytes into it.
    Records(u64),
    /// It lies below the checkpoint, its records not read: its file's
    /// length (a sealed segment's file was cut to its records when its
    /// successor was created).
    FileLen(u64),
}

impl Previous {
    /// The previous segment's length as known: its records' or its file's.
    fn len(self) -> u64 {
        match self {
            Previous::Records(len) | Previous::FileLen(len) => len,
        }
    }
}

/// Checks `prev`, what replay knows of segment `seg - 1`, against
/// `prev_len`, the length `seg`'s header records for it: records read
/// must end exactly there, and a file below the checkpoint must be at
/// least that long (cut short, its last records are lost).
fn check_previous(
    storage: &Segments,
    mode: &mut Mode<'_>,
    seg: u64,
    prev: Option<Previous>,
    prev_len: u64,
) -> Result<()> {
    match prev {
        Some(Previous::Records(len)) if len != prev_len => mode.problem(Error::corruption(
            storage.segment_start(seg - 1) + len.min(prev_len),
            format!(
                "segment {} holds {len} bytes of records but segment {seg} records that it \
                 was sealed at {prev_len}",
                seg - 1
            ),
        )),
        Some(Previous::FileLen(len)) if len < prev_len => mode.problem(Error::corruption(
            storage.segment_start(seg - 1) + len,
            format!(
                "segment {}'s file is {len} bytes long but segment {seg} records that it \
                 was sealed at {prev_len} (cut short; salvage gets the other keys out)",
                seg - 1
            ),
        )),
        _ => Ok(()),
    }
}

/// Whether a log ending at `tail` holds everything below `claimed`: a
/// log that ends at a segment's start resumes after that segment's
/// header, and a checkpoint taken then (before the segment's file was
/// created; a crash test found one) names that address.
pub(crate) fn reaches(storage: &Segments, tail: u64, claimed: u64) -> bool {
    let at_segment_start = storage.segment_start(storage.segment_of(tail)) == tail;
    tail >= claimed || (at_segment_start && claimed <= tail + SEGMENT_HEADER_BYTES)
}

/// The address of a record that verifies after `pos` (where a record
/// failed its checks) and before the last byte before `end` that is not
/// zero, if there is one; `None` for a torn tail, where only the cut
/// records and zeros follow (what a process crash leaves: the flusher
/// writes the log in order, so only a prefix of its last write is there).
/// Every byte is tried for a record's start through the first page's worth
/// past `pos` (damage in a length or flags byte throws a walk by stated
/// lengths off at once: found in review, 2026-12-05), then every page
/// boundary, where the appender starts a record. The zeros written or
/// allocated ahead of the records (up to 4 MiB) are passed in one read.
/// A record image stored inside a cut value could be taken for a record
/// (salvage's framing risk, see its module docs).
fn verified_record_after(
    storage: &Segments,
    chunk: &mut Chunk,
    pos: u64,
    end: u64,
) -> Result<Option<u64>> {
    let written = pos + nonzero_bytes(storage, chunk, pos, end)?;
    let page = PAGE_BYTES as u64;
    let starts_record = |chunk: &mut Chunk, at: u64| -> Result<bool> {
        Ok(matches!(
            next_record(storage, chunk, at, end)?,
            Next::Record(_)
        ))
    };
    for at in pos + 1..written.min(pos + page) {
        if starts_record(chunk, at)? {
            return Ok(Some(at));
        }
    }
    let mut boundary = (pos / page + 1) * page;
    while boundary < written {
        if starts_record(chunk, boundary)? {
            return Ok(Some(boundary));
        }
        boundary += page;
    }
    Ok(None)
}

/// The error of damage (`what`) at `at` in the newest segment, below the
/// durable mark `marked` or the checkpoint's `checkpointed`.
fn below_floor(at: u64, marked: u64, checkpointed: u64, what: &str) -> Error {
    let by = if at < marked {
        format!(
            "the newest segment's durable mark records its bytes up to offset {marked} as fdatasynced"
        )
    } else {
        format!("the index checkpoint records the log up to offset {checkpointed} as durable")
    };
    Error::corruption(
        at,
        format!(
            "{what} where {by}: damage, not a torn tail, so open cuts nothing (salvage gets \
             the other keys out)"
        ),
    )
}

/// The error of a log that ends at `tail`, below `claimed`, where a sound
/// index checkpoint records it durable.
fn lost_below_checkpoint(tail: u64, claimed: u64) -> Error {
    Error::corruption(
        tail,
        format!(
            "the log ends here, but the index checkpoint records it durable up to {claimed}: \
             a segment file is missing or was cut short (salvage gets the other keys out)"
        ),
    )
}

/// Calls `f` with the address and the verified record of every record of
/// segment `seg` that starts in its first `limit` bytes, in log order (pads
/// skipped), reading it sequentially through `chunk` (whose buffer a
/// caller scanning several segments keeps: a fresh one is allocated and
/// zeroed at its first read, a window's worth, [`CHUNK_BYTES`] by
/// default).
///
/// # Errors
/// [`Error::Corruption`] at the first invalid record; errors from `f`.
pub(crate) fn for_each_record(
    storage: &Segments,
    seg: u64,
    limit: u64,
    chunk: &mut Chunk,
    f: impl FnMut(u64, &Record<'_>) -> Result<()>,
) -> Result<()> {
    for_each_record_ahead(storage, seg, limit, chunk, 0, |_| {}, f)
}

/// As [`for_each_record`], and before `f` is called with a record, calls
/// `ahead` with the key of each record that starts less than `depth`
/// bytes after its end, once, as far as the chunk already holds them (not
/// for the first record, nor for those at the start of a chunk). So a
/// caller about to look each record's key up (compaction) can start those
/// lookups' memory loads early, and have their cache misses overlap. The
/// keys seen ahead are not verified: hints only, and a record of damaged
/// bytes may be seen ahead and never reach `f`, whose records alone are
/// verified.
///
/// # Errors
/// As [`for_each_record`].
pub(crate) fn for_each_record_ahead(
    storage: &Segments,
    seg: u64,
    limit: u64,
    chunk: &mut Chunk,
    depth: u64,
    mut ahead: impl FnMut(&[u8]),
    mut f: impl FnMut(u64, &Record<'_>) -> Result<()>,
) -> Result<()> {
    let start = storage.segment_start(seg);
    // Not the file's length: the file may be allocated ahead of its
    // records, until the next segment is created.
    let end = start + storage.written_len(seg)?;
    let stop = end.min(start.saturating_add(limit));
    let mut pos = start + SEGMENT_HEADER_BYTES;
    // The next address to see ahead.
    let mut seen = pos;
    let scanned = (|| {
        while pos < stop {
            match next_record(storage, chunk, pos, end)? {
                Next::Pad(len) => pos += len,
                Next::Record(h) => {
                    let next = pos + h.total_len() as u64;
                    seen = seen.max(next);
                    while seen < stop && seen < next.saturating_add(depth) {
                        let Some((len, key)) = chunk.peek_record(seen) else {
                            break;
                        };
                        if let Some(key) = key {
                            ahead(key);
                        }
                        seen += len;
                    }
                    // `next_record` verified it.
                    f(pos, &Record::verified(h, chunk.slice(pos, h.total_len())))?;
                    pos = next;
                }
                Next::Invalid => {
                    return Err(Error::corruption(pos, "invalid record in a sealed segment"));
                }
            }
        }
        Ok(())
    })();
    // Not held past the scan: the caller may retire the segment next, and
    // its last handle is let go on a thread of its own (`Core::retire`).
    chunk.release();
    scanned
}

/// What replay finds at an address.
pub(crate) enum Next {
    /// A pad of this many bytes.
    Pad(u64),
    /// A record whose checksum verified.
    Record(Header),
    /// Bytes that are not a valid record: a torn or corrupt tail.
    Invalid,
}

/// Decodes the record at `pos`, reading through `chunk`.
pub(crate) fn next_record(
    storage: &Segments,
    chunk: &mut Chunk,
    pos: u64,
    end: u64,
) -> Result<Next> {
    if !chunk.cover(storage, pos, HEADER_BYTES, end)? {
        return Ok(Next::Invalid);
    }
    let Ok(header) = Header::parse(chunk.slice(pos, HEADER_BYTES), pos) else {
        return Ok(Next::Invalid);
    };
    let total = header.total_len();
    let next = pos + total as u64;
    // The appender leaves either no room or room for a pad after a record
    // in a page, and pages end inside their segment: a record ending less
    // than a pad before its segment's end was not written by it (and the
    // log could not resume after it).
    let room_after = storage
        .segment_start(storage.segment_of(pos) + 1)
        .saturating_sub(next);
    if next > end || (1..HEADER_BYTES as u64).contains(&room_after) {
        return Ok(Next::Invalid);
    }
    if header.is_pad() {
        return Ok(Next::Pad(total as u64));
    }
    if !chunk.cover(storage, pos, total, end)? {
        return Ok(Next::Invalid);
    }
    Ok(match Record::verify(header, chunk.slice(pos, total), pos) {
        Ok(_) => Next::Record(header),
        Err(_) => Next::Invalid,
    })
}

/// Bytes from `from` up to the last byte before `end` that is not zero.
pub(crate) fn nonzero_bytes(
    storage: &Segments,
    chunk: &mut Chunk,
    from: u64,
    end: u64,
) -> Result<u64> {
    let mut last = from;
    let mut at = from;
    while at < end {
        let len = (end - at).min(CHUNK_BYTES as u64) as usize;
        if !chunk.cover(storage, at, len, end)? {
            break;
        }
        if let Some(i) = chunk.slice(at, len).iter().rposition(|&b| b != 0) {
            last = at + i as u64 + 1;
        }
        at += len as u64;
    }
    Ok(last - from)
}

/// Whether valid records (and pads) run without a gap from the first of
/// segment `seg` to `addr`: then `addr` is a record boundary, and bytes
/// that are no record there are a torn or allocated tail. Reads (and
/// checks the checksum of) every record of the segment below `addr`.
fn ends_records(
    storage: &Segments,
    chunk: &mut Chunk,
    seg: u64,
    addr: u64,
    end: u64,
) -> Result<bool> {
    let mut pos = storage.segment_start(seg) + SEGMENT_HEADER_BYTES;
    while pos < addr {
        pos += match next_record(storage, chunk, pos, end)? {
            Next::Pad(len) => len,
            Next::Record(header) => header.total_len() as u64,
            Next::Invalid => return Ok(false),
        };
    }
    Ok(pos == addr)
}

/// Applies the record at `pos`, whose checksum `next_record` verified, to
/// the index.
fn apply(
    storage: &Segments,
    index: &Index,
    hasher: &KeyHasher,
    chunk: &Chunk,
    scratch: &mut Vec<u8>,
    pos: u64,
) -> Result<()> {
    let mut own = Vec::new();
    let record = if chunk.holds(pos, HEADER_BYTES)
        && let Ok(h) = Header::parse(chunk.slice(pos, HEADER_BYTES), pos)
        && chunk.holds(pos, h.total_len())
    {
        // `next_record` verified the checksum of what the chunk holds.
        Record::verified(h, chunk.slice(pos, h.total_len()))
    } else {
        let h = read_cold(storage, pos, &mut own)?;
        Record::verify(h, &own, pos)?
    };
    let hash = hasher.hash(record.key);
    let mut writer = index.writer(shard_of(hash));
    let mut replaced = None;
    let mut rehash_scratch = Vec::new();
    let slot = writer.slot(
        hash,
        |addr| {
            let (bytes, logical, expiring, same) =
                with_chunk_record(storage, chunk, scratch, addr, |r| {
                    (
                        r.header.total_len() as u64,
                        (r.key.len() + r.value_len()) as u64,
                        r.expires_at.is_some(),
                        r.key == record.key,
                    )
                })?;
            if same {
                replaced = Some((storage.segment_of(addr), bytes, logical, expiring));
            }
            Ok(same)
        },
        |addrs: &[u64], out: &mut [u64]| {
            assert_eq!(addrs.len(), out.len(), "one hash per address");
            for (addrs, out) in addrs.chunks(REHASH_GROUP).zip(out.chunks_mut(REHASH_GROUP)) {
                // The first bytes of those not in the chunk at once, so
                // that their misses overlap.
                storage.touch_mapped(
                    addrs
                        .iter()
                        .copied()
                        .filter(|&addr| !chunk.holds(addr, HEADER_BYTES)),
                );
                for (&addr, h) in addrs.iter().zip(out) {
                    *h = with_chunk_record(storage, chunk, &mut rehash_scratch, addr, |r| {
                        hasher.hash(r.key)
                    })?;
                }
            }
            Ok(())
        },
    )?;
    if let Some((seg, bytes, logical, expiring)) = replaced {
        writer.remove_live(seg, bytes, logical, expiring);
    }
    if record.header.is_tombstone() {
        writer.clear(slot);
    } else {
        writer.set(hash, slot, pos);
        writer.add_live(
            storage.segment_of(pos),
            record.header.total_len() as u64,
            (record.key.len() + record.value_len()) as u64,
            record.expires_at,
        );
    }
    Ok(())
}

/// Calls `f` with the verified record at `addr`, from the chunk when it
/// holds it, else copied from its segment into `scratch`: through the
/// segment's memory map when it has one (a replayed key compared with the
/// records of its shard, and a shard's first growth during a full replay,
/// which re-reads every key of the shard; later growths rehash from the
/// homes the index keeps meanwhile, `Index::track_homes`), by pread
/// otherwise. Every record read here was replayed already, so it
/// lies below any cut of a torn tail.
fn with_chunk_record<T>(
    storage: &Segments,
    chunk: &Chunk,
    scratch: &mut Vec<u8>,
    addr: u64,
    f: impl FnOnce(&Record<'_>) -> T,
) -> Result<T> {
    if chunk.holds(addr, HEADER_BYTES) {
        let h = Header::parse(chunk.slice(addr, HEADER_BYTES), addr)?;
        if chunk.holds(addr, h.total_len()) {
            return Ok(f(&Record::verify(
                h,
                chunk.slice(addr, h.total_len()),
                addr,
            )?));
        }
    }
    let h = fetch_cold(storage, addr, scratch)?;
    Ok(f(&Record::verify(h, scratch, addr)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::tests::log_in;
    use crate::record::Entry;

    fn entry<'a>(key: &'a [u8], value: &'a [u8]) -> Entry<'a> {
        Entry {
            flags: 0,
            expires_at: None,
            key,
            value,
        }
    }

    /// A scan of a segment's first bytes through a chunk reading a quarter
    /// of them at a time visits the records starting in them, and
    /// allocates a window, not [`CHUNK_BYTES`]: sampling a segment for
    /// compression used to read 8 MiB to look at 256 KiB.
    #[test]
    fn a_sampling_scan_reads_only_what_it_samples() {
        let dir = tempfile::tempdir().unwrap();
        let log = log_in(dir.path(), 24, 64 << 20, 0);
        let value = vec![9u8; 1000];
        let mut addrs = Vec::new();
        for i in 0..10_000u32 {
            addrs.push(log.append(&entry(&i.to_le_bytes(), &value)).unwrap());
        }
        log.write_out().unwrap();
        let (sampled, window) = (256 << 10, 64 << 10);
        let mut chunk = Chunk::reading(window);
        let mut seen = Vec::new();
        for_each_record(log.storage(), 0, sampled, &mut chunk, |addr, _| {
            seen.push(addr);
            Ok(())
        })
        .unwrap();
        let first = log.storage().segment_start(0) + sampled;
        let expected: Vec<u64> = addrs.into_iter().filter(|&a| a < first).collect();
        assert_eq!(seen, expected);
        assert!(chunk.bytes.len() <= window + 2048, "{}", chunk.bytes.len());
    }

    /// A scan that looks ahead sees each record's key once, before `f`
    /// gets the record and never after; records at the start of a window
    /// are not seen ahead, the rest are.
    #[test]
    fn a_scan_looks_each_key_up_ahead_once_before_its_record() {
        let dir = tempfile::tempdir().unwrap();
        let log = log_in(dir.path(), 24, 64 << 20, 0);
        let mut keys = Vec::new();
        for i in 0..3_000u32 {
            let value = vec![7u8; (i as usize * 37) % 900];
            keys.push(format!("key{i}").into_bytes());
            log.append(&entry(&keys[i as usize], &value)).unwrap();
        }
        log.write_out().unwrap();
        let mut chunk = Chunk::reading(64 << 10);
        let ahead = std::cell::RefCell::new(Vec::new());
        let had = std::cell::RefCell::new(Vec::new());
        let mut not_ahead = 0;
        for_each_record_ahead(
            log.storage(),
            0,
            u64::MAX,
            &mut chunk,
            2 << 10,
            |key| {
                assert!(
                    !had.borrow().contains(&key.to_vec()),
                    "seen after its record"
                );
                ahead.borrow_mut().push(key.to_vec());
            },
            |_, record| {
                if !ahead.borrow().contains(&record.key.to_vec()) {
                    not_ahead += 1;
                }
                had.borrow_mut().push(record.key.to_vec());
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(had.into_inner(), keys, "every record, in order");
        let ahead = ahead.into_inner();
        let mut once = ahead.clone();
        once.dedup();
        assert_eq!(once, ahead, "each key seen ahead once");
        assert_eq!(ahead.len() + not_ahead, keys.len());
        assert!(!ahead.contains(&keys[0]), "the first record is not ahead");
        // About 1.4 MB in windows of 64 KiB: a record or so at each start.
        assert!(not_ahead < 60, "{not_ahead} records not seen ahead");
    }

    /// A mapping chunk reads a segment through its map (it allocates no
    /// buffer), sees the same records as one reading by pread, and lets
    /// the segment go when the scan ends, so that retiring it next drops
    /// the last handle on the retiring thread.
    #[test]
    fn a_mapping_scan_reads_through_the_map_and_lets_it_go() {
        let dir = tempfile::tempdir().unwrap();
        let log = log_in(dir.path(), 20, 64 << 20, 0);
        for i in 0..3_000u32 {
            let value = vec![(i % 251) as u8; (i as usize * 53) % 1500];
            log.append(&entry(format!("key{i}").as_bytes(), &value))
                .unwrap();
        }
        log.write_out().unwrap();
        let scan = |chunk: &mut Chunk, seg: u64| {
            let mut seen = Vec::new();
            for_each_record(log.storage(), seg, u64::MAX, chunk, |addr, r| {
                seen.push((addr, r.key.to_vec(), r.stored_value.to_vec()));
                Ok(())
            })
            .unwrap();
            seen
        };
        let mut mapping = Chunk::mapping();
        for seg in 0..3 {
            let mapped = scan(&mut mapping, seg);
            assert!(mapped.len() > 100, "segment {seg}: {}", mapped.len());
            assert_eq!(mapped, scan(&mut Chunk::default(), seg), "segment {seg}");
            assert!(mapping.mapped.is_none(), "let go after the scan");
            assert_eq!(mapping.len, 0);
        }
        assert!(mapping.bytes.is_empty(), "read through the maps");
    }

    /// After a crash the records replay read may be in the page cache
    /// only: a repairing replay fdatasyncs the newest segment before the
    /// log takes them for durable (and marks them so). A replay whose
    /// fdatasync fails fails.
    #[test]
    fn a_repairing_replay_makes_the_records_it_read_durable() {
        let dir = tempfile::tempdir().unwrap();
        let log = log_in(dir.path(), 20, 4 << 20, 0);
        log.append(&entry(b"k", b"v")).unwrap();
        log.write_out().unwrap();
        drop(log);
        let storage = Segments::new(dir.path(), 20, 1);
        let (hasher, retired) = (KeyHasher::new(1), Retired::default());
        let index = Index::with_capacity(64).unwrap();
        storage
            .fail_sync_of
            .store(0, std::sync::atomic::Ordering::Relaxed);
        let mut found = Replayed::default();
        let got = replay(
            &storage,
            &retired,
            &index,
            &hasher,
            Mode::Repair,
            Span::default(),
            &mut found,
        );
        assert!(matches!(got, Err(Error::Io(_))), "{got:?}");
    }

    /// A store that crashed idle right after a checkpoint: its `covered` is
    /// the end of the records, and zeros (allocated or written ahead)
    /// follow. Replay from the checkpoint cuts them and keeps every record,
    /// where it used to refuse and make open replay the whole log. A
    /// `covered` inside a record still refuses.
    #[test]
    fn zeros_right_at_a_checkpoint_s_covered_address_are_cut_without_a_full_replay() {
        let dir = tempfile::tempdir().unwrap();
        let log = log_in(dir.path(), 26, 64 << 20, 0);
        let value = vec![7u8; 3000];
        let mut addrs = Vec::new();
        for k in 0u32..100 {
            addrs.push(log.append(&entry(&k.to_le_bytes(), &value)).unwrap());
        }
        log.sync_all().unwrap();
        let covered = log.tail();
        let storage = log.storage();
        let path = storage.path(0);
        drop(log);
        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.set_len(covered + (1 << 20)).unwrap();
        drop(file);
        let storage = Segments::new(dir.path(), 26, 1);
        let (hasher, retired) = (KeyHasher::new(1), Retired::default());
        let replay = |from| {
            let index = Index::with_capacity(1024).unwrap();
            let mut found = Replayed::default();
            replay(
                &storage,
                &retired,
                &index,
                &hasher,
                Mode::Repair,
                Span { from, claimed: 0 },
                &mut found,
            )
        };
        // Inside the 51st record: no boundary, so no cut either.
        assert!(matches!(
            replay(addrs[50] + 100),
            Err(Error::Corruption { .. })
        ));
        assert_eq!(std::fs::metadata(&path).unwrap().len(), covered + (1 << 20));
        assert_eq!(replay(covered).unwrap(), covered);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), covered);
    }
}
