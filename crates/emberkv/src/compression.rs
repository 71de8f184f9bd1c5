//! Compression of the values of cold records: LZ4's block format (the
//! default, with `lz4_flex`) or zstd (RFC 8878).
//!
//! Values are compressed when compaction copies them (see `compaction.rs`;
//! with [`crate::Options::compress_cold_segments`], also when cold
//! segments are rewritten while writers are quiet): a record that outlived
//! the segment it was written in is a cold record, and the writers' path
//! stays free of the cost. On this project's machine (2026-12-07, 1 KiB
//! values half random and half a repeated pattern, as the harness writes
//! them, one thread, best of noisy runs): LZ4 compresses one in about
//! 1.0 µs to 0.56 of its size (1.1 µs to find random bytes
//! incompressible) and decompresses it in about 80 ns; zstd level 1
//! takes 3.6 to 5.5 µs to reach 0.53 and 220 to 330 ns to decompress,
//! and it alone can use a dictionary.
//!
//! A compressed value is stored as its decoded length (4 bytes,
//! little-endian) and one frame (the record's CRC32C covers the stored
//! bytes): an LZ4 block (record flag 64), or a zstd frame without
//! checksum, without content size or dictionary id, or, when the store has
//! a dictionary (`dictionary.rs`; record flag 32), with them, the id naming
//! the dictionary. Each value is its own frame, so a read decompresses its
//! own record only. A value that would not shrink by at least a 16th is
//! stored raw: a read of it costs no decompression and the log never grows
//! by compressing. How a record's value is stored is in its flags, not in
//! the store's options: a store reopened with another [`Compression`]
//! reads every record it holds.

use std::cell::RefCell;
use std::sync::Arc;

use arc_swap::ArcSwapOption;
use zstd::zstd_safe::{self, CCtx, CParameter, DCtx};

use crate::dictionary::Dictionary;
use crate::error::{Error, Result};
use crate::record::{FLAG_COMPRESSED, FLAG_DICTIONARY, FLAG_LZ4};

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
    /// Values of at least 64 bytes are compressed with LZ4's block format
    /// (the `lz4_flex` crate), when that saves at least a 16th of their
    /// size: about a fifth of zstd level 1's time to compress and a
    /// quarter of its time to decompress, for a few percent less saved.
    Lz4,
    /// Values of at least 64 bytes are compressed with zstd at `level`
    /// (-7 ..= 22; zstd's own scale, where 1 is fast and 3 its default),
    /// when that saves at least a 16th of their size.
    Zstd {
        /// zstd compression level, -7 ..= 22.
        level: i32,
    },
}

impl Compression {
    /// The level a dictionary is prepared for: the configured one, or 1
    /// (unused) when the store does not compress with zstd but may hold
    /// values it compressed before.
    pub(crate) fn level(&self) -> i32 {
        match *self {
            Compression::Zstd { level } => level,
            Compression::None | Compression::Lz4 => 1,
        }
    }
}

/// Levels accepted by [`Compression::Zstd`].
pub(crate) const LEVELS: std::ops::RangeInclusive<i32> = -7..=22;

/// Shortest value worth compressing, in bytes: below it a frame's own
/// overhead (about 10 bytes with the length) eats most of any saving.
pub(crate) const MIN_COMPRESS_BYTES: usize = 64;

/// Bytes of the decoded length in front of the frame.
pub(crate) const LEN_BYTES: usize = 4;

thread_local! {
    /// This thread's compression contexts: for frames without a
    /// dictionary (with the level it is set to) and with one.
    static COMPRESSORS: RefCell<Option<Compressors>> = const { RefCell::new(None) };
    /// This thread's decompression context (made at its first zstd
    /// frame) and a buffer for a payload that must leave the buffer it is
    /// decompressed into.
    static DECOMPRESSOR: RefCell<Decompressor> = const { RefCell::new(Decompressor::new()) };
}

/// A thread's zstd decompression context, made when a zstd frame first
/// needs it (a thread that reads only LZ4 blocks has none: a context held
/// 95,976 bytes after a 300-byte value, by zstd's own count), and its
/// scratch buffer.
struct Decompressor {
    context: Option<DCtx<'static>>,
    scratch: Vec<u8>,
}

impl Decompressor {
    const fn new() -> Decompressor {
        Decompressor {
            context: None,
            scratch: Vec::new(),
        }
    }
}

/// The zstd context in `slot`, made first if there is none.
///
/// # Errors
/// [`Error::Io`] when a context cannot be allocated.
fn context<'a>(slot: &'a mut Option<DCtx<'static>>) -> Result<&'a mut DCtx<'static>> {
    if slot.is_none() {
        *slot = Some(DCtx::try_create().ok_or_else(|| {
            Error::Io(std::io::Error::other(
                "cannot allocate a zstd decompression context",
            ))
        })?);
    }
    Ok(slot.as_mut().expect("made above"))
}

struct Compressors {
    level: i32,
    plain: CCtx<'static>,
    with_dictionary: CCtx<'static>,
}

impl Compressors {
    fn new(level: i32) -> Option<Compressors> {
        let mut plain = CCtx::try_create()?;
        for p in [
            CParameter::CompressionLevel(level),
            CParameter::ChecksumFlag(false),
            CParameter::ContentSizeFlag(false),
            CParameter::DictIdFlag(false),
        ] {
            plain.set_parameter(p).ok()?;
        }
        Some(Compressors {
            level,
            plain,
            with_dictionary: CCtx::try_create()?,
        })
    }
}

/// How a store encodes and decodes values: its [`Compression`] and, once
/// trained (see `dictionary.rs`), its dictionary. Shared by the read paths
/// and compaction.
pub(crate) struct Codec {
    compression: Compression,
    dictionary: ArcSwapOption<Dictionary>,
    /// Longest value the store can hold, in bytes: a stated length above
    /// it is corruption, found before anything is allocated for it.
    max_value: usize,
}

impl Codec {
    /// A codec for `compression`, with the store's dictionary if it has
    /// one, for a store of `segment_bytes` segments (no value is longer).
    pub(crate) fn new(
        compression: Compression,
        dictionary: Option<Dictionary>,
        segment_bytes: u64,
    ) -> Codec {
        Codec {
            compression,
            dictionary: ArcSwapOption::from(dictionary.map(Arc::new)),
            max_value: crate::MAX_VALUE_BYTES
                .min(usize::try_from(segment_bytes).unwrap_or(usize::MAX)),
        }
    }

    /// Whether compaction compresses the values it copies.
    pub(crate) fn compresses(&self) -> bool {
        self.compression != Compression::None
    }

    /// The zstd level values are compressed at, if they are compressed with
    /// zstd (the only codec that trains a dictionary).
    pub(crate) fn zstd_level(&self) -> Option<i32> {
        match self.compression {
            Compression::Zstd { level } => Some(level),
            Compression::None | Compression::Lz4 => None,
        }
    }

    /// Whether the store has a dictionary.
    pub(crate) fn has_dictionary(&self) -> bool {
        self.dictionary.load().is_some()
    }

    /// Starts compressing with `dictionary` (already durable in the store).
    pub(crate) fn set_dictionary(&self, dictionary: Dictionary) {
        self.dictionary.store(Some(Arc::new(dictionary)));
    }

    /// Compresses `value` into `out` (replacing its contents) in the stored
    /// form described in the module docs, with the store's dictionary when
    /// it has one and compresses with zstd. Returns the record flags to
    /// store it with ([`FLAG_COMPRESSED`], with [`FLAG_LZ4`] for an LZ4
    /// block or [`FLAG_DICTIONARY`] for a frame of the dictionary), or
    /// `None`, with `out` unspecified, when the store does not compress,
    /// the value is shorter than [`MIN_COMPRESS_BYTES`], would not shrink
    /// by a 16th, or a compression context cannot be had: the value is then
    /// stored raw.
    pub(crate) fn compress(&self, value: &[u8], out: &mut Vec<u8>) -> Option<u8> {
        if value.len() < MIN_COMPRESS_BYTES || value.len() > u32::MAX as usize {
            return None;
        }
        // The frame must fit in what is left after the length once a 16th
        // is saved.
        let room = value.len() - value.len() / 16 - LEN_BYTES;
        let level = match self.compression {
            Compression::None => return None,
            Compression::Lz4 => return compress_lz4(value, room, out),
            Compression::Zstd { level } => level,
        };
        let dictionary = self.dictionary.load();
        // zstd fails with "destination too small" past `room`.
        with_compressors(level, value.len(), |c| {
            out.clear();
            out.extend_from_slice(&(value.len() as u32).to_le_bytes());
            let mut frame = std::io::Cursor::new(&mut *out);
            frame.set_position(LEN_BYTES as u64);
            frame.get_mut().reserve_exact(room);
            // The frame is bounded by the room reserved, not by the
            // capacity the allocator happened to give.
            let (written, flags) = match dictionary.as_deref() {
                Some(d) => (
                    c.with_dictionary
                        .compress_using_cdict(&mut frame, value, &d.cdict),
                    FLAG_COMPRESSED | FLAG_DICTIONARY,
                ),
                None => (c.plain.compress2(&mut frame, value), FLAG_COMPRESSED),
            };
            matches!(written, Ok(n) if n <= room).then_some(flags)
        })
    }

    /// Replaces the contents of `out` with the decoded form of `payload`,
    /// the stored value of a record with `flags` ([`FLAG_COMPRESSED`], and
    /// maybe [`FLAG_LZ4`] or [`FLAG_DICTIONARY`]). Allocates nothing when
    /// `out` can hold the value (and, for zstd, the thread decompressed
    /// before).
    ///
    /// # Errors
    /// [`Error::Corruption`] (at `addr`) when the payload is malformed,
    /// does not decode to exactly its stated length, or names a dictionary
    /// the store does not have; an I/O error when a zstd frame needs a
    /// decompression context and none can be had (an LZ4 block needs
    /// none).
    pub(crate) fn decompress(
        &self,
        flags: u8,
        payload: &[u8],
        out: &mut Vec<u8>,
        addr: u64,
    ) -> Result<()> {
        with_decompressor(|d| self.decompress_with(&mut d.context, flags, payload, out, addr))
    }

    /// Replaces the contents of `buf` with the decoded form of the stored
    /// value held at `buf[range]` (see [`Codec::decompress`]).
    ///
    /// # Errors
    /// As [`Codec::decompress`].
    pub(crate) fn decompress_within(
        &self,
        flags: u8,
        buf: &mut Vec<u8>,
        range: std::ops::Range<usize>,
        addr: u64,
    ) -> Result<()> {
        with_decompressor(|d| {
            d.scratch.clear();
            d.scratch.extend_from_slice(&buf[range]);
            self.decompress_with(&mut d.context, flags, &d.scratch, buf, addr)
        })
    }

    /// The decoded length of `payload`, checked against the store's
    /// longest value (see [`decoded_len`]).
    fn checked_len(&self, payload: &[u8], addr: u64) -> Result<usize> {
        let len = decoded_len(payload, addr)?;
        if len > self.max_value {
            return Err(Error::corruption(
                addr,
                "compressed value longer than a segment",
            ));
        }
        Ok(len)
    }

    /// [`Codec::decompress`] of an LZ4 block: no context needed.
    fn decompress_lz4(&self, payload: &[u8], out: &mut Vec<u8>, addr: u64) -> Result<()> {
        let len = self.checked_len(payload, addr)?;
        let block = &payload[LEN_BYTES..];
        // A block's bytes expand at most 255 times (a match's length
        // byte): a longer stated length is a damaged one, refused before
        // anything is allocated for it.
        if len > block.len().saturating_mul(255) {
            return Err(Error::corruption(
                addr,
                "compressed value's length beyond its block",
            ));
        }
        // The block is written over the buffer's old contents: a buffer
        // reused for values of one size is not zeroed on each read.
        out.truncate(len);
        out.resize(len, 0);
        let written = lz4_flex::block::decompress_into(block, out);
        decoded_exactly(written, len, out, addr)
    }

    /// [`Codec::decompress`] with the zstd context in `d` (made there if
    /// a zstd frame needs one and there is none).
    fn decompress_with(
        &self,
        d: &mut Option<DCtx<'static>>,
        flags: u8,
        payload: &[u8],
        out: &mut Vec<u8>,
        addr: u64,
    ) -> Result<()> {
        if flags & FLAG_LZ4 != 0 {
            return self.decompress_lz4(payload, out, addr);
        }
        let len = self.checked_len(payload, addr)?;
        let frame = &payload[LEN_BYTES..];
        let d = context(d)?;
        out.clear();
        let written = if flags & FLAG_DICTIONARY != 0 {
            let dictionary = self.dictionary.load();
            let Some(dictionary) = dictionary.as_deref().filter(|dict| {
                zstd_safe::get_dict_id_from_frame(frame).map(|id| id.get()) == Some(dict.id)
            }) else {
                return Err(Error::corruption(
                    addr,
                    "compressed with a dictionary the store does not have",
                ));
            };
            out.reserve(len);
            d.decompress_using_ddict(out, frame, &dictionary.ddict)
        } else {
            out.reserve(len);
            d.decompress(out, frame)
        };
        decoded_exactly(written, len, out, addr)
    }
}

/// `Ok` when a decoder's `written` says it wrote exactly `len` bytes into
/// `out`; otherwise empties `out` and reports the value at `addr` damaged.
fn decoded_exactly<E>(
    written: std::result::Result<usize, E>,
    len: usize,
    out: &mut Vec<u8>,
    addr: u64,
) -> Result<()> {
    if matches!(written, Ok(n) if n == len) {
        return Ok(());
    }
    out.clear();
    Err(Error::corruption(
        addr,
        "compressed value does not decode to its length",
    ))
}

/// Compresses `value` as one LZ4 block after its length into `out`, for
/// [`Codec::compress`]: `Some(flags)` when the block takes at most `room`
/// bytes.
fn compress_lz4(value: &[u8], room: usize, out: &mut Vec<u8>) -> Option<u8> {
    out.clear();
    out.extend_from_slice(&(value.len() as u32).to_le_bytes());
    // `lz4_flex` wants room for its worst case, whatever the block takes.
    out.resize(
        LEN_BYTES + lz4_flex::block::get_maximum_output_size(value.len()),
        0,
    );
    let written = lz4_flex::block::compress_into(value, &mut out[LEN_BYTES..]).ok()?;
    out.truncate(LEN_BYTES + written);
    (written <= room).then_some(FLAG_COMPRESSED | FLAG_LZ4)
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

/// Values longer than this (1 MiB) are compressed with a context made for
/// them and dropped after: at high levels a context sized for a large
/// value holds hundreds of MiB (level 22 for a 64 MiB value: about
/// 600 MiB), too much to keep for the thread's life.
const KEEP_CONTEXT_UP_TO: usize = 1 << 20;

/// A decompression scratch buffer that grew past this (1 MiB) is freed
/// after use rather than kept for the thread's life.
const KEEP_SCRATCH_UP_TO: usize = 1 << 20;

/// Calls `f` with this thread's compression contexts for `level`, or with
/// contexts made for the call when the thread's cannot be used (during
/// thread-local destruction, or for a value longer than
/// [`KEEP_CONTEXT_UP_TO`]). `None` when no context can be had.
fn with_compressors<T>(
    level: i32,
    len: usize,
    f: impl FnOnce(&mut Compressors) -> Option<T>,
) -> Option<T> {
    if len > KEEP_CONTEXT_UP_TO {
        return f(&mut Compressors::new(level)?);
    }
    let mut f = Some(f);
    let cached = COMPRESSORS.try_with(|cell| {
        let mut cell = cell.try_borrow_mut().ok()?;
        if cell.as_ref().is_none_or(|c| c.level != level) {
            *cell = Compressors::new(level);
        }
        let c = cell.as_mut()?;
        Some(f.take().expect("called once")(c))
    });
    match (cached, f) {
        (Ok(Some(done)), _) => done,
        (_, Some(f)) => f(&mut Compressors::new(level)?),
        (_, None) => None,
    }
}

/// Calls `f` with this thread's decompression context and scratch buffer,
/// or with ones made for the call when the thread's cannot be used (during
/// thread-local destruction).
fn with_decompressor<T>(f: impl FnOnce(&mut Decompressor) -> Result<T>) -> Result<T> {
    let mut f = Some(f);
    let cached = DECOMPRESSOR.try_with(|cell| {
        let mut d = cell.try_borrow_mut().ok()?;
        let done = f.take().expect("called once")(&mut d);
        if d.scratch.capacity() > KEEP_SCRATCH_UP_TO {
            d.scratch = Vec::new();
        }
        Some(done)
    });
    match (cached, f) {
        (Ok(Some(done)), _) => done,
        (_, Some(f)) => f(&mut Decompressor::new()),
        // `f` is taken only by a call that returns its result.
        (_, None) => Err(Error::Io(std::io::Error::other(
            "the thread's decompressor was lost",
        ))),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::dictionary::tests::documents;

    fn zstd(level: i32) -> Codec {
        Codec::new(Compression::Zstd { level }, None, 1 << 30)
    }

    fn lz4() -> Codec {
        Codec::new(Compression::Lz4, None, 1 << 30)
    }

    fn compressible(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i % 13) as u8).collect()
    }

    /// `len` bytes of xorshift output from `seed`: incompressible.
    pub(crate) fn noise(seed: u64, len: usize) -> Vec<u8> {
        let mut x = (0x9E37_79B9_7F4A_7C15_u64 ^ seed) | 1;
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
            let codec = zstd(level);
            let value = compressible(5000);
            let mut stored = Vec::new();
            let flags = codec.compress(&value, &mut stored);
            assert_eq!(flags, Some(FLAG_COMPRESSED), "level {level}");
            assert!(stored.len() < value.len() / 2);
            assert_eq!(decoded_len(&stored, 0).unwrap(), value.len());
            let mut out = b"old contents".to_vec();
            codec
                .decompress(FLAG_COMPRESSED, &stored, &mut out, 0)
                .unwrap();
            assert_eq!(out, value);
        }
    }

    #[test]
    fn lz4_roundtrips_and_any_codec_reads_its_blocks() {
        let mut stored = Vec::new();
        for len in [MIN_COMPRESS_BYTES, 1024, 5000, 1 << 20] {
            let value = compressible(len);
            let flags = lz4().compress(&value, &mut stored);
            assert_eq!(flags, Some(FLAG_COMPRESSED | FLAG_LZ4), "{len} bytes");
            assert!(stored.len() < value.len() / 2);
            assert_eq!(decoded_len(&stored, 0).unwrap(), value.len());
            // How a value is stored is in its flags: a store reopened
            // with other options reads it.
            for codec in [lz4(), zstd(1), Codec::new(Compression::None, None, 1 << 30)] {
                let mut out = b"old contents".to_vec();
                codec
                    .decompress(FLAG_COMPRESSED | FLAG_LZ4, &stored, &mut out, 0)
                    .unwrap();
                assert_eq!(out, value);
            }
        }
        // And an LZ4 store reads zstd frames.
        let value = compressible(3000);
        let flags = zstd(1).compress(&value, &mut stored).unwrap();
        let mut out = Vec::new();
        lz4().decompress(flags, &stored, &mut out, 0).unwrap();
        assert_eq!(out, value);
    }

    #[test]
    fn lz4_compresses_even_with_a_dictionary_at_hand() {
        let docs = documents(3000);
        let codec = lz4();
        codec.set_dictionary(Dictionary::train(&docs, 1).expect("documents train a dictionary"));
        let mut stored = Vec::new();
        let value = compressible(2000);
        assert_eq!(
            codec.compress(&value, &mut stored),
            Some(FLAG_COMPRESSED | FLAG_LZ4)
        );
    }

    #[test]
    fn incompressible_and_short_values_stay_raw() {
        let mut stored = Vec::new();
        for codec in [zstd(1), lz4()] {
            assert_eq!(codec.compress(&noise(0, 4096), &mut stored), None);
            assert_eq!(
                codec.compress(&compressible(MIN_COMPRESS_BYTES - 1), &mut stored),
                None
            );
            assert_eq!(codec.compress(b"", &mut stored), None);
        }
        let none = Codec::new(Compression::None, None, 1 << 30);
        assert_eq!(none.compress(&compressible(5000), &mut stored), None);
    }

    #[test]
    fn a_saving_below_a_sixteenth_stays_raw() {
        // 1000 random bytes then 40 zeros: at best about 4 % smaller.
        let mut value = noise(0, 1000);
        value.extend_from_slice(&[0; 40]);
        let mut stored = Vec::new();
        assert_eq!(zstd(1).compress(&value, &mut stored), None);
        assert_eq!(lz4().compress(&value, &mut stored), None);
    }

    #[test]
    fn decompress_within_replaces_the_buffer() {
        for codec in [zstd(1), lz4()] {
            let value = compressible(300);
            let mut stored = Vec::new();
            let flags = codec.compress(&value, &mut stored).unwrap();
            let mut buf = b"header".to_vec();
            buf.extend_from_slice(&stored);
            buf.extend_from_slice(b"trailer");
            let end = buf.len() - 7;
            codec.decompress_within(flags, &mut buf, 6..end, 9).unwrap();
            assert_eq!(buf, value);
        }
    }

    /// A thread that reads only LZ4 blocks makes no zstd context (94 KiB
    /// a thread): until 2026-12-07 `decompress_within`, the path
    /// of every get of a compressed record, made one on each reading
    /// thread, and an LZ4 read failed where it could not be allocated.
    #[test]
    fn lz4_reads_make_no_zstd_context() {
        let has_context = || DECOMPRESSOR.with(|c| c.borrow().context.is_some());
        std::thread::spawn(move || {
            let value = compressible(300);
            let mut stored = Vec::new();
            let flags = lz4().compress(&value, &mut stored).unwrap();
            let mut buf = b"header".to_vec();
            buf.extend_from_slice(&stored);
            let end = buf.len();
            lz4().decompress_within(flags, &mut buf, 6..end, 0).unwrap();
            assert_eq!(buf, value);
            let mut out = Vec::new();
            zstd(1).decompress(flags, &stored, &mut out, 0).unwrap();
            assert_eq!(out, value);
            assert!(!has_context());
            let (mut stored, mut out) = (Vec::new(), Vec::new());
            let flags = zstd(1).compress(&value, &mut stored).unwrap();
            lz4().decompress(flags, &stored, &mut out, 0).unwrap();
            assert_eq!(out, value);
            assert!(has_context());
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_dictionary_shrinks_small_documents_and_frames_name_it() {
        let docs = documents(3000);
        let dictionary = Dictionary::train(&docs, 1).expect("documents train a dictionary");
        let id = dictionary.id;
        let plain = zstd(1);
        let codec = zstd(1);
        codec.set_dictionary(dictionary);
        let (mut raw, mut without, mut with) = (0, 0, 0);
        let (mut a, mut b, mut out) = (Vec::new(), Vec::new(), Vec::new());
        for doc in &docs {
            raw += doc.len();
            without += plain.compress(doc, &mut a).map_or(doc.len(), |_| a.len());
            let flags = codec.compress(doc, &mut b);
            assert_eq!(flags, Some(FLAG_COMPRESSED | FLAG_DICTIONARY));
            with += b.len();
            codec.decompress(flags.unwrap(), &b, &mut out, 0).unwrap();
            assert_eq!(&out, doc);
        }
        assert!(
            with * 2 < without,
            "{raw} bytes: {without} without, {with} with"
        );
        // A frame of the dictionary cannot be read without it, nor as a
        // plain frame, nor with another dictionary.
        let mut stored = Vec::new();
        let flags = codec.compress(&docs[0], &mut stored).unwrap();
        let corrupt = |c: &Codec, flags: u8, out: &mut Vec<u8>| {
            matches!(
                c.decompress(flags, &stored, out, 5),
                Err(Error::Corruption { offset: 5, .. })
            )
        };
        assert!(corrupt(&plain, flags, &mut out));
        assert!(corrupt(&codec, FLAG_COMPRESSED, &mut out));
        let other = zstd(1);
        let mut shuffled = documents(3000);
        shuffled.reverse();
        let second = Dictionary::train(&shuffled[..2000], 1).unwrap();
        assert_ne!(second.id, id);
        other.set_dictionary(second);
        assert!(corrupt(&other, flags, &mut out));
    }

    #[test]
    fn a_thread_keeps_no_large_buffer_or_context_after_a_large_value() {
        let codec = zstd(1);
        let value = compressible(4 << 20);
        let mut stored = Vec::new();
        let flags = codec.compress(&value, &mut stored).unwrap();
        assert!(
            COMPRESSORS.with(|c| c.borrow().is_none()),
            "a context made for a value over 1 MiB is not kept"
        );
        // Make the compressed payload itself larger than the scratch cap.
        let mut buf = noise(0, 2 << 20);
        let start = buf.len();
        buf.extend_from_slice(&stored);
        let end = buf.len();
        codec
            .decompress_within(flags, &mut buf, start..end, 0)
            .unwrap();
        assert_eq!(buf, value);
        let big = noise(0, 3 << 20);
        let mut stored = (big.len() as u32).to_le_bytes().to_vec();
        stored.extend_from_slice(&zstd::bulk::compress(&big, 1).unwrap());
        let mut buf = noise(0, 16);
        let start = buf.len();
        buf.extend_from_slice(&stored);
        let end = buf.len();
        // Not a frame of this format (it has a content size), but it
        // decodes: what matters is the scratch copy of 3 MiB.
        let _ = codec.decompress_within(FLAG_COMPRESSED, &mut buf, start..end, 0);
        let kept = DECOMPRESSOR.with(|c| c.borrow().scratch.capacity());
        assert!(kept <= KEEP_SCRATCH_UP_TO, "kept {kept}");
    }

    #[test]
    fn malformed_payloads_are_corruption() {
        for compression in [Compression::Zstd { level: 1 }, Compression::Lz4] {
            malformed_payloads_are_corruption_with(compression);
        }
    }

    fn malformed_payloads_are_corruption_with(compression: Compression) {
        let codec = Codec::new(compression, None, 1 << 30);
        let value = compressible(1000);
        let mut stored = Vec::new();
        let flags = codec.compress(&value, &mut stored).unwrap();
        let mut out = Vec::new();
        let corrupt = |p: &[u8], out: &mut Vec<u8>| {
            matches!(
                codec.decompress(flags, p, out, 77),
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
        // A length within the crate's limit but beyond the store's
        // segments allocates nothing either.
        let small = Codec::new(compression, None, 1 << 20);
        let mut beyond = stored.clone();
        beyond[..4].copy_from_slice(&((1u32 << 20) + 1).to_le_bytes());
        let mut fresh = Vec::new();
        assert!(matches!(
            small.decompress(flags, &beyond, &mut fresh, 3),
            Err(Error::Corruption { offset: 3, .. })
        ));
        assert_eq!(fresh.capacity(), 0);
        assert!(corrupt(&stored[..stored.len() - 1], &mut out), "cut frame");
        let mut garbage = stored.clone();
        for b in &mut garbage[4..] {
            *b = !*b;
        }
        assert!(corrupt(&garbage, &mut out), "not a frame");
        // A block read as the other codec's frame.
        let other = flags ^ FLAG_LZ4;
        assert!(matches!(
            codec.decompress(other, &stored, &mut out, 5),
            Err(Error::Corruption { offset: 5, .. })
        ));
    }

    #[test]
    fn an_lz4_length_beyond_what_its_block_can_hold_allocates_nothing() {
        let mut stored = Vec::new();
        lz4().compress(&compressible(1000), &mut stored).unwrap();
        let block = stored.len() - LEN_BYTES;
        let mut out = Vec::new();
        for len in [block * 255 + 1, 1 << 29] {
            let mut long = stored.clone();
            long[..4].copy_from_slice(&(len as u32).to_le_bytes());
            assert!(matches!(
                lz4().decompress(FLAG_COMPRESSED | FLAG_LZ4, &long, &mut out, 8),
                Err(Error::Corruption { offset: 8, .. })
            ));
            assert_eq!(out.capacity(), 0, "{len}");
        }
    }
}
