//! The record: the unit of the log.
//!
//! Layout (all integers little-endian; see `docs/ARCHITECTURE.md`):
//!
//! | offset   | size | field                                               |
//! |---------:|-----:|-----------------------------------------------------|
//! | 0        | 4    | CRC32C of bytes 4..end (for a pad: of bytes 4..16)  |
//! | 4        | 1    | flags: 1 tombstone, 2 pad, 4 has expiry, 8 in batch, 16 compressed, 32 with the dictionary |
//! | 5        | 3    | span of an update in place, or zero (format 4)      |
//! | 8        | 4    | key length in bytes                                 |
//! | 12       | 4    | value length in bytes (for a pad: bytes skipped)    |
//! | 16       | 8    | expiry, Unix time in ms (only with flag 4)          |
//! | 16 or 24 | k    | key                                                 |
//! | then     | v    | value (flag 16: compressed, see `compression.rs`)   |
//!
//! A pad fills the rest of a page that the next record does not fit in; its
//! payload is not covered by the checksum (it is never read; it is written
//! as zeros, see [`encode_pad`]). Flag 8 marks a
//! record of a write batch that is followed by more records of the same
//! batch; the batch's last record has it clear (see `recovery.rs`).
//!
//! A record rewritten where it stands (`Log::update_in_place`) records its
//! span: the bytes from its start to the log's tail at the rewrite. Every
//! record of that span was appended before the rewrite, so a log that
//! holds the rewritten record must hold them too for what survives to stay
//! a prefix of the writes; replay holds the record back until it has read
//! that far (see `recovery.rs`). Zero for every appended record.

use crate::checksum::Crc32c;
use crate::compression::Codec;
use crate::error::{Error, Result};

/// Size of the fixed record header, in bytes.
pub(crate) const HEADER_BYTES: usize = 16;
/// Size of the optional expiry field, in bytes.
pub(crate) const EXPIRY_BYTES: usize = 8;

/// The expiry a record's first bytes record, unchecked (the checksum
/// covers the whole record): `Some(None)` for a record without one,
/// `None` when `head` is shorter than the header and expiry field. For a
/// hint only (the expired-key sweep's, which reads and verifies the whole
/// record before acting on it).
pub(crate) fn peek_expiry(head: &[u8]) -> Option<Option<u64>> {
    let head = head.get(..HEADER_BYTES + EXPIRY_BYTES)?;
    Some(
        (head[4] & FLAG_EXPIRY != 0)
            .then(|| u64::from_le_bytes(head[HEADER_BYTES..].try_into().expect("8 bytes"))),
    )
}

/// Flag: the record removes its key.
pub(crate) const FLAG_TOMBSTONE: u8 = 1;
/// Flag: the record is padding up to the end of a page.
pub(crate) const FLAG_PAD: u8 = 2;
/// Flag: an expiry time follows the header.
const FLAG_EXPIRY: u8 = 4;
/// Flag: more records of the same write batch follow this one.
pub(crate) const FLAG_BATCH: u8 = 8;
/// Flag: the value is stored compressed (`compression.rs`).
pub(crate) const FLAG_COMPRESSED: u8 = 16;
/// Flag, with [`FLAG_COMPRESSED`] only: compressed with the store's
/// dictionary (`dictionary.rs`).
pub(crate) const FLAG_DICTIONARY: u8 = 32;
/// Flag, with [`FLAG_COMPRESSED`] and without [`FLAG_DICTIONARY`]: the
/// frame is an LZ4 block, not a zstd frame (`compression.rs`).
pub(crate) const FLAG_LZ4: u8 = 64;
/// The flags that say how a value is stored: a copy of a record that keeps
/// its stored value keeps these.
pub(crate) const VALUE_FLAGS: u8 = FLAG_COMPRESSED | FLAG_DICTIONARY | FLAG_LZ4;
const KNOWN_FLAGS: u8 = FLAG_TOMBSTONE | FLAG_PAD | FLAG_EXPIRY | FLAG_BATCH | VALUE_FLAGS;

const _: () = assert!(HEADER_BYTES == 4 + 1 + 3 + 4 + 4);

/// A record to be written.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Entry<'a> {
    /// [`FLAG_TOMBSTONE`], [`FLAG_BATCH`], and the [`VALUE_FLAGS`] of a
    /// compressed value.
    pub flags: u8,
    /// Unix time in ms after which the key is gone.
    pub expires_at: Option<u64>,
    pub key: &'a [u8],
    /// The value as stored: compressed with [`FLAG_COMPRESSED`].
    pub value: &'a [u8],
}

impl<'a> Entry<'a> {
    /// A tombstone removing `key`.
    pub(crate) fn tombstone(key: &'a [u8]) -> Entry<'a> {
        Entry {
            flags: FLAG_TOMBSTONE,
            expires_at: None,
            key,
            value: b"",
        }
    }

    /// The flags byte of the encoded record (its header's `flags`).
    pub(crate) fn flags(&self) -> u8 {
        self.flags
            | if self.expires_at.is_some() {
                FLAG_EXPIRY
            } else {
                0
            }
    }

    fn body_offset(&self) -> usize {
        HEADER_BYTES
            + if self.expires_at.is_some() {
                EXPIRY_BYTES
            } else {
                0
            }
    }

    /// Encoded size, in bytes.
    pub(crate) fn len(&self) -> usize {
        self.body_offset() + self.key.len() + self.value.len()
    }

    /// Length of the value as the user sees it, in bytes (decoded when
    /// it is stored compressed).
    pub(crate) fn value_len(&self) -> usize {
        if self.flags & FLAG_COMPRESSED != 0 {
            crate::compression::decoded_len(self.value, 0).unwrap_or(0)
        } else {
            self.value.len()
        }
    }

    /// The CRC32C the record carries (computed before taking the append
    /// lock, so the lock covers only the copy).
    pub(crate) fn checksum(&self) -> u32 {
        let mut head = [0u8; HEADER_BYTES + EXPIRY_BYTES];
        let n = self.write_head(&mut head);
        let mut crc = Crc32c::new();
        crc.update(&head[4..n]);
        crc.update(self.key);
        crc.update(self.value);
        crc.value()
    }

    /// Encodes the record with checksum `crc` (from [`Entry::checksum`])
    /// into `out`, which must be exactly [`Entry::len`] bytes long.
    pub(crate) fn encode(&self, out: &mut [u8], crc: u32) {
        debug_assert_eq!(out.len(), self.len());
        let n = self.write_head(out);
        let (k, v) = out[n..].split_at_mut(self.key.len());
        k.copy_from_slice(self.key);
        v.copy_from_slice(self.value);
        out[..4].copy_from_slice(&crc.to_le_bytes());
    }

    /// Writes header and expiry (not the checksum); returns their length.
    fn write_head(&self, out: &mut [u8]) -> usize {
        write_header(
            out,
            self.flags(),
            self.key.len() as u32,
            self.value.len() as u32,
        );
        if let Some(at) = self.expires_at {
            out[HEADER_BYTES..HEADER_BYTES + EXPIRY_BYTES].copy_from_slice(&at.to_le_bytes());
        }
        self.body_offset()
    }
}

/// Encodes a pad record covering exactly `out.len()` bytes (at least
/// [`HEADER_BYTES`]), its payload zeroed: a pad may fill a page whose
/// buffer held an older page, whose bytes must not reach the file.
pub(crate) fn encode_pad(out: &mut [u8]) {
    debug_assert!(out.len() >= HEADER_BYTES);
    let payload = (out.len() - HEADER_BYTES) as u32;
    let (header, rest) = out.split_at_mut(HEADER_BYTES);
    rest.fill(0);
    write_header(header, FLAG_PAD, 0, payload);
    let crc = crate::checksum::crc32c(&header[4..]);
    header[..4].copy_from_slice(&crc.to_le_bytes());
}

/// Longest span of an update in place, in bytes (exclusive): it is stored
/// in three bytes.
pub(crate) const MAX_SPAN: u64 = 1 << 24;

/// Sets the span of the encoded record `bytes` (see the module docs) and
/// its checksum again.
pub(crate) fn set_span(bytes: &mut [u8], span: u32) {
    debug_assert!(u64::from(span) < MAX_SPAN && span as usize >= bytes.len());
    bytes[5..8].copy_from_slice(&span.to_le_bytes()[..3]);
    let crc = crate::checksum::crc32c(&bytes[4..]);
    bytes[..4].copy_from_slice(&crc.to_le_bytes());
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
    /// The span of an update in place (see the module docs), in bytes:
    /// 0, or at least the record's length, below 2^24.
    pub span: u32,
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
        let b: &[u8; HEADER_BYTES] = bytes
            .get(..HEADER_BYTES)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| Error::corruption(addr, "short record header"))?;
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let header = Header {
            crc: u32_at(0),
            flags: b[4],
            span: u32::from_le_bytes([b[5], b[6], b[7], 0]),
            key_len: u32_at(8) as usize,
            value_len: u32_at(12) as usize,
        };
        if header.flags & !KNOWN_FLAGS != 0
            || header.flags & (FLAG_COMPRESSED | FLAG_TOMBSTONE) == FLAG_COMPRESSED | FLAG_TOMBSTONE
            || header.flags & (FLAG_COMPRESSED | FLAG_DICTIONARY) == FLAG_DICTIONARY
            || header.flags & (FLAG_COMPRESSED | FLAG_LZ4) == FLAG_LZ4
            || header.flags & (FLAG_DICTIONARY | FLAG_LZ4) == FLAG_DICTIONARY | FLAG_LZ4
        {
            return Err(Error::corruption(addr, "unknown record flags"));
        }
        if header.is_pad() {
            if header.key_len != 0 || header.flags != FLAG_PAD || header.span != 0 {
                return Err(Error::corruption(addr, "malformed pad record"));
            }
            if crate::checksum::crc32c(&b[4..]) != header.crc {
                return Err(Error::corruption(addr, "pad header checksum mismatch"));
            }
        } else if header.key_len > crate::MAX_KEY_BYTES || header.value_len > crate::MAX_VALUE_BYTES
        {
            return Err(Error::corruption(addr, "record length out of bounds"));
        } else if header.span != 0 && (header.span as usize) < header.total_len() {
            return Err(Error::corruption(
                addr,
                "update span shorter than its record",
            ));
        }
        Ok(header)
    }

    pub(crate) fn is_pad(&self) -> bool {
        self.flags & FLAG_PAD != 0
    }

    pub(crate) fn is_tombstone(&self) -> bool {
        self.flags & FLAG_TOMBSTONE != 0
    }

    /// Whether the value is stored compressed.
    pub(crate) fn is_compressed(&self) -> bool {
        self.flags & FLAG_COMPRESSED != 0
    }

    /// Whether more records of the same batch follow.
    pub(crate) fn continues_batch(&self) -> bool {
        self.flags & FLAG_BATCH != 0
    }

    fn body_offset(&self) -> usize {
        HEADER_BYTES
            + if self.flags & FLAG_EXPIRY != 0 {
                EXPIRY_BYTES
            } else {
                0
            }
    }

    /// Where the key lies in the record's bytes (empty for a pad).
    pub(crate) fn key_range(&self) -> std::ops::Range<usize> {
        if self.is_pad() {
            return 0..0;
        }
        let body = self.body_offset();
        body..body + self.key_len
    }

    /// Bytes the record spans in the log, header included.
    pub(crate) fn total_len(&self) -> usize {
        if self.is_pad() {
            HEADER_BYTES + self.value_len
        } else {
            self.body_offset() + self.key_len + self.value_len
        }
    }
}

/// A whole record whose checksum has been verified.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Record<'a> {
    pub header: Header,
    /// Unix time in ms after which the key is gone.
    pub expires_at: Option<u64>,
    pub key: &'a [u8],
    /// The value as stored: compressed when the header says so (use
    /// [`Record::value_into`] and [`Record::value_len`] for the value the
    /// user wrote).
    pub stored_value: &'a [u8],
}

impl<'a> Record<'a> {
    /// Verifies the checksum of a non-pad record held whole at the start of
    /// `bytes`.
    ///
    /// # Errors
    /// [`Error::Corruption`] on a checksum mismatch, a short buffer, or a
    /// compressed value whose stated length is out of bounds.
    pub(crate) fn verify(header: Header, bytes: &'a [u8], addr: u64) -> Result<Record<'a>> {
        let total = header.total_len();
        if header.is_pad() || bytes.len() < total {
            return Err(Error::corruption(addr, "record truncated"));
        }
        let crc = crate::checksum::crc32c(&bytes[4..total]);
        if crc != header.crc {
            return Err(Error::corruption(
                addr,
                format!(
                    "record checksum mismatch: stored {:#010x}, computed {crc:#010x}",
                    header.crc
                ),
            ));
        }
        let record = Record::verified(header, bytes);
        if header.is_compressed() {
            crate::compression::decoded_len(record.stored_value, addr)?;
        }
        Ok(record)
    }

    /// Splits the non-pad record held whole at the start of `bytes` as its
    /// header states, its checksum unchecked: for a record that failed
    /// [`Record::verify`], to read which key its bytes name (see
    /// `Core::judge_damaged`). Nothing in it may be returned as data.
    /// `None` for a pad or a buffer shorter than the record.
    pub(crate) fn unverified(header: Header, bytes: &'a [u8]) -> Option<Record<'a>> {
        (!header.is_pad() && bytes.len() >= header.total_len())
            .then(|| Record::verified(header, bytes))
    }

    /// Splits a non-pad record held whole at the start of `bytes` whose
    /// checksum [`Record::verify`] has already checked (replay verifies each
    /// record as it scans, then applies it from the same buffer).
    pub(crate) fn verified(header: Header, bytes: &'a [u8]) -> Record<'a> {
        let body = header.body_offset();
        let expires_at = (body > HEADER_BYTES)
            .then(|| u64::from_le_bytes(bytes[HEADER_BYTES..body].try_into().expect("8 bytes")));
        let (key, stored_value) = bytes[body..header.total_len()].split_at(header.key_len);
        Record {
            header,
            expires_at,
            key,
            stored_value,
        }
    }

    /// Length of the value the user wrote, in bytes.
    pub(crate) fn value_len(&self) -> usize {
        if self.header.is_compressed() {
            // Bounds-checked by `verify`; 0 only for a record never verified.
            crate::compression::decoded_len(self.stored_value, 0).unwrap_or(0)
        } else {
            self.stored_value.len()
        }
    }

    /// Replaces the contents of `out` with the value the user wrote,
    /// decompressing it with `codec` when it is stored compressed.
    ///
    /// # Errors
    /// [`Error::Corruption`] (at `addr`) when a compressed value does not
    /// decode.
    #[inline]
    pub(crate) fn value_into(&self, codec: &Codec, out: &mut Vec<u8>, addr: u64) -> Result<()> {
        if self.header.is_compressed() {
            self.decompress_into(codec, out, addr)
        } else {
            out.clear();
            out.extend_from_slice(self.stored_value);
            Ok(())
        }
    }

    /// Whether the record holds a value that is live at `now_ms` (Unix ms):
    /// not a tombstone and not expired.
    pub(crate) fn is_live(&self, now_ms: u64) -> bool {
        !self.header.is_tombstone() && self.expires_at.is_none_or(|at| at > now_ms)
    }

    /// The compressed case of [`Record::value_into`], kept out of line so
    /// that a get of a raw value pays nothing for it.
    #[cold]
    #[inline(never)]
    fn decompress_into(&self, codec: &Codec, out: &mut Vec<u8>, addr: u64) -> Result<()> {
        codec.decompress(self.header.flags, self.stored_value, out, addr)
    }

    /// Offset of the stored value inside the record's bytes.
    pub(crate) fn value_offset(&self) -> usize {
        self.header.total_len() - self.header.value_len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(entry: &Entry<'_>) -> Vec<u8> {
        let mut buf = vec![0; entry.len()];
        entry.encode(&mut buf, entry.checksum());
        buf
    }

    fn roundtrip(flags: u8, expires_at: Option<u64>, key: &[u8], value: &[u8]) {
        let entry = Entry {
            flags,
            expires_at,
            key,
            value,
        };
        let buf = encode(&entry);
        let h = Header::parse(&buf, 0).unwrap();
        assert_eq!(h.total_len(), buf.len());
        let r = Record::verify(h, &buf, 0).unwrap();
        assert_eq!(
            (r.key, r.stored_value, r.expires_at),
            (key, value, expires_at)
        );
        assert_eq!(r.header.is_tombstone(), flags & FLAG_TOMBSTONE != 0);
        assert_eq!(r.header.continues_batch(), flags & FLAG_BATCH != 0);
        assert_eq!(&buf[r.value_offset()..], value);
    }

    #[test]
    fn encode_decode_roundtrip() {
        roundtrip(0, None, b"key", b"value");
        roundtrip(0, None, b"", b"");
        roundtrip(FLAG_TOMBSTONE, None, b"gone", b"");
        roundtrip(FLAG_BATCH, Some(1_700_000_000_000), b"k", b"v");
        roundtrip(0, Some(0), &[0u8; 300], &[7u8; 5000]);
    }

    #[test]
    fn only_meaningful_value_flags_parse() {
        let entry = Entry {
            flags: 0,
            expires_at: None,
            key: b"k",
            value: b"stored value",
        };
        let buf = encode(&entry);
        for flags in [
            FLAG_COMPRESSED,
            FLAG_COMPRESSED | FLAG_DICTIONARY,
            FLAG_COMPRESSED | FLAG_LZ4,
            FLAG_COMPRESSED | FLAG_LZ4 | FLAG_BATCH,
        ] {
            let mut b = buf.clone();
            b[4] = flags;
            assert_eq!(Header::parse(&b, 0).unwrap().flags, flags);
        }
        for flags in [
            FLAG_DICTIONARY,
            FLAG_LZ4,
            FLAG_DICTIONARY | FLAG_LZ4,
            FLAG_COMPRESSED | FLAG_DICTIONARY | FLAG_LZ4,
            FLAG_COMPRESSED | FLAG_LZ4 | FLAG_TOMBSTONE,
            128,
        ] {
            let mut b = buf.clone();
            b[4] = flags;
            assert!(
                matches!(
                    Header::parse(&b, 3),
                    Err(Error::Corruption { offset: 3, .. })
                ),
                "flags {flags}"
            );
        }
    }

    #[test]
    fn expiry_decides_liveness() {
        let entry = Entry {
            flags: 0,
            expires_at: Some(1000),
            key: b"k",
            value: b"v",
        };
        let buf = encode(&entry);
        let r = Record::verify(Header::parse(&buf, 0).unwrap(), &buf, 0).unwrap();
        assert!(r.is_live(999));
        assert!(!r.is_live(1000));
    }

    #[test]
    fn every_bit_flip_is_detected() {
        let buf = encode(&Entry {
            flags: 0,
            expires_at: Some(77),
            key: b"hello",
            value: b"the value",
        });
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
    fn pad_roundtrip_zeroes_its_payload() {
        let mut buf = vec![0xAB; 100];
        encode_pad(&mut buf);
        let h = Header::parse(&buf, 0).unwrap();
        assert!(h.is_pad());
        assert_eq!(h.total_len(), 100);
        assert!(buf[HEADER_BYTES..].iter().all(|&b| b == 0));
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
        assert!(matches!(
            Header::parse(&buf[..3], 42),
            Err(Error::Corruption { offset: 42, .. })
        ));
    }
}
