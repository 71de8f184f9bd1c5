//! Edge cases of the public API.

use std::sync::Arc;

use emberkv::{Db, Error, MAX_KEY_BYTES, MAX_VALUE_BYTES, Options};

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn open(dir: &std::path::Path) -> emberkv::Result<Db> {
    Db::open(dir, Options::default())
}

#[test]
fn empty_key_and_empty_value() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = open(dir.path())?;
    db.insert(b"", b"empty key")?;
    db.insert(b"empty value", b"")?;
    assert_eq!(db.get(b"")?.as_deref(), Some(&b"empty key"[..]));
    assert_eq!(db.get(b"empty value")?.as_deref(), Some(&b""[..]));
    assert!(db.contains_key(b"empty value")?);
    db.close()?;
    let db = open(dir.path())?;
    assert_eq!(db.get(b"")?.as_deref(), Some(&b"empty key"[..]));
    assert_eq!(db.get(b"empty value")?.as_deref(), Some(&b""[..]));
    assert_eq!(db.len(), 2);
    Ok(())
}

#[test]
fn values_larger_than_a_page_and_the_limit() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = open(dir.path())?;
    let page_plus = vec![0xA5u8; (1 << 20) + 17];
    let max: Vec<u8> = (0..MAX_VALUE_BYTES).map(|i| (i % 251) as u8).collect();
    db.insert(b"small", b"before")?;
    db.insert(b"page+", &page_plus)?;
    db.insert(b"max", &max)?;
    db.insert(b"after", b"after")?;
    assert_eq!(db.get(b"page+")?.as_deref(), Some(&page_plus[..]));
    assert!(db.get(b"max")? == Some(max.clone()));
    db.close()?;
    let db = open(dir.path())?;
    assert_eq!(db.get(b"small")?.as_deref(), Some(&b"before"[..]));
    assert_eq!(db.get(b"page+")?.as_deref(), Some(&page_plus[..]));
    assert!(db.get(b"max")? == Some(max));
    assert_eq!(db.get(b"after")?.as_deref(), Some(&b"after"[..]));
    Ok(())
}

#[test]
fn oversize_key_and_value_are_rejected_and_write_nothing() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = open(dir.path())?;
    let key = vec![1u8; MAX_KEY_BYTES];
    db.insert(&key, b"largest key")?;
    let too_long_key = vec![1u8; MAX_KEY_BYTES + 1];
    assert!(matches!(
        db.insert(&too_long_key, b"v"),
        Err(Error::KeyTooLarge { len, max }) if len == MAX_KEY_BYTES + 1 && max == MAX_KEY_BYTES
    ));
    assert!(matches!(
        db.remove(&too_long_key),
        Err(Error::KeyTooLarge { .. })
    ));
    let too_long_value = vec![0u8; MAX_VALUE_BYTES + 1];
    assert!(matches!(
        db.insert(b"k", &too_long_value),
        Err(Error::ValueTooLarge { .. })
    ));
    assert_eq!(db.len(), 1);
    assert_eq!(db.get(b"k")?, None);
    db.close()?;
    let db = open(dir.path())?;
    assert_eq!(db.len(), 1);
    assert_eq!(db.get(&key)?.as_deref(), Some(&b"largest key"[..]));
    Ok(())
}

#[test]
fn small_segments_bound_the_value_size() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), Options::default().segment_bytes(1 << 20))?;
    let err = db.insert(b"k", &vec![0u8; 1 << 20]).unwrap_err();
    assert!(matches!(err, Error::ValueTooLarge { max, .. } if max < 1 << 20));
    let Error::ValueTooLarge { max, .. } = err else {
        unreachable!()
    };
    db.insert(b"k", &vec![3u8; max])?;
    assert_eq!(db.get(b"k")?.map(|v| v.len()), Some(max));
    Ok(())
}

#[test]
fn overwrite_longer_and_shorter_then_remove_and_reinsert_across_reopen() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = open(dir.path())?;
    db.insert(b"k", b"short")?;
    db.insert(b"k", &[b'L'; 5000])?;
    assert_eq!(db.get(b"k")?.map(|v| v.len()), Some(5000));
    db.insert(b"k", b"s")?;
    assert_eq!(db.get(b"k")?.as_deref(), Some(&b"s"[..]));
    assert!(db.remove(b"k")?);
    assert!(!db.remove(b"k")?);
    assert_eq!(db.get(b"k")?, None);
    assert!(db.is_empty());
    db.close()?;

    let db = open(dir.path())?;
    assert_eq!(db.get(b"k")?, None);
    assert!(db.is_empty());
    db.insert(b"k", b"again")?;
    db.close()?;

    let db = open(dir.path())?;
    assert_eq!(db.get(b"k")?.as_deref(), Some(&b"again"[..]));
    assert_eq!(db.len(), 1);
    Ok(())
}

#[test]
fn get_into_reuses_the_buffer_and_reports_misses() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = open(dir.path())?;
    db.insert(b"a", b"alpha")?;
    let mut buf = b"stale contents that are longer".to_vec();
    assert!(db.get_into(b"a", &mut buf)?);
    assert_eq!(buf, b"alpha");
    assert!(!db.get_into(b"missing", &mut buf)?);
    Ok(())
}

#[test]
fn second_open_is_locked_until_the_first_closes() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = open(dir.path())?;
    assert!(matches!(open(dir.path()), Err(Error::Locked { .. })));
    drop(db);
    open(dir.path())?.close()?;
    Ok(())
}

/// Found by a file-damage sweep: with only `LOCK` locked, deleting it
/// (by hand, taken for a stale lock) while a writer had the store open let
/// a second writer create a new `LOCK`, lock it and write beside the first.
#[test]
fn a_deleted_lock_file_does_not_let_a_second_writer_in() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = open(dir.path())?;
    db.insert(b"first", b"writer")?;
    std::fs::remove_file(dir.path().join("LOCK"))?;
    assert!(matches!(open(dir.path()), Err(Error::Locked { .. })));
    let read_only = Db::open(dir.path(), Options::default().read_only(true));
    assert!(
        matches!(read_only, Err(Error::Locked { .. })),
        "{read_only:?}"
    );
    assert!(matches!(
        emberkv::check(dir.path()),
        Err(Error::Locked { .. })
    ));
    db.close()?;
    let db = open(dir.path())?;
    assert_eq!(db.get(b"first")?.as_deref(), Some(&b"writer"[..]));
    let second = open(dir.path());
    assert!(matches!(second, Err(Error::Locked { .. })), "{second:?}");
    Ok(())
}

#[test]
fn a_regular_file_is_not_a_store_directory() -> TestResult {
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("plain");
    std::fs::write(&file, b"not a store")?;
    let err = Db::open(&file, Options::default()).unwrap_err();
    assert!(
        matches!(&err, Error::InvalidPath { path, .. } if *path == file),
        "{err:?}"
    );
    assert!(err.to_string().contains("not a directory"), "{err}");
    assert_eq!(std::fs::read(&file)?, b"not a store");
    Ok(())
}

#[test]
fn invalid_options_are_errors() -> TestResult {
    let dir = tempfile::tempdir()?;
    for opts in [
        Options::default().segment_bytes(3 << 20),
        Options::default().hot_bytes(1024),
        Options::default().flush_interval(std::time::Duration::from_secs(5)),
        Options::default().max_space_amplification(1.25),
        Options::default().max_space_amplification(f64::NAN),
    ] {
        assert!(matches!(
            Db::open(dir.path(), opts),
            Err(Error::InvalidOptions(_))
        ));
    }
    Ok(())
}

#[test]
fn data_outgrowing_the_hot_tier_is_read_back_from_segments() -> TestResult {
    let dir = tempfile::tempdir()?;
    // No background compaction: the test counts the segment files.
    let opts = Options::default()
        .hot_bytes(4 << 20)
        .segment_bytes(2 << 20)
        .compaction_garbage(None);
    let db = open_with(dir.path(), opts.clone())?;
    let value = |i: u32| {
        format!("{i:08}")
            .repeat(1 + (i % 100) as usize)
            .into_bytes()
    };
    for i in 0..20_000u32 {
        db.insert(&i.to_be_bytes(), &value(i))?;
    }
    for i in (0..20_000u32).step_by(3) {
        assert!(db.remove(&i.to_be_bytes())?);
    }
    let check = |db: &Db| -> TestResult {
        for i in 0..20_000u32 {
            let expected = (i % 3 != 0).then(|| value(i));
            assert_eq!(db.get(&i.to_be_bytes())?, expected, "key {i}");
        }
        Ok(())
    };
    check(&db)?;
    assert_eq!(db.len(), 20_000 - 6_667);
    db.close()?;
    let db = open_with(dir.path(), opts)?;
    check(&db)?;
    assert_eq!(db.len(), 20_000 - 6_667);
    let segments = std::fs::read_dir(dir.path())?
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "seg"))
        })
        .count();
    assert!(segments > 3, "expected several segments, found {segments}");
    Ok(())
}

fn open_with(dir: &std::path::Path, opts: Options) -> emberkv::Result<Db> {
    Db::open(dir, opts)
}

#[test]
fn concurrent_writers_and_readers_see_whole_values() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = Arc::new(Db::open(dir.path(), Options::default().hot_bytes(4 << 20))?);
    std::thread::scope(|s| {
        for t in 0..4u8 {
            let db = &db;
            s.spawn(move || {
                for round in 0..2_000u32 {
                    let key = [t, (round % 97) as u8];
                    let value = vec![t ^ (round as u8); 100 + (round % 900) as usize];
                    db.insert(&key, &value).unwrap();
                }
            });
            s.spawn(move || {
                let db = &db;
                let mut buf = Vec::new();
                for round in 0..4_000u32 {
                    let key = [t, (round % 97) as u8];
                    if db.get_into(&key, &mut buf).unwrap() {
                        assert!(buf.len() >= 100 && buf.iter().all(|&b| b == buf[0]));
                    }
                }
            });
        }
    });
    assert_eq!(db.len(), 4 * 97);
    Ok(())
}

#[test]
fn sync_writes_from_many_threads_all_survive_reopen() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), Options::default().sync_writes(true))?;
    std::thread::scope(|s| {
        for t in 0..8u32 {
            let db = &db;
            s.spawn(move || {
                for i in 0..100u32 {
                    db.insert(format!("{t}:{i}").as_bytes(), &i.to_le_bytes())
                        .unwrap();
                }
            });
        }
    });
    drop(db);
    let db = open(dir.path())?;
    assert_eq!(db.len(), 800);
    assert_eq!(db.get(b"7:99")?.as_deref(), Some(&99u32.to_le_bytes()[..]));
    Ok(())
}

#[test]
fn write_marks_tell_when_writes_are_durable() -> TestResult {
    let dir = tempfile::tempdir()?;
    // The longest flush interval (1 s): a write just made is durable only
    // if the flusher happened to run between it and the look.
    let db = open_with(
        dir.path(),
        Options::default().flush_interval(std::time::Duration::from_secs(1)),
    )?;
    let empty = db.write_mark()?;
    assert!(db.is_durable(empty)?, "nothing written: all durable");
    let mut not_yet = 0;
    for i in 0..20u32 {
        db.insert(&i.to_le_bytes(), b"v")?;
        not_yet += u32::from(!db.is_durable(db.write_mark()?)?);
    }
    assert!(
        not_yet > 0,
        "20 writes, each durable the moment it returned"
    );
    let mark = db.write_mark()?;
    assert!(mark > empty);
    assert!(db.is_durable(empty)?);
    db.sync()?;
    assert!(db.is_durable(mark)?);
    db.insert(b"k2", b"v2")?;
    assert!(db.is_durable(mark)?, "a later write does not undo it");

    // Another store's mark, and a mark of an earlier open, are refused.
    let other_dir = tempfile::tempdir()?;
    let other = open(other_dir.path())?;
    assert!(matches!(other.is_durable(mark), Err(Error::ForeignMark)));
    db.close()?;
    let db = open(dir.path())?;
    assert!(matches!(db.is_durable(mark), Err(Error::ForeignMark)));
    Ok(())
}

#[test]
fn with_sync_writes_a_write_is_durable_when_it_returns() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = open_with(dir.path(), Options::default().sync_writes(true))?;
    for i in 0..100u32 {
        db.insert(&i.to_le_bytes(), b"value")?;
        assert!(db.is_durable(db.write_mark()?)?, "write {i}");
    }
    Ok(())
}
