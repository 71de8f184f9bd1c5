//! Cold gets never answer with a record the index no longer points at,
//! read through the segments' memory maps (the default) or by positioned
//! reads through the read cache: cold records read again come from the
//! cache, and overwrites, removals, compaction and a reopen leave every
//! get equal to a model.

use std::collections::HashMap;

use emberkv::{Db, Options};

fn value(k: u32, version: u32) -> Vec<u8> {
    let mut v = vec![(k ^ version) as u8; 2_000];
    v[..4].copy_from_slice(&k.to_le_bytes());
    v[4..8].copy_from_slice(&version.to_le_bytes());
    v
}

fn check(db: &Db, model: &HashMap<u32, Vec<u8>>, keys: u32) {
    for k in 0..keys {
        assert_eq!(
            db.get(&k.to_le_bytes()).unwrap().as_ref(),
            model.get(&k),
            "key {k}"
        );
    }
}

#[test]
fn cold_gets_through_the_cache_follow_overwrites_removals_and_compaction() {
    cold_gets_follow_overwrites_removals_and_compaction(false);
}

#[test]
fn cold_gets_through_the_maps_follow_overwrites_removals_and_compaction() {
    cold_gets_follow_overwrites_removals_and_compaction(true);
}

/// With `map`, gets read cold records through the segments' maps and
/// never through the read cache.
fn cold_gets_follow_overwrites_removals_and_compaction(map: bool) {
    const KEYS: u32 = 8_000; // 16 MiB of values, four times the hot tier
    let dir = tempfile::tempdir().unwrap();
    let options = Options::default()
        .hot_bytes(4 << 20)
        .read_cache_bytes(8 << 20)
        .map_cold_reads(map)
        .segment_bytes(4 << 20)
        .compaction_garbage(None);
    let db = Db::open(dir.path(), options.clone()).unwrap();
    let mut model = HashMap::new();
    for k in 0..KEYS {
        db.insert(&k.to_le_bytes(), &value(k, 0)).unwrap();
        model.insert(k, value(k, 0));
    }
    // The first 2,000 keys are cold; without maps, the second miss on each
    // admits it to the read cache, so the third read hits.
    for _ in 0..3 {
        for k in 0..2_000u32 {
            assert_eq!(db.get(&k.to_le_bytes()).unwrap().unwrap(), model[&k]);
        }
    }
    let stats = db.stats().unwrap();
    if map {
        assert_eq!((stats.read_cache_hits, stats.read_cache_bytes), (0, 0));
    } else {
        assert!(stats.read_cache_hits >= 1_000, "{stats:?}");
    }
    // Overwrite and remove some of the cached keys, then move what is left
    // with compaction: the cache still holds their old records.
    for k in (0..2_000u32).step_by(3) {
        db.insert(&k.to_le_bytes(), &value(k, 1)).unwrap();
        model.insert(k, value(k, 1));
    }
    for k in (1..2_000u32).step_by(5) {
        db.remove(&k.to_le_bytes()).unwrap();
        model.remove(&k);
    }
    check(&db, &model, KEYS);
    db.compact().unwrap();
    check(&db, &model, KEYS);
    check(&db, &model, KEYS);
    db.close().unwrap();
    let db = Db::open(dir.path(), options).unwrap();
    for _ in 0..3 {
        check(&db, &model, KEYS);
    }
    assert_eq!(db.stats().unwrap().read_cache_hits > 0, !map);
}
