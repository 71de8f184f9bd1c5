//! Index checkpoints: used when sound, ignored when damaged, stale or
//! foreign, and never trusted over the log.

use std::collections::HashMap;
use std::path::Path;

use emberkv::{Db, Error, Options};

mod store_files;
use store_files::segment_numbers;

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn options() -> Options {
    Options::default()
        .segment_bytes(1 << 20)
        .compaction_garbage(None)
}

fn value(k: u32, round: u32) -> Vec<u8> {
    let mut v = format!("{k}/{round}/").into_bytes();
    v.resize(200 + (k % 300) as usize, b'~');
    v
}

fn write_rounds(
    db: &Db,
    model: &mut HashMap<u32, Vec<u8>>,
    rounds: std::ops::Range<u32>,
) -> TestResult {
    for round in rounds {
        for k in 0..3_000u32 {
            if (k + round) % 7 == 0 {
                db.remove(&k.to_le_bytes())?;
                model.remove(&k);
            } else {
                db.insert(&k.to_le_bytes(), &value(k, round))?;
                model.insert(k, value(k, round));
            }
        }
    }
    Ok(())
}

fn check(dir: &Path, model: &HashMap<u32, Vec<u8>>) -> TestResult {
    let db = Db::open(dir, options())?;
    assert_eq!(db.len(), model.len());
    for k in 0..3_000u32 {
        assert_eq!(db.get(&k.to_le_bytes())?, model.get(&k).cloned(), "key {k}");
    }
    let stats = db.stats()?;
    let logical: u64 = model.values().map(|v| 4 + v.len() as u64).sum();
    assert_eq!(
        stats.logical_bytes, logical,
        "byte counts survive the checkpoint"
    );
    db.close()?;
    Ok(())
}

#[test]
fn a_clean_close_leaves_a_checkpoint_that_reopen_uses() -> TestResult {
    let dir = tempfile::tempdir()?;
    let mut model = HashMap::new();
    let db = Db::open(dir.path(), options())?;
    write_rounds(&db, &mut model, 0..3)?;
    db.compact()?;
    write_rounds(&db, &mut model, 3..4)?;
    db.close()?;
    assert!(dir.path().join("CHECKPOINT").exists());
    check(dir.path(), &model)?;
    // Writes after the checkpoint, then a checkpoint-less crash-like stop:
    // the checkpoint is older than the log, and replay covers the rest.
    let saved = std::fs::read(dir.path().join("CHECKPOINT"))?;
    let db = Db::open(dir.path(), options())?;
    write_rounds(&db, &mut model, 4..6)?;
    db.compact()?;
    write_rounds(&db, &mut model, 6..7)?;
    db.close()?;
    std::fs::write(dir.path().join("CHECKPOINT"), &saved)?;
    check(dir.path(), &model)?;
    Ok(())
}

/// A `CHECKPOINT.tmp` left by a crash while a checkpoint was written is
/// deleted by the next writable open (it is never read, but it counts in
/// the store's files and against its space bound), and left alone by a
/// read-only open, which changes nothing on disk.
#[test]
fn a_leftover_checkpoint_temporary_file_is_deleted_by_a_writable_open() -> TestResult {
    let dir = tempfile::tempdir()?;
    let mut model = HashMap::new();
    let db = Db::open(dir.path(), options())?;
    write_rounds(&db, &mut model, 0..1)?;
    db.close()?;
    let tmp = dir.path().join("CHECKPOINT.tmp");
    std::fs::write(&tmp, vec![7u8; 100_000])?;
    let before = Db::open(dir.path(), options().read_only(true))?
        .stats()?
        .disk_bytes;
    assert!(tmp.exists());
    let db = Db::open(dir.path(), options())?;
    assert!(!tmp.exists());
    assert!(db.stats()?.disk_bytes <= before - 100_000);
    db.close()?;
    check(dir.path(), &model)
}

#[test]
fn damaged_or_foreign_checkpoints_are_ignored() -> TestResult {
    let dir = tempfile::tempdir()?;
    let other = tempfile::tempdir()?;
    let mut model = HashMap::new();
    let db = Db::open(dir.path(), options())?;
    write_rounds(&db, &mut model, 0..3)?;
    db.close()?;
    let path = dir.path().join("CHECKPOINT");
    let good = std::fs::read(&path)?;
    for at in [0, 20, 40, good.len() / 2, good.len() - 1] {
        let mut bad = good.clone();
        bad[at] ^= 0x01;
        std::fs::write(&path, &bad)?;
        check(dir.path(), &model)?;
    }
    std::fs::write(&path, &good[..good.len() / 3])?;
    check(dir.path(), &model)?;
    // A sound checkpoint of another store must not be trusted.
    let db = Db::open(other.path(), options())?;
    db.insert(b"x", b"y")?;
    db.close()?;
    std::fs::copy(other.path().join("CHECKPOINT"), &path)?;
    check(dir.path(), &model)?;
    Ok(())
}

#[test]
fn a_log_cut_below_its_checkpoint_is_refused_not_replayed_short() -> TestResult {
    let dir = tempfile::tempdir()?;
    let mut model = HashMap::new();
    let db = Db::open(dir.path(), options())?;
    write_rounds(&db, &mut model, 0..2)?;
    db.close()?;
    // Cut the newest segment's tail off after the checkpoint was written
    // (its durable mark goes too, so that only the checkpoint can tell):
    // the log lost records the checkpoint says were durable. A newcomer's
    // walkthrough deleted the newest segment file; open ignored the
    // checkpoint as stale, replayed the shorter log, and `check` called
    // the store sound, with 1,691 acknowledged keys gone.
    let newest = std::fs::read_dir(dir.path())?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "seg"))
        .max()
        .unwrap();
    let len = std::fs::metadata(&newest)?.len();
    let file = std::fs::OpenOptions::new().write(true).open(&newest)?;
    file.set_len(len / 2)?;
    std::os::unix::fs::FileExt::write_all_at(&file, &[0; 16], 40)?;
    match Db::open(dir.path(), options()) {
        Err(Error::Corruption { reason, .. }) => {
            assert!(reason.contains("checkpoint"), "{reason}")
        }
        other => panic!("expected Corruption, got {:?}", other.map(|db| db.len())),
    }
    assert_eq!(
        std::fs::metadata(&newest)?.len(),
        len / 2,
        "open cut the file"
    );
    let report = emberkv::check(dir.path())?;
    assert!(
        report.problems.iter().any(|p| p.contains("checkpoint")),
        "{report}"
    );
    // Salvage gets out what is left, every value one that was written.
    let mut salvaged = 0;
    let report = emberkv::salvage(dir.path(), |key, value, _| {
        let k = u32::from_le_bytes(key.try_into().unwrap());
        let text = String::from_utf8_lossy(value);
        assert!(text.starts_with(&format!("{k}/")), "key {k}: {text:.20}");
        salvaged += 1;
        Ok(())
    })?;
    assert!(salvaged > 0);
    let missing: u64 = report.missing.iter().map(|(_, len)| len).sum();
    assert!(missing > 0, "{report:?}");
    Ok(())
}

/// A checkpoint file that is there but cannot be read fails the open,
/// `check` and `salvage` with the I/O error. Found by an attack helper:
/// every error reading it was taken for "no checkpoint", so with `EMFILE`
/// injected on that one file (`strace -e inject=openat:error=EMFILE`)
/// `check` called sound, and a writable open accepted (and then
/// checkpointed over), a store whose newest segment was gone. Here the file
/// gives way to a directory, which `read` refuses with `EISDIR`, as it
/// would refuse it with `EMFILE` short of descriptors.
#[test]
fn a_checkpoint_that_cannot_be_read_fails_the_open_instead_of_being_ignored() -> TestResult {
    let dir = tempfile::tempdir()?;
    let mut model = HashMap::new();
    let db = Db::open(dir.path(), options())?;
    write_rounds(&db, &mut model, 0..2)?;
    db.close()?;
    let path = dir.path().join("CHECKPOINT");
    let saved = std::fs::read(&path)?;
    std::fs::remove_file(&path)?;
    std::fs::create_dir(&path)?;
    let unreadable = |e: &Error| matches!(e, Error::Io(io) if io.raw_os_error() == Some(21));
    match Db::open(dir.path(), options()) {
        Err(e) => assert!(unreadable(&e), "{e:?}"),
        Ok(db) => panic!("opened with {} keys", db.len()),
    }
    match emberkv::check(dir.path()) {
        Err(e) => assert!(unreadable(&e), "{e:?}"),
        Ok(report) => panic!("checked: {report}"),
    }
    match emberkv::salvage(dir.path(), |_, _, _| Ok(())) {
        Err(e) => assert!(unreadable(&e), "{e:?}"),
        Ok(report) => panic!("salvaged: {report:?}"),
    }
    // Nothing was changed: with the file back, the store opens whole.
    std::fs::remove_dir(&path)?;
    std::fs::write(&path, saved)?;
    check(dir.path(), &model)
}

/// A sealed segment below the checkpoint replaced by the same-numbered
/// segment of another store, or two sealed segments swapped, is refused
/// at open as a full replay refuses it. Found by a helper's damage sweep:
/// with a checkpoint, open read no header of the segments it covered, and
/// gets returned the other store's values (their checksums hold), which
/// a compaction then copied in for good.
#[test]
fn a_foreign_or_misplaced_segment_below_the_checkpoint_is_refused() -> TestResult {
    let store = |dir: &Path, round: u32| -> TestResult {
        let db = Db::open(dir, options())?;
        write_rounds(&db, &mut HashMap::new(), round..round + 2)?;
        db.close()?;
        Ok(())
    };
    let dir = tempfile::tempdir()?;
    let other = tempfile::tempdir()?;
    store(dir.path(), 0)?;
    store(other.path(), 5)?;
    let ours = segment_numbers(dir.path());
    let theirs = segment_numbers(other.path());
    // A sealed segment both stores have (the newest is not sealed).
    let seg = *ours
        .iter()
        .rev()
        .skip(1)
        .find(|s| theirs.contains(s))
        .ok_or("no sealed segment in common")?;
    let name = format!("{seg:012}.seg");
    let path = dir.path().join(&name);
    let good = std::fs::read(&path)?;
    assert!(dir.path().join("CHECKPOINT").exists());
    let refused = |what: &str| match Db::open(dir.path(), options()) {
        Err(Error::Corruption { reason, .. }) => {
            assert!(reason.contains("another store"), "{what}: {reason}")
        }
        other => panic!(
            "{what}: expected Corruption, got {:?}",
            other.map(|db| db.len())
        ),
    };
    std::fs::copy(other.path().join(&name), &path)?;
    refused("another store's segment");
    std::fs::write(&path, &good)?;
    let next = dir.path().join(format!("{:012}.seg", seg + 1));
    let next_good = std::fs::read(&next)?;
    std::fs::write(&path, &next_good)?;
    std::fs::write(&next, &good)?;
    refused("two segments swapped");
    std::fs::write(&path, &good)?;
    std::fs::write(&next, &next_good)?;
    assert!(
        Db::open(dir.path(), options())?
            .get(&1u32.to_le_bytes())?
            .is_some()
    );
    Ok(())
}

/// A sealed segment below the checkpoint cut short is refused at open, as
/// a full replay refuses it (its successor's header records the length it
/// was sealed at). Found by a helper's damage sweep: with a checkpoint the
/// store opened, and gets of the keys whose records were cut away failed
/// one by one with `Corruption`.
#[test]
fn a_sealed_segment_cut_short_below_the_checkpoint_is_refused() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), options())?;
    write_rounds(&db, &mut HashMap::new(), 0..8)?;
    db.close()?;
    assert!(dir.path().join("CHECKPOINT").exists());
    let segments = segment_numbers(dir.path());
    assert!(segments.len() >= 4, "{segments:?}");
    // Every sealed segment: those whose successor is below the checkpoint
    // too, and the last ones, whose successor (or themselves) replay reads.
    // (The checkpoint's replay refuses the log, and the full replay open
    // falls back to names the first bad record.)
    for &seg in &segments[..segments.len() - 1] {
        let path = dir.path().join(format!("{seg:012}.seg"));
        let good = std::fs::read(&path)?;
        std::fs::write(&path, &good[..good.len() / 2])?;
        match Db::open(dir.path(), options()) {
            Err(Error::Corruption { .. }) => {}
            other => panic!(
                "segment {seg}: expected Corruption, got {:?}",
                other.map(|db| db.len())
            ),
        }
        let report = emberkv::check(dir.path())?;
        assert!(!report.problems.is_empty(), "segment {seg}: {report:?}");
        std::fs::write(&path, &good)?;
    }
    Db::open(dir.path(), options())?.close()?;
    Ok(())
}

/// Rewrites the checkpoint's `covered` (after the magic, the layout version
/// and the store id) and recomputes its checksum: a file no damage
/// produces, which open must still never let destroy records.
fn set_covered(dir: &Path, covered: u64) {
    let path = dir.join("CHECKPOINT");
    let mut bytes = std::fs::read(&path).unwrap();
    let body = bytes.len() - 4;
    bytes[20..28].copy_from_slice(&covered.to_le_bytes());
    let crc = crc_fast::crc32_iscsi(&bytes[..body]);
    bytes[body..].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&path, bytes).unwrap();
}

/// A store of 10,000 keys of 300 bytes over several 1 MiB segments,
/// closed cleanly (so with a checkpoint).
fn closed_store(dir: &Path) {
    let db = Db::open(dir, options()).unwrap();
    for k in 0..10_000u32 {
        db.insert(&k.to_le_bytes(), &[k as u8; 300]).unwrap();
    }
    db.close().unwrap();
}

fn assert_all_there(db: &Db) {
    for k in 0..10_000u32 {
        assert_eq!(
            db.get(&k.to_le_bytes()).unwrap(),
            Some(vec![k as u8; 300]),
            "key {k}"
        );
    }
}

#[test]
fn a_covered_address_off_a_record_boundary_in_the_newest_segment_truncates_nothing() {
    // Found by an attack on the checkpoint checks: replay from this
    // `covered` met no valid record there and cut the newest segment to
    // its header, losing 459 of 3,000 keys for good.
    let dir = tempfile::tempdir().unwrap();
    closed_store(dir.path());
    let newest = *segment_numbers(dir.path()).last().unwrap();
    set_covered(dir.path(), (newest << 20) + 64 + 1);
    assert_all_there(&Db::open(dir.path(), options()).unwrap());
}

#[test]
fn a_covered_address_off_a_record_boundary_in_a_sealed_segment_does_not_fail_open() {
    // The same attack one segment back made open fail with Corruption on a
    // store `check` finds sound.
    let dir = tempfile::tempdir().unwrap();
    closed_store(dir.path());
    set_covered(dir.path(), (segment_numbers(dir.path())[0] << 20) + 64 + 1);
    assert!(emberkv::check(dir.path()).unwrap().is_sound());
    assert_all_there(&Db::open(dir.path(), options()).unwrap());
}

#[test]
fn a_torn_tail_at_the_covered_address_is_cut_after_a_full_replay() {
    // The genuine case the check above must not break: a crash leaves
    // garbage right at the checkpoint's `covered`; open cuts it off (after
    // replaying the whole log) and keeps every record before it.
    let dir = tempfile::tempdir().unwrap();
    closed_store(dir.path());
    let newest = *segment_numbers(dir.path()).last().unwrap();
    let path = dir.path().join(format!("{newest:012}.seg"));
    let len = std::fs::metadata(&path).unwrap().len();
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    std::io::Write::write_all(&mut file, &[0xA5; 100]).unwrap();
    drop(file);
    let db = Db::open(dir.path(), options()).unwrap();
    assert_all_there(&db);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), len);
    db.insert(b"after", b"the cut").unwrap();
    db.close().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    assert_all_there(&db);
    assert_eq!(db.get(b"after").unwrap().unwrap(), b"the cut");
}

/// A full replay (no checkpoint) into an index presized for 16 keys:
/// 20,000 keys make every shard grow several times while the log is
/// replayed (the first growth of each reads keys whose records lie in
/// chunks already read, through the segment maps or by pread without
/// them; the later ones rehash from the homes kept meanwhile), among
/// overwrites and removes, and every key and value comes back, and no
/// removed key.
#[test]
fn a_full_replay_that_grows_the_index_finds_every_key() -> TestResult {
    const KEYS: u32 = 20_000;
    for mapped in [true, false] {
        let dir = tempfile::tempdir()?;
        let small = || options().key_capacity(16).map_cold_reads(mapped);
        let db = Db::open(dir.path(), small())?;
        let initial_index_bytes = db.stats()?.index_bytes;
        for k in 0..KEYS {
            db.insert(&k.to_le_bytes(), &value(k, 0))?;
        }
        for k in (0..KEYS).step_by(3) {
            db.insert(&k.to_le_bytes(), &value(k, 1))?;
        }
        // Removes between growths, and keys inserted after them (into the
        // slots their tombstones free during the replay).
        for k in (0..KEYS).filter(|k| k % 5 == 1) {
            assert!(db.remove(&k.to_le_bytes())?);
        }
        for k in KEYS..KEYS + KEYS / 4 {
            db.insert(&k.to_le_bytes(), &value(k, 0))?;
        }
        db.close()?;
        std::fs::remove_file(dir.path().join("CHECKPOINT"))?;
        let db = Db::open(dir.path(), small())?;
        assert!(
            db.stats()?.index_bytes > 4 * initial_index_bytes,
            "the index did not grow during the replay (mapped: {mapped})"
        );
        let live = |k: u32| k % 5 != 1 || k >= KEYS;
        let all = 0..KEYS + KEYS / 4;
        assert_eq!(
            db.len(),
            all.clone().filter(|&k| live(k)).count(),
            "mapped: {mapped}"
        );
        for k in all {
            let round = u32::from(k % 3 == 0 && k < KEYS);
            let want = live(k).then(|| value(k, round));
            assert_eq!(db.get(&k.to_le_bytes())?, want, "key {k}, mapped: {mapped}");
        }
        db.close()?;
    }
    Ok(())
}
