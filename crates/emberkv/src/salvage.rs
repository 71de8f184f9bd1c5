//! [`salvage`]: every key a damaged store's segment files still hold, read
//! without opening the store.
//!
//! Open refuses a store with damage it cannot cut off (in a sealed segment,
//! below the newest segment's durable mark, or a log shorter than its
//! checkpoint records), since the records after the damage were
//! acknowledged. Salvage reads every segment file in log order as replay
//! does (a damaged segment header included: the file's name gives its
//! place), and where a record fails its checks it goes on after it:
//! - at the end its header states, when that header still parses and a
//!   record (or pad, or the end of the file's records) is found there, so
//!   that only the damaged record is lost;
//! - else at the next page boundary (every [`PAGE_BYTES`] of log address,
//!   where the appender starts each page with a record) at which a record
//!   passes its checks, losing the records in between. Never at an
//!   arbitrary byte: a value may itself hold bytes that form a valid
//!   record (a server client can store any bytes), and taking them for one
//!   would return data never written for its key. The one case left: a
//!   record larger than a page spans page boundaries, so damage to its
//!   header lets a record stored inside its value at a boundary pass.
//!
//! Each key's newest record found that way wins; its value is then read and
//! decoded. What salvage cannot know: the key of a damaged record (the key
//! its header and bytes suggest is reported, unchecked), and whether the
//! damage cut a write batch (the records around it that may belong to one
//! are left out and named, see [`SalvageReport::left_out`]). A key whose
//! newest record was damaged or left out comes back with its value before
//! that, if one remains (or, when that record was a tombstone, comes back
//! at all), so the report names all of them, and the salvaged keys belong
//! in a new store (the command-line tool's `salvage` writes them as
//! `export` lines for `import`). Log ranges the files should hold but do
//! not (a missing segment file, a file shorter than its successor's header,
//! its own durable mark or the checkpoint record) are reported too.

use std::collections::HashMap;
use std::path::Path;

use crate::clock::now_ms;
use crate::compression::{Codec, Compression};
use crate::dictionary::Dictionary;
use crate::error::{Error, Result};
use crate::log::PAGE_BYTES;
use crate::log::read_cold;
use crate::record::{HEADER_BYTES, Header, Record};
use crate::recovery::{Chunk, Next, next_record};
use crate::storage::{SEGMENT_HEADER_BYTES, Segments};
use crate::{checkpoint, manifest, meta};

/// A range of the log that held no valid record.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Damage {
    /// Log address of its first byte.
    pub addr: u64,
    /// Its length, in bytes.
    pub len: u64,
    /// The key the damaged record's bytes name, when its header still
    /// parses: unchecked (the damage may be in the key), for review.
    pub probable_key: Option<Vec<u8>>,
}

/// What [`salvage`] found.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct SalvageReport {
    /// Segment files read.
    pub segments: usize,
    /// Records that passed their checks (pads not counted).
    pub records: u64,
    /// Live keys passed to the callback.
    pub keys: u64,
    /// Byte ranges that held no valid record: damage (a damaged segment
    /// header is its 64 bytes). Zeros from a range to the end of a file
    /// (room allocated ahead of the writes) are not listed.
    pub damaged: Vec<Damage>,
    /// Log ranges, as (log address, length in bytes), that the files
    /// should hold but do not: a segment file missing between others (not
    /// retired), a sealed segment's file shorter than the length its
    /// successor's header records, the newest one shorter than its durable
    /// mark, a log shorter than what the index checkpoint records durable.
    pub missing: Vec<(u64, u64)>,
    /// Keys of records that passed their checks but were left out because
    /// damage may have cut their write batch (a batch is all or nothing, as
    /// in recovery): the records of a batch read before the damage, and
    /// after it every record up to and including the first that ends a
    /// batch (for a store without batches, the first record after each
    /// damaged range), since a damaged record's flags cannot be trusted to
    /// say whether it began or continued a batch.
    pub left_out: Vec<Vec<u8>>,
}

impl SalvageReport {
    /// Whether every byte the store should hold was there and held valid
    /// records.
    pub fn is_whole(&self) -> bool {
        self.damaged.is_empty() && self.missing.is_empty() && self.left_out.is_empty()
    }
}

/// Calls `f(key, value, expires_at)` (`expires_at` in Unix milliseconds)
/// for every live key whose newest record in the segment files of the
/// store in `path` passes its checks, in log order, skipping damaged bytes
/// (see the module docs for what a key whose newest record was damaged
/// gets). Changes nothing; holds the store's lock meanwhile. Expired keys
/// are left out.
///
/// # Errors
/// [`Error::InvalidPath`] when `path` holds no store; [`Error::Locked`]
/// when the store is open elsewhere; errors reading the meta file, the
/// retired-segment manifest or the compression dictionary
/// ([`Error::Corruption`], [`Error::IncompatibleFormat`]); errors from
/// `f`; [`Error::Io`].
pub fn salvage(
    path: impl AsRef<Path>,
    mut f: impl FnMut(&[u8], &[u8], Option<u64>) -> Result<()>,
) -> Result<SalvageReport> {
    let dir = path.as_ref();
    if !dir.join(meta::META_FILE).exists() {
        return Err(Error::InvalidPath {
            path: dir.to_path_buf(),
            reason: "holds no emberkv store".into(),
        });
    }
    let _lock = meta::lock(dir)?;
    let meta = meta::load_or_create(dir, 30)?;
    let storage = Segments::new(dir, meta.segment_bits, meta.store_id);
    let retired = manifest::load(dir)?;
    let codec = Codec::new(
        Compression::None,
        Dictionary::load(dir, meta.store_id, 1)?,
        storage.segment_size(),
    );
    let mut report = SalvageReport::default();
    // Each key's newest record found: its address, and whether it is a
    // tombstone.
    let mut newest: HashMap<Vec<u8>, (u64, bool)> = HashMap::new();
    let mut chunk = Chunk::default();
    let segments: Vec<u64> = storage
        .list()?
        .into_iter()
        .filter(|&s| !retired.contains(s))
        .collect();
    // Where the last segment read starts and where its file ends.
    let mut prev: Option<(u64, u64)> = None;
    for (i, &seg) in segments.iter().enumerate() {
        report.segments += 1;
        let start = storage.segment_start(seg);
        let missing_from = if i == 0 { 0 } else { segments[i - 1] + 1 };
        if let Some(gap) = retired.first_missing(missing_from, seg) {
            let from = storage.segment_start(gap);
            report.missing.push((from, start - from));
        }
        let end = start + storage.file_len(seg)?.min(storage.segment_size());
        let header = if chunk.cover(&storage, start, SEGMENT_HEADER_BYTES as usize, end)? {
            storage
                .check_header(seg, chunk.slice(start, SEGMENT_HEADER_BYTES as usize))
                .ok()
        } else {
            None
        };
        match header {
            Some(h) => {
                if let Some((prev_start, prev_end)) = prev.filter(|_| seg > 0)
                    && segments.get(i.wrapping_sub(1)) == Some(&(seg - 1))
                    && prev_end < prev_start + h.prev_len
                {
                    report
                        .missing
                        .push((prev_end, prev_start + h.prev_len - prev_end));
                }
            }
            // The file's name gives its place: its records are read all
            // the same.
            None => report.damaged.push(Damage {
                addr: start,
                len: SEGMENT_HEADER_BYTES.min(end - start),
                probable_key: None,
            }),
        }
        scan_segment(&storage, &mut chunk, seg, end, &mut report, &mut newest)?;
        let durable = header.map_or(0, |h| start + h.durable_len);
        if seg == *segments.last().expect("a segment") && end < durable {
            report.missing.push((end, durable - end));
        }
        prev = Some((start, end));
    }
    let log_end = prev.map_or(0, |(_, end)| end);
    if let Ok(Some(c)) = checkpoint::load(dir, meta.store_id)
        && c.covered > log_end
    {
        report.missing.push((log_end, c.covered - log_end));
    }
    let mut live: Vec<(u64, Vec<u8>)> = newest
        .into_iter()
        .filter(|(_, (_, tombstone))| !tombstone)
        .map(|(key, (addr, _))| (addr, key))
        .collect();
    live.sort_unstable();
    let (mut bytes, mut value) = (Vec::new(), Vec::new());
    let now = now_ms();
    for (addr, key) in live {
        let header = read_cold(&storage, addr, &mut bytes)?;
        let record = Record::verify(header, &bytes, addr)?;
        if record.expires_at.is_some_and(|at| at <= now) {
            continue;
        }
        match record.value_into(&codec, &mut value, addr) {
            Ok(()) => {}
            // A frame no compressor wrote behind a valid checksum: damage.
            Err(Error::Corruption { .. }) => {
                report.damaged.push(Damage {
                    addr,
                    len: header.total_len() as u64,
                    probable_key: Some(key.clone()),
                });
                continue;
            }
            Err(e) => return Err(e),
        }
        f(&key, &value, record.expires_at)?;
        report.keys += 1;
    }
    Ok(report)
}

/// Reads the records of segment `seg`, whose file's bytes end at log
/// address `end`, into `newest`, going on past damage as the module docs
/// say, and notes damage and records left out in `report`.
fn scan_segment(
    storage: &Segments,
    chunk: &mut Chunk,
    seg: u64,
    end: u64,
    report: &mut SalvageReport,
    newest: &mut HashMap<Vec<u8>, (u64, bool)>,
) -> Result<()> {
    let mut pos = storage.segment_start(seg) + SEGMENT_HEADER_BYTES;
    // Records of a batch whose last record has not been read yet.
    let mut batch: Vec<(Vec<u8>, u64, bool)> = Vec::new();
    // Set at damage, until a record that ends a batch: the records read
    // meanwhile may belong to a batch the damage cut (a damaged record's
    // flags cannot be trusted), so they are left out.
    let mut cut_batch = false;
    while pos < end {
        let len = match next_record(storage, chunk, pos, end)? {
            Next::Invalid => {
                report.left_out.extend(batch.drain(..).map(|(key, ..)| key));
                cut_batch = true;
                let (resume, probable_key) = resume_after(storage, chunk, pos, end)?;
                if resume >= end && zeros_to(storage, chunk, pos, end)? {
                    // Room allocated ahead of the records, not damage.
                    break;
                }
                report.damaged.push(Damage {
                    addr: pos,
                    len: resume - pos,
                    probable_key,
                });
                pos = resume;
                continue;
            }
            Next::Pad(len) => len,
            Next::Record(header) => {
                let len = header.total_len();
                let record = Record::verified(header, chunk.slice(pos, len));
                report.records += 1;
                if cut_batch {
                    report.left_out.push(record.key.to_vec());
                    cut_batch = header.continues_batch();
                } else {
                    batch.push((record.key.to_vec(), pos, header.is_tombstone()));
                    if !header.continues_batch() {
                        for (key, addr, tombstone) in batch.drain(..) {
                            newest.insert(key, (addr, tombstone));
                        }
                    }
                }
                len as u64
            }
        };
        pos += len;
    }
    report.left_out.extend(batch.drain(..).map(|(key, ..)| key));
    Ok(())
}

/// Where reading goes on after the record at `pos` failed its checks (see
/// the module docs), and the key its bytes name when its header parses.
fn resume_after(
    storage: &Segments,
    chunk: &mut Chunk,
    pos: u64,
    end: u64,
) -> Result<(u64, Option<Vec<u8>>)> {
    let mut probable_key = None;
    if chunk.cover(storage, pos, HEADER_BYTES, end)?
        && let Ok(header) = Header::parse(chunk.slice(pos, HEADER_BYTES), pos)
    {
        let stated = pos + header.total_len() as u64;
        let key_at = pos + (header.total_len() - header.key_len - header.value_len) as u64;
        if !header.is_pad() && chunk.cover(storage, key_at, header.key_len, end)? {
            probable_key = Some(chunk.slice(key_at, header.key_len).to_vec());
        }
        if stated == end
            || (stated < end && !matches!(next_record(storage, chunk, stated, end)?, Next::Invalid))
        {
            return Ok((stated, probable_key));
        }
    }
    let mut boundary = (pos / PAGE_BYTES as u64 + 1) * PAGE_BYTES as u64;
    while boundary < end {
        if !matches!(next_record(storage, chunk, boundary, end)?, Next::Invalid) {
            return Ok((boundary, probable_key));
        }
        boundary += PAGE_BYTES as u64;
    }
    Ok((end, probable_key))
}

/// Whether the bytes from `from` to `end` are all zeros.
fn zeros_to(storage: &Segments, chunk: &mut Chunk, mut from: u64, end: u64) -> Result<bool> {
    while from < end {
        let len = (end - from).min(1 << 20) as usize;
        if !chunk.cover(storage, from, len, end)? {
            return Ok(false);
        }
        if chunk.slice(from, len).iter().any(|&b| b != 0) {
            return Ok(false);
        }
        from += len as u64;
    }
    Ok(true)
}
