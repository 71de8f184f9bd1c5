//! `emberkv::check`: read-only verification.

use emberkv::{CheckReport, Db, Error, Options, check};

mod store_files;
use store_files::newest_segment;

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn build(dir: &std::path::Path) -> TestResult {
    // No background compaction: the tests count records and segments.
    let db = Db::open(
        dir,
        Options::default()
            .segment_bytes(1 << 20)
            .compaction_garbage(None),
    )?;
    for i in 0..3_000u32 {
        db.insert(&i.to_le_bytes(), &vec![(i % 251) as u8; 1000])?;
    }
    for i in (0..3_000u32).step_by(10) {
        db.remove(&i.to_le_bytes())?;
    }
    db.close()?;
    Ok(())
}

#[test]
fn a_clean_store_is_sound_and_check_changes_nothing() -> TestResult {
    let dir = tempfile::tempdir()?;
    build(dir.path())?;
    let before = std::fs::read(dir.path().join("000000000001.seg"))?;
    let report = check(dir.path())?;
    assert!(report.is_sound(), "{report}");
    assert_eq!(report.keys, 2_700);
    assert_eq!(report.records, 3_300);
    assert_eq!(report.tombstones, 300);
    assert!(report.segments >= 3);
    assert_eq!(std::fs::read(dir.path().join("000000000001.seg"))?, before);
    Ok(())
}

#[test]
fn damage_in_a_sealed_segment_and_a_torn_tail_are_reported() -> TestResult {
    let dir = tempfile::tempdir()?;
    build(dir.path())?;
    let seg = dir.path().join("000000000000.seg");
    let mut bytes = std::fs::read(&seg)?;
    bytes[5_000] ^= 0x40;
    std::fs::write(&seg, &bytes)?;
    let newest = newest_segment(dir.path());
    // A torn record's worth of bytes past the records, as a crash leaves
    // them.
    let len = std::fs::metadata(&newest)?.len();
    let mut torn = std::fs::read(&newest)?;
    torn.extend_from_slice(&[0xA5; 300]);
    std::fs::write(&newest, &torn)?;
    let report = check(dir.path())?;
    assert!(!report.is_sound());
    assert!(
        report.problems.iter().any(|p| p.contains("sealed segment")),
        "{report}"
    );
    // A torn tail is what a crash leaves, past the durable mark: the next
    // open cuts it off, and it is no problem of the store.
    assert!(
        report.repairs.iter().any(|p| p.contains("torn")),
        "{report}"
    );
    assert!(
        !report.problems.iter().any(|p| p.contains("torn")),
        "{report}"
    );
    assert_eq!(
        std::fs::metadata(&newest)?.len(),
        len + 300,
        "check must not repair"
    );
    Ok(())
}

/// A torn tail alone leaves the store sound, with the repair listed; the
/// newest segment cut below its durable mark (acknowledged records lost)
/// is a problem, named as damage rather than a torn tail.
#[test]
fn a_torn_tail_is_a_repair_and_a_cut_below_the_durable_mark_a_problem() -> TestResult {
    let dir = tempfile::tempdir()?;
    build(dir.path())?;
    let newest = newest_segment(dir.path());
    let bytes = std::fs::read(&newest)?;
    let mut torn = bytes.clone();
    torn.extend_from_slice(&[0xA5; 300]);
    std::fs::write(&newest, &torn)?;
    let report = check(dir.path())?;
    assert!(report.is_sound(), "{report}");
    assert_eq!(report.repairs.len(), 1, "{report}");
    assert!(report.repairs[0].contains("torn"), "{report}");
    assert!(
        report
            .to_string()
            .ends_with("sound; the next open repairs what is listed"),
        "{report}"
    );
    assert_eq!(report.keys, 2_700);
    // The open cuts it off; then nothing is left to repair.
    Db::open(dir.path(), Options::default().compaction_garbage(None))?.close()?;
    let report = check(dir.path())?;
    assert!(report.is_sound() && report.repairs.is_empty(), "{report}");
    assert!(report.to_string().ends_with("\nsound"), "{report}");

    let len = std::fs::metadata(&newest)?.len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&newest)?
        .set_len(len - 7)?;
    let report = check(dir.path())?;
    assert!(!report.is_sound(), "{report}");
    assert!(report.repairs.is_empty(), "{report}");
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.contains("not a torn tail")),
        "{report}"
    );
    Ok(())
}

/// What no crash leaves stays a problem, past the durable mark too: damage
/// with records that verify after it, a damaged durable mark, a newest
/// segment file longer than a segment. Found in review (2026-12-05): the
/// first version of the repairs listed each as a repair, so a store whose
/// records an open would cut off checked sound.
#[test]
fn what_no_crash_leaves_past_the_durable_mark_stays_a_problem() -> TestResult {
    let dir = tempfile::tempdir()?;
    build(dir.path())?;
    // No checkpoint and no mark (both slots zero, as in a segment never
    // marked): every record of the newest segment lies past the mark.
    std::fs::remove_file(dir.path().join("CHECKPOINT"))?;
    let newest = newest_segment(dir.path());
    let clean = std::fs::read(&newest)?;
    let mut unmarked = clean.clone();
    unmarked[40..56].fill(0);
    std::fs::write(&newest, &unmarked)?;
    assert!(check(dir.path())?.is_clean());

    // Damage in the segment's first record, in its body, its key length
    // or its flags (the last two throw a walk by stated lengths off: found
    // in review, listed as a torn tail of 964,920 bytes): records verify
    // after it.
    for at in [30, 8, 4] {
        let mut first = unmarked.clone();
        first[64 + at] ^= if at == 4 { 0x80 } else { 0x01 };
        std::fs::write(&newest, &first)?;
        let report = check(dir.path())?;
        assert!(!report.is_sound(), "byte {at}: {report}");
        assert!(report.repairs.is_empty(), "byte {at}: {report}");
        assert!(
            (report.problems.iter()).any(|p| p.contains("records that verify after it")),
            "byte {at}: {report}"
        );
    }
    // Damage in its last record: nothing verifies after it, as after a
    // crash that cut the records written last.
    let mut last = unmarked.clone();
    let n = last.len();
    last[n - 10] ^= 0x01;
    std::fs::write(&newest, &last)?;
    let report = check(dir.path())?;
    assert!(report.is_sound() && report.repairs.len() == 1, "{report}");
    assert!(report.repairs[0].contains("torn tail"), "{report}");

    // A damaged mark slot (a crash writes a slot whole).
    let mut slot = clean.clone();
    slot[40..48].fill(0xEE);
    std::fs::write(&newest, &slot)?;
    let report = check(dir.path())?;
    assert!(
        (report.problems.iter()).any(|p| p.contains("damaged durable mark")),
        "{report}"
    );

    // Longer than a segment (1 MiB here).
    let mut long = clean.clone();
    long.resize((1 << 20) + 100, 0xA5);
    std::fs::write(&newest, &long)?;
    let report = check(dir.path())?;
    assert!(report.repairs.is_empty(), "{report}");
    assert!(
        (report.problems.iter()).any(|p| p.contains("more than a segment")),
        "{report}"
    );
    Ok(())
}

/// A newest segment emptied in a backup is a problem: the backup's `NEWEST`
/// names it. Without `NEWEST` (an older build's backup) it cannot be told
/// from one a crash left without a header, unless it is segment 0: a
/// problem too, also when compaction retired every segment before it
/// (found in review: the first version took "no segment before it" for
/// "the store's first", and an open of the copy then found none of its
/// 1,000 keys).
#[test]
fn a_headerless_newest_segment_after_retired_ones_is_a_problem() -> TestResult {
    let dir = tempfile::tempdir()?;
    let (store, copy) = (dir.path().join("store"), dir.path().join("copy"));
    let db = Db::open(
        &store,
        Options::default()
            .segment_bytes(1 << 20)
            .compaction_garbage(None),
    )?;
    for round in 0..3usize {
        for i in 0..1_000u32 {
            db.insert(&i.to_le_bytes(), &vec![round as u8; 300 + 100 * round])?;
        }
    }
    db.compact()?;
    db.backup(&copy)?;
    db.close()?;
    let newest = newest_segment(&copy);
    assert_ne!(
        newest.file_name().unwrap(),
        "000000000000.seg",
        "compaction retired the segments before the newest"
    );
    assert!(!copy.join("000000000000.seg").exists());
    assert!(check(&copy)?.is_clean());
    std::fs::write(&newest, b"")?;
    let report = check(&copy)?;
    assert!(report.repairs.is_empty(), "{report}");
    assert!(
        (report.problems.iter()).any(|p| p.contains("though the store created it (NEWEST)")),
        "{report}"
    );
    std::fs::remove_file(copy.join("NEWEST"))?;
    let report = check(&copy)?;
    assert!(report.repairs.is_empty(), "{report}");
    assert!(
        (report.problems.iter()).any(|p| p.contains("cannot be told")),
        "{report}"
    );
    Ok(())
}

/// Two damaged records in one sealed segment are both named (a newcomer
/// found check stopped at a segment's first), and the records after them
/// are still checked.
/// Flips a bit at each of `offsets` in the store's first segment file,
/// checks the store, and counts the problems that mention `what`.
fn flip_and_check(
    dir: &std::path::Path,
    offsets: &[usize],
    what: &str,
) -> Result<(usize, CheckReport), Box<dyn std::error::Error>> {
    let seg = dir.join("000000000000.seg");
    let mut bytes = std::fs::read(&seg)?;
    for &at in offsets {
        bytes[at] ^= 0x40;
    }
    std::fs::write(&seg, &bytes)?;
    let report = check(dir)?;
    let named = report.problems.iter().filter(|p| p.contains(what)).count();
    Ok((named, report))
}

#[test]
fn every_damaged_record_of_a_sealed_segment_is_named() -> TestResult {
    let dir = tempfile::tempdir()?;
    build(dir.path())?;
    let (named, report) = flip_and_check(dir.path(), &[5_000, 500_000], "sealed segment")?;
    assert_eq!(named, 2, "{report}");
    // Every record but the two damaged ones (and those a skip to the next
    // page may lose, none here: the damage is in values).
    assert_eq!(report.records, 3_300 - 2, "{report}");
    Ok(())
}

#[test]
fn a_store_open_elsewhere_is_locked_and_a_missing_store_is_an_error() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), Options::default())?;
    assert!(matches!(check(dir.path()), Err(Error::Locked { .. })));
    drop(db);
    assert!(check(dir.path())?.is_sound());
    let empty = tempfile::tempdir()?;
    assert!(check(empty.path()).is_err());
    assert!(!empty.path().join("emberkv.meta").exists());
    Ok(())
}

/// Damage below the newest segment's durable mark is named record by
/// record too (a newcomer's check of a one-segment store stopped at the
/// first, "999 records verified" out of 2,000), since open refuses it
/// rather than cutting it off.
#[test]
fn every_damaged_record_below_the_durable_mark_is_named() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), Options::default().compaction_garbage(None))?;
    for i in 0..2_000u32 {
        db.insert(&i.to_le_bytes(), &vec![(i % 251) as u8; 500])?;
    }
    db.close()?;
    std::fs::remove_file(dir.path().join("CHECKPOINT"))?;
    // Value bytes of two records (each about 520 bytes).
    let (named, report) = flip_and_check(dir.path(), &[300_000, 700_000], "durable mark")?;
    assert_eq!(named, 2, "{report}");
    assert_eq!(report.records, 2_000 - 2, "{report}");
    Ok(())
}
