//! [`salvage`]: every key a damaged store's segment files still hold, read
//! without opening the store.
//!
//! Open refuses a store with damage it cannot cut off (in a sealed segment,
//! or below the newest segment's durable mark), since the records after the
//! damage were acknowledged. Salvage reads every segment file in log order
//! as replay does, and where a record fails its checks it scans on, byte by
//! byte, to the next offset where a record (or pad) passes them, so the
//! records after a damaged one are kept. Each key's newest record found
//! that way wins; its value is then read and decoded.
//!
//! What it cannot know: the key of a damaged record, and whether the
//! damage cut a write batch (the records around it that may belong to one
//! are left out, see [`SalvageReport::batch_records_dropped`]). A key
//! whose newest record was damaged or left out comes back with its value
//! before that (or, when that record was a tombstone, comes back at all),
//! so every damaged range is reported, and the salvaged keys belong in a new store (the
//! command-line tool's `salvage` writes them as `export` lines for
//! `import`). A record that passes its checks inside damaged bytes is taken
//! as one (a CRC32C match by chance is a 1 in 2^32 event per offset
//! scanned, behind a header that must parse first).

use std::collections::HashMap;
use std::path::Path;

use crate::clock::now_ms;
use crate::compression::{Codec, Compression};
use crate::dictionary::Dictionary;
use crate::error::{Error, Result};
use crate::log::read_cold;
use crate::record::Record;
use crate::recovery::{Chunk, Next, next_record};
use crate::storage::{SEGMENT_HEADER_BYTES, Segments};
use crate::{manifest, meta};

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
    /// Byte ranges that held no valid record, as (log address, length in
    /// bytes): damage, including a segment whose header is damaged (its
    /// whole file). Zeros from a range to the end of a file (room
    /// allocated ahead of the writes) are not listed.
    pub damaged: Vec<(u64, u64)>,
    /// Records that passed their checks but were left out because damage
    /// may have cut their write batch (a batch is all or nothing, as in
    /// recovery): the records of a batch read before the damage, and after
    /// it every record up to and including the first that ends a batch
    /// (for a store without batches, the first record after each damaged
    /// range), since a damaged record's flags cannot be trusted to say
    /// whether it began or continued a batch.
    pub batch_records_dropped: u64,
}

impl SalvageReport {
    /// Whether every byte of every segment file held valid records.
    pub fn is_whole(&self) -> bool {
        self.damaged.is_empty() && self.batch_records_dropped == 0
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
    for seg in storage
        .list()?
        .into_iter()
        .filter(|&s| !retired.contains(s))
    {
        report.segments += 1;
        let start = storage.segment_start(seg);
        let end = start + storage.file_len(seg)?.min(storage.segment_size());
        let header_ok = chunk.cover(&storage, start, SEGMENT_HEADER_BYTES as usize, end)?
            && storage
                .check_header(seg, chunk.slice(start, SEGMENT_HEADER_BYTES as usize))
                .is_ok();
        if !header_ok {
            // Another store's file, or one whose place in the log is
            // unknown: none of its records can be trusted to be this
            // segment's.
            report.damaged.push((start, end - start));
            continue;
        }
        let mut pos = start + SEGMENT_HEADER_BYTES;
        let mut damaged_from = None;
        // Records of a batch whose last record has not been read yet.
        let mut batch: Vec<(Vec<u8>, u64, bool)> = Vec::new();
        // Set at damage, until a record that ends a batch: the records
        // read meanwhile may belong to a batch the damage cut (a damaged
        // record's flags cannot be trusted), so they are left out.
        let mut cut_batch = false;
        while pos < end {
            let len = match next_record(&storage, &mut chunk, pos, end)? {
                Next::Invalid => {
                    damaged_from.get_or_insert(pos);
                    report.batch_records_dropped += batch.len() as u64;
                    batch.clear();
                    cut_batch = true;
                    pos += 1;
                    continue;
                }
                Next::Pad(len) => len,
                Next::Record(header) => {
                    let len = header.total_len();
                    report.records += 1;
                    if cut_batch {
                        report.batch_records_dropped += 1;
                        cut_batch = header.continues_batch();
                    } else {
                        let record = Record::verified(header, chunk.slice(pos, len));
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
            if let Some(from) = damaged_from.take() {
                report.damaged.push((from, pos - from));
            }
            pos += len;
        }
        report.batch_records_dropped += batch.len() as u64;
        if let Some(from) = damaged_from
            && !zeros_to(&storage, &mut chunk, from, end)?
        {
            report.damaged.push((from, end - from));
        }
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
                report.damaged.push((addr, header.total_len() as u64));
                continue;
            }
            Err(e) => return Err(e),
        }
        f(&key, &value, record.expires_at)?;
        report.keys += 1;
    }
    Ok(report)
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
