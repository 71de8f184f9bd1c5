//! Atomic update, compare-and-swap, batches, expiry, iteration, scan,
//! backup and stats.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, SystemTime};

use emberkv::{Db, Error, Options, WriteBatch};

mod store_files;
use store_files::{files_of, newest_segment, segment_files};

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn open(dir: &std::path::Path) -> emberkv::Result<Db> {
    Db::open(dir, Options::default())
}

#[test]
fn concurrent_increments_are_never_lost() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = open(dir.path())?;
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                for _ in 0..10_000 {
                    db.update(b"counter", |old| {
                        let n = old.map_or(0, |v| u64::from_le_bytes(v.try_into().unwrap()));
                        Some((n + 1).to_le_bytes().to_vec())
                    })
                    .unwrap();
                }
            });
        }
    });
    let read = |db: &Db| -> emberkv::Result<u64> {
        Ok(u64::from_le_bytes(
            db.get(b"counter")?.unwrap().try_into().unwrap(),
        ))
    };
    assert_eq!(read(&db)?, 80_000);
    db.close()?;
    assert_eq!(read(&open(dir.path())?)?, 80_000);
    Ok(())
}

#[test]
fn update_can_create_read_and_remove() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = open(dir.path())?;
    assert_eq!(
        db.update(b"k", |old| {
            assert_eq!(old, None);
            Some(b"one".to_vec())
        })?,
        Some(b"one".to_vec())
    );
    assert_eq!(
        db.update(b"k", |old| old.map(|v| [v, b"+two"].concat()))?,
        Some(b"one+two".to_vec())
    );
    assert_eq!(db.update(b"k", |_| None)?, None);
    assert_eq!(db.get(b"k")?, None);
    assert!(db.is_empty());
    let too_big = db.update(b"k", |_| Some(vec![0; emberkv::MAX_VALUE_BYTES + 1]));
    assert!(matches!(too_big, Err(Error::ValueTooLarge { .. })));
    assert_eq!(db.get(b"k")?, None);
    Ok(())
}

/// An update to the value the key already holds appends nothing and keeps
/// the key's expiry; on a `sync_writes` store whose record of the key is
/// durable already, it costs no fdatasync either.
#[test]
fn an_update_to_the_same_value_appends_nothing() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = open(dir.path())?;
    db.insert_with_ttl(b"k", b"same", Duration::from_secs(100))?;
    let before = db.stats()?.records_appended;
    let new = db.update(b"k", |old| old.map(<[u8]>::to_vec))?;
    assert_eq!(new.as_deref(), Some(&b"same"[..]));
    assert_eq!(db.stats()?.records_appended, before, "nothing appended");
    assert!(db.ttl(b"k")?.unwrap().is_some(), "the ttl is kept");
    db.update(b"k", |_| Some(b"other".to_vec()))?;
    assert_eq!(db.stats()?.records_appended, before + 1);
    db.close()?;

    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), Options::default().sync_writes(true))?;
    db.insert(b"k", b"same")?;
    let synced = db.stats()?.fdatasyncs;
    db.update(b"k", |old| old.map(<[u8]>::to_vec))?;
    assert_eq!(db.stats()?.fdatasyncs, synced, "already durable: no sync");
    Ok(())
}

#[test]
fn compare_and_swap_checks_the_current_value() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = open(dir.path())?;
    assert!(db.compare_and_swap(b"k", None, Some(b"v1"))?);
    assert!(!db.compare_and_swap(b"k", None, Some(b"v2"))?);
    assert!(!db.compare_and_swap(b"k", Some(b"v0"), Some(b"v2"))?);
    assert_eq!(db.get(b"k")?.as_deref(), Some(&b"v1"[..]));
    assert!(db.compare_and_swap(b"k", Some(b"v1"), Some(b"v2"))?);
    assert!(db.compare_and_swap(b"k", Some(b"v2"), None)?);
    assert_eq!(db.get(b"k")?, None);
    Ok(())
}

#[test]
fn a_swap_to_the_same_value_appends_nothing() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = open(dir.path())?;
    db.insert(b"k", b"same")?;
    let before = db.stats()?.records_appended;
    assert!(db.compare_and_swap(b"k", Some(b"same"), Some(b"same"))?);
    assert_eq!(db.stats()?.records_appended, before, "nothing appended");
    // An expiry to clear is a change: the swap writes.
    db.insert_with_ttl(b"t", b"same", Duration::from_secs(100))?;
    let before = db.stats()?.records_appended;
    assert!(db.compare_and_swap(b"t", Some(b"same"), Some(b"same"))?);
    assert_eq!(db.stats()?.records_appended, before + 1);
    assert_eq!(db.ttl(b"t")?, Some(None), "the swap cleared the expiry");
    db.close()?;
    let db = open(dir.path())?;
    assert_eq!(db.get(b"k")?.as_deref(), Some(&b"same"[..]));
    assert_eq!(db.ttl(b"t")?, Some(None));
    drop(db);

    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), Options::default().sync_writes(true))?;
    db.insert(b"k", b"same")?;
    let synced = db.stats()?.fdatasyncs;
    assert!(db.compare_and_swap(b"k", Some(b"same"), Some(b"same"))?);
    assert_eq!(db.stats()?.fdatasyncs, synced, "already durable: no sync");
    Ok(())
}

#[test]
fn batches_apply_all_and_last_write_per_key_wins() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = open(dir.path())?;
    db.insert(b"gone", b"x")?;
    let mut batch = WriteBatch::new();
    for i in 0..1000u32 {
        batch.insert(&i.to_le_bytes(), &[i as u8; 100]);
    }
    batch.insert(b"twice", b"first").insert(b"twice", b"second");
    batch.insert(b"short-lived", b"x").remove(b"short-lived");
    batch.remove(b"gone").remove(b"never-there");
    assert_eq!(batch.len(), 1006);
    db.apply_batch(&batch)?;
    let check = |db: &Db| -> TestResult {
        assert_eq!(db.len(), 1001);
        assert_eq!(db.get(b"twice")?.as_deref(), Some(&b"second"[..]));
        assert_eq!(db.get(b"short-lived")?, None);
        assert_eq!(db.get(b"gone")?, None);
        assert_eq!(db.get(&999u32.to_le_bytes())?, Some(vec![231; 100]));
        Ok(())
    };
    check(&db)?;
    db.close()?;
    check(&open(dir.path())?)?;
    Ok(())
}

#[test]
fn batch_inserts_keep_their_expiry_across_a_reopen() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = open(dir.path())?;
    db.insert_with_ttl(b"plain", b"old", Duration::from_secs(100))?;
    let later = SystemTime::now() + Duration::from_secs(100);
    let mut batch = WriteBatch::new();
    batch.insert_with_expiry(b"ttl", b"v", later);
    batch.insert_with_expiry(b"past", b"v", SystemTime::now() - Duration::from_secs(1));
    batch.insert(b"plain", b"new");
    db.apply_batch(&batch)?;
    let check = |db: &Db| -> TestResult {
        let left = db.ttl(b"ttl")?.flatten().expect("an expiry");
        assert!(left > Duration::from_secs(98) && left <= Duration::from_secs(100));
        assert_eq!(db.get(b"past")?, None);
        assert_eq!(db.get(b"plain")?.as_deref(), Some(&b"new"[..]));
        assert_eq!(db.ttl(b"plain")?, Some(None), "insert clears the expiry");
        Ok(())
    };
    check(&db)?;
    db.close()?;
    check(&open(dir.path())?)?;
    Ok(())
}

#[test]
fn a_batch_larger_than_a_page_and_an_oversize_batch() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), Options::default().segment_bytes(2 << 20))?;
    let mut batch = WriteBatch::new();
    for i in 0..600u32 {
        batch.insert(&i.to_le_bytes(), &vec![7u8; 2000]);
    }
    db.apply_batch(&batch)?;
    let mut huge = WriteBatch::new();
    for i in 0..2000u32 {
        huge.insert(&(i + 10_000).to_le_bytes(), &vec![1u8; 2000]);
    }
    assert!(matches!(
        db.apply_batch(&huge),
        Err(Error::BatchTooLarge { .. })
    ));
    assert_eq!(db.len(), 600);
    db.close()?;
    let db = Db::open(dir.path(), Options::default())?;
    assert_eq!(db.len(), 600);
    assert_eq!(db.get(&599u32.to_le_bytes())?, Some(vec![7u8; 2000]));
    Ok(())
}

#[test]
fn expired_keys_are_never_returned_from_memory_or_file() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = open(dir.path())?;
    db.insert_with_ttl(b"short", b"v", Duration::from_millis(30))?;
    db.insert_with_ttl(b"long", b"v", Duration::from_secs(3600))?;
    db.insert(b"forever", b"v")?;
    db.insert_with_expiry(b"past", b"v", SystemTime::now() - Duration::from_secs(1))?;
    assert_eq!(db.get(b"past")?, None);
    assert!(db.get(b"short")?.is_some());
    let ttl = db.ttl(b"long")?.unwrap().unwrap();
    assert!(ttl > Duration::from_secs(3590) && ttl <= Duration::from_secs(3600));
    assert_eq!(db.ttl(b"forever")?, Some(None));
    assert_eq!(db.ttl(b"missing")?, None);
    std::thread::sleep(Duration::from_millis(60));
    assert_eq!(db.get(b"short")?, None);
    assert!(!db.contains_key(b"short")?);
    assert_eq!(db.ttl(b"short")?, None);
    assert!(!db.remove(b"short")?);
    db.close()?;
    let db = open(dir.path())?;
    assert_eq!(db.get(b"short")?, None);
    assert_eq!(db.get(b"past")?, None);
    assert_eq!(db.get(b"long")?.as_deref(), Some(&b"v"[..]));
    let keys: HashSet<Vec<u8>> = db.keys().collect::<Result<_, _>>()?;
    assert_eq!(keys, HashSet::from([b"long".to_vec(), b"forever".to_vec()]));
    Ok(())
}

#[test]
fn expire_persist_and_update_keep_or_change_the_ttl() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = open(dir.path())?;
    db.insert(b"k", b"1")?;
    assert!(!db.persist(b"k")?);
    assert!(db.expire(b"k", Duration::from_secs(100))?);
    assert!(!db.expire(b"missing", Duration::from_secs(100))?);
    db.update(b"k", |_| Some(b"2".to_vec()))?;
    assert!(db.ttl(b"k")?.unwrap().is_some(), "update keeps the ttl");
    assert!(db.persist(b"k")?);
    assert_eq!(db.ttl(b"k")?, Some(None));
    assert!(db.expire(b"k", Duration::ZERO)?);
    assert_eq!(db.get(b"k")?, None);
    db.insert_with_ttl(b"j", b"v", Duration::from_secs(100))?;
    db.insert(b"j", b"w")?;
    assert_eq!(db.ttl(b"j")?, Some(None), "insert clears the ttl");
    Ok(())
}

#[test]
fn iteration_returns_every_stable_key_once_while_writes_go_on() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), Options::default().key_capacity(16))?;
    for i in 0..5_000u32 {
        db.insert(format!("stable{i}").as_bytes(), &i.to_le_bytes())?;
    }
    let seen = std::thread::scope(|s| {
        let writer = s.spawn(|| {
            // Grows the index shards and churns other keys meanwhile.
            for i in 0..20_000u32 {
                db.insert(format!("churn{i}").as_bytes(), b"x").unwrap();
                if i % 3 == 0 {
                    db.remove(format!("churn{}", i / 2).as_bytes()).unwrap();
                }
            }
        });
        let mut seen: HashMap<Vec<u8>, usize> = HashMap::new();
        for item in db.iter() {
            let (k, v) = item.unwrap();
            if k.starts_with(b"stable") {
                let i: u32 = std::str::from_utf8(&k[6..]).unwrap().parse().unwrap();
                assert_eq!(v, i.to_le_bytes());
            }
            *seen.entry(k).or_default() += 1;
        }
        writer.join().unwrap();
        seen
    });
    for i in 0..5_000u32 {
        assert_eq!(
            seen.get(format!("stable{i}").as_bytes()),
            Some(&1),
            "stable{i}"
        );
    }
    Ok(())
}

/// Found by a helper's attack: a call after the iterator returned `None`
/// panicked (index out of bounds: the walk moved past the last shard).
#[test]
fn an_iterator_keeps_returning_none_once_done() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = open(dir.path())?;
    let mut empty = db.iter();
    assert!(empty.next().is_none());
    assert!(empty.next().is_none());
    db.insert(b"a", b"1")?;
    let mut it = db.iter();
    assert_eq!(it.next().transpose()?, Some((b"a".to_vec(), b"1".to_vec())));
    assert!(it.next().is_none());
    assert!(it.next().is_none());
    let mut keys = db.keys();
    assert_eq!(keys.next().transpose()?, Some(b"a".to_vec()));
    assert!(keys.next().is_none());
    assert!(keys.next().is_none());
    // Adapters that poll again after `None`.
    let chained: Vec<_> = db.iter().chain(db.iter()).collect::<Result<_, _>>()?;
    assert_eq!(chained.len(), 2);
    Ok(())
}

#[test]
fn scan_cursor_visits_every_key_across_calls_and_growth() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), Options::default().key_capacity(16))?;
    for i in 0..3_000u32 {
        db.insert(&i.to_le_bytes(), b"v")?;
    }
    let mut found = HashSet::new();
    let mut cursor = 0;
    let mut calls = 0;
    loop {
        let (keys, next) = db.scan(cursor, 10)?;
        found.extend(keys);
        calls += 1;
        if calls == 50 {
            for i in 3_000..20_000u32 {
                db.insert(&i.to_le_bytes(), b"grow")?;
            }
        }
        if next == 0 {
            break;
        }
        cursor = next;
    }
    assert!(calls > 100);
    for i in 0..3_000u32 {
        assert!(found.contains(&i.to_le_bytes()[..]), "key {i} missed");
    }
    let (_, next) = db.scan(u64::MAX, 10)?;
    assert_ne!(next, u64::MAX, "a garbage cursor still makes progress");
    Ok(())
}

#[test]
fn backup_is_a_consistent_store_of_its_own() -> TestResult {
    let dir = tempfile::tempdir()?;
    let backup_dir = tempfile::tempdir()?;
    let dest = backup_dir.path().join("copy");
    let db = Db::open(dir.path(), Options::default().segment_bytes(1 << 20))?;
    let mut expected = HashMap::new();
    for i in 0..3_000u32 {
        let v = vec![(i % 256) as u8; 500 + (i % 700) as usize];
        db.insert(&i.to_le_bytes(), &v)?;
        expected.insert(i.to_le_bytes().to_vec(), v);
    }
    db.remove(&5u32.to_le_bytes())?;
    expected.remove(&5u32.to_le_bytes()[..]);
    db.backup(&dest)?;
    db.insert(b"after backup", b"not in the copy")?;
    assert!(matches!(db.backup(&dest), Err(Error::InvalidPath { .. })));
    // Not inside the store's own directory (a newcomer could), also by a
    // path through `..`; nothing is left there.
    let store_name = dir.path().file_name().ok_or("a named store directory")?;
    let through_dots = dest.join("../..").join(store_name).join("sub/copy");
    for inside in [dir.path().join("copy"), through_dots] {
        match db.backup(&inside) {
            Err(Error::InvalidPath { reason, .. }) => {
                assert!(reason.contains("inside"), "{reason}")
            }
            other => panic!("backup into {}: {other:?}", inside.display()),
        }
    }
    assert!(!dir.path().join("copy").exists() && !dir.path().join("sub").exists());
    let copy = Db::open(&dest, Options::default())?;
    assert_eq!(copy.len(), expected.len());
    for (k, v) in &expected {
        assert_eq!(copy.get(k)?.as_ref(), Some(v));
    }
    assert_eq!(copy.get(b"after backup")?, None);
    Ok(())
}

/// Regression (an attack on backups, 2026-12-07): a destination inside
/// the store reached through a bind mount of its directory, whose path
/// names another place, is refused as one inside it is (it was made, a
/// whole backup inside the store). Needs `mount` (root, outside most
/// containers); skipped with a message elsewhere.
#[test]
fn a_backup_into_the_store_through_a_bind_mount_is_refused() -> TestResult {
    use std::process::Command;
    struct Unmount<'a>(&'a std::path::Path);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(self.0).output();
        }
    }
    let dir = tempfile::tempdir()?;
    let (store, bind) = (dir.path().join("store"), dir.path().join("bind"));
    let db = Db::open(&store, Options::default())?;
    db.insert(b"k", b"v")?;
    std::fs::create_dir(&bind)?;
    let mounted = Command::new("mount")
        .arg("--bind")
        .arg(&store)
        .arg(&bind)
        .output()
        .is_ok_and(|out| out.status.success());
    if !mounted {
        eprintln!("skipped: cannot bind-mount here");
        return Ok(());
    }
    let _unmount = Unmount(&bind);
    for inside in [bind.join("sub"), bind.clone()] {
        match db.backup(&inside) {
            Err(Error::InvalidPath { reason, .. }) => {
                assert!(
                    reason.contains("inside") || reason.contains("not empty"),
                    "{reason}"
                )
            }
            other => panic!("backup into {}: {other:?}", inside.display()),
        }
    }
    assert!(!store.join("sub").exists());
    db.backup(dir.path().join("copy"))?;
    assert_eq!(
        Db::open(dir.path().join("copy"), Options::default())?.get(b"k")?,
        Some(b"v".to_vec())
    );
    Ok(())
}

/// A backup on the same file system links the store's sealed segments
/// (same inode) and copies the newest; neither store's later writes,
/// compactions and closes change a byte of the other's files.
#[test]
fn a_backup_links_sealed_segments_and_neither_store_changes_the_other() -> TestResult {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir()?;
    let (src, dest) = (dir.path().join("store"), dir.path().join("copy"));
    // No background compaction: it would retire some of the segments.
    let options = Options::default()
        .segment_bytes(1 << 20)
        .compaction_garbage(None);
    let db = Db::open(&src, options.clone())?;
    for round in 0..3u8 {
        for k in 0..2_000u32 {
            db.insert(&k.to_le_bytes(), &[round; 900])?;
        }
    }
    db.backup(&dest)?;
    let (mut linked, mut copied) = (0, 0);
    for path in segment_files(&dest)? {
        let name = path.file_name().ok_or("no file name")?;
        let (ours, theirs) = (
            std::fs::metadata(&path)?,
            std::fs::metadata(src.join(name))?,
        );
        if ours.ino() == theirs.ino() {
            linked += 1;
        } else {
            copied += 1;
        }
    }
    assert!(linked >= 5, "{linked} segments linked, {copied} copied");
    assert_eq!(copied, 1, "the newest segment is copied");
    let backed_up = files_of(&dest);
    for k in 0..2_000u32 {
        db.insert(&k.to_le_bytes(), b"after the backup")?;
    }
    db.compact()?;
    db.close()?;
    assert_eq!(
        files_of(&dest),
        backed_up,
        "the store's writes changed the backup"
    );
    let stored = files_of(&src);
    let copy = Db::open(&dest, options.clone())?;
    for k in 0..2_000u32 {
        assert_eq!(copy.get(&k.to_le_bytes())?, Some(vec![2; 900]));
        copy.insert(&k.to_le_bytes(), b"written to the copy")?;
    }
    copy.compact()?;
    copy.close()?;
    assert_eq!(
        files_of(&src),
        stored,
        "the backup's writes changed the store"
    );
    let db = Db::open(&src, options)?;
    for k in 0..2_000u32 {
        assert_eq!(
            db.get(&k.to_le_bytes())?.as_deref(),
            Some(&b"after the backup"[..])
        );
    }
    Ok(())
}

/// A store with a sealed segment whose records end well before the
/// segment's end (a 3 MiB value did not fit after 1,500 of 1,000 bytes),
/// closed; returns its options.
fn store_with_a_short_sealed_segment(dir: &std::path::Path) -> emberkv::Result<Options> {
    let options = Options::default()
        .segment_bytes(4 << 20)
        .compaction_garbage(None);
    let db = Db::open(dir, options.clone())?;
    for k in 0..1_500u32 {
        db.insert(&k.to_le_bytes(), &[1; 1_000])?;
    }
    db.insert(b"large", &vec![2; 3 << 20])?;
    db.insert(b"small", b"3")?;
    db.close()?;
    Ok(options)
}

/// A backup whose newest segment is gone (deleted, or a backup of an older
/// build cut short, without `NEWEST`) leaves a linked segment its newest:
/// opening it, writing and closing must not change a byte of the store's
/// files. Found by a review of the
/// linked backup: the backup's log went on in the shared file, and the
/// store then failed its check and, without its checkpoint, its open.
#[test]
fn a_backup_missing_its_newest_segment_never_writes_the_store_s_files() -> TestResult {
    let dir = tempfile::tempdir()?;
    let (src, dest) = (dir.path().join("store"), dir.path().join("copy"));
    let options = store_with_a_short_sealed_segment(&src)?;
    Db::open(&src, options.clone())?.backup(&dest)?;
    let stored = files_of(&src);
    std::fs::remove_file(newest_segment(&dest))?;
    // The backup's NEWEST names the deleted segment: its records are lost,
    // and the open says so (since 2026-12-05; before, a backup had no
    // NEWEST). Without it, as in an older build's backup, the open goes on
    // with a linked segment as its newest.
    let refused = Db::open(&dest, options.clone());
    assert!(
        matches!(&refused, Err(Error::Corruption { reason, .. }) if reason.contains("NEWEST")),
        "{refused:?}"
    );
    std::fs::remove_file(dest.join("NEWEST"))?;
    let copy = Db::open(&dest, options.clone())?;
    copy.insert(b"written to the copy", &[4; 5_000])?;
    copy.close()?;
    assert_eq!(
        files_of(&src),
        stored,
        "the backup's open wrote the store's files"
    );
    let report = emberkv::check(&src)?;
    assert!(report.is_clean(), "{:?}", report.problems);
    // As after a crash: no checkpoint, so the open replays every segment.
    std::fs::remove_file(src.join("CHECKPOINT"))?;
    let db = Db::open(&src, options)?;
    assert_eq!(db.get(b"small")?.as_deref(), Some(&b"3"[..]));
    assert_eq!(db.get(&7u32.to_le_bytes())?, Some(vec![1; 1_000]));
    Ok(())
}

/// Backups taken while a writer overwrites and compaction retires
/// segments (which it may do while a backup copies the newest) are each
/// the store as of one moment: every key holds the last value written
/// before some write `p`, and none written after.
#[test]
fn backups_under_writes_and_compaction_are_each_a_prefix() -> TestResult {
    const KEYS: u64 = 500;
    let dir = tempfile::tempdir()?;
    let options = Options::default()
        .segment_bytes(1 << 20)
        .max_space_amplification(1.3);
    let db = Db::open(dir.path().join("store"), options.clone())?;
    let done = std::sync::atomic::AtomicBool::new(false);
    let backups: Vec<std::path::PathBuf> = std::thread::scope(|s| {
        s.spawn(|| {
            let mut i = 0u64;
            while !done.load(std::sync::atomic::Ordering::Relaxed) || i < 20 * KEYS {
                let mut value = i.to_le_bytes().to_vec();
                // A key's successive values differ in length, so that no
                // write is an update in place: each leaves garbage for
                // compaction (with one length, a loaded CI machine saw
                // the updates go in place and compaction never run).
                value.resize(400 + (i / KEYS % 2) as usize, 7);
                db.insert(&(i % KEYS).to_le_bytes(), &value).unwrap();
                i += 1;
            }
        });
        let backups = (0..6)
            .map(|n| {
                std::thread::sleep(Duration::from_millis(30));
                let dest = dir.path().join(format!("copy{n}"));
                db.backup(&dest).unwrap();
                dest
            })
            .collect();
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        backups
    });
    assert!(db.stats()?.compactions > 0, "compaction never ran");
    for dest in backups {
        let copy = Db::open(&dest, options.clone())?;
        let mut values = HashMap::new();
        for k in 0..KEYS {
            if let Some(v) = copy.get(&k.to_le_bytes())? {
                values.insert(k, u64::from_le_bytes(v[..8].try_into()?));
            }
        }
        // Writes below `p` are in the copy, the rest are not.
        let p = values.values().max().map_or(0, |&i| i + 1);
        for k in 0..KEYS {
            let expected = (p > k).then(|| k + (p - 1 - k) / KEYS * KEYS);
            assert_eq!(
                values.get(&k).copied(),
                expected,
                "key {k}, {}",
                dest.display()
            );
        }
    }
    Ok(())
}

#[test]
fn stats_count_keys_bytes_and_garbage() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = open(dir.path())?;
    for i in 0..1_000u32 {
        db.insert(&i.to_le_bytes(), &[1u8; 96])?;
    }
    db.sync()?;
    let s = db.stats()?;
    assert_eq!(s.keys, 1_000);
    assert_eq!(s.logical_bytes, 100_000);
    assert_eq!(s.live_record_bytes, 116_000);
    assert!(s.disk_bytes >= 116_000);
    assert!(s.index_bytes > 0 && s.hot_bytes > 0);
    for i in 0..1_000u32 {
        db.insert(&i.to_le_bytes(), &[2u8; 96])?;
    }
    db.sync()?;
    let after = db.stats()?;
    assert_eq!(after.logical_bytes, 100_000);
    assert!(after.space_amplification > 2.0 * s.space_amplification * 0.9);
    db.close()?;
    let reopened = open(dir.path())?.stats()?;
    assert_eq!(reopened.keys, 1_000);
    assert_eq!(reopened.logical_bytes, 100_000);
    assert_eq!(reopened.live_record_bytes, 116_000);
    Ok(())
}

#[test]
fn stats_count_appended_records_and_fdatasyncs() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), Options::default().sync_writes(true))?;
    std::thread::scope(|s| {
        for t in 0..8u32 {
            let db = &db;
            s.spawn(move || {
                for i in 0..100u32 {
                    db.insert(&[t.to_le_bytes(), i.to_le_bytes()].concat(), b"v")
                        .unwrap();
                }
            });
        }
    });
    let s = db.stats()?;
    assert_eq!(s.records_appended, 800);
    // Every acknowledged write waited for an fdatasync covering it; writers
    // waiting together share one (how many share depends on scheduling).
    assert!(s.fdatasyncs >= 1 && s.fdatasyncs <= 800, "{s:?}");
    Ok(())
}

#[test]
fn clear_removes_every_key_expired_ones_included_durably() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = open(dir.path())?;
    for i in 0..2_000u32 {
        db.insert(&i.to_le_bytes(), b"v")?;
    }
    db.insert_with_ttl(b"soon gone", b"v", Duration::from_millis(1))?;
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(db.len(), 2_001, "an expired key counts until touched");
    assert_eq!(db.clear()?, 2_000);
    assert_eq!(db.len(), 0);
    assert_eq!(db.get(&7u32.to_le_bytes())?, None);
    db.insert(b"after", b"kept")?;
    db.close()?;
    for replay_all in [false, true] {
        if replay_all {
            std::fs::remove_file(dir.path().join("CHECKPOINT"))?;
        }
        let db = open(dir.path())?;
        assert_eq!(db.len(), 1, "replay_all: {replay_all}");
        assert_eq!(db.get(b"after")?.as_deref(), Some(&b"kept"[..]));
        assert_eq!(db.get(&7u32.to_le_bytes())?, None);
        db.close()?;
    }
    Ok(())
}

#[test]
fn stats_count_keys_with_an_expiry_across_writes_reopens_and_compaction() -> TestResult {
    let dir = tempfile::tempdir()?;
    let opts = || Options::default().compaction_garbage(None);
    let db = Db::open(dir.path(), opts())?;
    let expiring = |db: &Db| db.stats().map(|s| s.expiring_keys);
    let long = Duration::from_secs(1000);
    db.insert(b"a", b"1")?;
    db.insert_with_ttl(b"b", b"2", long)?;
    db.insert_with_ttl(b"c", b"3", long)?;
    assert_eq!(expiring(&db)?, 2);
    assert!(db.persist(b"b")?);
    assert!(db.expire(b"a", long)?);
    db.insert(b"c", b"plain again")?;
    assert_eq!(expiring(&db)?, 1, "a");
    db.update(b"a", |_| Some(b"kept ttl".to_vec()))?;
    let mut batch = WriteBatch::new();
    batch.insert(b"e", b"5");
    batch.remove(b"b");
    db.apply_batch(&batch)?;
    assert_eq!(expiring(&db)?, 1, "update keeps the ttl");
    let mut batch = WriteBatch::new();
    batch.insert_with_expiry(b"f", b"6", SystemTime::now() + long);
    batch.remove(b"f");
    batch.insert_with_expiry(b"g", b"7", SystemTime::now() + long);
    db.apply_batch(&batch)?;
    assert_eq!(expiring(&db)?, 2, "a batch's last write per key counts");
    assert!(db.remove(b"g")?);
    assert_eq!(expiring(&db)?, 1);
    db.insert_with_ttl(b"d", b"4", Duration::from_millis(1))?;
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(
        (db.len(), expiring(&db)?),
        (4, 2),
        "expired d counts until touched"
    );
    assert!(db.remove(b"a")?);
    assert_eq!(expiring(&db)?, 1);
    db.close()?;
    for replay_all in [false, true] {
        if replay_all {
            std::fs::remove_file(dir.path().join("CHECKPOINT"))?;
        }
        let db = Db::open(dir.path(), opts())?;
        assert_eq!(
            (db.len(), expiring(&db)?),
            (3, 1),
            "replay_all: {replay_all}"
        );
        db.close()?;
    }
    let db = Db::open(dir.path(), opts())?;
    db.compact()?;
    assert_eq!((db.len(), expiring(&db)?), (2, 0), "compaction dropped d");
    Ok(())
}
