//! A store opened by a relative path, then the process's working
//! directory changed (as a daemon does after start-up). A test binary of
//! its own: the working directory is the whole process's, and the tests
//! of one binary run on threads side by side.

use emberkv::{Db, Options};

/// Regression (reasoned by an attack helper on backups, 2026-12-07): the
/// store kept the path it was opened by, so after a change of working
/// directory the segments, checkpoint and `RETIRED` it made went to, or
/// were looked for in, another directory's `store`.
#[test]
fn a_store_opened_by_a_relative_path_outlives_a_change_of_working_directory() {
    let (first, second) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    std::env::set_current_dir(first.path()).unwrap();
    let options = Options::default().segment_bytes(1 << 20).hot_bytes(4 << 20);
    let db = Db::open("store", options.clone()).unwrap();
    let value = [7u8; 1_000];
    for k in 0..1_000u32 {
        db.insert(&k.to_le_bytes(), &value).unwrap();
    }
    std::env::set_current_dir(second.path()).unwrap();
    // Several segments more (each made after the change), their records
    // overwritten, compacted and checkpointed at the close.
    for round in 0..4u8 {
        for k in 0..3_000u32 {
            db.insert(&k.to_le_bytes(), &[round; 1_000]).unwrap();
        }
    }
    db.sync().unwrap();
    db.compact().unwrap();
    db.close().unwrap();
    assert!(
        !second.path().join("store").exists(),
        "nothing made in the new directory"
    );
    let db = Db::open(first.path().join("store"), options).unwrap();
    assert_eq!(db.len(), 3_000);
    for k in 0..3_000u32 {
        assert_eq!(
            db.get(&k.to_le_bytes()).unwrap(),
            Some(vec![3u8; 1_000]),
            "key {k}"
        );
    }
    db.close().unwrap();
    assert!(
        emberkv::check(first.path().join("store"))
            .unwrap()
            .is_clean()
    );
}
