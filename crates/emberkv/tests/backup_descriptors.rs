//! `Db::backup` to another file system holds a file for each sealed
//! segment it copies, so that compaction may go on meanwhile: the store's
//! own for a segment whose descriptor it has open, else one of its own. A
//! process with descriptors for every segment and a few more must still
//! get a whole backup, whether the store has its segments open or not;
//! when descriptors run out, the segments taken so far are copied at
//! once.
//!
//! The child is this test binary re-executed with `descriptors_child` as
//! the test filter and `EMBERKV_DESCRIPTORS_CHILD` set to the store's and
//! the backup's directories, whether to read every key first, and the
//! descriptors to leave; it lowers its own `RLIMIT_NOFILE` before the
//! backup, which the parent's other tests must not share.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Stdio};

use emberkv::{Db, Options};

mod store_files;
use store_files::segment_files;

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

fn segments(store: &Path) -> u64 {
    segment_files(store).unwrap().len() as u64
}

#[test]
fn descriptors_child() {
    let Ok(args) = std::env::var(ENV_CHILD) else {
        return;
    };
    let args: Vec<&str> = args.split('\n').collect();
    let [store, dest, warm, spare] = args[..] else {
        panic!("{args:?}")
    };
    let db = Db::open(store, options()).unwrap();
    // A warm store has read every segment (and holds each one's file);
    // a cold one, opened from its checkpoint, none.
    let soft = if warm == "warm" {
        for k in 0..KEYS {
            assert_eq!(db.get(&k.to_le_bytes()).unwrap(), Some(value(k)));
        }
        open_descriptors()
    } else {
        open_descriptors() + segments(Path::new(store))
    } + spare.parse::<u64>().unwrap();
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
    {
        let db = Db::open(&store, options()).unwrap();
        for k in 0..KEYS {
            db.insert(&k.to_le_bytes(), &value(k)).unwrap();
        }
        db.close().unwrap();
    }
    assert!(segments(&store) >= 20, "{} segments", segments(&store));
    let cases = [
        ("warm", 6),
        ("cold", 4),
        ("cold", 5),
        ("cold", 6),
        ("cold", 7),
    ];
    for (n, (warm, spare)) in cases.into_iter().enumerate() {
        let dest = elsewhere.path().join(format!("backup-{n}"));
        let out = Command::new(std::env::current_exe().unwrap())
            .args(["descriptors_child", "--exact", "--nocapture"])
            .env(
                ENV_CHILD,
                format!("{}\n{}\n{warm}\n{spare}", store.display(), dest.display()),
            )
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("backed up with at most"),
            "{warm} store, {spare} spare descriptors: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let backup = Db::open(&dest, options()).unwrap();
        assert_eq!(backup.len(), KEYS as usize);
        for k in 0..KEYS {
            let got = backup.get(&k.to_le_bytes()).unwrap();
            assert_eq!(got, Some(value(k)), "key {k}");
        }
    }
}
