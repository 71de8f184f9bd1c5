//! Running out: disk space, file descriptors, and the size limits.
//!
//! The disk-full tests mount a small tmpfs (which takes root; where
//! mounting is not allowed they print `skipped: <reason>` and pass) and fill
//! it with a store's writes after a filler file has taken part of it, then
//! delete the filler. The file-descriptor tests re-run this test binary as
//! a child under a low `ulimit -n`.

use std::ffi::OsStr;
use std::fs::File;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use emberkv::{Db, Error, MAX_KEY_BYTES, MAX_VALUE_BYTES, Options, Stats, WriteBatch};

mod store_files;
use store_files::segment_files;

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// A tmpfs mounted on a fresh temporary directory, unmounted on drop.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Mounts a tmpfs of `bytes`, or says why it cannot.
    fn mount(bytes: u64) -> Result<Tmpfs, String> {
        let dir = tempfile::tempdir().map_err(|e| format!("no temporary directory: {e}"))?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
            .arg(dir.path())
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "mount -t tmpfs failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(Tmpfs { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let unmounted = Command::new("umount")
            .arg(self.dir.path())
            .status()
            .is_ok_and(|s| s.success());
        if !unmounted {
            // Busy (a handle leaked by a failing test): detach it anyway.
            let _ = Command::new("umount")
                .arg("-l")
                .arg(self.dir.path())
                .status();
        }
    }
}

/// A `bytes` tmpfs, or `None` after printing why the test is skipped.
fn tmpfs(bytes: u64) -> Option<Tmpfs> {
    match Tmpfs::mount(bytes) {
        Ok(fs) => Some(fs),
        Err(why) => {
            eprintln!("skipped: {why}");
            None
        }
    }
}

fn is_disk_full(e: &Error) -> bool {
    matches!(e, Error::Io(io) if io.kind() == ErrorKind::StorageFull)
}

fn key(i: u32) -> Vec<u8> {
    format!("key-{i:06}").into_bytes()
}

/// Value `i` (4 KiB and a bit), distinct per `i` and `version`, and of a
/// length of its own per version, so that every overwrite appends (none
/// goes in place) and leaves garbage behind.
fn value(i: u32, version: u32) -> Vec<u8> {
    let mut v = format!("{i}:{version}:").into_bytes();
    v.resize(4_200 + (version % 64) as usize, (i ^ version) as u8);
    v
}

/// Writes `value(i, 0)` under `key(i)` for i = `from`, `from + 1`, ...
/// until a write fails; returns the `i` that failed and the error.
fn fill(db: &Db, from: u32) -> (u32, Error) {
    for i in from.. {
        if let Err(e) = db.insert(&key(i), &value(i, 0)) {
            return (i, e);
        }
        assert!(i < 100_000, "the disk never filled");
    }
    unreachable!()
}

/// Keys written again after space was freed, as version 1.
const REWRITTEN: u32 = 100;

/// Keys `0..acked` hold `value(i, 0)`, or `value(i, 1)` below
/// [`REWRITTEN`] when `rewritten` is 1; key `acked`, whose write failed,
/// holds `value(acked, 0)` or nothing (a failed write may or may not have
/// taken effect).
fn check(db: &Db, acked: u32, rewritten: u32) -> TestResult {
    for i in 0..acked {
        let version = if i < REWRITTEN { rewritten } else { 0 };
        assert_eq!(db.get(&key(i))?, Some(value(i, version)), "key {i}");
    }
    let failed = db.get(&key(acked))?;
    assert!(
        failed.is_none() || failed == Some(value(acked, 0)),
        "the failed write left a value it never wrote"
    );
    Ok(())
}

fn small(sync_writes: bool) -> Options {
    Options::default()
        .segment_bytes(1 << 20)
        .hot_bytes(4 << 20)
        .sync_writes(sync_writes)
}

#[test]
fn a_full_disk_fails_sync_writes_cleanly_and_the_same_handle_resumes_once_space_is_freed()
-> TestResult {
    let Some(fs) = tmpfs(16 << 20) else {
        return Ok(());
    };
    let filler = fs.path().join("filler");
    std::fs::write(&filler, vec![1u8; 8 << 20])?;
    let store = fs.path().join("store");
    let opts = small(true).compaction_garbage(None);
    let db = Db::open(&store, opts.clone())?;
    let (acked, err) = fill(&db, 0);
    eprintln!("first failed write after {acked} acknowledged: {err}");
    assert!(is_disk_full(&err), "{err:?}");
    assert!(acked > 100, "only {acked} writes fit");
    check(&db, acked, 0)?;
    for _ in 0..3 {
        let again = db.insert(b"while full", b"x").unwrap_err();
        assert!(is_disk_full(&again), "a write on a full disk: {again:?}");
    }
    assert!(is_disk_full(&db.sync().unwrap_err()));

    std::fs::remove_file(&filler)?;
    db.insert(b"after", b"space was freed")?;
    for i in 0..REWRITTEN {
        db.insert(&key(i), &value(i, 1))?;
    }
    check(&db, acked, 1)?;
    db.close()?;
    let db = Db::open(&store, opts)?;
    check(&db, acked, 1)?;
    assert_eq!(db.get(b"after")?.as_deref(), Some(&b"space was freed"[..]));
    assert!(emberkv::check(&store).is_err(), "locked while open");
    db.close()?;
    let report = emberkv::check(&store)?;
    assert!(report.is_sound(), "{report}");
    Ok(())
}

#[test]
fn a_store_closed_on_a_full_disk_reopens_for_reads_and_for_writes_once_space_is_freed() -> TestResult
{
    let Some(fs) = tmpfs(16 << 20) else {
        return Ok(());
    };
    let filler = fs.path().join("filler");
    std::fs::write(&filler, vec![1u8; 8 << 20])?;
    let store = fs.path().join("store");
    let opts = small(true).compaction_garbage(None);
    let db = Db::open(&store, opts.clone())?;
    let (acked, err) = fill(&db, 0);
    assert!(is_disk_full(&err), "{err:?}");
    // The failed write is still in the hot tier: close cannot make it
    // durable, and says so.
    let closed = db.close().unwrap_err();
    assert!(is_disk_full(&closed), "{closed:?}");

    let db = Db::open(&store, opts.clone())?;
    check(&db, acked, 0)?;
    // Recovery cut the failed write off; what still fits in the last
    // allocated page may be written, then the disk is full again.
    let (acked, err) = fill(&db, acked);
    assert!(is_disk_full(&err), "{err:?}");
    check(&db, acked, 0)?;
    std::fs::remove_file(&filler)?;
    db.insert(b"after", b"space was freed")?;
    db.close()?;
    let db = Db::open(&store, opts)?;
    check(&db, acked, 0)?;
    assert_eq!(db.get(b"after")?.as_deref(), Some(&b"space was freed"[..]));
    Ok(())
}

#[test]
fn a_checkpoint_that_finds_the_disk_full_leaves_no_temporary_file() -> TestResult {
    let Some(fs) = tmpfs(4 << 20) else {
        return Ok(());
    };
    let store = fs.path().join("store");
    let opts = small(true).compaction_garbage(None);
    let db = Db::open(&store, opts.clone())?;
    for i in 0..100 {
        db.insert(&key(i), &value(i, 0))?;
    }
    // Everything is durable; only the checkpoint at close needs room.
    fill_up(&fs.path().join("filler"))?;
    let closed = db.close().unwrap_err();
    assert!(is_disk_full(&closed), "{closed:?}");
    assert!(!store.join("CHECKPOINT.tmp").exists());
    std::fs::remove_file(fs.path().join("filler"))?;
    let db = Db::open(&store, opts)?;
    check(&db, 100, 0)?;
    db.close()?;
    Ok(())
}

/// Takes every free byte of the file system at `path`.
fn fill_up(path: &Path) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = File::create(path)?;
    let chunk = vec![7u8; 4096];
    loop {
        match f.write_all(&chunk) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::StorageFull => return Ok(()),
            Err(e) => return Err(e),
        }
    }
}

#[test]
fn a_segment_whose_creation_found_the_disk_full_is_created_once_there_is_room() -> TestResult {
    let Some(fs) = tmpfs(4 << 20) else {
        return Ok(());
    };
    let store = fs.path().join("store");
    let opts = small(true).compaction_garbage(None);
    let db = Db::open(&store, opts.clone())?;
    // Fill the first segment into its last 4 KiB page, so that what is left
    // of it takes no new page, but the second segment's header does.
    let first = store.join("000000000000.seg");
    let mut keys = 0;
    while std::fs::metadata(&first)?.len() < (1 << 20) - 3_000 {
        db.insert(&key(keys), &[b's'; 1_000])?;
        keys += 1;
    }
    fill_up(&fs.path().join("filler"))?;
    let err = db.insert(b"big", &[b'b'; 8_000]).unwrap_err();
    assert!(is_disk_full(&err), "{err:?}");
    std::fs::remove_file(fs.path().join("filler"))?;
    db.insert(b"after", b"space was freed")?;
    db.close()?;
    // Replay the log itself: the second segment has a sound header that
    // records the first one's length.
    std::fs::remove_file(store.join("CHECKPOINT"))?;
    let db = Db::open(&store, opts)?;
    for i in 0..keys {
        assert_eq!(db.get(&key(i))?.as_deref(), Some(&[b's'; 1_000][..]));
    }
    assert_eq!(db.get(b"big")?.as_deref(), Some(&[b'b'; 8_000][..]));
    assert_eq!(db.get(b"after")?.as_deref(), Some(&b"space was freed"[..]));
    db.close()?;
    let report = emberkv::check(&store)?;
    assert!(report.is_sound(), "{report}");
    Ok(())
}

/// Polls `done` until it holds, for at most `patience`.
fn eventually(patience: Duration, mut done: impl FnMut() -> bool) -> bool {
    let give_up = Instant::now() + patience;
    while Instant::now() < give_up {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    done()
}

/// What [`grow_and_overwrite`] did: each key's last acknowledged version,
/// and the write that failed (key, version), which may or may not have
/// taken effect.
struct Grown {
    versions: Vec<u32>,
    failed: (u32, u32),
    error: Error,
}

/// Adds a key, then overwrites `overwrites` older ones, until a write
/// fails: the store grows (so the disk fills whatever compaction does) and
/// leaves garbage behind.
fn grow_and_overwrite(db: &Db, overwrites: usize) -> Grown {
    let mut versions = Vec::new();
    loop {
        let n = versions.len() as u32;
        if let Err(error) = db.insert(&key(n), &value(n, 0)) {
            return Grown {
                versions,
                failed: (n, 0),
                error,
            };
        }
        versions.push(0);
        for j in 0..overwrites {
            let old = (n as usize * 7 + j) % versions.len();
            let v = versions[old] + 1;
            if let Err(error) = db.insert(&key(old as u32), &value(old as u32, v)) {
                return Grown {
                    versions,
                    failed: (old as u32, v),
                    error,
                };
            }
            versions[old] = v;
        }
    }
}

impl Grown {
    /// Every key holds its acknowledged value, or the failed write's.
    fn check(&self, db: &Db) -> TestResult {
        let (failed_key, failed_version) = self.failed;
        let failed_value = Some(value(failed_key, failed_version));
        for (i, &v) in self.versions.iter().enumerate() {
            let got = db.get(&key(i as u32))?;
            let ok =
                got == Some(value(i as u32, v)) || (i as u32 == failed_key && got == failed_value);
            assert!(ok, "key {i}: {:?}", got.map(|g| g.len()));
        }
        let got = db.get(&key(self.versions.len() as u32))?;
        assert!(got.is_none() || got == failed_value, "a key never written");
        Ok(())
    }

    /// Overwrites keys `0..50` once more.
    fn overwrite(&mut self, db: &Db) -> TestResult {
        for i in 0..50 {
            db.insert(&key(i), &value(i, 1_000))?;
            self.versions[i as usize] = 1_000;
        }
        Ok(())
    }

    /// What the failed write's key holds now.
    fn failed_outcome(&self, db: &Db) -> emberkv::Result<Option<Vec<u8>>> {
        db.get(&key(self.failed.0))
    }
}

/// After `Db::compact`, every sealed segment holds live records only: the
/// files hold about the live records, plus the segment being written.
fn assert_reclaimed(full: &Stats, reclaimed: &Stats) {
    assert!(
        reclaimed.disk_bytes < full.disk_bytes
            && reclaimed.disk_bytes < reclaimed.live_record_bytes + (2 << 20),
        "garbage not reclaimed: {reclaimed:?}, full: {full:?}"
    );
}

#[test]
fn a_full_disk_under_default_durability_leaves_the_background_threads_working() -> TestResult {
    let Some(fs) = tmpfs(16 << 20) else {
        return Ok(());
    };
    let filler = fs.path().join("filler");
    std::fs::write(&filler, vec![1u8; 6 << 20])?;
    let store = fs.path().join("store");
    let opts = small(false)
        .compaction_garbage(Some(0.2))
        .flush_interval(Duration::from_millis(5));
    let db = Db::open(&store, opts.clone())?;
    let mut grown = grow_and_overwrite(&db, 10);
    let full = db.stats()?;
    eprintln!(
        "first failed write after {} keys: {}; {} bytes on disk for {} live",
        grown.versions.len(),
        grown.error,
        full.disk_bytes,
        full.live_record_bytes
    );
    assert!(is_disk_full(&grown.error), "{:?}", grown.error);
    // Acknowledged in default mode means in memory: all readable.
    grown.check(&db)?;

    // Room for the hot tier's unflushed bytes (at most 4 MiB) and the
    // copies of a segment's live records.
    std::fs::remove_file(&filler)?;
    assert!(
        eventually(Duration::from_secs(20), || db.stats().is_ok_and(|s| {
            s.fdatasyncs > full.fdatasyncs && s.compactions > full.compactions
        })),
        "no fdatasync or no compaction in 20 s after space was freed: {:?}",
        db.stats()
    );
    db.compact()?;
    let reclaimed = db.stats()?;
    assert_reclaimed(&full, &reclaimed);
    grown.overwrite(&db)?;
    db.sync()?;
    reopen_and_check(&grown, db, &store, opts)
}

/// Checks `grown` on `db`, closes it, reopens the store at `store` and
/// checks again: every acknowledged version survived, and the failed
/// write's outcome did not change at reopen.
fn reopen_and_check(grown: &Grown, db: Db, store: &Path, opts: Options) -> TestResult {
    grown.check(&db)?;
    let outcome = grown.failed_outcome(&db)?;
    db.close()?;
    let db = Db::open(store, opts)?;
    grown.check(&db)?;
    assert_eq!(
        grown.failed_outcome(&db)?,
        outcome,
        "the failed write changed at reopen"
    );
    Ok(())
}

#[test]
fn compaction_on_a_full_disk_needs_room_for_one_segments_copies_not_all() -> TestResult {
    let Some(fs) = tmpfs(16 << 20) else {
        return Ok(());
    };
    let filler = fs.path().join("filler");
    std::fs::write(&filler, vec![1u8; 2 << 20])?;
    let store = fs.path().join("store");
    let opts = small(true).compaction_garbage(None);
    let db = Db::open(&store, opts.clone())?;
    let mut grown = grow_and_overwrite(&db, 2);
    assert!(is_disk_full(&grown.error), "{:?}", grown.error);
    let full = db.stats()?;
    eprintln!(
        "full after {} keys: {} bytes on disk for {} live",
        grown.versions.len(),
        full.disk_bytes,
        full.live_record_bytes
    );
    // 2 MiB: more than the copies of one 1 MiB segment's live records, and
    // less than those of all the segments `compact` takes (every one with
    // garbage).
    assert!(full.live_record_bytes > 3 << 20, "{full:?}");
    std::fs::remove_file(&filler)?;
    let report = db.compact()?;
    let reclaimed = db.stats()?;
    eprintln!("{report:?}; then {} bytes on disk", reclaimed.disk_bytes);
    assert_reclaimed(&full, &reclaimed);
    grown.overwrite(&db)?;
    reopen_and_check(&grown, db, &store, opts)
}

// ------------------------------------------------------ file descriptors

const ENV_FD_CHILD: &str = "EMBERKV_FD_CHILD";
const ENV_FD_DIR: &str = "EMBERKV_FD_DIR";
/// The child's `ulimit -n`.
const FD_LIMIT: u32 = 48;
const EMFILE: i32 = 24;

fn is_out_of_fds(e: &Error) -> bool {
    matches!(e, Error::Io(io) if io.raw_os_error() == Some(EMFILE))
}

/// Re-runs this binary's test `child` in a child process, after the shell
/// command `limit` (a `ulimit`) and with the variables `env` set; returns
/// its stderr, failing on a failed child or one that did not print `done`.
fn run_child(
    limit: &str,
    child: &str,
    env: &[(&str, &OsStr)],
    done: &str,
) -> Result<String, Box<dyn std::error::Error>> {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("{limit} && exec \"$0\" \"$@\""))
        .arg(std::env::current_exe()?)
        .args([child, "--exact", "--nocapture", "--test-threads=1"])
        .envs(env.iter().copied())
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "child {child} failed: {stderr}");
    assert!(stderr.contains(done), "child {child} did not run: {stderr}");
    Ok(stderr)
}

/// Runs `fd_child` in `mode` on `dir` in a child process limited to
/// [`FD_LIMIT`] open files; returns its stderr, failing on a failed child.
fn run_fd_child(mode: &str, dir: &Path) -> Result<String, Box<dyn std::error::Error>> {
    run_child(
        &format!("ulimit -n {FD_LIMIT}"),
        "fd_child",
        &[(ENV_FD_CHILD, mode.as_ref()), (ENV_FD_DIR, dir.as_os_str())],
        &format!("child {mode} done"),
    )
}

/// Holds open files until dropped: the file descriptors a test takes away.
fn take_every_fd() -> Vec<File> {
    let mut held = Vec::new();
    loop {
        match File::open("/dev/null") {
            Ok(f) => held.push(f),
            Err(e) if e.raw_os_error() == Some(EMFILE) => return held,
            Err(e) => panic!("open /dev/null: {e}"),
        }
    }
}

/// The child half of the file-descriptor tests; does nothing in a normal
/// test run.
#[test]
fn fd_child() -> TestResult {
    let Ok(mode) = std::env::var(ENV_FD_CHILD) else {
        return Ok(());
    };
    let dir = PathBuf::from(std::env::var(ENV_FD_DIR)?);
    match mode.as_str() {
        "open-many" => {
            // Under a limit of 48 descriptors the store keeps at most 24
            // segments open (the shared default bound, the store alone in
            // its process), of
            // the 57 it has and as many more as it writes here.
            let db = Db::open(&dir, small(false).compaction_garbage(None))?;
            let read_all = |keys: u32| -> TestResult {
                for i in 0..keys {
                    assert_eq!(db.get(&key(i))?, Some(big_value(i)), "key {i}");
                }
                assert_eq!(db.get(&key(keys))?, None);
                Ok(())
            };
            let keys = (0..)
                .find(|&i| !matches!(db.contains_key(&key(i)), Ok(true)))
                .unwrap_or(0);
            read_all(keys)?;
            let before = segment_files(&dir)?.len();
            let mut more = keys;
            while segment_files(&dir)?.len() < 2 * before {
                db.insert(&key(more), &big_value(more))?;
                more += 1;
            }
            read_all(more)?;
            // The newest segment and the one opened last may pass the
            // bound.
            let open = db.stats()?.open_files;
            assert!(open <= FD_LIMIT as usize / 2 + 2, "{open} segments open");
            db.close()?;
            let db = Db::open(&dir, small(false).compaction_garbage(None))?;
            for i in 0..more {
                assert_eq!(
                    db.get(&key(i))?,
                    Some(big_value(i)),
                    "key {i} after the reopen"
                );
            }
            db.close()?;
            eprintln!(
                "{keys} keys read, {} more written and read back",
                more - keys
            );
        }
        "two-stores" => {
            // Two stores of 57 segments each, the process's bound of 24
            // descriptors shared between them.
            let opts = small(false).compaction_garbage(None);
            let stores = [
                Db::open(dir.join("a"), opts.clone())?,
                Db::open(dir.join("b"), opts.clone())?,
            ];
            let mut keys = [0, 0];
            for (db, keys) in stores.iter().zip(&mut keys) {
                *keys = (0..)
                    .find(|&i| !matches!(db.contains_key(&key(i)), Ok(true)))
                    .unwrap_or(0);
            }
            let read_all = |db: &Db, keys: u32| -> TestResult {
                for i in 0..keys {
                    assert_eq!(db.get(&key(i))?, Some(big_value(i)), "key {i}");
                }
                Ok(())
            };
            for (db, &keys) in stores.iter().zip(&keys) {
                read_all(db, keys)?;
            }
            // The second store's reads took the first store's descriptors,
            // all but its newest segment's, rather than its own back.
            let (first, second) = (stores[0].stats()?, stores[1].stats()?);
            assert!(
                first.open_files <= 2 && second.open_files >= FD_LIMIT as usize / 2 - 2,
                "{} and {} segments open",
                first.open_files,
                second.open_files
            );
            // Both grow, by turns, then are read back by turns.
            for _ in 0..keys[0] {
                for (db, keys) in stores.iter().zip(&mut keys) {
                    db.insert(&key(*keys), &big_value(*keys))?;
                    *keys += 1;
                }
            }
            for (db, &keys) in stores.iter().zip(&keys).chain(stores.iter().zip(&keys)) {
                read_all(db, keys)?;
            }
            // The newest segment and the one opened last, in each store,
            // may pass the bound.
            let open = stores[0].stats()?.open_files + stores[1].stats()?.open_files;
            assert!(open <= FD_LIMIT as usize / 2 + 4, "{open} segments open");
            for db in stores {
                db.close()?;
            }
            for (name, keys) in ["a", "b"].into_iter().zip(keys) {
                let db = Db::open(dir.join(name), opts.clone())?;
                read_all(&db, keys)?;
                db.close()?;
            }
            eprintln!("{} and {} keys read back", keys[0], keys[1]);
        }
        "check" => {
            // A sound store checked again and again while another thread
            // takes every free descriptor and gives them back, by turns:
            // short of descriptors, the check must fail, not list problems.
            let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let hog = {
                let stop = std::sync::Arc::clone(&stop);
                std::thread::spawn(move || {
                    let mut turn = 0u64;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        turn += 1;
                        let held = take_every_fd();
                        std::thread::sleep(std::time::Duration::from_millis(1));
                        drop(held);
                        std::thread::sleep(std::time::Duration::from_millis(10 + turn % 7 * 5));
                    }
                })
            };
            let (mut out_of_fds, mut sound) = (0, 0);
            let mut unsound = None;
            for _ in 0..100 {
                match emberkv::check(&dir) {
                    Err(e) if is_out_of_fds(&e) => out_of_fds += 1,
                    Err(e) => panic!("{e}"),
                    Ok(report) if report.is_sound() => sound += 1,
                    Ok(report) => unsound = Some(report),
                }
            }
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            hog.join().expect("the descriptor hog");
            eprintln!("{out_of_fds} checks out of descriptors, {sound} sound");
            if let Some(report) = unsound {
                panic!("a sound store checked short of descriptors: {report}");
            }
        }
        "write" => {
            let db = Db::open(&dir, small(true).compaction_garbage(None))?;
            let held = take_every_fd();
            let (acked, err) = fill(&db, 0);
            eprintln!("out of file descriptors after {acked} writes: {err}");
            assert!(is_out_of_fds(&err), "{err:?}");
            check(&db, acked, 0)?;
            drop(held);
            db.insert(b"after", b"descriptors were freed")?;
            check(&db, acked, 0)?;
            db.close()?;
            let db = Db::open(&dir, small(true))?;
            check(&db, acked, 0)?;
            assert_eq!(
                db.get(b"after")?.as_deref(),
                Some(&b"descriptors were freed"[..])
            );
        }
        other => panic!("unknown child mode {other}"),
    }
    eprintln!("child {mode} done");
    Ok(())
}

fn big_value(i: u32) -> Vec<u8> {
    vec![i as u8; 200 << 10]
}

/// Fills a store in `dir` with values of 200 KiB (without compaction)
/// until it has more segments than [`FD_LIMIT`] plus 8, and closes it;
/// returns the number of keys, `key(0)` up.
fn more_segments_than_descriptors(dir: &Path) -> Result<u32, Box<dyn std::error::Error>> {
    let db = Db::open(dir, small(false).compaction_garbage(None))?;
    let mut keys = 0;
    while segment_files(dir)?.len() <= FD_LIMIT as usize + 8 {
        db.insert(&key(keys), &big_value(keys))?;
        keys += 1;
    }
    db.close()?;
    Ok(keys)
}

/// A store of more segments than the process may open files: it opens
/// (from its checkpoint, and replaying every segment), reads every key,
/// grows to twice as many segments and reopens, keeping at most half the
/// limit open. Until 2026-12-07 every segment stayed open, and the open
/// failed with `EMFILE`.
#[test]
fn a_store_with_more_segments_than_file_descriptors_opens_reads_and_grows() -> TestResult {
    let dir = tempfile::tempdir()?;
    let opts = small(false).compaction_garbage(None);
    let keys = more_segments_than_descriptors(dir.path())?;
    // From the checkpoint, then replaying every segment.
    eprintln!("{}", run_fd_child("open-many", dir.path())?);
    std::fs::remove_file(dir.path().join("CHECKPOINT"))?;
    eprintln!("{}", run_fd_child("open-many", dir.path())?);
    // Nothing was lost or damaged.
    let db = Db::open(dir.path(), opts)?;
    for i in 0..keys {
        assert_eq!(db.get(&key(i))?, Some(big_value(i)), "key {i}");
    }
    db.close()?;
    let report = emberkv::check(dir.path())?;
    assert!(report.is_sound(), "{report}");
    Ok(())
}

/// Two stores of more segments than the process may open files, both at
/// the default bound, which they share: both open, read every key, grow by
/// turns and read back, holding at most half the limit between them, plus
/// each store's newest segment and the one it opened last.
/// Until 2026-12-07 each store's default bound was half the limit of its
/// own, and the second store's reads failed with `EMFILE`.
#[test]
fn two_stores_at_the_default_bound_share_it() -> TestResult {
    let dir = tempfile::tempdir()?;
    for name in ["a", "b"] {
        more_segments_than_descriptors(&dir.path().join(name))?;
    }
    eprintln!("{}", run_fd_child("two-stores", dir.path())?);
    for name in ["a", "b"] {
        let report = emberkv::check(dir.path().join(name))?;
        assert!(report.is_sound(), "{report}");
    }
    Ok(())
}

/// Found by an attack helper: `check` of a sound store run short of
/// descriptors returned a report listing "Too many open files" as a
/// problem of the store, instead of the error.
#[test]
fn a_check_short_of_descriptors_fails_instead_of_reporting_problems() -> TestResult {
    let dir = tempfile::tempdir()?;
    more_segments_than_descriptors(dir.path())?;
    eprintln!("{}", run_fd_child("check", dir.path())?);
    Ok(())
}

#[test]
fn running_out_of_file_descriptors_fails_writes_cleanly_until_some_are_freed() -> TestResult {
    let dir = tempfile::tempdir()?;
    eprintln!("{}", run_fd_child("write", dir.path())?);
    Ok(())
}

// ---------------------------------------------------------- size limits

#[test]
fn the_largest_key_with_the_largest_value_fits_and_one_byte_more_writes_nothing() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), Options::default())?;
    let key = vec![0xA7u8; MAX_KEY_BYTES];
    let mut value = vec![0x5Au8; MAX_VALUE_BYTES];
    value[0] = 1;
    value[MAX_VALUE_BYTES - 1] = 2;
    db.insert(&key, &value)?;
    let before = db.stats()?.records_appended;
    let long_key = vec![0xA7u8; MAX_KEY_BYTES + 1];
    let mut long_value = value.clone();
    long_value.push(1);
    assert!(matches!(
        db.insert(&key, &long_value),
        Err(Error::ValueTooLarge { len, max }) if len == MAX_VALUE_BYTES + 1 && max == MAX_VALUE_BYTES
    ));
    assert!(matches!(
        db.insert(&long_key, b""),
        Err(Error::KeyTooLarge { .. })
    ));
    assert_eq!(
        db.stats()?.records_appended,
        before,
        "a rejected write was appended"
    );
    assert_eq!(db.len(), 1);
    assert!(db.get(&key)? == Some(value.clone()));
    db.close()?;
    let db = Db::open(dir.path(), Options::default())?;
    assert_eq!(db.len(), 1);
    assert!(db.get(&key)? == Some(value));
    Ok(())
}

/// Found by a helper's attack: a batch whose oversized value a later
/// operation on the same key overrode was applied, though its docs refuse
/// a batch with any oversized operation.
#[test]
fn a_batch_with_an_oversized_value_is_refused_even_when_overridden() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), Options::default())?;
    let mut batch = WriteBatch::new();
    batch.insert(b"k", &vec![0; MAX_VALUE_BYTES + 1]);
    batch.insert(b"k", b"small");
    assert!(value_too_large(db.apply_batch(&batch), MAX_VALUE_BYTES));
    let mut batch = WriteBatch::new();
    batch.insert(b"k", &vec![0; MAX_VALUE_BYTES + 1]);
    batch.remove(b"k");
    assert!(value_too_large(db.apply_batch(&batch), MAX_VALUE_BYTES));
    assert_eq!(db.get(b"k")?, None);
    assert_eq!(db.stats()?.records_appended, 0);
    Ok(())
}

fn value_too_large<T>(r: emberkv::Result<T>, max: usize) -> bool {
    matches!(r, Err(Error::ValueTooLarge { len, max: m }) if len == max + 1 && m == max)
}

fn key_too_large<T>(r: emberkv::Result<T>) -> bool {
    matches!(
        r,
        Err(Error::KeyTooLarge { len, max }) if len == MAX_KEY_BYTES + 1 && max == MAX_KEY_BYTES
    )
}

#[test]
fn every_write_path_takes_the_segment_bound_exactly_and_rejects_one_byte_more() -> TestResult {
    let dir = tempfile::tempdir()?;
    let opts = Options::default().segment_bytes(1 << 20);
    let db = Db::open(dir.path(), opts.clone())?;
    let key = vec![b'k'; MAX_KEY_BYTES];
    // What one 1 MiB segment holds with the largest key.
    let Err(Error::ValueTooLarge { max, .. }) = db.insert(&key, &vec![0; 1 << 20]) else {
        panic!("a 1 MiB value fit in a 1 MiB segment");
    };
    let fits = vec![1u8; max];
    let over = vec![2u8; max + 1];
    let too_large = |r| value_too_large(r, max);
    let long_key = vec![b'k'; MAX_KEY_BYTES + 1];
    db.insert(&key, b"first")?;
    let before = db.stats()?.records_appended;
    assert!(too_large(db.insert(&key, &over)));
    assert!(too_large(db.insert_with_ttl(
        &key,
        &over,
        Duration::from_secs(60)
    )));
    assert!(value_too_large(
        db.update(&key, |_| Some(over.clone())),
        max
    ));
    assert!(value_too_large(
        db.compare_and_swap(&key, Some(b"first"), Some(&over)),
        max
    ));
    let mut batch = WriteBatch::new();
    batch.insert(b"small", b"x").insert(&key, &over);
    assert!(too_large(db.apply_batch(&batch)));
    assert!(key_too_large(db.insert(&long_key, b"")));
    assert!(key_too_large(db.update(&long_key, |_| Some(Vec::new()))));
    assert!(key_too_large(db.compare_and_swap(
        &long_key,
        None,
        Some(b"")
    )));
    assert!(key_too_large(db.expire(&long_key, Duration::from_secs(1))));
    let mut batch = WriteBatch::new();
    batch.insert(b"small", b"x").remove(&long_key);
    assert!(key_too_large(db.apply_batch(&batch)));
    assert_eq!(
        db.stats()?.records_appended,
        before,
        "a rejected write was appended"
    );
    assert_eq!(db.get(&key)?.as_deref(), Some(&b"first"[..]));
    assert_eq!(db.get(b"small")?, None);

    assert!(db.compare_and_swap(&key, Some(b"first"), Some(&fits))?);
    assert_eq!(db.update(&key, |_| Some(fits.clone()))?, Some(fits.clone()));
    db.insert_with_ttl(&key, &fits, Duration::from_secs(3600))?;
    let mut batch = WriteBatch::new();
    batch.insert(&key, &fits);
    db.apply_batch(&batch)?;
    assert!(db.get(&key)? == Some(fits.clone()));
    db.close()?;
    let db = Db::open(dir.path(), opts)?;
    assert_eq!(db.len(), 1);
    assert!(db.get(&key)? == Some(fits));
    Ok(())
}

// ------------------------------------------------------------- memory

const ENV_MEMORY_CHILD: &str = "EMBERKV_MEMORY_CHILD";

#[test]
fn tables_too_large_to_allocate_are_a_clear_error() -> TestResult {
    // Found by an attack on the read cache: the largest valid
    // `read_cache_bytes` (2^40) allocated 40 GiB of address tables at open,
    // and under `ulimit -v` the process aborted. Found by an attack on
    // 2026-12-07: so did the largest valid `key_capacity` (2^34, 172 GB
    // of index tables), whose shards' tables were allocated one by one.
    // A child with 4 GiB of address space opens a store with each.
    let dir = tempfile::tempdir()?;
    run_child(
        "ulimit -v 4194304",
        "memory_child",
        &[(ENV_MEMORY_CHILD, dir.path().as_os_str())],
        "memory child done",
    )?;
    Ok(())
}

const ENV_ADDRESS_CHILD: &str = "EMBERKV_ADDRESS_CHILD";

/// Regression (an attack helper, 2026-12-07): under `ulimit -v` of 300 to
/// 500 MB a store opened, and its first insert (or its flusher) aborted
/// the process: the segment the open recovered was mapped first (256 MiB
/// of address space), the hot tier's map of 262 MiB then failed, and
/// pages took buffers of their own that could not be had. The hot tier's
/// map is now made before any segment's, and the flusher's stock of
/// buffers gives up where memory is short.
#[test]
fn a_store_fills_and_reopens_in_400_mb_of_address_space() -> TestResult {
    let dir = tempfile::tempdir()?;
    run_child(
        "ulimit -v 400000",
        "address_child",
        &[(ENV_ADDRESS_CHILD, dir.path().as_os_str())],
        "address child done",
    )?;
    Ok(())
}

/// The child half of the address-space test; does nothing in a normal
/// test run.
#[test]
fn address_child() -> TestResult {
    let Ok(dir) = std::env::var(ENV_ADDRESS_CHILD) else {
        return Ok(());
    };
    let store = Path::new(&dir).join("store");
    let db = Db::open(&store, Options::default())?;
    db.insert(b"first", b"v")?;
    db.close()?;
    // Reopened: recovery maps the segment before the log is made.
    let db = Db::open(&store, Options::default())?;
    for k in 0..20_000u32 {
        db.insert(&k.to_le_bytes(), &[7; 4_000])?;
    }
    db.close()?;
    let db = Db::open(&store, Options::default())?;
    assert_eq!(db.len(), 20_001);
    assert_eq!(db.get(&19_999u32.to_le_bytes())?, Some(vec![7; 4_000]));
    eprintln!("address child done");
    Ok(())
}

/// The child half of the memory test; does nothing in a normal test run.
#[test]
fn memory_child() -> TestResult {
    let Ok(dir) = std::env::var(ENV_MEMORY_CHILD) else {
        return Ok(());
    };
    let options = Options::default().read_cache_bytes(1 << 40);
    match Db::open(&dir, options) {
        Err(Error::InvalidOptions(msg)) => eprintln!("open: {msg}"),
        Err(e) => panic!("open failed otherwise: {e:?}"),
        Ok(_) => panic!("open allocated 40 GiB in 4 GiB of address space"),
    }
    match Db::open(&dir, Options::default().key_capacity(1 << 34)) {
        Err(Error::InvalidOptions(msg)) => eprintln!("open: {msg}"),
        Err(e) => panic!("open failed otherwise: {e:?}"),
        Ok(_) => panic!("open allocated 172 GB in 4 GiB of address space"),
    }
    let db = Db::open(&dir, Options::default().read_cache_bytes(1 << 20))?;
    db.insert(b"k", b"v")?;
    eprintln!("memory child done");
    Ok(())
}
