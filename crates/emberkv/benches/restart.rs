//! How long `Db::open` takes on a store of many keys: issue 4's fast
//! restart (10 million keys reopened in under 2 s on the project's
//! machine). A benchmark, not a test: it prints what it measured and
//! asserts nothing about time.
//!
//! ```sh
//! cargo bench -p emberkv --bench restart -- --keys 10000000
//! ```
//!
//! It fills a fresh store with `--keys` keys of 16 bytes and values of
//! `--value-bytes` bytes from `--threads` writers, closes it, and times
//! three opens, each followed by a check that a sample of the keys reads
//! back with the value written:
//!
//! 1. after a clean close, which writes an index checkpoint: nothing to
//!    replay;
//! 2. after a SIGKILL: a child process reopens the store, overwrites
//!    `--crash-writes` keys, syncs and is killed while idle, so open
//!    restores the last checkpoint and replays the log written after it
//!    (500,000 records of 132 bytes by default, about 63 MiB: just under
//!    the maintenance thread's 64 MiB checkpoint interval, so about the
//!    most a crash leaves to replay; the synced writes leave no torn
//!    record, so this times the replay, not the repair of a torn tail);
//! 3. with the checkpoint file deleted: the full replay of the log that a
//!    stale or damaged checkpoint falls back to.
//!
//! The OS page cache is not dropped between the steps: the opens read a
//! warm cache. Run without `--bench` (as `cargo test --benches` does), it
//! takes a smoke-sized store of at most 10,000 keys.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use emberkv::{Db, Options};

/// Times `Db::open` of a store of many keys after a clean close, after a
/// SIGKILL, and with the checkpoint deleted. Arguments other than these
/// flags are ignored, but unknown flags (`-- --nocapture`) are rejected.
#[derive(Parser)]
struct Args {
    /// Keys in the store.
    #[arg(long, default_value_t = 10_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    keys: u64,
    /// Bytes of each value (at least 1: the two values written under a key
    /// differ in their first byte).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
    value_bytes: u64,
    /// Writer threads of the fill.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..))]
    threads: u64,
    /// Keys the killed child overwrites before the SIGKILL.
    #[arg(long, default_value_t = 500_000)]
    crash_writes: u64,
    /// Open with the default `key_capacity` (65,536) instead of presizing
    /// the index for `--keys`.
    #[arg(long)]
    default_capacity: bool,
    /// Directory to create the store's temporary directory in (the
    /// system's temporary directory by default); the temporary directory
    /// is removed at the end.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Internal: run as the child that writes and waits to be killed.
    #[arg(long, hide = true)]
    child: Option<PathBuf>,
    /// Passed by `cargo bench`; without it the store is smoke-sized.
    #[arg(long, hide = true)]
    bench: bool,
    /// Filters `cargo bench` passes on to every benchmark; ignored.
    #[arg(hide = true)]
    _filters: Vec<String>,
}

/// Most keys of a run without `--bench` (`cargo test --benches`).
const SMOKE_KEYS: u64 = 10_000;

/// The key of number `i`: 16 bytes.
fn key(i: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(b"restart:");
    k[8..].copy_from_slice(&i.to_be_bytes());
    k
}

/// The value of key `i` in round `round`, `len` bytes long.
fn value(i: u64, round: u64, len: u64) -> Vec<u8> {
    let seed = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ round;
    (0..len as usize)
        .map(|b| (seed >> ((b % 8) * 8)) as u8 ^ b as u8)
        .collect()
}

/// The options of every open: the index presized for the keys, as a user
/// who knows the store's size would, unless `--default-capacity` (then a
/// fill and a full replay also pay for the index's growth).
fn options(args: &Args) -> Options {
    if args.default_capacity {
        Options::default()
    } else {
        Options::default().key_capacity(args.keys as usize)
    }
}

/// Checks that 10,000 keys spread over the store, and the keys on either
/// side of `overwritten_from` and the last key, read back: keys from
/// `overwritten_from` on with the child's value, the others with the
/// fill's.
fn check(db: &Db, args: &Args, overwritten_from: u64) {
    let step = (args.keys / 10_000).max(1);
    let ends = [
        overwritten_from.saturating_sub(1),
        overwritten_from,
        args.keys - 1,
    ];
    let sample = (0..args.keys).step_by(step as usize);
    for i in sample.chain(ends.into_iter().filter(|&i| i < args.keys)) {
        let round = u64::from(i >= overwritten_from);
        let got = db.get(&key(i)).expect("get");
        assert_eq!(got, Some(value(i, round, args.value_bytes)), "key {i}");
    }
}

/// Opens the store at `dir`, times the open, and checks a sample of keys
/// (see [`check`]).
fn timed_open(dir: &Path, args: &Args, overwritten_from: u64, what: &str) -> Db {
    let started = Instant::now();
    let db = Db::open(dir, options(args)).expect("open");
    let opened = started.elapsed();
    check(&db, args, overwritten_from);
    println!(
        "{what}: open {:.3} s ({} keys, {:.1} MiB of index)",
        opened.as_secs_f64(),
        db.len(),
        db.stats().expect("stats").index_bytes as f64 / (1 << 20) as f64
    );
    db
}

/// The first of the keys the child overwrites (the last `--crash-writes`).
fn overwritten_from(args: &Args) -> u64 {
    args.keys.saturating_sub(args.crash_writes)
}

/// The child: reopens the store, overwrites the last `--crash-writes` keys
/// with a second value, syncs, says so, and waits to be killed.
fn child(dir: &Path, args: &Args) {
    let db = Db::open(dir, options(args)).expect("child open");
    for i in overwritten_from(args)..args.keys {
        db.insert(&key(i), &value(i, 1, args.value_bytes))
            .expect("child insert");
    }
    db.sync().expect("child sync");
    println!("written");
    std::io::stdout().flush().expect("flush");
    loop {
        std::thread::sleep(Duration::from_secs(60));
    }
}

fn main() {
    let mut args = Args::parse();
    if !args.bench {
        args.keys = args.keys.min(SMOKE_KEYS);
        args.crash_writes = args.crash_writes.min(args.keys / 2);
    }
    if let Some(dir) = &args.child {
        return child(dir, &args);
    }
    let temp = tempfile::tempdir_in(args.dir.clone().unwrap_or_else(std::env::temp_dir))
        .expect("temporary directory");
    let dir = temp.path().join("store");

    let started = Instant::now();
    let db = Db::open(&dir, options(&args)).expect("open");
    std::thread::scope(|s| {
        for t in 0..args.threads {
            let (db, args) = (&db, &args);
            s.spawn(move || {
                for i in (t..args.keys).step_by(args.threads as usize) {
                    db.insert(&key(i), &value(i, 0, args.value_bytes))
                        .expect("insert");
                }
            });
        }
    });
    db.close().expect("close");
    println!(
        "filled {} keys of 16 B with {} B values in {:.1} s",
        args.keys,
        args.value_bytes,
        started.elapsed().as_secs_f64()
    );

    timed_open(&dir, &args, args.keys, "1. after a clean close")
        .close()
        .expect("close");

    let mut kid = Command::new(std::env::current_exe().expect("own path"))
        .arg("--child")
        .arg(&dir)
        .arg("--bench")
        .args(["--keys", &args.keys.to_string()])
        .args(["--value-bytes", &args.value_bytes.to_string()])
        .args(["--crash-writes", &args.crash_writes.to_string()])
        .args(args.default_capacity.then_some("--default-capacity"))
        .stdout(Stdio::piped())
        .spawn()
        .expect("child");
    let mut line = String::new();
    BufReader::new(kid.stdout.take().expect("child stdout"))
        .read_line(&mut line)
        .expect("child output");
    assert_eq!(line.trim(), "written", "the child stopped early");
    kid.kill().expect("SIGKILL");
    kid.wait().expect("reap");
    // The child's overwrites were synced before it said so.
    let first = overwritten_from(&args);
    let what = format!(
        "2. after a SIGKILL, {} keys overwritten since the last open",
        args.keys - first
    );
    timed_open(&dir, &args, first, &what)
        .close()
        .expect("close");

    std::fs::remove_file(dir.join("CHECKPOINT")).expect("remove the checkpoint");
    timed_open(
        &dir,
        &args,
        first,
        "3. with the checkpoint deleted (full replay)",
    )
    .close()
    .expect("close");
}
