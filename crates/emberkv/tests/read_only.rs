//! Stores that are only read: `Options::read_only` handles (reads work,
//! writes fail with `Error::ReadOnly`, not one byte on disk changes, the
//! lock is shared), and `check`, `salvage` and read-only handles on a
//! read-only file system (a failing disk the kernel remounted so, say: an
//! attack on the CLI found check and salvage failing with `EROFS`, as they
//! opened the lock file and the segment files for writing). The file
//! system tests need `mount` (root, outside most containers) and are
//! skipped with a message elsewhere.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

use emberkv::{Db, Error, Options, WriteBatch};

mod store_files;
use store_files::{newest_segment, segment_files};

/// Runs `mount args...`; whether it succeeded.
fn mount(args: &[&str]) -> bool {
    Command::new("mount")
        .args(args)
        .output()
        .is_ok_and(|out| out.status.success())
}

/// A tmpfs at `at`, unmounted when dropped.
struct Tmpfs<'a>(&'a Path);

impl Drop for Tmpfs<'_> {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0).output();
    }
}

#[test]
fn check_and_salvage_read_a_store_on_a_read_only_file_system() {
    let dir = tempfile::tempdir().unwrap();
    let at = dir.path();
    let path = at.to_str().unwrap();
    if !mount(&["-t", "tmpfs", "-o", "size=64m", "tmpfs", path]) {
        eprintln!("skipped: cannot mount a tmpfs here");
        return;
    }
    let _unmount = Tmpfs(at);
    let store = at.join("store");
    {
        let db = Db::open(&store, Options::default().segment_bytes(1 << 20)).unwrap();
        for k in 0..3_000u32 {
            db.insert(&k.to_le_bytes(), &[k as u8; 1_000]).unwrap();
        }
        db.close().unwrap();
    }
    assert!(mount(&["-o", "remount,ro", path]), "remount read-only");
    let report = emberkv::check(&store).unwrap();
    assert!(report.is_clean(), "{report}");
    let mut keys = 0;
    let salvaged = emberkv::salvage(&store, |key, value, _| {
        let k = u32::from_le_bytes(key.try_into().unwrap());
        assert_eq!(value, [k as u8; 1_000]);
        keys += 1;
        Ok(())
    })
    .unwrap();
    assert!(salvaged.is_whole());
    assert_eq!(keys, 3_000);
    let db = Db::open(&store, Options::default().read_only(true)).unwrap();
    assert_eq!(db.len(), 3_000);
    for k in 0..3_000u32 {
        assert_eq!(db.get(&k.to_le_bytes()).unwrap().unwrap(), [k as u8; 1_000]);
    }
    // A destination inside the store is refused before a directory is
    // made (it was made first, and removed: here that failed with EROFS).
    match db.backup(store.join("copy/inside")) {
        Err(Error::InvalidPath { reason, .. }) => assert!(reason.contains("inside"), "{reason}"),
        other => panic!("backup inside the store: {other:?}"),
    }
    db.close().unwrap();
    let writable = Db::open(&store, Options::default());
    assert!(
        writable.is_err(),
        "a writable open on a read-only file system"
    );
}

/// Every file of the store directory `dir`: name, then length and bytes.
fn files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let path = e.unwrap().path();
            let bytes = std::fs::read(&path).unwrap();
            (path, bytes)
        })
        .collect()
}

/// Loads 3,000 keys of 1,000 bytes (several segments of 1 MiB; one key
/// with an expiry, every hundredth removed, and a torn record's worth of
/// bytes at the end of the newest segment, as a crash leaves them) and
/// closes the store. Returns the newest segment's path and how many bytes
/// were added to it.
fn build(dir: &Path) -> (PathBuf, u64) {
    let opts = Options::default()
        .segment_bytes(1 << 20)
        .compaction_garbage(None);
    let db = Db::open(dir, opts).unwrap();
    for k in 0..3_000u32 {
        db.insert(&k.to_le_bytes(), &[k as u8; 1_000]).unwrap();
    }
    for k in (0..3_000u32).step_by(100) {
        assert!(db.remove(&k.to_le_bytes()).unwrap());
    }
    let later = SystemTime::now() + Duration::from_secs(3_600);
    db.insert_with_expiry(b"expiring", b"soon", later).unwrap();
    db.close().unwrap();
    let newest = newest_segment(dir);
    let torn = [0xA5u8; 300];
    let mut bytes = std::fs::read(&newest).unwrap();
    bytes.extend_from_slice(&torn);
    std::fs::write(&newest, bytes).unwrap();
    (newest, torn.len() as u64)
}

/// What a read-only handle reads is the store, and every write is refused
/// without touching a file: the directory is byte for byte the same after
/// the handle is closed, torn tail included (an open for writing cuts it).
#[test]
fn a_read_only_handle_reads_the_store_and_changes_no_byte_of_it() {
    let dir = tempfile::tempdir().unwrap();
    let (newest, torn) = build(dir.path());
    let before = files(dir.path());
    let db = Db::open(dir.path(), Options::default().read_only(true)).unwrap();
    assert_eq!(db.len(), 3_000 - 30 + 1);
    for k in 0..3_000u32 {
        let want = (k % 100 != 0).then(|| vec![k as u8; 1_000]);
        assert_eq!(db.get(&k.to_le_bytes()).unwrap(), want, "key {k}");
    }
    assert_eq!(db.get(b"expiring").unwrap().as_deref(), Some(&b"soon"[..]));
    assert!(db.ttl(b"expiring").unwrap().unwrap().is_some());
    assert_eq!(db.iter().count(), 3_000 - 30 + 1);
    let stats = db.stats().unwrap();
    assert_eq!(stats.keys, 3_000 - 30 + 1);
    assert_eq!(stats.torn_bytes_cut, torn);

    let key = 1u32.to_le_bytes();
    let later = SystemTime::now() + Duration::from_secs(60);
    let mut batch = WriteBatch::new();
    batch.insert(b"new", b"value");
    // Arguments too large for any store get the handle's refusal too (an
    // attack found KeyTooLarge and ValueTooLarge here).
    let (long_key, long_value) = (
        vec![7u8; emberkv::MAX_KEY_BYTES + 1],
        vec![7u8; emberkv::MAX_VALUE_BYTES + 1],
    );
    let mut long_batch = WriteBatch::new();
    long_batch.insert(&long_key, b"value");
    let refused: Vec<(&str, emberkv::Result<()>)> = vec![
        ("insert", db.insert(b"new", b"value")),
        (
            "insert_with_ttl",
            db.insert_with_ttl(&key, b"v", Duration::from_secs(60)),
        ),
        (
            "insert_with_expiry",
            db.insert_with_expiry(&key, b"v", later),
        ),
        ("remove", db.remove(&key).map(drop)),
        ("remove absent", db.remove(b"absent").map(drop)),
        ("update", db.update(&key, |_| None).map(drop)),
        (
            "compare_and_swap",
            db.compare_and_swap(&key, Some(&[1u8; 1_000]), None)
                .map(drop),
        ),
        ("expire", db.expire(&key, Duration::from_secs(1)).map(drop)),
        ("persist", db.persist(b"expiring").map(drop)),
        ("apply_batch", db.apply_batch(&batch)),
        ("clear", db.clear().map(drop)),
        ("compact", db.compact().map(drop)),
        ("insert long key", db.insert(&long_key, b"v")),
        ("insert long value", db.insert(b"new", &long_value)),
        ("remove long key", db.remove(&long_key).map(drop)),
        ("update long key", db.update(&long_key, |_| None).map(drop)),
        (
            "compare_and_swap long value",
            db.compare_and_swap(b"new", None, Some(&long_value))
                .map(drop),
        ),
        (
            "expire long key",
            db.expire(&long_key, Duration::from_secs(1)).map(drop),
        ),
        ("persist long key", db.persist(&long_key).map(drop)),
        ("apply_batch long key", db.apply_batch(&long_batch)),
    ];
    for (what, result) in refused {
        assert!(matches!(result, Err(Error::ReadOnly)), "{what}: {result:?}");
    }
    db.sync().unwrap();
    assert_eq!(db.get(&key).unwrap().unwrap(), [1u8; 1_000]);
    db.close().unwrap();
    assert_eq!(
        files(dir.path()),
        before,
        "a read-only handle changed the store"
    );

    // An open for writing cuts the tail the read-only handle left.
    let len = std::fs::metadata(&newest).unwrap().len();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.stats().unwrap().torn_bytes_cut, torn);
    assert_eq!(db.len(), 3_000 - 30 + 1);
    drop(db);
    assert!(std::fs::metadata(&newest).unwrap().len() < len);
}

/// Read-only handles share the store; a writable one has it alone.
#[test]
fn read_only_handles_share_the_lock_and_keep_a_writer_out() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    let ro = || Db::open(dir.path(), Options::default().read_only(true));
    let a = ro().unwrap();
    // Positioned reads, through the read cache, instead of the maps.
    let pread = Options::default().read_only(true).map_cold_reads(false);
    let b = Db::open(dir.path(), pread).unwrap();
    assert_eq!(a.len(), b.len());
    for k in 1..100u32 {
        let key = k.to_le_bytes();
        assert_eq!(b.get(&key).unwrap().unwrap(), [k as u8; 1_000]);
        assert_eq!(b.get(&key).unwrap(), a.get(&key).unwrap());
    }
    let writer = Db::open(dir.path(), Options::default());
    assert!(matches!(writer, Err(Error::Locked { .. })), "{writer:?}");
    // `check` changes nothing either, and goes beside them (it names the
    // torn tail the handles ignore).
    let report = emberkv::check(dir.path()).unwrap();
    assert!(
        report.repairs.iter().any(|p| p.contains("torn")),
        "{report}"
    );
    drop(a);
    let writer = Db::open(dir.path(), Options::default());
    assert!(matches!(writer, Err(Error::Locked { .. })), "{writer:?}");
    drop(b);
    let writer = Db::open(dir.path(), Options::default()).unwrap();
    assert!(matches!(ro(), Err(Error::Locked { .. })));
    writer.insert(b"after", b"readers").unwrap();
    drop(writer);
    assert_eq!(
        ro().unwrap().get(b"after").unwrap().as_deref(),
        Some(&b"readers"[..])
    );
}

/// A read-only open never makes a store: a missing directory stays
/// missing, an empty one empty.
#[test]
fn a_read_only_open_of_no_store_fails_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let got = Db::open(&missing, Options::default().read_only(true));
    assert!(matches!(got, Err(Error::InvalidPath { .. })), "{got:?}");
    assert!(!missing.exists());
    let got = Db::open(dir.path(), Options::default().read_only(true));
    assert!(matches!(got, Err(Error::InvalidPath { .. })), "{got:?}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// A backup taken through a read-only handle opens as the store.
#[test]
fn a_read_only_handle_backs_up_the_store() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    let before = files(dir.path());
    let dest = tempfile::tempdir().unwrap();
    let copy = dest.path().join("copy");
    {
        let db = Db::open(dir.path(), Options::default().read_only(true)).unwrap();
        db.backup(&copy).unwrap();
    }
    assert_eq!(files(dir.path()), before);
    let db = Db::open(&copy, Options::default()).unwrap();
    assert_eq!(db.len(), 3_000 - 30 + 1);
    assert_eq!(db.get(&7u32.to_le_bytes()).unwrap().unwrap(), [7u8; 1_000]);
}

/// A power cut while a segment was created can leave its file a header's
/// length of zeros, with `NEWEST` naming the one before: the store opens
/// (the segment is created again), and so must a read-only handle's backup
/// of it. Found in review: the backup named that segment in its `NEWEST`,
/// since its copy was a header long, and then refused to open ("empty or
/// its header damaged, though the store created it").
#[test]
fn a_backup_of_a_store_whose_newest_segment_is_a_header_of_zeros_opens() {
    let dir = tempfile::tempdir().unwrap();
    let (store, copy) = (dir.path().join("store"), dir.path().join("copy"));
    let options = Options::default()
        .segment_bytes(1 << 20)
        .compaction_garbage(None);
    let db = Db::open(&store, options.clone()).unwrap();
    let mut k = 0u32;
    while segment_files(&store).unwrap().len() < 2 {
        db.insert(&k.to_le_bytes(), &[1; 1_000]).unwrap();
        k += 1;
    }
    db.close().unwrap();
    let newest_before = std::fs::read(store.join("NEWEST")).unwrap();
    let db = Db::open(&store, options.clone()).unwrap();
    let segments = segment_files(&store).unwrap().len();
    while segment_files(&store).unwrap().len() == segments {
        db.insert(&k.to_le_bytes(), &[2; 1_000]).unwrap();
        k += 1;
    }
    db.close().unwrap();
    let newest = newest_segment(&store);
    std::fs::write(&newest, [0u8; 64]).unwrap();
    std::fs::write(store.join("NEWEST"), &newest_before).unwrap();
    std::fs::remove_file(store.join("CHECKPOINT")).unwrap();
    let report = emberkv::check(&store).unwrap();
    assert!(report.is_sound() && report.repairs.len() == 1, "{report}");
    let keys = {
        let db = Db::open(&store, options.clone().read_only(true)).unwrap();
        db.backup(&copy).unwrap();
        db.len()
    };
    let report = emberkv::check(&copy).unwrap();
    assert!(report.is_sound() && report.repairs.len() == 1, "{report}");
    let db = Db::open(&copy, options).unwrap();
    assert_eq!(db.len(), keys);
}

/// A crash inside the creation of a segment leaves its file empty (or
/// shorter than its header): a read-only handle reads past it, and its
/// backup holds every key, checks sound and opens both ways. Found by an
/// attack: the backup failed with "segment shorter than its durable
/// length".
#[test]
fn a_read_only_handle_backs_up_a_store_whose_newest_segment_a_crash_left_empty() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s");
    let db = Db::open(&store, Options::default()).unwrap();
    db.insert(b"k", b"v").unwrap();
    db.close().unwrap();
    std::fs::write(store.join("000000000001.seg"), b"").unwrap();
    let before = files(&store);
    let copy = dir.path().join("copy");
    {
        let db = Db::open(&store, Options::default().read_only(true)).unwrap();
        assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
        db.backup(&copy).unwrap();
    }
    assert_eq!(files(&store), before);
    // The backup names the segment before the empty one as its newest
    // (`NEWEST`), so its check tells the empty file for what a crash left
    // (found in review: it said it "cannot be told" from lost records).
    let report = emberkv::check(&copy).unwrap();
    assert!(report.is_sound(), "{report}");
    for read_only in [true, false] {
        let db = Db::open(&copy, Options::default().read_only(read_only)).unwrap();
        assert_eq!(db.len(), 1);
        assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
    }
    let db = Db::open(&copy, Options::default()).unwrap();
    db.insert(b"after", b"the backup").unwrap();
    db.close().unwrap();
    assert!(emberkv::check(&copy).unwrap().is_clean());
    let db = Db::open(&store, Options::default()).unwrap();
    assert_eq!(db.get(b"after").unwrap(), None);
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
}
