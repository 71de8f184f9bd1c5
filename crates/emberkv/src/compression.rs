//! Compression of the values of cold records: zstd (RFC 8878).
//!
//! Values are compressed when compaction copies them (see `compaction.rs`):
//! a record that outlived the segment it was written in is a cold record,
//! and the writers' path stays free of the cost (zstd level 1 takes 2 to
//! 3 µs per 1 KiB value on this project's machine, about as long as a
//! whole uncompressed insert; decompressing takes about 0.4 µs).
//!
//! A compressed value is stored as its decoded length (4 bytes,
//! little-endian) and one zstd frame without content size, checksum or
//! dictionary id (the record's CRC32C covers the stored bytes). Each value
//! is its own frame, so a read decompresses its own record only. A value
//! that would not shrink by at least a 16th is stored raw: a read of it
//! costs no decompression and the log never grows by compressing.

use std::cell::RefCell;

use crate::error::{Error, Result};

/// How compaction stores the values of the records it copies.
///
/// ```
/// use emberkv::{Compression, Options};
/// let opts = Options::default().compression(Compression::Zstd { level: 3 });
/// assert_eq!(opts.compression, Compression::Zstd { level: 3 });
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Compression {
    /// Values are stored as given.
    None,
    /// Values of at least 64 bytes are compressed with zstd at `level`
    /// (-7 ..= 22; zstd's own scale, where 1 is fast and 3 its default),
    /// when that saves at least a 16th of their size.
    Zstd {
        /// zstd compression level, -7 ..= 22.
        level: i32,
    },
}

/// Levels accepted by [`Compression::Zstd`].
pub(crate) const LEVELS: std::ops::RangeInclusive<i32> = -7..=22;

/// Shortest value worth compressing, in bytes: below it a frame's own
/// overhead (about 10 bytes with the length) eats most of any saving.
pub(crate) const MIN_COMPRESS_BYTES: usize = 64;

/// Bytes of the decoded length in front of the frame.
pub(crate) const LEN_BYTES: usize = 4;

thread_local! {
    /// This thread's compression context and the level it is set to.
    static COMPRESSOR: RefCell<Option<(i32, zstd::bulk::Compressor<'static>)>> =
        const { RefCell::new(None) };
    /// This thread's decompression context and a buffer for a payload
    /// that must leave the buffer it is decompressed into.
    static DECOMPRESSOR: RefCell<Option<(zstd::bulk::Decompressor<'static>, Vec<u8>)>> =
        const { RefCell::new(None) };
}

/// Compresses `value` at zstd `level` into `out` (replacing its contents)
/// as the stored form described in the module docs. Returns `false`, with
/// `out` unspecified, when the value is shorter than
/// [`MIN_COMPRESS_BYTES`], would not shrink by a 16th, or a compression
/// context cannot be had: the value is then stored raw.
pub(crate) fn compress(level: i32, value: &[u8], out: &mut Vec<u8>) -> bool {
    if value.len() < MIN_COMPRESS_BYTES || value.len() > u32::MAX as usize {
        return false;
    }
    // The frame must fit in what is left after the length once a 16th is
    // saved; zstd fails with "destination too small" otherwise.
    let room = value.len() - value.len() / 16 - LEN_BYTES;
    COMPRESSOR.with(|cell| {
        let mut cell = cell.borrow_mut();
        if cell.as_ref().is_none_or(|(l, _)| *l != level) {
            *cell = new_compressor(level).map(|c| (level, c));
        }
        let Some((_, compressor)) = cell.as_mut() else {
            return false;
        };
        out.clear();
        out.extend_from_slice(&(value.len() as u32).to_le_bytes());
        let mut frame = std::io::Cursor::new(&mut *out);
        frame.set_position(LEN_BYTES as u64);
        frame.get_mut().reserve_exact(room);
        // The frame is bounded by the room reserved, not by the capacity
        // the allocator happened to give.
        let written = compressor.compress_to_buffer(value, &mut frame);
        matches!(written, Ok(n) if n <= room)
    })
}

fn new_compressor(level: i32) -> Option<zstd::bulk::Compressor<'static>> {
    let mut c = zstd::bulk::Compressor::new(level).ok()?;
    c.include_checksum(false).ok()?;
    c.include_contentsize(false).ok()?;
    c.include_dictid(false).ok()?;
    Some(c)
}

/// Decoded length of the compressed `payload` (a record's stored value).
///
/// # Errors
/// [`Error::Corruption`] (at `addr`) when the payload is shorter than its
/// length field or the length exceeds [`crate::MAX_VALUE_BYTES`].
pub(crate) fn decoded_len(payload: &[u8], addr: u64) -> Result<usize> {
    let len = payload
        .get(..LEN_BYTES)
        .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize)
        .ok_or_else(|| Error::corruption(addr, "compressed value shorter than its length"))?;
    if len > crate::MAX_VALUE_BYTES {
        return Err(Error::corruption(
            addr,
            "compressed value's length out of bounds",
        ));
    }
    Ok(len)
}

/// Decompresses the compressed `payload` into `out`, replacing its
/// contents. Allocates nothing when `out` can hold the value (and the
/// thread decompressed before).
///
/// # Errors
/// [`Error::Corruption`] (at `addr`) when the payload is malformed or does
/// not decode to exactly its stated length; an I/O error when no
/// decompression context can be had.
pub(crate) fn decompress(payload: &[u8], out: &mut Vec<u8>, addr: u64) -> Result<()> {
    with_decompressor(|d, _| decompress_with(d, payload, out, addr))
}

/// Replaces the contents of `buf` with the decompressed form of the
/// compressed payload held at `buf[range]`.
///
/// # Errors
/// As [`decompress`].
pub(crate) fn decompress_within(
    buf: &mut Vec<u8>,
    range: std::ops::Range<usize>,
    addr: u64,
) -> Result<()> {
    with_decompressor(|d, scratch| {
        scratch.clear();
        scratch.extend_from_slice(&buf[range]);
        decompress_with(d, scratch, buf, addr)
    })
}

fn with_decompressor<T>(
    f: impl FnOnce(&mut zstd::bulk::Decompressor<'static>, &mut Vec<u8>) -> Result<T>,
) -> Result<T> {
    DECOMPRESSOR.with(|cell| {
        let mut cell = cell.borrow_mut();
        if cell.is_none() {
            *cell = Some((zstd::bulk::Decompressor::new()?, Vec::new()));
        }
        let (d, scratch) = cell.as_mut().expect("set above");
        f(d, scratch)
    })
}

fn decompress_with(
    d: &mut zstd::bulk::Decompressor<'static>,
    payload: &[u8],
    out: &mut Vec<u8>,
    addr: u64,
) -> Result<()> {
    let len = decoded_len(payload, addr)?;
    out.clear();
    out.reserve(len);
    match d.decompress_to_buffer(&payload[LEN_BYTES..], out) {
        Ok(n) if n == len => Ok(()),
        _ => {
            out.clear();
            Err(Error::corruption(
                addr,
                "compressed value does not decode to its length",
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compressible(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i % 13) as u8).collect()
    }

    fn noise(len: usize) -> Vec<u8> {
        let mut x = 0x9E37_79B9_7F4A_7C15_u64;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    #[test]
    fn roundtrip_at_every_level_kind() {
        for level in [-7, -1, 1, 3, 19] {
            let value = compressible(5000);
            let mut stored = Vec::new();
            assert!(compress(level, &value, &mut stored), "level {level}");
            assert!(stored.len() < value.len() / 2);
            assert_eq!(decoded_len(&stored, 0).unwrap(), value.len());
            let mut out = b"old contents".to_vec();
            decompress(&stored, &mut out, 0).unwrap();
            assert_eq!(out, value);
        }
    }

    #[test]
    fn incompressible_and_short_values_stay_raw() {
        let mut stored = Vec::new();
        assert!(!compress(1, &noise(4096), &mut stored));
        assert!(!compress(
            1,
            &compressible(MIN_COMPRESS_BYTES - 1),
            &mut stored
        ));
        assert!(!compress(1, b"", &mut stored));
    }

    #[test]
    fn a_saving_below_a_sixteenth_stays_raw() {
        // 1000 random bytes then 40 zeros: at best about 4 % smaller.
        let mut value = noise(1000);
        value.extend_from_slice(&[0; 40]);
        let mut stored = Vec::new();
        assert!(!compress(1, &value, &mut stored));
    }

    #[test]
    fn decompress_within_replaces_the_buffer() {
        let value = compressible(300);
        let mut stored = Vec::new();
        assert!(compress(1, &value, &mut stored));
        let mut buf = b"header".to_vec();
        buf.extend_from_slice(&stored);
        buf.extend_from_slice(b"trailer");
        let end = buf.len() - 7;
        decompress_within(&mut buf, 6..end, 9).unwrap();
        assert_eq!(buf, value);
    }

    #[test]
    fn malformed_payloads_are_corruption() {
        let value = compressible(1000);
        let mut stored = Vec::new();
        assert!(compress(1, &value, &mut stored));
        let mut out = Vec::new();
        let corrupt = |p: &[u8], out: &mut Vec<u8>| {
            matches!(
                decompress(p, out, 77),
                Err(Error::Corruption { offset: 77, .. })
            )
        };
        assert!(corrupt(&stored[..3], &mut out), "short length field");
        let mut longer = stored.clone();
        longer[..4].copy_from_slice(&1001u32.to_le_bytes());
        assert!(corrupt(&longer, &mut out), "length above the frame's");
        let mut shorter = stored.clone();
        shorter[..4].copy_from_slice(&999u32.to_le_bytes());
        assert!(corrupt(&shorter, &mut out), "length below the frame's");
        let mut huge = stored.clone();
        huge[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(corrupt(&huge, &mut out), "length past the value limit");
        assert!(out.capacity() < 1 << 20, "no allocation from a bad length");
        assert!(corrupt(&stored[..stored.len() - 1], &mut out), "cut frame");
        let mut garbage = stored.clone();
        for b in &mut garbage[4..] {
            *b = !*b;
        }
        assert!(corrupt(&garbage, &mut out), "not a frame");
    }
}
