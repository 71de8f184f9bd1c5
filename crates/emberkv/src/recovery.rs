//! Recovery: rebuild the index by replaying the segment files.
//!
//! The segment files alone are enough to recover. Replay reads every
//! segment in order, in large sequential chunks, applies each record to the
//! index (a tombstone removes its key), skips pads, and stops at the first
//! record that fails a check:
//! - in the newest segment that is a torn or corrupt tail: the file is cut
//!   there (and the cut fdatasynced), and the log resumes from that address;
//! - in an older segment it is [`Error::Corruption`] naming the address,
//!   since a segment is fdatasynced before its successor gets any byte.
//!
//! A newest segment that holds no more than a damaged header (a crash while
//! creating it) is re-created empty.

use crate::error::{Error, Result};
use crate::index::{Index, KeyHasher};
use crate::log::{PAGE_BYTES, read_cold};
use crate::record::{HEADER_BYTES, Header, Record};
use crate::storage::{SEGMENT_HEADER_BYTES, Segments};

/// Bytes read per sequential read during replay.
const CHUNK_BYTES: usize = 8 << 20;

/// A window of a segment file held in memory during replay.
struct Chunk {
    addr: u64,
    bytes: Vec<u8>,
}

impl Chunk {
    fn holds(&self, addr: u64, len: usize) -> bool {
        addr >= self.addr && addr + len as u64 <= self.addr + self.bytes.len() as u64
    }

    fn slice(&self, addr: u64, len: usize) -> &[u8] {
        let off = (addr - self.addr) as usize;
        &self.bytes[off..off + len]
    }

    /// Makes the chunk cover `addr..addr + len`, reading at most up to
    /// `end`. Returns `false` when the file ends first.
    fn cover(&mut self, storage: &Segments, addr: u64, len: usize, end: u64) -> Result<bool> {
        if self.holds(addr, len) {
            return Ok(true);
        }
        if addr + len as u64 > end {
            return Ok(false);
        }
        let want = len.max(CHUNK_BYTES).min((end - addr) as usize);
        self.bytes.resize(want, 0);
        let n = storage.read_at(addr, &mut self.bytes)?;
        self.bytes.truncate(n);
        self.addr = addr;
        Ok(n >= len)
    }
}

/// Replays the store's segments into `index` and returns the log tail (the
/// address the next record goes to).
///
/// # Errors
/// [`Error::Corruption`] for damage outside the newest segment's tail or a
/// missing segment; [`Error::IncompatibleFormat`]; I/O errors.
pub(crate) fn replay(storage: &Segments, index: &Index, hasher: &KeyHasher) -> Result<u64> {
    let segments = storage.list()?;
    let Some(&newest) = segments.last() else {
        storage.create(0)?;
        return Ok(SEGMENT_HEADER_BYTES);
    };
    if let Some(w) = segments.windows(2).find(|w| w[1] != w[0] + 1) {
        return Err(Error::corruption(
            storage.segment_start(w[0] + 1),
            format!("segment file {} is missing", w[0] + 1),
        ));
    }
    let mut chunk = Chunk {
        addr: 0,
        bytes: Vec::new(),
    };
    let mut scratch = Vec::new();
    let mut tail = 0;
    for seg in segments {
        let start = storage.segment_start(seg);
        let end = start + storage.file_len(seg)?;
        let header_ok = chunk.cover(storage, start, SEGMENT_HEADER_BYTES as usize, end)?;
        let checked = if header_ok {
            storage.check_header(seg, chunk.slice(start, SEGMENT_HEADER_BYTES as usize))
        } else {
            Err(Error::corruption(start, "segment header truncated"))
        };
        match checked {
            Ok(()) => {}
            Err(Error::Corruption { .. })
                if seg == newest && end <= start + SEGMENT_HEADER_BYTES =>
            {
                storage.create(seg)?;
                return Ok(start + SEGMENT_HEADER_BYTES);
            }
            Err(e) => return Err(e),
        }
        let mut pos = start + SEGMENT_HEADER_BYTES;
        while pos < end {
            match next_record(storage, &mut chunk, pos, end)? {
                Next::Pad(len) => pos += len,
                Next::Record(header) => {
                    apply(storage, index, hasher, &chunk, &mut scratch, pos, header)?;
                    pos += header.total_len() as u64;
                }
                Next::Invalid if seg == newest => {
                    storage.truncate(seg, pos)?;
                    break;
                }
                Next::Invalid => {
                    return Err(Error::corruption(
                        pos,
                        "invalid record before the end of a sealed segment",
                    ));
                }
            }
        }
        tail = pos;
    }
    Ok(tail)
}

/// What replay finds at an address.
enum Next {
    /// A pad of this many bytes.
    Pad(u64),
    /// A record whose checksum verified.
    Record(Header),
    /// Bytes that are not a valid record: a torn or corrupt tail.
    Invalid,
}

/// Decodes the record at `pos`, reading through `chunk`.
fn next_record(storage: &Segments, chunk: &mut Chunk, pos: u64, end: u64) -> Result<Next> {
    if !chunk.cover(storage, pos, HEADER_BYTES, end)? {
        return Ok(Next::Invalid);
    }
    let Ok(header) = Header::parse(chunk.slice(pos, HEADER_BYTES), pos) else {
        return Ok(Next::Invalid);
    };
    let total = header.total_len();
    let next = pos + total as u64;
    // The appender leaves either no room or room for a pad in a page.
    let room = next.next_multiple_of(PAGE_BYTES as u64) - next;
    if room != 0 && room < HEADER_BYTES as u64 || next > end {
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

/// Applies the verified record at `pos` (held whole in `chunk`) to the index.
fn apply(
    storage: &Segments,
    index: &Index,
    hasher: &KeyHasher,
    chunk: &Chunk,
    scratch: &mut Vec<u8>,
    pos: u64,
    header: Header,
) -> Result<()> {
    // `next_record` verified the checksum.
    let key = chunk.slice(pos + HEADER_BYTES as u64, header.key_len);
    let hash = hasher.hash(key);
    let mut writer = index.writer(hash);
    let mut key_at = |addr: u64| -> Result<Vec<u8>> {
        if chunk.holds(addr, HEADER_BYTES) {
            let h = Header::parse(chunk.slice(addr, HEADER_BYTES), addr)?;
            if chunk.holds(addr, HEADER_BYTES + h.key_len) {
                return Ok(chunk.slice(addr + HEADER_BYTES as u64, h.key_len).to_vec());
            }
        }
        let h = read_cold(storage, addr, scratch)?;
        Ok(Record::verify(h, scratch, addr)?.key.to_vec())
    };
    let slot = {
        let mut is_key = |addr| Ok(key_at(addr)? == key);
        writer.slot(&mut is_key, |addr| {
            let mut buf = Vec::new();
            let h = read_cold(storage, addr, &mut buf)?;
            Ok(hasher.hash(Record::verify(h, &buf, addr)?.key))
        })?
    };
    if header.is_tombstone() {
        writer.clear(slot);
    } else {
        writer.set(slot, pos);
    }
    Ok(())
}
