//! [`salvage`]: every key a damaged store's segment files still hold, read
//! without opening the store.
//!
//! Open refuses a store with damage it cannot cut off (in a sealed segment,
//! below the newest segment's durable mark, or a log shorter than its
//! checkpoint records), since the records after the damage were
//! acknowledged. Salvage reads every segment file in log order as replay
//! does (one whose header is damaged too: the file's name gives its place;
//! one with a sound header naming another store or segment is skipped),
//! and where a record fails its checks it goes on after it:
//! - at the end its header states, when that header still parses and a
//!   record (or a pad that ends a page, or the end of the file's bytes) is
//!   found there, so that only the damaged record is lost;
//! - else at the next page boundary (every [`PAGE_BYTES`] of log address,
//!   where the appender starts a page with a record) at which a record
//!   passes its checks, losing the records in between (their keys are
//!   named when their headers parse). Not at an arbitrary byte: a value
//!   may itself hold bytes that form valid records (a server client can
//!   store any bytes), and taking them for records of the log would return
//!   data never written for their keys.
//!
//! Record headers carry no checksum of their own, so the framing past
//! damage can still be fooled, only in ways that need damage to land just
//! so: a damaged length that points at records planted inside the same
//! record's value, or a page boundary that falls inside a record or batch
//! (a record or write batch larger than a page, or the two-page first page
//! after a recovery) where planted bytes form a record. Review the keys
//! the report names, and the values of keys written near a damaged range.
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
use crate::recovery::{Chunk, Next, next_record, nonzero_bytes, reaches};
use crate::storage::{self, SEGMENT_HEADER_BYTES, Segments};
use crate::{checkpoint, manifest, meta};

/// A range of the log that held no valid record.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Damage {
    /// Log address of its first byte.
    pub addr: u64,
    /// Its length, in bytes.
    pub len: u64,
    /// The keys the range's bytes name, unchecked (the damage may be in a
    /// key, and a record found inside a value names a key too), for
    /// review, at most 1,000: the damaged record's when its header still
    /// parses, and, in a range skipped to reach the next page, those of the
    /// records whose headers parse one after the other from it and of every
    /// record found byte by byte that passes its checks.
    pub probable_keys: Vec<Vec<u8>>,
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
    /// In address order, disjoint (ranges found by two of those checks are
    /// merged).
    pub missing: Vec<(u64, u64)>,
    /// Keys of records that passed their checks but were left out because
    /// damage may have cut their write batch (a batch is all or nothing, as
    /// in recovery): the records of a batch read before the damage, and
    /// after it every record up to and including the first that ends a
    /// batch (for a store without batches, the first record after each
    /// damaged range), since a damaged record's flags cannot be trusted to
    /// say whether it began or continued a batch.
    pub left_out: Vec<Vec<u8>>,
    /// Files other than the segments that could not be used, and what
    /// salvage did instead, one line each.
    pub warnings: Vec<String>,
}

impl SalvageReport {
    /// Whether every byte the store should hold was there and held valid
    /// records, and every file could be used.
    pub fn is_whole(&self) -> bool {
        self.damaged.is_empty()
            && self.missing.is_empty()
            && self.left_out.is_empty()
            && self.warnings.is_empty()
    }
}

/// Calls `f(key, value, expires_at)` (`expires_at` in Unix milliseconds)
/// for every live key whose newest record in the segment files of the
/// store in `path` passes its checks, in log order, skipping damaged bytes
/// (see the module docs for what a key whose newest record was damaged
/// gets). Changes nothing; holds the store's lock meanwhile. Expired keys
/// are left out.
///
/// A damaged meta file, manifest of retired segments or compression
/// dictionary does not stop it (see [`SalvageReport::warnings`]).
///
/// # Errors
/// [`Error::InvalidPath`] when `path` holds no store; [`Error::Locked`]
/// when the store is open elsewhere; [`Error::Corruption`] when the meta
/// file is damaged and no segment header says what it held;
/// [`Error::IncompatibleFormat`] for a store of a newer format; errors
/// from `f`; [`Error::Io`], among them an index checkpoint that is there
/// but cannot be read (what it records as durable could not be checked).
pub fn salvage(
    path: impl AsRef<Path>,
    mut f: impl FnMut(&[u8], &[u8], Option<u64>) -> Result<()>,
) -> Result<SalvageReport> {
    let dir = path.as_ref();
    let _lock = meta::lock_shared(dir)?;
    let mut report = SalvageReport::default();
    let meta = match meta::load(dir) {
        Err(e @ Error::Corruption { .. }) => {
            let meta = meta_from_segments(dir).ok_or(e)?;
            report.warnings.push(format!(
                "the meta file is damaged or missing: segment size 2^{} bytes and the \
                 store id taken from a segment header",
                meta.segment_bits
            ));
            meta
        }
        meta => meta?,
    };
    let storage = Segments::read_only(dir, meta.segment_bits, meta.store_id);
    let retired = manifest::load(dir).unwrap_or_else(|e| {
        report.warnings.push(format!(
            "RETIRED is unreadable ({e}): every segment file is read, those compaction \
             retired and a crash left included: their records are older copies, and a key \
             removed since may come back"
        ));
        Default::default()
    });
    let dictionary = Dictionary::load(dir, meta.store_id, 1).unwrap_or_else(|e| {
        report.warnings.push(format!(
            "the compression dictionary is unreadable ({e}): values compressed with it \
             are reported as damaged"
        ));
        None
    });
    let codec = Codec::new(Compression::None, dictionary, storage.segment_size());
    // Each key's newest record found: its address, and whether it is a
    // tombstone.
    let mut newest: HashMap<Vec<u8>, (u64, bool)> = HashMap::new();
    let mut chunk = Chunk::default();
    let segments: Vec<u64> = storage
        .list()?
        .into_iter()
        .filter(|&s| !retired.contains(s))
        .collect();
    // What a sound checkpoint records as durable: the log must reach it.
    let claimed = checkpoint::claimed(dir, meta.store_id)?;
    // Where the last segment read starts and where its file ends, and
    // where the log's valid records end.
    let mut prev: Option<(u64, u64)> = None;
    let mut log_end = 0;
    for (i, &seg) in segments.iter().enumerate() {
        report.segments += 1;
        let start = storage.segment_start(seg);
        let missing_from = if i == 0 { 0 } else { segments[i - 1] + 1 };
        if let Some(gap) = retired.first_missing(missing_from, seg) {
            let from = storage.segment_start(gap);
            report.missing.push((from, start - from));
        }
        let end = start + storage.file_len(seg)?.min(storage.segment_size());
        // The header, or whether it is a sound one of another store or
        // segment (else damaged: the file's name gives its place, and its
        // records are read all the same).
        let header = if chunk.cover(&storage, start, SEGMENT_HEADER_BYTES as usize, end)? {
            let bytes = chunk.slice(start, SEGMENT_HEADER_BYTES as usize);
            storage
                .check_header(seg, bytes)
                .map_err(|_| storage::header_checksum_ok(bytes))
        } else {
            Err(false)
        };
        match header {
            Ok(h) => {
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
            Err(foreign) => {
                report.damaged.push(Damage {
                    addr: start,
                    len: if foreign {
                        end - start
                    } else {
                        SEGMENT_HEADER_BYTES.min(end - start)
                    },
                    probable_keys: Vec::new(),
                });
                if foreign {
                    // A sound header of another store or place: none of
                    // its records belong here.
                    prev = None;
                    continue;
                }
            }
        }
        let newest_seg = seg == *segments.last().expect("a segment");
        let durable = header.map_or(start, |h| start + h.durable_len);
        // Below it, zeros are missing records, not room allocated ahead.
        let floor = if newest_seg {
            durable.max(claimed.min(start + storage.segment_size()))
        } else {
            end
        };
        log_end = scan_segment(
            &storage,
            &mut chunk,
            seg,
            end,
            floor,
            &mut report,
            &mut newest,
        )?;
        if newest_seg && end < durable {
            report.missing.push((end, durable - end));
        }
        prev = Some((start, end));
    }
    if !reaches(&storage, log_end, claimed) {
        report.missing.push((log_end, claimed - log_end));
    }
    report.missing = merged(std::mem::take(&mut report.missing));
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
                    probable_keys: vec![key.clone()],
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
/// say, and notes damage and records left out in `report`; zeros to the
/// end of the file at or past `floor` are room allocated ahead, not
/// damage. Returns where its last valid record ends.
fn scan_segment(
    storage: &Segments,
    chunk: &mut Chunk,
    seg: u64,
    end: u64,
    floor: u64,
    report: &mut SalvageReport,
    newest: &mut HashMap<Vec<u8>, (u64, bool)>,
) -> Result<u64> {
    let mut pos = storage.segment_start(seg) + SEGMENT_HEADER_BYTES;
    let mut valid_end = pos;
    // Records held back, as recovery holds them: those of a batch whose
    // last record has not been read yet, and those of an update in
    // place's span not read to its end (`hold_until`).
    let mut batch: Vec<(Vec<u8>, u64, bool)> = Vec::new();
    let mut in_batch = false;
    let mut hold_until = 0;
    // Set at damage, until a record that ends a batch: the records read
    // meanwhile may belong to a batch the damage cut (a damaged record's
    // flags cannot be trusted), so they are left out.
    let mut cut_batch = false;
    while pos < end {
        let len = match next_record(storage, chunk, pos, end)? {
            Next::Invalid => {
                report.left_out.extend(batch.drain(..).map(|(key, ..)| key));
                (in_batch, hold_until) = (false, 0);
                cut_batch = true;
                let (resume, probable_keys) = resume_after(storage, chunk, pos, end)?;
                if resume >= end && pos >= floor && nonzero_bytes(storage, chunk, pos, end)? == 0 {
                    // Room allocated ahead of the records, not damage.
                    break;
                }
                report.damaged.push(Damage {
                    addr: pos,
                    len: resume - pos,
                    probable_keys,
                });
                pos = resume;
                continue;
            }
            Next::Pad(len) => {
                // A batch never reaches a pad (it lies in one page, and a
                // pad ends one): recovery takes the batch for torn. A span
                // may cross pages.
                if in_batch {
                    report.left_out.extend(batch.drain(..).map(|(key, ..)| key));
                    (in_batch, hold_until) = (false, 0);
                }
                len
            }
            Next::Record(header) => {
                let len = header.total_len();
                let record = Record::verified(header, chunk.slice(pos, len));
                report.records += 1;
                if cut_batch {
                    report.left_out.push(record.key.to_vec());
                    cut_batch = header.continues_batch();
                } else {
                    batch.push((record.key.to_vec(), pos, header.is_tombstone()));
                    hold_until = hold_until.max(pos + u64::from(header.span));
                    in_batch = header.continues_batch();
                    if !in_batch && pos + len as u64 >= hold_until {
                        for (key, addr, tombstone) in batch.drain(..) {
                            newest.insert(key, (addr, tombstone));
                        }
                    }
                }
                len as u64
            }
        };
        pos += len;
        valid_end = pos;
    }
    report.left_out.extend(batch.drain(..).map(|(key, ..)| key));
    Ok(valid_end)
}

/// Most keys [`Damage::probable_keys`] lists for one range.
const MAX_PROBABLE_KEYS: usize = 1000;

/// Where reading goes on after the record at `pos` failed its checks (see
/// the module docs), and the keys the skipped bytes name (see
/// [`Damage::probable_keys`]).
pub(crate) fn resume_after(
    storage: &Segments,
    chunk: &mut Chunk,
    pos: u64,
    end: u64,
) -> Result<(u64, Vec<Vec<u8>>)> {
    let page = PAGE_BYTES as u64;
    // A pad fills its page to the end; anything else where a pad should
    // not be is no place to go on from.
    let starts_here = |chunk: &mut Chunk, at: u64, pad_ok: bool| -> Result<bool> {
        Ok(match next_record(storage, chunk, at, end)? {
            Next::Record(_) => true,
            Next::Pad(len) => pad_ok && (at + len).is_multiple_of(page),
            Next::Invalid => false,
        })
    };
    if chunk.cover(storage, pos, HEADER_BYTES, end)?
        && let Ok(header) = Header::parse(chunk.slice(pos, HEADER_BYTES), pos)
    {
        let at = pos + header.total_len() as u64;
        if at == end || (at < end && starts_here(chunk, at, true)?) {
            let keys = record_keys(storage, chunk, pos, at, end)?;
            return Ok((at, keys));
        }
    }
    let mut boundary = (pos / page + 1) * page;
    while boundary < end && !starts_here(chunk, boundary, false)? {
        boundary += page;
    }
    let resume = boundary.min(end);
    let mut keys = record_keys(storage, chunk, pos, resume, end)?;
    // For naming only (a match inside a value costs a line of review), the
    // records the skip loses, found byte by byte: a damaged length throws
    // the walk above off at once.
    let mut at = pos + 1;
    while at < resume && keys.len() < MAX_PROBABLE_KEYS {
        if let Next::Record(header) = next_record(storage, chunk, at, end)? {
            let len = header.total_len();
            let key = Record::verified(header, chunk.slice(at, len)).key;
            if !keys.iter().any(|k| k == key) {
                keys.push(key.to_vec());
            }
            at += len as u64;
        } else {
            at += 1;
        }
    }
    Ok((resume, keys))
}

/// The keys of the records whose headers parse one after the other from
/// `from`, up to `to` (the first one's bytes need not verify: it is the
/// damaged one): unchecked.
fn record_keys(
    storage: &Segments,
    chunk: &mut Chunk,
    from: u64,
    to: u64,
    end: u64,
) -> Result<Vec<Vec<u8>>> {
    let mut keys: Vec<Vec<u8>> = Vec::new();
    let mut at = from;
    while at < to
        && keys.len() < MAX_PROBABLE_KEYS
        && chunk.cover(storage, at, HEADER_BYTES, end)?
    {
        let bytes = chunk.slice(at, HEADER_BYTES);
        // Zeros parse as an empty record: lost or unwritten bytes, no key.
        if bytes.iter().all(|&b| b == 0) {
            break;
        }
        let Ok(header) = Header::parse(bytes, at) else {
            break;
        };
        let key_at = at + (header.total_len() - header.key_len - header.value_len) as u64;
        if !header.is_pad() && chunk.cover(storage, key_at, header.key_len, end)? {
            let key = chunk.slice(key_at, header.key_len);
            if !keys.iter().any(|k| k == key) {
                keys.push(key.to_vec());
            }
        }
        at += header.total_len() as u64;
    }
    Ok(keys)
}

/// What a damaged meta file held that salvage needs (the segment size and
/// the store id), from the first segment file whose header's checksum
/// holds; `None` when none does.
fn meta_from_segments(dir: &Path) -> Option<meta::Meta> {
    let mut names: Vec<(u64, std::path::PathBuf)> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter_map(|p| {
            let seg = p
                .file_name()?
                .to_str()?
                .strip_suffix(".seg")?
                .parse()
                .ok()?;
            Some((seg, p))
        })
        .collect();
    names.sort();
    names.into_iter().find_map(|(seg, path)| {
        let mut header = [0u8; SEGMENT_HEADER_BYTES as usize];
        let file = std::fs::File::open(path).ok()?;
        std::os::unix::fs::FileExt::read_exact_at(&file, &mut header, 0).ok()?;
        let bits = u32::from_le_bytes(header[12..16].try_into().expect("4 bytes"));
        let named = u64::from_le_bytes(header[16..24].try_into().expect("8 bytes"));
        (storage::header_checksum_ok(&header) && (20..=32).contains(&bits) && named == seg).then(
            || meta::Meta {
                version: crate::FORMAT_VERSION,
                segment_bits: bits,
                hash_seed: 0,
                store_id: u64::from_le_bytes(header[24..32].try_into().expect("8 bytes")),
            },
        )
    })
}

/// `ranges` of (address, length) in address order, those that overlap or
/// touch merged into one.
fn merged(mut ranges: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    ranges.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
    for (at, len) in ranges {
        match out.last_mut() {
            Some((prev, prev_len)) if at <= *prev + *prev_len => {
                *prev_len = (*prev_len).max(at + len - *prev);
            }
            _ => out.push((at, len)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::merged;

    /// Regression: the newest segment cut in half below its durable mark,
    /// under a checkpoint that claims more, was named twice (the cut file
    /// and the short log), one range inside the other.
    #[test]
    fn missing_ranges_are_merged_in_address_order() {
        assert_eq!(
            merged(vec![(3_648_128, 502_400), (3_593_920, 556_608)]),
            [(3_593_920, 556_608)]
        );
        assert_eq!(
            merged(vec![(50, 10), (0, 10), (10, 5), (40, 12), (70, 1)]),
            [(0, 15), (40, 20), (70, 1)]
        );
        assert!(merged(Vec::new()).is_empty());
    }
}
