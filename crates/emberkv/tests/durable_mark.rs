//! The durable mark after a SIGKILL: a child process inserts with
//! `sync_writes` and acknowledges each insert in a file; the parent kills
//! it, then damages the first record of the newest segment, which lies
//! below the segment's durable mark. Recovery must refuse the store
//! (`Corruption` at that record, the file unchanged) instead of cutting
//! the segment there, which would lose every acknowledged record after it;
//! with the byte restored, every acknowledged insert is there.
//!
//! The child is this test binary re-executed with `durable_mark_child` as
//! the test filter and `EMBERKV_MARK_DIR` set.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use emberkv::{Db, Error, Options};

const ENV_DIR: &str = "EMBERKV_MARK_DIR";
/// Inserts acknowledged before the kill: about 3 MiB of records, so that
/// the mark (written at least every MiB made durable) lies well past the
/// first record.
const ACKED_BEFORE_KILL: usize = 3000;
/// A child runs at most this long, should its parent be gone.
const CHILD_LIFETIME: Duration = Duration::from_secs(60);

fn options() -> Options {
    Options::default()
        .sync_writes(true)
        .compaction_garbage(None)
}

fn key(i: u64) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

fn value(i: u64) -> Vec<u8> {
    let mut v = format!("value of {i}:").into_bytes();
    v.resize(1000, b'0' + (i % 10) as u8);
    v
}

#[test]
fn durable_mark_child() {
    let Ok(dir) = std::env::var(ENV_DIR) else {
        return;
    };
    let dir = PathBuf::from(dir);
    let db = Db::open(dir.join("store"), options()).unwrap();
    let mut acks = File::create(dir.join("acks")).unwrap();
    let deadline = Instant::now() + CHILD_LIFETIME;
    let mut i = 0;
    while Instant::now() < deadline {
        db.insert(&key(i), &value(i)).unwrap();
        writeln!(acks, "{i}").unwrap();
        i += 1;
    }
}

/// CRC32C, for the mark slots' checks.
fn crc32c(bytes: &[u8]) -> u32 {
    crc_fast::crc32_iscsi(bytes)
}

/// The durable mark of segment `seg`'s header `h`: the larger length of
/// the slots (40..48, 48..56: length u32, CRC32C of the segment number and
/// the length) that check.
fn mark_of(h: &[u8], seg: u64) -> u64 {
    (0..2)
        .filter_map(|i| {
            let at = 40 + 8 * i;
            let len = u32::from_le_bytes(h[at..at + 4].try_into().unwrap());
            let mut covered = seg.to_le_bytes().to_vec();
            covered.extend_from_slice(&len.to_le_bytes());
            let crc = u32::from_le_bytes(h[at + 4..at + 8].try_into().unwrap());
            (crc == crc32c(&covered)).then_some(u64::from(len))
        })
        .max()
        .unwrap_or(0)
}

fn acked(dir: &Path) -> u64 {
    fs::read_to_string(dir.join("acks"))
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.is_empty())
        .count() as u64
}

#[test]
fn damage_below_the_durable_mark_after_sigkill_is_refused_not_cut() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "durable_mark_child", "--nocapture"])
        .env(ENV_DIR, dir.path())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while acked(dir.path()) < ACKED_BEFORE_KILL as u64 {
        assert!(
            started.elapsed() < CHILD_LIFETIME,
            "the child acknowledged only {} inserts",
            acked(dir.path())
        );
        assert!(child.try_wait().unwrap().is_none(), "the child exited");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    // Read after the kill: the one insert in flight may or may not be there.
    let acked = acked(dir.path());

    let store = dir.path().join("store");
    let seg = store.join("000000000000.seg");
    let bytes = fs::read(&seg).unwrap();
    let mark = mark_of(&bytes, 0);
    assert!(
        mark > 1 << 20,
        "mark {mark}: expected more than a MiB after {acked} acknowledged inserts of 1 KiB"
    );
    // A byte of the first record's value (its 16-byte header and 11-byte
    // key come first).
    let at = 64 + 16 + 11 + 100;
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&seg)
        .unwrap();
    let mut byte = [0u8];
    file.read_exact_at(&mut byte, at).unwrap();
    file.write_all_at(&[byte[0] ^ 0x04], at).unwrap();
    let _ = fs::remove_file(store.join("CHECKPOINT"));
    match Db::open(&store, options()) {
        Err(Error::Corruption { offset, .. }) => assert_eq!(offset, 64),
        Err(e) => panic!("expected Corruption at 64, got {e:?}"),
        Ok(db) => panic!(
            "a damaged durable record was taken for a torn tail: the store opened with {} of \
             {acked} acknowledged keys",
            db.len()
        ),
    }
    assert_eq!(
        fs::read(&seg).unwrap().len(),
        bytes.len(),
        "the file was cut"
    );
    assert!(!emberkv::check(&store).unwrap().is_sound());

    file.write_all_at(&byte, at).unwrap();
    let db = Db::open(&store, options()).unwrap();
    for i in 0..acked {
        assert_eq!(db.get(&key(i)).unwrap(), Some(value(i)), "key {i}");
    }
}
