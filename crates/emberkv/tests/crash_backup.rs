//! Crash test of `Db::backup`: a child process takes backups of a store in a
//! loop, each into a new directory, and is killed with SIGKILL at a random
//! moment; the parent then checks that the store's files are unchanged, that
//! every backup that opens holds the whole store, and that opening, writing
//! to and closing each such backup changes none of the store's files (a
//! backup links the store's sealed segments on the same file system).
//!
//! The child is this test binary re-executed with `backup_child` as the test
//! filter and `EMBERKV_BACKUP_CHILD` set to the store's directory. Set
//! `EMBERKV_CRASH_SEED` to vary (or reproduce) the kill times.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use emberkv::{Db, Options};

mod store_files;
use store_files::files_of;

const ENV_CHILD: &str = "EMBERKV_BACKUP_CHILD";
const ENV_SEED: &str = "EMBERKV_CRASH_SEED";
const KEYS: u32 = 1_500;
const CYCLES: u64 = 6;

/// 4 MiB segments, no background compaction: the store is not written
/// while the child backs it up, so its files stay as they are.
fn options() -> Options {
    Options::default()
        .segment_bytes(4 << 20)
        .compaction_garbage(None)
}

fn value(k: u32) -> Vec<u8> {
    vec![(k % 251) as u8; 1_000]
}

/// A store whose sealed segments end well before their segment's end (a
/// 3 MiB value did not fit after the small ones), the case where a backup
/// that went on in a linked segment would write into the store's file.
fn build_store(dir: &Path) {
    let db = Db::open(dir, options()).unwrap();
    for k in 0..KEYS {
        db.insert(&k.to_le_bytes(), &value(k)).unwrap();
    }
    db.insert(b"large", &vec![7; 3 << 20]).unwrap();
    for k in KEYS..KEYS + 100 {
        db.insert(&k.to_le_bytes(), &value(k)).unwrap();
    }
    db.close().unwrap();
}

#[test]
fn backup_child() {
    let Ok(store) = std::env::var(ENV_CHILD) else {
        return;
    };
    let store = PathBuf::from(store);
    let db = Db::open(&store, options()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut n = 0;
    while Instant::now() < deadline {
        db.backup(store.with_file_name(format!("backup-{n}")))
            .unwrap();
        n += 1;
    }
}

#[test]
fn a_backup_killed_at_any_moment_never_changes_the_store() {
    let seed: u64 = std::env::var(ENV_SEED)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(7);
    let root = tempfile::tempdir().unwrap();
    let store = root.path().join("store");
    build_store(&store);
    let stored = files_of(&store);
    let mut opened = 0;
    for cycle in 0..CYCLES {
        let ctx = format!("[{ENV_SEED}={seed}, cycle {cycle}]");
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["backup_child", "--exact", "--nocapture", "--test-threads=1"])
            .env(ENV_CHILD, &store)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        if cycle + 1 == CYCLES && opened == 0 {
            // No backup finished inside the earlier cycles' windows (a
            // loaded machine: CI's run on 2026-12-07 beside a torture run
            // failed here): the last cycle kills the child only once its
            // first backup is complete, so that one is always checked.
            let first = store.with_file_name("backup-0").join("emberkv.meta");
            let deadline = Instant::now() + Duration::from_secs(300);
            while !first.exists() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
        } else {
            let h = (seed ^ cycle.wrapping_mul(0x9E37_79B9_7F4A_7C15))
                .wrapping_mul(0xBF58_476D_1CE4_E5B9);
            std::thread::sleep(Duration::from_millis(20 + (h >> 40) % 200));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(
            files_of(&store),
            stored,
            "{ctx} the backups changed the store"
        );
        let backups: Vec<PathBuf> = fs::read_dir(root.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("backup-"))
            })
            .collect();
        for backup in backups {
            // Without its meta file a directory is no store (a backup cut
            // short): it is not opened, as a user would not.
            if backup.join("emberkv.meta").exists() {
                let copy = Db::open(&backup, options()).unwrap_or_else(|e| {
                    panic!(
                        "{ctx} a complete backup {} does not open: {e:?}",
                        backup.display()
                    )
                });
                assert_eq!(
                    copy.len(),
                    KEYS as usize + 101,
                    "{ctx} {}",
                    backup.display()
                );
                for k in (0..KEYS + 100).step_by(97) {
                    assert_eq!(copy.get(&k.to_le_bytes()).unwrap(), Some(value(k)), "{ctx}");
                }
                copy.insert(b"written to the backup", &[1; 5_000]).unwrap();
                copy.close().unwrap();
                opened += 1;
            }
            fs::remove_dir_all(&backup).unwrap();
        }
        assert_eq!(
            files_of(&store),
            stored,
            "{ctx} a backup's writes changed the store"
        );
    }
    assert!(
        opened > 0,
        "no backup completed before a kill in {CYCLES} cycles"
    );
    let report = emberkv::check(&store).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    // A full replay of the store (no checkpoint) still finds every key.
    fs::remove_file(store.join("CHECKPOINT")).unwrap();
    let db = Db::open(&store, options()).unwrap();
    assert_eq!(db.len(), KEYS as usize + 101);
}
