//! The bodies of the fuzz targets in the repository's `fuzz/` directory,
//! as ordinary functions: the cargo fuzz targets are one-line wrappers
//! around them, and `tests/fuzz_corpus.rs` replays the committed corpus
//! through them on a stable toolchain. Each one panics when a property
//! fails. Not part of the API: hidden from the docs, and it may change with
//! any release.
//!
//! # `recovery` inputs
//!
//! The first byte holds flags, the rest is split into parts at
//! [`SEPARATOR`]:
//!
//! | bits | meaning |
//! |------|---------|
//! | [`HEADERS`] | each segment part is the segment's records: a valid header (this store, this segment, the previous file's length) goes in front; otherwise a part is the whole file |
//! | [`CHECKSUMS`] | the trailing CRC32C of `CHECKPOINT` is recomputed, and, unless there is a `CHECKPOINT`, every other checksum the harness can frame (a raw segment header's, each record's from the start of the records on as far as their headers parse, and the trailing CRC32C of `RETIRED`), so mutations reach past the checksums |
//! | [`WITH_CHECKPOINT`] | the last part is the `CHECKPOINT` file |
//! | [`WITH_RETIRED`] | the last part left is the `RETIRED` file |
//! | `FIRST_SEGMENT` (bits 4 and 5) | the number of the first segment file (0 to 3) |
//! | [`MARKS`] | with [`CHECKSUMS`]: the durable mark slots of raw segment headers get valid checksums |
//! | [`NEAR_END`] | with [`HEADERS`]: a pad record fills each segment up to [`NEAR_END_ROOM`] bytes before its end, and the part's records follow it, so that they reach the segment's end without a megabyte of input |
//!
//! The other parts are segment files with consecutive numbers (at most
//! [`MAX_SEGMENTS`]), next to a valid `emberkv.meta` of 1 MiB segments.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use crate::checksum::crc32c;
use crate::compression::{Codec, Compression};
use crate::meta::{META_FILE, Meta};
use crate::record::{
    Entry, FLAG_BATCH, FLAG_PAD, FLAG_TOMBSTONE, HEADER_BYTES, Header, Record, VALUE_FLAGS,
    encode_pad, set_span,
};
use crate::storage::{SEGMENT_HEADER_BYTES, Segments, mark_slot};
use crate::{Db, Error, Options, Result};

/// Flag: each segment part gets a valid segment header in front.
pub const HEADERS: u8 = 1;
/// Flag: the harness recomputes the checkpoint's checksum, and every
/// other checksum it can frame unless the input has a `CHECKPOINT`. Open
/// checks a checkpoint's image against itself and against the recovered
/// log, but not each entry against its record's key, so records rewritten
/// with valid checksums under a checkpoint are a state no damage produces;
/// with a checkpoint the fuzzer explores crafted images over damage the
/// record checksums catch.
pub const CHECKSUMS: u8 = 2;
/// Flag: the last part is the `CHECKPOINT` file.
pub const WITH_CHECKPOINT: u8 = 4;
/// Flag: the last part (after the checkpoint's) is the `RETIRED` file.
pub const WITH_RETIRED: u8 = 8;
/// Flag: with [`HEADERS`], each segment part starts [`NEAR_END_ROOM`]
/// bytes before the segment's end, after a pad record.
pub const NEAR_END: u8 = 0x40;
/// Flag: with [`CHECKSUMS`], the durable mark slots of raw segment
/// headers get valid checksums too (the length each holds is the
/// input's); without it they count only when the input's own checksum
/// holds, so most inputs have no mark and reach the cut of torn tails.
pub const MARKS: u8 = 0x80;
/// Where a [`NEAR_END`] part starts: this many bytes before the end of its
/// segment.
pub const NEAR_END_ROOM: u64 = 256;
/// Separates the parts of a `recovery` input.
pub const SEPARATOR: &[u8] = b"|SEG";
/// Most segment files a `recovery` input lays out.
pub const MAX_SEGMENTS: usize = 8;

const FIRST_SEGMENT_SHIFT: u8 = 4;
/// log2 of the segment size of the stores the harness lays out (1 MiB).
const SEGMENT_BITS: u32 = 20;
const META: Meta = Meta {
    version: crate::FORMAT_VERSION,
    segment_bits: SEGMENT_BITS,
    hash_seed: 0x5eed_5eed_5eed_5eed,
    store_id: 0x000f_0220_000f_0220,
};
const CHECKPOINT_FILE: &str = "CHECKPOINT";
const RETIRED_FILE: &str = "RETIRED";
/// A key written after every successful open, to check the store takes
/// writes and keeps them across a reopen.
const PROBE_KEY: &[u8] = b"fuzz-probe";
const PROBE_VALUE: &[u8] = b"written after open";

/// Decodes a record from arbitrary bytes, as the log's readers and replay
/// do, and checks:
/// - no length from the input exceeds the crate's limits once the header
///   parses (so nothing is allocated from an unchecked length);
/// - a record that verifies re-encodes to exactly its bytes;
/// - a record that does not verify is short, fails its checksum or holds
///   a compressed value whose length is out of bounds;
/// - a compressed value decodes to its stated length or is corruption;
/// - the same record with its checksum recomputed verifies and re-encodes
///   (when its compressed value's length is in bounds).
pub fn record(data: &[u8]) {
    let Ok(header) = Header::parse(data, 0) else {
        return;
    };
    let total = header.total_len();
    if header.is_pad() {
        assert_eq!((header.flags, header.key_len), (FLAG_PAD, 0));
        assert_eq!(total, HEADER_BYTES + header.value_len);
        return;
    }
    assert!(header.key_len <= crate::MAX_KEY_BYTES && header.value_len <= crate::MAX_VALUE_BYTES);
    match Record::verify(header, data, 0) {
        Ok(r) => assert_reencodes(&r, &data[..total]),
        Err(e) => {
            assert!(matches!(e, Error::Corruption { offset: 0, .. }), "{e}");
            assert!(
                data.len() < total
                    || crc32c(&data[4..total]) != header.crc
                    || header.is_compressed()
            );
        }
    }
    if let Some(whole) = data.get(..total) {
        let mut fixed = whole.to_vec();
        let crc = crc32c(&fixed[4..]);
        fixed[..4].copy_from_slice(&crc.to_le_bytes());
        let h = Header::parse(&fixed, 0).expect("only the checksum changed");
        match Record::verify(h, &fixed, 0) {
            Ok(r) => assert_reencodes(&r, &fixed),
            Err(e) => assert!(h.is_compressed(), "{e}"),
        }
    }
}

/// Checks that `r`, verified from `bytes`, encodes back to `bytes`.
fn assert_reencodes(r: &Record<'_>, bytes: &[u8]) {
    let entry = Entry {
        flags: r.header.flags & (FLAG_TOMBSTONE | FLAG_BATCH | VALUE_FLAGS),
        expires_at: r.expires_at,
        key: r.key,
        value: r.stored_value,
    };
    assert_eq!(entry.len(), bytes.len());
    let mut out = vec![0; entry.len()];
    if r.header.span == 0 {
        assert_eq!(entry.checksum(), r.header.crc);
        entry.encode(&mut out, r.header.crc);
    } else {
        // Rewritten by an update in place: its span is in the header,
        // under the checksum, and no entry carries it.
        entry.encode(&mut out, 0);
        set_span(&mut out, r.header.span);
    }
    assert_eq!(out, bytes);
    assert_eq!(&bytes[r.value_offset()..], r.stored_value);
    let mut value = Vec::new();
    let codec = Codec::new(Compression::None, None, u64::MAX);
    match r.value_into(&codec, &mut value, 0) {
        Ok(()) => assert_eq!(value.len(), r.value_len()),
        Err(e) => assert!(r.header.is_compressed() && matches!(e, Error::Corruption { .. })),
    }
}

/// Lays out the store files that `data` describes (see the module docs) in
/// `dir`, an empty directory, then checks what recovery makes of them:
/// - `emberkv::check` and `Db::open` either succeed or fail with
///   [`Error::Corruption`] or [`Error::IncompatibleFormat`]; never a
///   panic or a hang;
/// - open fails only when check found a problem;
/// - [`crate::salvage()`] never panics, and on a store `check` finds sound
///   with nothing for an open to repair (opened without an index image)
///   returns exactly what the store holds;
/// - without a usable `CHECKPOINT` (which makes open trust an index image
///   instead of replaying): every key iteration returns reads back with
///   `get`, unless `check` found a value that does not decode; a write
///   after open, a compaction (compressing with zstd, or with LZ4 for an
///   input of odd length), a close and a reopen keep
///   exactly those keys and the write; and `check` then finds the store
///   sound;
/// - with one: opening from it never costs the log a record (opened and
///   closed with no write, then reopened without the checkpoint, the
///   store holds exactly what a replay of the whole log gave in a copy of
///   the same files); and, in a fresh layout of the input, every call
///   returns (an error is fine: damage below a checkpoint surfaces when
///   it is read).
///
/// # Panics
/// When a property fails, or the files cannot be written.
pub fn recovery(dir: &Path, data: &[u8]) {
    if !lay_out(dir, data).expect("laying out the store files") {
        return;
    }
    let trusts_image = matches!(crate::checkpoint::load(dir, META.store_id), Ok(Some(_)));
    // What a replay of the whole log keeps, from a copy of the files taken
    // before anything opens them.
    let replayed = if trusts_image {
        full_replay_of_a_copy(dir, data)
    } else {
        None
    };
    let report = crate::check(dir);
    let salvaged = salvage_all(dir);
    // The compaction below copies with the input's codec: zstd, or LZ4
    // for an input of odd length.
    let compression = if data.len() % 2 == 1 {
        Compression::Lz4
    } else {
        Compression::Zstd { level: 1 }
    };
    let db = match Db::open(dir, options().compression(compression)) {
        Ok(db) => db,
        Err(e) => {
            assert_damage(&e);
            if let Ok(report) = &report {
                assert!(!report.is_sound(), "open failed ({e}) on a sound store");
            }
            return;
        }
    };
    if let Err(e) = &report {
        assert_damage(e);
    }
    if trusts_image {
        loses_no_record(dir, db, replayed);
        for entry in fs::read_dir(dir).expect("listing the store") {
            fs::remove_file(entry.expect("a directory entry").path()).expect("clearing the store");
        }
        lay_out(dir, data).expect("laying out the store files again");
        if let Ok(db) = Db::open(dir, options()) {
            exercise(db);
        }
        return;
    }
    let mut live = match read_all(&db) {
        Ok(live) => live,
        Err(e) => {
            // A compressed value whose record verifies but whose frame no
            // compressor wrote (the harness recomputes checksums) fails
            // only when read: `check`, which decodes every key's newest
            // value, must have flagged it.
            assert!(matches!(e, Error::Corruption { .. }), "{e}");
            assert!(
                report
                    .as_ref()
                    .is_err_and(|e| matches!(e, Error::Corruption { .. }))
                    || report.as_ref().is_ok_and(|r| !r.is_sound()),
                "a read failed ({e}) on a store check found sound"
            );
            return;
        }
    };
    if let (Ok(report), Some(salvaged)) = (&report, &salvaged)
        && report.is_clean()
    {
        assert_eq!(salvaged, &live, "salvage of a sound store differs from it");
    }
    db.insert(PROBE_KEY, PROBE_VALUE)
        .expect("a write after open");
    live.insert(PROBE_KEY.to_vec(), PROBE_VALUE.to_vec());
    db.compact().expect("compaction of a replayed store");
    assert_eq!(read_all(&db).expect("reading after compaction"), live);
    db.close().expect("close");
    let db = Db::open(dir, options()).expect("reopening a store that opened");
    assert_eq!(read_all(&db).expect("reading after reopen"), live);
    db.close().expect("close after reopen");
    let report = crate::check(dir).expect("check after a clean close");
    assert!(report.is_clean(), "{report}");
}

/// What [`crate::salvage()`] finds in `dir`: every key without an expiry
/// and its value (`None` when it fails, which only damage to the meta
/// file, the manifest or the dictionary may make it do; it must never
/// panic).
fn salvage_all(dir: &Path) -> Option<BTreeMap<Vec<u8>, Vec<u8>>> {
    let mut keys = BTreeMap::new();
    let salvaged = crate::salvage(dir, |key, value, expires_at| {
        if expires_at.is_none() {
            assert!(keys.insert(key.to_vec(), value.to_vec()).is_none());
        }
        Ok(())
    });
    match salvaged {
        Ok(report) => {
            assert!(report.keys >= keys.len() as u64);
            Some(keys)
        }
        Err(e) => {
            assert_damage(&e);
            None
        }
    }
}

/// What a replay of the whole log keeps of a layout (see
/// [`full_replay_of_a_copy`]).
struct Replayed {
    kept: BTreeMap<Vec<u8>, Vec<u8>>,
    /// Whether `check` found the files sound with nothing to repair
    /// before the replay: else the replay cut a torn or damaged tail off
    /// the newest segment (or refused damage).
    sound: bool,
}

/// Lays `data` out again in a directory next to `dir`, without its
/// `CHECKPOINT`, and returns what a replay of the whole log keeps there
/// (`None` when that open or read fails on damage); removes the copy.
fn full_replay_of_a_copy(dir: &Path, data: &[u8]) -> Option<Replayed> {
    let mut name = dir.file_name().expect("a named directory").to_owned();
    name.push("-replayed");
    let copy = dir.with_file_name(name);
    let _ = fs::remove_dir_all(&copy);
    fs::create_dir(&copy).expect("creating the copy");
    lay_out(&copy, data).expect("laying out the copy");
    fs::remove_file(copy.join(CHECKPOINT_FILE)).expect("the copy's checkpoint");
    let sound = crate::check(&copy).is_ok_and(|report| report.is_clean());
    let kept = Db::open(&copy, options()).ok().and_then(|db| {
        let kept = read_all(&db).ok();
        let _ = db.close();
        kept
    });
    fs::remove_dir_all(&copy).expect("removing the copy");
    kept.map(|kept| Replayed { kept, sound })
}

/// Closes `db`, opened from an index image with no write since, deletes
/// the checkpoint and reopens: a replay of the whole log must keep exactly
/// what it kept before the image was opened, so that nothing done from the
/// image cut records off the log. Where that replay cut damage off the
/// newest segment, it may instead refuse the store: the close marked the
/// bytes the image covered durable (they were synced, damage or not), and
/// damage below the mark is rot that open does not cut (`salvage` reads
/// past it).
fn loses_no_record(dir: &Path, db: Db, replayed: Option<Replayed>) {
    if let Err(e) = db.close() {
        assert_damage(&e);
        return;
    }
    let Some(Replayed {
        kept: replayed,
        sound,
    }) = replayed
    else {
        return;
    };
    let _ = fs::remove_file(dir.join(CHECKPOINT_FILE));
    let db = match Db::open(dir, options()) {
        Ok(db) => db,
        Err(Error::Corruption { .. }) if !sound => return,
        Err(e) => panic!("a full replay that worked on a copy of sound files: {e}"),
    };
    assert_eq!(
        read_all(&db).expect("reading what a full replay read on a copy"),
        replayed,
        "opening from the checkpoint changed what the log holds"
    );
    let _ = db.close();
}

/// Uses a store opened from an index image the input supplied: every call
/// must return, with a value or an error. (The image may be crafted, with
/// its checksum recomputed: entries may point at records of other keys,
/// which a real checkpoint never does, so a key may then show up twice,
/// or not be found by its own key.)
fn exercise(db: Db) {
    let keys: Vec<Vec<u8>> = db.keys().filter_map(Result::ok).collect();
    for key in &keys {
        let _ = db.get(key);
        let _ = db.remove(key);
    }
    let _ = db.insert(PROBE_KEY, PROBE_VALUE);
    let _ = db.compact();
    let _ = db.close();
}

/// The options of every open: the smallest hot tier and index, no
/// background compaction (the harness compacts when it wants).
fn options() -> Options {
    Options::default()
        .key_capacity(64)
        .hot_bytes(4 << 20)
        .segment_bytes(1 << SEGMENT_BITS)
        .compaction_garbage(None)
        // Compaction's copies are compressed (zstd here; `recovery` picks
        // the codec of the store it compacts): the harness's reopen and
        // check then read compressed records.
        .compression(Compression::Zstd { level: 1 })
}

/// The errors damaged files may give.
fn assert_damage(e: &Error) {
    assert!(
        matches!(
            e,
            Error::Corruption { .. } | Error::IncompatibleFormat { .. }
        ),
        "not a damage error: {e:?}"
    );
}

/// Every live key without an expiry and its value, as iteration returns
/// them, each checked against `get` (keys with an expiry are left out: one
/// may expire while the harness runs).
fn read_all(db: &Db) -> Result<BTreeMap<Vec<u8>, Vec<u8>>> {
    let mut live = BTreeMap::new();
    for pair in db.iter() {
        let (key, value) = pair?;
        if db.expiry(&key)? != Some(None) {
            continue;
        }
        assert_eq!(
            db.get(&key)?.as_ref(),
            Some(&value),
            "get disagrees with iteration"
        );
        assert!(
            live.insert(key, value).is_none(),
            "iteration returned a key twice"
        );
    }
    Ok(live)
}

/// Writes the store files a `recovery` input describes (see the module
/// docs) into `dir`, an empty directory: to look at an input that failed
/// with the CLI (`emberkv DIR check`), say. Returns `false`, writing
/// nothing, for an empty input.
///
/// # Errors
/// [`Error::Io`].
pub fn lay_out(dir: &Path, data: &[u8]) -> Result<bool> {
    let Some((&flags, rest)) = data.split_first() else {
        return Ok(false);
    };
    let mut parts = split(rest);
    fs::write(dir.join(META_FILE), META.encode())?;
    let fix = flags & CHECKSUMS != 0 && flags & WITH_CHECKPOINT == 0;
    let mut write_tail_crc_file = |wanted: u8, name: &str, fix: bool| -> Result<()> {
        if flags & wanted != 0
            && let Some(part) = parts.pop()
        {
            let mut bytes = part.to_vec();
            if fix && bytes.len() >= 4 {
                let at = bytes.len() - 4;
                let (body, crc) = bytes.split_at_mut(at);
                crc.copy_from_slice(&crc32c(body).to_le_bytes());
            }
            fs::write(dir.join(name), bytes)?;
        }
        Ok(())
    };
    write_tail_crc_file(WITH_CHECKPOINT, CHECKPOINT_FILE, flags & CHECKSUMS != 0)?;
    write_tail_crc_file(WITH_RETIRED, RETIRED_FILE, fix)?;
    let storage = Segments::new(dir, SEGMENT_BITS, META.store_id);
    let first = u64::from(flags >> FIRST_SEGMENT_SHIFT & 3);
    let mut prev_len = 0;
    for (seg, part) in (first..).zip(parts.into_iter().take(MAX_SEGMENTS)) {
        let mut bytes = part.to_vec();
        if flags & HEADERS != 0 {
            if fix {
                fix_records(&mut bytes);
            }
            storage.create(seg, prev_len)?;
            let start = storage.segment_start(seg);
            let mut at = SEGMENT_HEADER_BYTES;
            if flags & NEAR_END != 0 {
                let near_end = storage.segment_size() - NEAR_END_ROOM;
                let mut pad = vec![0; (near_end - at) as usize];
                encode_pad(&mut pad);
                storage.write_at(start + at, &pad[..HEADER_BYTES])?;
                at = near_end;
            }
            storage.write_at(start + at, &bytes)?;
            prev_len = at + bytes.len() as u64;
        } else {
            if fix && bytes.len() >= SEGMENT_HEADER_BYTES as usize {
                let (head, records) = bytes.split_at_mut(SEGMENT_HEADER_BYTES as usize);
                // The durable mark's slots (40..56) are outside the
                // header's checksum and carry their own.
                let mut unmarked = head[..60].to_vec();
                unmarked[40..56].fill(0);
                let crc = crc32c(&unmarked);
                head[60..].copy_from_slice(&crc.to_le_bytes());
                if flags & MARKS != 0 {
                    for slot in head[40..56].chunks_mut(8) {
                        let len = u32::from_le_bytes(slot[..4].try_into().expect("4 bytes"));
                        slot.copy_from_slice(&mark_slot(seg, len));
                    }
                }
                fix_records(records);
            }
            fs::write(dir.join(storage.file_name(seg)), &bytes)?;
            prev_len = bytes.len() as u64;
        }
    }
    Ok(true)
}

/// Splits `rest` at each [`SEPARATOR`].
fn split(mut rest: &[u8]) -> Vec<&[u8]> {
    let mut parts = Vec::new();
    while let Some(at) = rest.windows(SEPARATOR.len()).position(|w| w == SEPARATOR) {
        parts.push(&rest[..at]);
        rest = &rest[at + SEPARATOR.len()..];
    }
    parts.push(rest);
    parts
}

/// Recomputes the checksum of each record from the start of `records` on,
/// for as long as the headers parse and the records fit.
fn fix_records(records: &mut [u8]) {
    let mut pos = 0;
    while let Some(rec) = records.get_mut(pos..).filter(|r| r.len() >= HEADER_BYTES) {
        if rec[4] == FLAG_PAD {
            let crc = crc32c(&rec[4..HEADER_BYTES]);
            rec[..4].copy_from_slice(&crc.to_le_bytes());
        }
        let Ok(header) = Header::parse(rec, 0) else {
            return;
        };
        let total = header.total_len();
        let Some(whole) = rec.get_mut(..total) else {
            return;
        };
        if !header.is_pad() {
            let crc = crc32c(&whole[4..]);
            whole[..4].copy_from_slice(&crc.to_le_bytes());
        }
        pos += total;
    }
}

/// Creates an empty store in `dir` with the meta file the `recovery`
/// harness lays out, so that a store written there (with any options: the
/// meta file's 1 MiB segments win) turns into a `recovery` input with
/// [`recovery_input`].
///
/// # Errors
/// [`Error::Io`].
pub fn create_store(dir: &Path) -> Result<()> {
    fs::create_dir_all(dir)?;
    fs::write(dir.join(META_FILE), META.encode())?;
    Ok(())
}

/// The `recovery` input that lays out the closed store in `dir` (made with
/// [`create_store`]) again: its segment files (a missing one, retired, as
/// an empty part), and its `CHECKPOINT` and `RETIRED` files when
/// `flags` asks for them and they exist. With [`HEADERS`] the segment
/// headers are left out (the harness writes them back).
///
/// # Errors
/// [`Error::InvalidPath`] when the segments do not start at 0 to 3 or
/// hold the separator; [`Error::Io`].
pub fn recovery_input(dir: &Path, flags: u8) -> Result<Vec<u8>> {
    let storage = Segments::new(dir, SEGMENT_BITS, META.store_id);
    let segments = storage.list()?;
    let invalid = |reason: &str| Error::InvalidPath {
        path: dir.to_path_buf(),
        reason: reason.into(),
    };
    let first = segments.first().copied().unwrap_or(0);
    if first > 3 || segments.len() > MAX_SEGMENTS {
        return Err(invalid("segments do not fit a recovery input"));
    }
    let wanted = flags;
    let mut flags = flags & (HEADERS | CHECKSUMS) | (first as u8) << FIRST_SEGMENT_SHIFT;
    let mut parts = Vec::new();
    for seg in first..=segments.last().copied().unwrap_or(0) {
        let bytes = match fs::read(dir.join(storage.file_name(seg))) {
            Ok(b) if flags & HEADERS != 0 => b
                .get(SEGMENT_HEADER_BYTES as usize..)
                .unwrap_or_default()
                .to_vec(),
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e.into()),
        };
        parts.push(bytes);
    }
    for (flag, name) in [
        (WITH_RETIRED, RETIRED_FILE),
        (WITH_CHECKPOINT, CHECKPOINT_FILE),
    ] {
        if wanted & flag == 0 {
            continue;
        }
        match fs::read(dir.join(name)) {
            Ok(b) => {
                flags |= flag;
                parts.push(b);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e.into()),
        }
    }
    let mut input = vec![flags];
    for (i, part) in parts.iter().enumerate() {
        if part.windows(SEPARATOR.len()).any(|w| w == SEPARATOR) {
            return Err(invalid("a file holds the separator"));
        }
        if i > 0 {
            input.extend_from_slice(SEPARATOR);
        }
        input.extend_from_slice(part);
    }
    Ok(input)
}
