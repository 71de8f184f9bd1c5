//! The record: the unit of the log.
//!
//! Layout (all integers little-endian; see `docs/ARCHITECTURE.md`):
//!
//! | offset | size | field                                              |
//! |-------:|-----:|----------------------------------------------------|
//! | 0      | 4    | CRC32C of bytes 4..end (for a pad: of bytes 4..16) |
//! | 4      | 1    | flags: 1 = tombstone, 2 = pad                      |
//! | 5      | 3    | reserved, zero                                     |
//! | 8      | 4    | key length in bytes                                |
//! | 12     | 4    | value length in bytes (for a pad: bytes skipped)   |
//! | 16     | k    | key                                                |
//! | 16 + k | v    | value                                              |
//!
//! A pad fills the rest of a page that the next record does not fit in; its
//! payload is not covered by the checksum (it is never read).

use crate::error::{Error, Result};

/// Size of the record header, in bytes.
pub(crate) const HEADER_BYTES: usize = 16;

/// Flag: the record removes its key.
pub(crate) const FLAG_TOMBSTONE: u8 = 1;
/// Flag: the record is padding up to the end of a page.
pub(crate) const FLAG_PAD: u8 = 2;
const KNOWN_FLAGS: u8 = FLAG_TOMBSTONE | FLAG_PAD;

const _: () = assert!(HEADER_BYTES == 4 + 1 + 3 + 4 + 4);

/// Total encoded size of a record, in bytes.
pub(crate) fn encoded_len(key_len: usize, value_len: usize) -> usize {
    HEADER_BYTES + key_len + value_len
}

/// The CRC32C a record of these fields carries (computed before taking the
/// append lock, so the lock covers only the copy).
pub(crate) fn checksum(flags: u8, key: &[u8], value: &[u8]) -> u32 {
    let mut header = [0u8; HEADER_BYTES];
    write_header(&mut header, flags, key.len() as u32, value.len() as u32);
    let crc = crc32c::crc32c(&header[4..]);
    crc32c::crc32c_append(crc32c::crc32c_append(crc, key), value)
}

/// Encodes a record whose checksum is `crc` (from [`checksum`]) into `out`,
/// which must be exactly `encoded_len(key.len(), value.len())` bytes long.
pub(crate) fn encode_with_checksum(out: &mut [u8], crc: u32, flags: u8, key: &[u8], value: &[u8]) {
    debug_assert_eq!(out.len(), encoded_len(key.len(), value.len()));
    let (header, body) = out.split_at_mut(HEADER_BYTES);
    let (k, v) = body.split_at_mut(key.len());
    k.copy_from_slice(key);
    v.copy_from_slice(value);
    write_header(header, flags, key.len() as u32, value.len() as u32);
    header[..4].copy_from_slice(&crc.to_le_bytes());
}

/// Encodes a pad record covering exactly `out.len()` bytes (at least
/// [`HEADER_BYTES`]).
pub(crate) fn encode_pad(out: &mut [u8]) {
    debug_assert!(out.len() >= HEADER_BYTES);
    let payload = (out.len() - HEADER_BYTES) as u32;
    let header = &mut out[..HEADER_BYTES];
    write_header(header, FLAG_PAD, 0, payload);
    let crc = crc32c::crc32c(&header[4..]);
    header[..4].copy_from_slice(&crc.to_le_bytes());
}

fn write_header(header: &mut [u8], flags: u8, key_len: u32, value_len: u32) {
    header[4] = flags;
    header[5..8].fill(0);
    header[8..12].copy_from_slice(&key_len.to_le_bytes());
    header[12..16].copy_from_slice(&value_len.to_le_bytes());
}

/// A decoded header: enough to know how many bytes the record spans.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    pub crc: u32,
    pub flags: u8,
    pub key_len: usize,
    pub value_len: usize,
}

impl Header {
    /// Parses and bounds-checks a header. `addr` is only used in errors.
    ///
    /// # Errors
    /// [`Error::Corruption`] when a reserved byte is set, a flag is unknown,
    /// or a length exceeds the crate's limits.
    pub(crate) fn parse(bytes: &[u8], addr: u64) -> Result<Header> {
        let b: &[u8; HEADER_BYTES] = bytes[..HEADER_BYTES]
            .try_into()
            .map_err(|_| Error::corruption(addr, "short record header"))?;
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let header = Header {
            crc: u32_at(0),
            flags: b[4],
            key_len: u32_at(8) as usize,
            value_len: u32_at(12) as usize,
        };
        if b[5..8] != [0, 0, 0] || header.flags & !KNOWN_FLAGS != 0 {
            return Err(Error::corruption(addr, "unknown record flags"));
        }
        if header.is_pad() {
            if header.key_len != 0 || header.flags != FLAG_PAD {
                return Err(Error::corruption(addr, "malformed pad record"));
            }
            if crc32c::crc32c(&b[4..]) != header.crc {
                return Err(Error::corruption(addr, "pad header checksum mismatch"));
            }
        } else if header.key_len > crate::MAX_KEY_BYTES || header.value_len > crate::MAX_VALUE_BYTES
        {
            return Err(Error::corruption(addr, "record length out of bounds"));
        }
        Ok(header)
    }

    pub(crate) fn is_pad(&self) -> bool {
        self.flags & FLAG_PAD != 0
    }

    pub(crate) fn is_tombstone(&self) -> bool {
        self.flags & FLAG_TOMBSTONE != 0
    }

    /// Bytes the record spans in the log, header included.
    pub(crate) fn total_len(&self) -> usize {
        HEADER_BYTES + self.key_len + self.value_len
    }
}

/// A whole record whose checksum has been verified.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Record<'a> {
    pub header: Header,
    pub key: &'a [u8],
    pub value: &'a [u8],
}

impl<'a> Record<'a> {
    /// Verifies the checksum of a non-pad record held whole in `bytes`
    /// (`bytes.len() >= header.total_len()`).
    ///
    /// # Errors
    /// [`Error::Corruption`] on a checksum mismatch or a short buffer.
    pub(crate) fn verify(header: Header, bytes: &'a [u8], addr: u64) -> Result<Record<'a>> {
        let total = header.total_len();
        if header.is_pad() || bytes.len() < total {
            return Err(Error::corruption(addr, "record truncated"));
        }
        let crc = crc32c::crc32c(&bytes[4..total]);
        if crc != header.crc {
            return Err(Error::corruption(
                addr,
                format!(
                    "record checksum mismatch: stored {:#010x}, computed {crc:#010x}",
                    header.crc
                ),
            ));
        }
        let (key, value) = bytes[HEADER_BYTES..total].split_at(header.key_len);
        Ok(Record { header, key, value })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(flags: u8, key: &[u8], value: &[u8]) {
        let mut buf = vec![0; encoded_len(key.len(), value.len())];
        encode_with_checksum(&mut buf, checksum(flags, key, value), flags, key, value);
        let h = Header::parse(&buf, 0).unwrap();
        assert_eq!(h.total_len(), buf.len());
        let r = Record::verify(h, &buf, 0).unwrap();
        assert_eq!((r.key, r.value, r.header.flags), (key, value, flags));
    }

    #[test]
    fn encode_decode_roundtrip() {
        roundtrip(0, b"key", b"value");
        roundtrip(0, b"", b"");
        roundtrip(FLAG_TOMBSTONE, b"gone", b"");
        roundtrip(0, &[0u8; 300], &[7u8; 5000]);
    }

    #[test]
    fn every_bit_flip_is_detected() {
        let mut buf = vec![0; encoded_len(5, 9)];
        let crc = checksum(0, b"hello", b"the value");
        encode_with_checksum(&mut buf, crc, 0, b"hello", b"the value");
        for byte in 0..buf.len() {
            for bit in 0..8 {
                let mut bad = buf.clone();
                bad[byte] ^= 1 << bit;
                let ok = Header::parse(&bad, 0)
                    .and_then(|h| Record::verify(h, &bad, 0).map(|_| ()))
                    .is_ok();
                assert!(!ok, "flip of bit {bit} in byte {byte} went unnoticed");
            }
        }
    }

    #[test]
    fn pad_roundtrip_and_payload_is_ignored() {
        let mut buf = vec![0xAB; 100];
        encode_pad(&mut buf);
        let h = Header::parse(&buf, 0).unwrap();
        assert!(h.is_pad());
        assert_eq!(h.total_len(), 100);
        buf[1] ^= 1;
        assert!(Header::parse(&buf, 0).is_err());
    }

    #[test]
    fn oversize_lengths_are_corruption_not_allocation() {
        let mut buf = vec![0; HEADER_BYTES];
        write_header(&mut buf, 0, u32::MAX, 0);
        assert!(matches!(
            Header::parse(&buf, 42),
            Err(Error::Corruption { offset: 42, .. })
        ));
    }
}
