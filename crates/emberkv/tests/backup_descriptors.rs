//! `Db::backup` to another file system keeps a file open for each sealed
//! segment it copies, so that compaction may go on meanwhile; a process
//! short of file descriptors must still get a whole backup (the segments
//! opened so far are then copied at once).
//!
//! The child is this test binary re-executed with `descriptors_child` as
//! the test filter and `EMBERKV_DESCRIPTORS_CHILD` set to the store's and
//! the backup's directories; it lowers its own `RLIMIT_NOFILE` before the
//! backup, which the parent's other tests must not share.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use emberkv::{Db, Options};

const ENV_CHILD: &str = "EMBERKV_DESCRIPTORS_CHILD";
const KEYS: u32 = 24_000;

/// 1 MiB segments, no background compaction.
fn options() -> Options {
    Options::default()
        .segment_bytes(1 << 20)
        .compaction_garbage(None)
}

fn value(k: u32) -> Vec<u8> {
    vec![(k % 251) as u8; 1_000]
}

fn open_descriptors() -> u64 {
    fs::read_dir("/proc/self/fd").unwrap().count() as u64
}

#[test]
fn descriptors_child() {
    let Ok(dirs) = std::env::var(ENV_CHILD) else {
        return;
    };
    let (store, dest) = dirs.split_once('\n').unwrap();
    let db = Db::open(store, options()).unwrap();
    // The store opens a segment's file when it first reads it: read every
    // key, so that it holds them all (it needs a descriptor per segment
    // anyway); then leave room for a few more, far fewer than its
    // segments.
    for k in 0..KEYS {
        assert_eq!(db.get(&k.to_le_bytes()).unwrap(), Some(value(k)));
    }
    let soft = open_descriptors() + 6;
    let (_, hard) = rlimit::getrlimit(rlimit::Resource::NOFILE).unwrap();
    rlimit::setrlimit(rlimit::Resource::NOFILE, soft, hard).unwrap();
    db.backup(dest).unwrap();
    db.close().unwrap();
    println!("backed up with at most {soft} descriptors");
}

#[test]
fn a_backup_short_of_file_descriptors_is_whole() {
    if std::env::var(ENV_CHILD).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Ok(elsewhere) = tempfile::tempdir_in("/dev/shm") else {
        eprintln!("skipped: no /dev/shm");
        return;
    };
    let device = |p: &Path| fs::metadata(p).unwrap().dev();
    if device(dir.path()) == device(elsewhere.path()) {
        eprintln!("skipped: /dev/shm is on the store's file system");
        return;
    }
    let store = dir.path().join("store");
    let dest: PathBuf = elsewhere.path().join("backup");
    {
        let db = Db::open(&store, options()).unwrap();
        for k in 0..KEYS {
            db.insert(&k.to_le_bytes(), &value(k)).unwrap();
        }
        db.close().unwrap();
    }
    let segments = fs::read_dir(&store)
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name();
            name.to_string_lossy().ends_with(".seg")
        })
        .count();
    assert!(segments >= 20, "{segments} segments");
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["descriptors_child", "--exact", "--nocapture"])
        .env(
            ENV_CHILD,
            format!("{}\n{}", store.display(), dest.display()),
        )
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("backed up with at most"),
        "child failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let backup = Db::open(&dest, options()).unwrap();
    assert_eq!(backup.len(), KEYS as usize);
    for k in 0..KEYS {
        assert_eq!(
            backup.get(&k.to_le_bytes()).unwrap(),
            Some(value(k)),
            "key {k}"
        );
    }
}
