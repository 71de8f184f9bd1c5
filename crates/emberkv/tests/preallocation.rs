//! Segment files allocated ahead of their records (segments of 64 MiB or
//! more), by `fallocate` or, with `sync_writes`, by zeros the flusher
//! writes ahead: a store copied while it is open, as a crash would leave
//! its files (zeros after the records of the active segment), opens with
//! every synced write, also across the creation of a new segment; a closed
//! store gives the allocation back and checks clean.

use std::path::Path;

use emberkv::{Db, Options};

const VALUE: usize = 64 << 10;

fn value(k: u32) -> Vec<u8> {
    let mut v = vec![(k % 251) as u8; VALUE];
    v[..4].copy_from_slice(&k.to_le_bytes());
    v
}

/// Copies every file of `from` into `to`, as a crash image (a file the
/// store's background thread renames or deletes meanwhile is left out, as
/// a crash could leave it).
fn copy_files(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        match std::fs::copy(entry.path(), to.join(entry.file_name())) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            copied => {
                copied.unwrap();
            }
        }
    }
}

/// Opens the crash image in `to`, finds keys `0..keys` there with their
/// values, closes it and checks it sound.
fn open_image(to: &Path, options: &Options, keys: u32) {
    let copy = Db::open(to, options.clone()).unwrap();
    for k in 0..keys {
        let got = copy.get(&k.to_le_bytes()).unwrap();
        assert_eq!(got, Some(value(k)), "image of {keys} keys, key {k}");
    }
    copy.close().unwrap();
    let report = emberkv::check(to).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
}

/// A store in `dir` with 64 MiB segments holding 40 values of 64 KiB,
/// whose active segment was sealed (`compact`) after the flusher had time
/// to allocate or write zeros ahead of the records.
fn sealed_store(dir: &Path, sync_writes: bool) -> (Db, Options) {
    let options = Options::default()
        .segment_bytes(64 << 20)
        .sync_writes(sync_writes)
        .compaction_garbage(None);
    let db = Db::open(dir, options.clone()).unwrap();
    for k in 0u32..40 {
        db.insert(&k.to_le_bytes(), &value(k)).unwrap();
    }
    db.sync().unwrap();
    // The flusher wakes (every 100 ms at least) and writes zeros ahead.
    std::thread::sleep(std::time::Duration::from_millis(250));
    assert_eq!(db.compact().unwrap().segments, 0);
    (db, options)
}

fn segment_lengths(dir: &Path) -> Vec<u64> {
    let mut segs: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "seg"))
        .collect();
    segs.sort();
    segs.iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .collect()
}

#[test]
fn a_store_copied_while_open_opens_with_every_synced_write() {
    let dir = tempfile::tempdir().unwrap();
    let (store, image) = (dir.path().join("store"), dir.path().join("image"));
    let options = Options::default()
        .segment_bytes(64 << 20)
        .compaction_garbage(None);
    let db = Db::open(&store, options.clone()).unwrap();
    // 1,100 values of 64 KiB: 70 MiB. A sync after each of the keys from
    // 400 on leaves the file allocated 1 MiB past a record's end rather
    // than a page's; `compact` every 37 keys from 400 on seals the active
    // segment at the end of its page (the pads are not live) with nothing
    // to compact, and the next segment's creation cuts it back from what
    // was allocated ahead of its records.
    const KEYS: u32 = 1_100;
    let mut images = Vec::new();
    for k in 0..KEYS {
        if k >= 400 && k % 37 == 0 {
            assert_eq!(db.compact().unwrap().segments, 0);
        }
        db.insert(&k.to_le_bytes(), &value(k)).unwrap();
        if k >= 400 {
            db.sync().unwrap();
        }
        if k % 275 == 274 {
            db.sync().unwrap();
            let to = image.join(k.to_string());
            copy_files(&store, &to);
            images.push((to, k + 1));
        }
    }
    let lengths = segment_lengths(&store);
    assert!(lengths.len() > 10, "{lengths:?}");
    for (to, synced) in images {
        open_image(&to, &options, synced);
    }
    db.close().unwrap();
    let report = emberkv::check(&store).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    let lengths = segment_lengths(&store);
    let db = Db::open(&store, options).unwrap();
    assert_eq!(db.len(), KEYS as usize);
    let stats = db.stats().unwrap();
    assert!(
        stats.disk_bytes >= lengths.iter().sum::<u64>(),
        "{stats:?} {lengths:?}"
    );
}

#[test]
fn a_sync_writes_store_copied_while_open_opens_with_every_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let (store, image) = (dir.path().join("store"), dir.path().join("image"));
    let options = Options::default()
        .segment_bytes(64 << 20)
        .sync_writes(true)
        .compaction_garbage(None);
    let db = Db::open(&store, options.clone()).unwrap();
    // 1,100 acknowledged values of 64 KiB (70 MiB, two segments), the
    // store copied every 275 keys, after a pause in which the flusher
    // wakes (every 100 ms at least) and writes zeros ahead of the records.
    const KEYS: u32 = 1_100;
    let mut images = Vec::new();
    for k in 0..KEYS {
        db.insert(&k.to_le_bytes(), &value(k)).unwrap();
        if k % 275 == 274 {
            std::thread::sleep(std::time::Duration::from_millis(250));
            let to = image.join(k.to_string());
            copy_files(&store, &to);
            images.push((to, k + 1));
        }
    }
    let mut zeros_seen = 0;
    for (to, acked) in images {
        let copied = segment_lengths(&to);
        open_image(&to, &options, acked);
        // Opening cut the zeros after the newest segment's records, and
        // the clean close kept it cut.
        let cut = segment_lengths(&to);
        if copied.last().unwrap() >= &(cut.last().unwrap() + (2 << 20)) {
            zeros_seen += 1;
        }
    }
    assert!(zeros_seen > 0, "no image held zeros ahead of the records");
    db.close().unwrap();
    let report = emberkv::check(&store).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    let db = Db::open(&store, options).unwrap();
    assert_eq!(db.len(), KEYS as usize);
}

/// Regression (reviews of the zeros written ahead, 2026-12-01): a store
/// closed right after its active segment was sealed (`compact`), before a
/// record reached the next segment, kept what was allocated ahead of the
/// sealed segment's records (`check` found a torn tail), and its close's
/// checkpoint covered up to a next segment that had no file, so every
/// reopen replayed the whole log. A write-out now creates the segment the
/// tail is in, which cuts the sealed one.
#[test]
fn a_store_closed_right_after_a_seal_checks_clean_and_has_its_next_segment() {
    for sync_writes in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let (db, options) = sealed_store(dir.path(), sync_writes);
        db.close().unwrap();
        let report = emberkv::check(dir.path()).unwrap();
        assert!(
            report.is_clean(),
            "sync_writes {sync_writes}: {:?}",
            report.problems
        );
        let lengths = segment_lengths(dir.path());
        assert_eq!(lengths.len(), 2, "{lengths:?}");
        assert_eq!(lengths[1], 64, "the next segment holds its header");
        let db = Db::open(dir.path(), options).unwrap();
        assert_eq!(db.len(), 40);
    }
}

/// A backup taken right after a seal checks clean and restores every key.
/// Found by a review of the zeros written ahead (2026-12-01): the backup
/// copied the sealed segment's whole file, zeros ahead of its records
/// included. Since a write-out creates the tail's segment (which cuts the
/// sealed one) this state no longer reaches a backup, whose own sync
/// creates it; the backup copies a sealed segment's written bytes all the
/// same.
#[test]
fn a_backup_right_after_a_seal_copies_records_only() {
    for sync_writes in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let (store, copy) = (dir.path().join("store"), dir.path().join("copy"));
        let (db, options) = sealed_store(&store, sync_writes);
        db.backup(&copy).unwrap();
        let report = emberkv::check(&copy).unwrap();
        assert!(
            report.is_clean(),
            "sync_writes {sync_writes}: {:?}",
            report.problems
        );
        let restored = Db::open(&copy, options).unwrap();
        for k in 0u32..40 {
            assert_eq!(restored.get(&k.to_le_bytes()).unwrap(), Some(value(k)));
        }
    }
}
