//! Compaction through the public API: space reclaimed, data intact, while
//! reads and writes go on.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use emberkv::{Compression, Db, Options};

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn small(dir: &std::path::Path, background: Option<f64>) -> emberkv::Result<Db> {
    Db::open(
        dir,
        Options::default()
            .segment_bytes(1 << 20)
            .hot_bytes(4 << 20)
            .compaction_garbage(background),
    )
}

/// [`small`] with background compaction that also rewrites cold segments
/// compressed while writers are quiet.
fn compressing_cold(dir: &std::path::Path) -> emberkv::Result<Db> {
    Db::open(
        dir,
        Options::default()
            .segment_bytes(1 << 20)
            .hot_bytes(4 << 20)
            .compression(Compression::Zstd { level: 1 })
            .compress_cold_segments(true),
    )
}

fn value(key: u32, round: u32) -> Vec<u8> {
    let mut v = format!("{key}:{round}:").into_bytes();
    v.resize(300 + (key % 500) as usize, b'.');
    v
}

#[test]
fn compact_reclaims_overwritten_and_removed_records() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = small(dir.path(), None)?;
    let mut model = HashMap::new();
    for round in 0..4 {
        for k in 0..5_000u32 {
            db.insert(&k.to_le_bytes(), &value(k, round))?;
            model.insert(k, value(k, round));
        }
    }
    for k in (0..5_000u32).step_by(4) {
        db.remove(&k.to_le_bytes())?;
        model.remove(&k);
    }
    db.sync()?;
    let before = db.stats()?;
    assert!(before.space_amplification > 4.0, "{before:?}");
    let report = db.compact()?;
    let after = db.stats()?;
    assert!(report.segments > 0 && report.bytes_reclaimed > 0);
    assert!(
        after.space_amplification <= 1.5,
        "space amplification {} after compact",
        after.space_amplification
    );
    assert_eq!(after.compactions as usize, report.segments);
    let check = |db: &Db| -> TestResult {
        assert_eq!(db.len(), model.len());
        for k in 0..5_000u32 {
            assert_eq!(db.get(&k.to_le_bytes())?, model.get(&k).cloned(), "key {k}");
        }
        Ok(())
    };
    check(&db)?;
    db.close()?;
    let db = small(dir.path(), None)?;
    check(&db)?;
    assert!(emberkv::check(dir.path()).is_err(), "locked while open");
    db.close()?;
    let report = emberkv::check(dir.path())?;
    assert!(report.is_sound(), "{report}");
    Ok(())
}

/// A retirement does not wait for its file's deletion to reach the disk
/// (no directory fsync since 2026-12-06): a power cut may bring the
/// retired segment's file back. The next open deletes it, and reads the
/// copies, not the records the file holds.
#[test]
fn a_retired_segment_s_file_back_after_a_crash_is_deleted_at_open() -> TestResult {
    let dir = tempfile::tempdir()?;
    let aside = tempfile::tempdir()?;
    let db = small(dir.path(), None)?;
    let mut model = HashMap::new();
    for round in 0..4 {
        for k in 0..3_000u32 {
            db.insert(&k.to_le_bytes(), &value(k, round))?;
            model.insert(k, value(k, round));
        }
    }
    db.sync()?;
    let segments = |dir: &std::path::Path| -> std::io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            let name = entry?.file_name().to_string_lossy().into_owned();
            if name.ends_with(".seg") {
                names.push(name);
            }
        }
        Ok(names)
    };
    let before = segments(dir.path())?;
    for name in &before {
        std::fs::copy(dir.path().join(name), aside.path().join(name))?;
    }
    assert!(db.compact()?.segments > 0);
    db.close()?;
    let after = segments(dir.path())?;
    let gone: Vec<_> = before.iter().filter(|n| !after.contains(n)).collect();
    assert!(!gone.is_empty(), "nothing retired");
    for name in &gone {
        std::fs::copy(aside.path().join(name), dir.path().join(name))?;
    }
    let db = small(dir.path(), None)?;
    for name in &gone {
        assert!(!dir.path().join(name).exists(), "{name} left");
    }
    assert_eq!(db.len(), model.len());
    for k in 0..3_000u32 {
        assert_eq!(db.get(&k.to_le_bytes())?, model.get(&k).cloned(), "key {k}");
    }
    db.close()?;
    let report = emberkv::check(dir.path())?;
    assert!(report.is_clean(), "{report}");
    Ok(())
}

#[test]
fn compaction_runs_while_readers_and_writers_go_on() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = small(dir.path(), None)?;
    for k in 0..2_000u32 {
        db.insert(&k.to_le_bytes(), &value(k, 0))?;
    }
    std::thread::scope(|s| {
        let db = &db;
        for t in 0..2u32 {
            s.spawn(move || {
                for round in 1..6 {
                    for k in (t..2_000).step_by(2) {
                        db.insert(&k.to_le_bytes(), &value(k, round)).unwrap();
                    }
                }
            });
        }
        s.spawn(move || {
            let mut buf = Vec::new();
            for i in 0..40_000u32 {
                let k = i % 2_000;
                assert!(db.get_into(&k.to_le_bytes(), &mut buf).unwrap(), "key {k}");
                let text = String::from_utf8_lossy(&buf);
                assert!(
                    text.starts_with(&format!("{k}:")),
                    "key {k} read {text:.20}"
                );
            }
        });
        s.spawn(move || {
            for _ in 0..10 {
                db.compact().unwrap();
            }
        });
        s.spawn(move || {
            let mut seen = 0;
            for item in db.iter() {
                let (k, _) = item.unwrap();
                assert_eq!(k.len(), 4);
                seen += 1;
            }
            assert_eq!(seen, 2_000, "every key present throughout, once");
        });
    });
    for k in 0..2_000u32 {
        assert_eq!(db.get(&k.to_le_bytes())?, Some(value(k, 5)));
    }
    db.close()?;
    let db = small(dir.path(), None)?;
    for k in 0..2_000u32 {
        assert_eq!(db.get(&k.to_le_bytes())?, Some(value(k, 5)));
    }
    Ok(())
}

#[test]
fn background_compaction_keeps_space_bounded_under_churn() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = small(dir.path(), Some(0.33))?;
    for round in 0..8 {
        for k in 0..3_000u32 {
            db.insert(&k.to_le_bytes(), &value(k, round))?;
        }
    }
    db.sync()?;
    // Liveness, not timing: the compactor wakes once a second.
    let deadline = Instant::now() + Duration::from_secs(60);
    while db.stats()?.compactions == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        db.stats()?.compactions > 0,
        "background compaction never ran"
    );
    for k in 0..3_000u32 {
        assert_eq!(db.get(&k.to_le_bytes())?, Some(value(k, 7)));
    }
    Ok(())
}

/// Segments short of `compaction_garbage` are compacted once writers are
/// quiet: with 70 % of every key overwritten, no sealed segment reaches
/// 0.9, but each passes two thirds of it.
#[test]
fn segments_short_of_the_garbage_share_are_compacted_once_writers_are_quiet() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = small(dir.path(), Some(0.9))?;
    for k in 0..6_000u32 {
        db.insert(&k.to_le_bytes(), &value(k, 0))?;
    }
    for k in (0..6_000u32).filter(|k| k % 10 < 7) {
        db.insert(&k.to_le_bytes(), &value(k, 1))?;
    }
    db.sync()?;
    let before = db.stats()?;
    // Liveness, not timing: writers count as quiet after half a second.
    let deadline = Instant::now() + Duration::from_secs(60);
    while db.stats()?.compactions == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let after = db.stats()?;
    assert!(after.compactions > 0, "nothing compacted at rest");
    assert!(after.disk_bytes < before.disk_bytes, "{before:?} {after:?}");
    for k in 0..6_000u32 {
        let round = u32::from(k % 10 < 7);
        assert_eq!(db.get(&k.to_le_bytes())?, Some(value(k, round)));
    }
    Ok(())
}

#[test]
fn values_written_once_get_compressed_while_writers_are_quiet() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = compressing_cold(dir.path())?;
    // About 4 MiB of compressible values, none overwritten: no garbage, so
    // only the quiet-time recompression can shrink them.
    for k in 0..12_000u32 {
        db.insert(&k.to_le_bytes(), &value(k, 0))?;
    }
    db.sync()?;
    let before = db.stats()?;
    assert!(before.space_amplification > 1.0);
    // Liveness, not timing: one segment a second once writers are quiet.
    let deadline = Instant::now() + Duration::from_secs(60);
    while db.stats()?.space_amplification > 0.5 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let after = db.stats()?;
    assert!(
        after.space_amplification <= 0.5,
        "not recompressed: {before:?} -> {after:?}"
    );
    assert_eq!(after.logical_bytes, before.logical_bytes);
    for k in 0..12_000u32 {
        assert_eq!(db.get(&k.to_le_bytes())?, Some(value(k, 0)));
    }
    db.close()?;
    let db = small(dir.path(), None)?;
    for k in (0..12_000u32).step_by(7) {
        assert_eq!(db.get(&k.to_le_bytes())?, Some(value(k, 0)));
    }
    Ok(())
}

/// A JSON-like document of about 200 bytes: values a dictionary is for.
fn document(i: u32) -> Vec<u8> {
    let mix = |x: u32| x.wrapping_mul(0x9E37_79B9).rotate_left(13) % 100_000;
    format!(
        "{{\"id\":{i},\"name\":\"user{}\",\"email\":\"user{}@example.com\",\"country\":\"{}\",\
         \"plan\":\"{}\",\"active\":{},\"score\":{}}}",
        mix(i),
        mix(i + 1),
        ["DE", "FR", "US", "JP"][(mix(i + 2) % 4) as usize],
        ["free", "pro", "team"][(mix(i + 3) % 3) as usize],
        mix(i + 4) % 2 == 0,
        mix(i + 5) % 1000
    )
    .into_bytes()
}

#[test]
fn small_documents_get_a_dictionary_that_survives_reopen_and_backup() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = compressing_cold(dir.path())?;
    const N: u32 = 40_000;
    for i in 0..N {
        db.insert(&i.to_le_bytes(), &document(i))?;
    }
    db.sync()?;
    let before = db.stats()?;
    // Liveness, not timing: training, then one segment a second.
    let deadline = Instant::now() + Duration::from_secs(90);
    while db.stats()?.space_amplification > 0.6 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let after = db.stats()?;
    assert!(
        dir.path().join("DICTIONARY").exists(),
        "no dictionary adopted"
    );
    assert!(
        after.space_amplification <= 0.6,
        "documents not compressed with the dictionary: {before:?} -> {after:?}"
    );
    let backup = tempfile::tempdir()?;
    db.backup(backup.path().join("copy"))?;
    db.close()?;
    assert!(emberkv::check(dir.path())?.is_sound());
    // Full replay, the dictionary read back from its file.
    std::fs::remove_file(dir.path().join("CHECKPOINT"))?;
    let db = small(dir.path(), None)?;
    for i in 0..N {
        assert_eq!(db.get(&i.to_le_bytes())?, Some(document(i)), "key {i}");
    }
    assert_eq!(db.stats()?.logical_bytes, before.logical_bytes);
    drop(db);
    let copy = small(&backup.path().join("copy"), None)?;
    for i in (0..N).step_by(11) {
        assert_eq!(
            copy.get(&i.to_le_bytes())?,
            Some(document(i)),
            "backup key {i}"
        );
    }
    drop(copy);
    // Without its dictionary the store opens, and the values that need it
    // are corruption, never wrong bytes.
    std::fs::remove_file(dir.path().join("DICTIONARY"))?;
    let db = small(dir.path(), None)?;
    let mut unreadable = 0;
    for i in 0..N {
        match db.get(&i.to_le_bytes()) {
            Ok(v) => assert_eq!(v, Some(document(i))),
            Err(emberkv::Error::Corruption { .. }) => unreadable += 1,
            Err(e) => return Err(e.into()),
        }
    }
    assert!(
        unreadable > N / 2,
        "{unreadable} values needed the dictionary"
    );
    drop(db);
    // A damaged dictionary file fails the open.
    let file = backup.path().join("copy").join("DICTIONARY");
    let mut bytes = std::fs::read(&file)?;
    bytes[100] ^= 1;
    std::fs::write(&file, bytes)?;
    assert!(matches!(
        small(&backup.path().join("copy"), None),
        Err(emberkv::Error::Corruption { .. })
    ));
    Ok(())
}

/// Incompressible bytes from `seed`.
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Regression (found by an attack on the compression change, older than
/// it): an oldest segment of live data that never gets garbage keeps every
/// tombstone "needed", and each pass carried them into a segment that
/// then counted them as garbage again: an idle store compacted about 8
/// segments a second, forever.
#[test]
fn an_idle_store_with_carried_tombstones_stops_compacting() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = small(dir.path(), Some(0.33))?;
    for i in 0..3_000u64 {
        db.insert(format!("live{i}").as_bytes(), &noise(i, 300))?;
    }
    for i in 0..60_000u64 {
        db.insert(format!("t{i}").as_bytes(), b"v")?;
    }
    for i in 0..60_000u64 {
        db.remove(format!("t{i}").as_bytes())?;
    }
    // Liveness, not timing: wait (up to a minute) for a quiet spell of
    // three seconds in which nothing is appended.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut quiet = false;
    while !quiet && Instant::now() < deadline {
        let before = db.stats()?.records_appended;
        std::thread::sleep(Duration::from_secs(3));
        quiet = db.stats()?.records_appended == before;
    }
    assert!(quiet, "still rewriting: {:?}", db.stats()?);
    for i in (0..3_000u64).step_by(7) {
        assert_eq!(db.get(format!("live{i}").as_bytes())?, Some(noise(i, 300)));
    }
    for i in (0..60_000u64).step_by(101) {
        assert_eq!(db.get(format!("t{i}").as_bytes())?, None);
    }
    Ok(())
}

#[test]
fn backup_after_compaction_opens_on_its_own() -> TestResult {
    let dir = tempfile::tempdir()?;
    let out = tempfile::tempdir()?;
    let db = small(dir.path(), None)?;
    for round in 0..3 {
        for k in 0..3_000u32 {
            db.insert(&k.to_le_bytes(), &value(k, round))?;
        }
    }
    db.compact()?;
    db.backup(out.path().join("b"))?;
    let copy = small(&out.path().join("b"), None)?;
    for k in 0..3_000u32 {
        assert_eq!(copy.get(&k.to_le_bytes())?, Some(value(k, 2)));
    }
    Ok(())
}

/// Regression: values of 600,000 bytes leave most of each 1 MiB page as
/// padding, which compaction counted as garbage; every copy was padded
/// again, so an idle store compacted itself forever and `compact` copied
/// everything on every call.
#[test]
fn padding_is_not_garbage_and_a_compact_store_stays_put() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), Options::default().compaction_garbage(None))?;
    for k in 0..20u32 {
        db.insert(&k.to_le_bytes(), &vec![k as u8; 600_000])?;
    }
    db.sync()?;
    let first = db.compact()?;
    assert_eq!(first.segments, 0, "nothing is dead yet: {first:?}");
    db.insert(&3u32.to_le_bytes(), b"overwritten")?;
    let second = db.compact()?;
    assert_eq!(second.segments, 1, "{second:?}");
    assert!(second.bytes_reclaimed >= 600_000, "{second:?}");
    let third = db.compact()?;
    assert_eq!(third.segments, 0, "compacting a compact store: {third:?}");
    for k in 0..20u32 {
        let v = db.get(&k.to_le_bytes())?.unwrap();
        assert!(if k == 3 {
            v == b"overwritten"
        } else {
            v == vec![k as u8; 600_000]
        });
    }
    Ok(())
}

/// One damaged record in a sealed segment (below a checkpoint, so open
/// does not read it) used to fail every compaction pass, the background
/// thread's included, and the store's space then grew without bound: the
/// pass now leaves that segment in place, names it, and compacts the
/// others; the damaged key reads as `Corruption`, every other key its value.
#[test]
fn a_damaged_record_leaves_its_segment_and_compaction_goes_on() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = small(dir.path(), None)?;
    for k in 0..5_000u32 {
        db.insert(&k.to_le_bytes(), &value(k, 0))?;
    }
    // A tombstone in the first segment too.
    db.remove(&0u32.to_le_bytes())?;
    db.close()?;
    let seg0 = dir.path().join("000000000000.seg");
    let mut bytes = std::fs::read(&seg0)?;
    // Far enough in that compaction copies groups of live records before
    // it meets the damage.
    let victim = 1_000u32;
    let needle = value(victim, 0);
    let at = bytes
        .windows(needle.len())
        .position(|w| w == needle)
        .ok_or("the victim's value")?;
    bytes[at + 10] ^= 0x01;
    std::fs::write(&seg0, &bytes)?;

    // Keys below the victim stay as they are; the others are overwritten.
    let expected = |k: u32| match k {
        0 => None,
        k if k < victim => Some(value(k, 0)),
        k => Some(value(k, 1)),
    };
    let db = small(dir.path(), None)?;
    for k in victim + 1..5_000 {
        db.insert(&k.to_le_bytes(), &value(k, 1))?;
    }
    db.sync()?;
    let report = db.compact()?;
    assert_eq!(report.damaged, vec![0], "{report:?}");
    assert!(
        report.segments > 0 && report.records_copied > 0,
        "{report:?}"
    );
    assert!(seg0.exists(), "the damaged segment was deleted");
    let again = db.compact()?;
    assert!(again.damaged.is_empty(), "{again:?}");
    let check_all = |db: &Db| -> TestResult {
        for k in (0..5_000u32).filter(|&k| k != victim) {
            assert_eq!(db.get(&k.to_le_bytes())?, expected(k), "key {k}");
        }
        assert!(matches!(
            db.get(&victim.to_le_bytes()),
            Err(emberkv::Error::Corruption { .. })
        ));
        Ok(())
    };
    check_all(&db)?;
    db.close()?;
    let db = small(dir.path(), None)?;
    check_all(&db)?;
    // After a reopen the pass meets the damage again, and skips it again.
    assert_eq!(db.compact()?.damaged, vec![0]);
    check_all(&db)?;
    Ok(())
}
