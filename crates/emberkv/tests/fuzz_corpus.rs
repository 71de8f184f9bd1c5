//! Replays the committed fuzz corpora, `fuzz/corpus/record` and
//! `fuzz/corpus/recovery`, through the bodies of the fuzz targets
//! (`emberkv::fuzzing`), so that every input the fuzzer kept, and every
//! input that once crashed, is checked by `cargo test` on a stable
//! toolchain. `write_seeds` (ignored; `scripts/fuzz.sh seed` runs it)
//! writes the seed inputs from real stores.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use emberkv::fuzzing::{self, CHECKSUMS, HEADERS, WITH_CHECKPOINT, WITH_RETIRED};
use emberkv::{Compression, Db, Error, Options, WriteBatch};

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target)
}

/// Every input of a target's corpus, by file name.
fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = corpus_dir(target);
    let mut inputs: Vec<(String, Vec<u8>)> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, fs::read(&path).unwrap())
        })
        .collect();
    inputs.sort();
    assert!(!inputs.is_empty(), "{} is empty", dir.display());
    inputs
}

/// A directory for one store, under `/dev/shm` when it exists: recovery
/// fsyncs, which on a disk would dominate the run time.
fn scratch_dir() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        tempfile::tempdir_in(shm).unwrap()
    } else {
        tempfile::tempdir().unwrap()
    }
}

#[test]
fn record_corpus_replays() {
    for (name, input) in corpus("record") {
        eprintln!("record/{name}");
        fuzzing::record(&input);
    }
}

#[test]
fn recovery_corpus_replays() {
    for (name, input) in corpus("recovery") {
        eprintln!("recovery/{name}");
        fuzzing::recovery(scratch_dir().path(), &input);
    }
}

/// An input of the recovery corpus laid out as a store in a fresh
/// directory.
fn laid_out(name: &str) -> tempfile::TempDir {
    let input = fs::read(corpus_dir("recovery").join(name)).unwrap();
    let dir = scratch_dir();
    assert!(fuzzing::lay_out(dir.path(), &input).unwrap());
    dir
}

/// Regression: with no segment file left, recovery looks for the first
/// segment `RETIRED` leaves. A manifest retiring the first 2^40 segments
/// made the search (one number at a time, then) spin for hours: the store
/// now opens at once with its log at segment 2^40. One retiring every
/// segment (`below` = 2^64 - 1) left the search with nothing to find, which
/// panicked: it is corruption now.
#[test]
fn manifest_retiring_most_or_all_segments() -> emberkv::Result<()> {
    let dir = laid_out("regression-retired-below-huge");
    let db = Db::open(dir.path(), options())?;
    db.insert(b"k", b"v")?;
    db.close()?;
    let db = Db::open(dir.path(), options())?;
    assert_eq!(db.get(b"k")?.as_deref(), Some(&b"v"[..]));
    db.close()?;
    let report = emberkv::check(dir.path())?;
    assert!(report.is_clean(), "{report}");

    let dir = laid_out("regression-retired-below-max");
    let err = Db::open(dir.path(), options()).unwrap_err();
    assert!(matches!(err, Error::Corruption { .. }), "{err}");
    let report = emberkv::check(dir.path())?;
    assert!(!report.is_sound(), "{report}");
    Ok(())
}

/// Regression: a segment file longer than a segment let replay accept a
/// record crossing the segment's end and resume the log in the next
/// segment's address space, past where that segment's file would start:
/// the next write then left a gap of zeros after the new segment's header,
/// and compaction (or the next open) found that segment damaged. The
/// crossing record is now a torn tail, cut off.
#[test]
fn record_across_the_segment_end_is_a_torn_tail() -> emberkv::Result<()> {
    let dir = laid_out("regression-record-across-segment-end");
    let db = Db::open(dir.path(), options())?;
    assert_eq!(db.get(b"a")?.as_deref(), Some(&b"1"[..]));
    assert_eq!(db.get(b"k")?, None);
    db.insert(b"after", b"open")?;
    db.compact()?;
    db.close()?;
    let db = Db::open(dir.path(), options())?;
    assert_eq!(db.get(b"a")?.as_deref(), Some(&b"1"[..]));
    assert_eq!(db.get(b"after")?.as_deref(), Some(&b"open"[..]));
    db.close()?;
    let report = emberkv::check(dir.path())?;
    assert!(report.is_clean(), "{report}");
    Ok(())
}

/// Regression, found by the recovery target: records ending exactly at
/// the end of a segment whose file is longer, so that replay cuts the file
/// at the segment's end. The cut's log address was masked to a file offset,
/// which for the segment's end is 0: the whole file was truncated, and the
/// keys replay had just indexed pointed past its end.
#[test]
fn a_cut_at_the_segment_end_keeps_the_segment() -> emberkv::Result<()> {
    let dir = laid_out("regression-cut-at-segment-end");
    let db = Db::open(dir.path(), options())?;
    let mut keys = 0;
    for pair in db.iter() {
        let (key, value) = pair?;
        assert_eq!(db.get(&key)?, Some(value));
        keys += 1;
    }
    assert!(keys > 0);
    db.close()?;
    let segment = fs::metadata(dir.path().join("000000000000.seg"))?;
    assert_eq!(segment.len(), 1 << 20, "cut at the segment's end");
    Ok(())
}

/// Regression, found by the recovery target: replay accepted a record
/// ending 15 bytes before its segment's end, which the appender never
/// writes (it leaves no room or room for a pad). The log resumed there; the
/// next write moved to the next segment and the flusher wrote the 15 bytes
/// of the page's slack after the tail, so the sealed segment ended in an
/// invalid record: `check` reported it, and an open without the checkpoint
/// failed. Such a record is now a torn tail.
#[test]
fn a_record_ending_less_than_a_pad_before_the_segment_end_is_torn() -> emberkv::Result<()> {
    let dir = laid_out("regression-record-ends-just-before-segment-end");
    let db = Db::open(dir.path(), options())?;
    db.insert(b"after", b"open")?;
    db.close()?;
    fs::remove_file(dir.path().join("CHECKPOINT"))?;
    let db = Db::open(dir.path(), options())?;
    assert_eq!(db.get(b"after")?.as_deref(), Some(&b"open"[..]));
    db.close()?;
    let report = emberkv::check(dir.path())?;
    assert!(report.is_clean(), "{report}");
    Ok(())
}

/// The `recovery` harness on the crafted checkpoint an attack found (a
/// `covered` one byte past the first record's start, checksum recomputed,
/// which made open cut the segment to its header): the harness must pass
/// on it now, and it fails if opening from the image loses records.
#[test]
fn the_harness_checks_a_crafted_covered_loses_no_record() -> emberkv::Result<()> {
    let dir = scratch_dir();
    fuzzing::create_store(dir.path())?;
    let db = Db::open(dir.path(), options())?;
    for round in 0..3 {
        write_some(&db, round)?;
    }
    db.close()?;
    let path = dir.path().join("CHECKPOINT");
    let mut checkpoint = fs::read(&path)?;
    // After the magic (8), the layout version (4) and the store id (8); the
    // harness recomputes the checksum.
    checkpoint[20..28].copy_from_slice(&(64u64 + 1).to_le_bytes());
    fs::write(&path, checkpoint)?;
    let flags = HEADERS | CHECKSUMS | WITH_RETIRED | WITH_CHECKPOINT;
    let input = fuzzing::recovery_input(dir.path(), flags)?;
    fuzzing::recovery(scratch_dir().path(), &input);
    Ok(())
}

/// A time far in the future (2096), so that seeds do not depend on the
/// clock.
fn far_future() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(4_000_000_000)
}

fn options() -> Options {
    Options::default()
        .key_capacity(64)
        .hot_bytes(4 << 20)
        .compaction_garbage(None)
        .compression(Compression::Zstd { level: 1 })
}

/// Writes a little of everything a record can be: plain, empty key and
/// value, overwritten, removed (a tombstone), with an expiry to come and
/// one passed, and a batch.
fn write_some(db: &Db, round: u8) -> emberkv::Result<()> {
    let key = |k: &str| format!("{k}:{round}").into_bytes();
    db.insert(&key("user"), b"Ada Lovelace")?;
    db.insert(&key("counter"), b"1")?;
    db.insert(&key("counter"), b"2")?;
    db.insert(&key("gone"), b"soon removed")?;
    db.remove(&key("gone"))?;
    db.insert(&key("empty"), b"")?;
    db.insert_with_expiry(&key("session"), b"token", far_future())?;
    db.insert_with_expiry(&key("stale"), b"expired", SystemTime::UNIX_EPOCH)?;
    // Longer than a cold read's first guess (4 KiB) once: a second read.
    let big = if round == 0 { 5000 } else { 100 };
    db.insert(&key("big"), &vec![round; big])?;
    let mut batch = WriteBatch::new();
    batch
        .insert(&key("from"), b"90")
        .insert(&key("to"), b"110")
        .remove(&key("user"));
    db.apply_batch(&batch)
}

/// The records of a segment file (after its 64-byte header), framed by
/// the format in `docs/ARCHITECTURE.md`.
fn records(segment: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut pos = 64;
    while pos + 16 <= segment.len() {
        let u32_at = |i: usize| u32::from_le_bytes(segment[i..i + 4].try_into().unwrap()) as usize;
        let flags = segment[pos + 4];
        let (key_len, value_len) = (u32_at(pos + 8), u32_at(pos + 12));
        let total = if flags & 2 != 0 {
            16 + value_len
        } else {
            16 + if flags & 4 != 0 { 8 } else { 0 } + key_len + value_len
        };
        out.push(segment[pos..(pos + total).min(segment.len())].to_vec());
        pos += total;
    }
    out
}

/// Writes the seed inputs of `record` and `recovery` from three small
/// stores: one empty, one with a segment of records, and one whose
/// compactions retired segments.
#[test]
#[ignore = "writes fuzz/corpus; run by scripts/fuzz.sh seed"]
fn write_seeds() -> emberkv::Result<()> {
    let stores: [(&str, u8); 3] = [("empty", 0), ("one-segment", 1), ("compacted", 3)];
    for (name, rounds) in stores {
        let dir = scratch_dir();
        fuzzing::create_store(dir.path())?;
        let db = Db::open(dir.path(), options())?;
        for round in 0..rounds {
            write_some(&db, round)?;
            if name == "compacted" {
                db.compact()?;
            }
        }
        db.close()?;
        let variants = [
            ("replay", HEADERS | CHECKSUMS | WITH_RETIRED),
            (
                "checkpoint",
                HEADERS | CHECKSUMS | WITH_RETIRED | WITH_CHECKPOINT,
            ),
            ("raw", CHECKSUMS | WITH_RETIRED),
        ];
        // A checkpoint holds every index shard (some 40 KB here): one
        // store's is seed enough.
        let variants = variants
            .into_iter()
            .filter(|(variant, _)| *variant != "checkpoint" || name == "compacted");
        for (variant, flags) in variants {
            let input = fuzzing::recovery_input(dir.path(), flags)?;
            fuzzing::recovery(scratch_dir().path(), &input);
            fs::write(
                corpus_dir("recovery").join(format!("seed-{name}-{variant}")),
                input,
            )?;
        }
        if name == "one-segment" {
            let segment = fs::read(dir.path().join("000000000000.seg"))?;
            for (i, record) in records(&segment).into_iter().enumerate() {
                fuzzing::record(&record);
                fs::write(corpus_dir("record").join(format!("seed-{i:02}")), record)?;
            }
        }
        if name == "compacted" {
            // Compaction stored the 5,000-byte value compressed (flag 16).
            let mut compressed = 0;
            for entry in fs::read_dir(dir.path())? {
                let path = entry?.path();
                if path.extension().is_none_or(|e| e != "seg") {
                    continue;
                }
                for record in records(&fs::read(&path)?) {
                    if record.len() > 4 && record[4] & 16 != 0 {
                        fuzzing::record(&record);
                        let seed = format!("seed-compressed-{compressed}");
                        fs::write(corpus_dir("record").join(seed), record)?;
                        compressed += 1;
                    }
                }
            }
            assert!(
                compressed > 0,
                "no compressed record in the compacted store"
            );
        }
    }
    Ok(())
}
