//! SIGKILL during write batches and atomic updates: after a crash a batch
//! is either wholly in the store or not at all, and with `sync_writes`
//! every acknowledged batch and increment survives.
//!
//! The test re-runs its own binary as the writer process (the test
//! `batch_crash_child`, active only when `EMBERKV_BATCH_CHILD` is set).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use emberkv::{Db, Options, WriteBatch};

const CHILD_ENV: &str = "EMBERKV_BATCH_CHILD";

fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Batch number `n`: how many keys it inserts, and each value.
fn batch_len(n: u64) -> u64 {
    1 + splitmix64(n) % 60
}

fn batch_key(n: u64, i: u64) -> Vec<u8> {
    format!("b{n}:{i}").into_bytes()
}

fn batch_value(n: u64, i: u64) -> Vec<u8> {
    let mut v = format!("batch {n} item {i}|").into_bytes();
    v.resize(10 + (splitmix64(n ^ i << 32) % 20_000) as usize, b'=');
    v
}

fn options(sync: bool) -> Options {
    Options::default()
        .sync_writes(sync)
        .flush_interval(Duration::from_millis(5))
        .segment_bytes(1 << 20)
        .hot_bytes(4 << 20)
}

/// The largest number acknowledged in an ack file (writers append after
/// each acknowledged operation; a torn last line is ignored). Two threads
/// may append out of order, hence the largest rather than the last.
fn last_ack(path: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut lines: Vec<&str> = text.split('\n').collect();
    lines.pop(); // empty, or a torn last line
    lines.iter().map(|l| l.parse().unwrap()).max()
}

fn append_ack(file: &mut std::fs::File, n: u64) {
    file.write_all(format!("{n}\n").as_bytes()).unwrap();
}

#[test]
fn batch_crash_child() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let dir = PathBuf::from(dir);
    let sync = std::env::var("EMBERKV_BATCH_SYNC").is_ok();
    let db = Db::open(dir.join("store"), options(sync)).unwrap();
    let open_acks = |name: &str| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join(name))
            .unwrap()
    };
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut acks = open_acks("batches");
            let mut n = last_ack(&dir.join("batches")).map_or(0, |n| n + 1);
            loop {
                let mut batch = WriteBatch::new();
                for i in 0..batch_len(n) {
                    batch.insert(&batch_key(n, i), &batch_value(n, i));
                }
                db.apply_batch(&batch).unwrap();
                append_ack(&mut acks, n);
                n += 1;
            }
        });
        for _ in 0..2 {
            s.spawn(|| {
                let mut acks = open_acks("counter");
                loop {
                    let new = db
                        .update(b"counter", |old| {
                            let n = old.map_or(0, |v| u64::from_le_bytes(v.try_into().unwrap()));
                            Some((n + 1).to_le_bytes().to_vec())
                        })
                        .unwrap()
                        .unwrap();
                    append_ack(&mut acks, u64::from_le_bytes(new.try_into().unwrap()));
                }
            });
        }
    });
}

fn run_cycles(sync: bool) {
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut seed = if sync { 11 } else { 29 };
    let mut batches_seen = 0;
    for cycle in 0..8 {
        let mut child = Command::new(&exe);
        child
            .args([
                "batch_crash_child",
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        if sync {
            child.env("EMBERKV_BATCH_SYNC", "1");
        }
        let mut child = child.spawn().unwrap();
        seed = splitmix64(seed);
        std::thread::sleep(Duration::from_millis(200 + seed % 500));
        child.kill().unwrap();
        child.wait().unwrap();
        // What the kill left checks sound (a batch cut by the kill is part
        // of a torn tail, no problem).
        if dir.path().join("store").join("emberkv.meta").exists() {
            let report = emberkv::check(dir.path().join("store")).unwrap();
            assert!(report.is_sound(), "cycle {cycle}, after the kill: {report}");
        }

        let db = Db::open(dir.path().join("store"), options(sync)).unwrap();
        let acked = last_ack(&dir.path().join("batches"));
        // Every batch up to two past the last acknowledged one: whole or absent.
        let upto = acked.map_or(2, |n| n + 2);
        for n in 0..=upto {
            let present: Vec<bool> = (0..batch_len(n))
                .map(|i| {
                    let v = db.get(&batch_key(n, i)).unwrap();
                    if let Some(v) = &v {
                        assert!(
                            v == &batch_value(n, i),
                            "cycle {cycle}: batch {n} item {i} holds a wrong value"
                        );
                    }
                    v.is_some()
                })
                .collect();
            let whole = present.iter().all(|&p| p);
            let none = present.iter().all(|&p| !p);
            assert!(
                whole || none,
                "cycle {cycle}: batch {n} is partly applied: {present:?}"
            );
            if sync && acked.is_some_and(|a| n <= a) {
                assert!(whole, "cycle {cycle}: acknowledged batch {n} was lost");
            }
            if whole {
                batches_seen = batches_seen.max(n);
            }
        }
        let counter = db
            .get(b"counter")
            .unwrap()
            .map_or(0, |v| u64::from_le_bytes(v.try_into().unwrap()));
        if sync && let Some(acked) = last_ack(&dir.path().join("counter")) {
            // Two updaters: at most two increments were in flight.
            assert!(
                counter >= acked && counter <= acked + 2,
                "cycle {cycle}: counter {counter}, last acknowledged {acked}"
            );
        }
        db.close().unwrap();
    }
    assert!(
        batches_seen > 10,
        "only {batches_seen} batches survived in all"
    );
}

#[test]
fn sync_batches_and_updates_survive_sigkill_whole() {
    run_cycles(true);
}

#[test]
fn default_mode_batches_are_all_or_nothing_after_sigkill() {
    run_cycles(false);
}

/// A torn write of a batch (the newest segment cut anywhere inside the
/// batch's records, as a crash mid-write leaves it) drops the whole batch.
#[test]
fn a_batch_cut_anywhere_is_dropped_whole() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let opts = Options::default().compaction_garbage(None);
    let db = Db::open(&store, opts.clone()).unwrap();
    db.insert(b"before", b"kept").unwrap();
    // Closed, so that the file holds just its records (an open store's
    // active segment is allocated ahead of them).
    db.close().unwrap();
    let seg = store.join("000000000000.seg");
    let batch_start = std::fs::metadata(&seg).unwrap().len();
    let db = Db::open(&store, opts.clone()).unwrap();
    let mut batch = WriteBatch::new();
    for i in 0..20 {
        batch.insert(&batch_key(7, i), &batch_value(7, i));
    }
    db.apply_batch(&batch).unwrap();
    db.close().unwrap();
    let _ = std::fs::remove_file(store.join("CHECKPOINT"));
    let mut whole = std::fs::read(&seg).unwrap();
    // The close marked the whole file durable; a crash mid-write leaves
    // the durable mark no further than the batch's start (here: there),
    // or recovery takes the cut for damage to durable bytes and refuses
    // to open. A slot: the length (u32) and the CRC32C of the segment
    // number and the length.
    let len = u32::try_from(batch_start).unwrap().to_le_bytes();
    let crc = crc_fast::crc32_iscsi(&[&0u64.to_le_bytes()[..], &len].concat());
    for slot in [40, 48] {
        whole[slot..slot + 4].copy_from_slice(&len);
        whole[slot + 4..slot + 8].copy_from_slice(&crc.to_le_bytes());
    }
    let batch_end = whole.len() as u64;
    let step = ((batch_end - batch_start) / 97).max(1);
    for cut in (batch_start + 1..batch_end).step_by(step as usize) {
        std::fs::write(&seg, &whole[..cut as usize]).unwrap();
        let db = Db::open(&store, opts.clone()).unwrap();
        assert_eq!(db.get(b"before").unwrap().as_deref(), Some(&b"kept"[..]));
        for i in 0..20 {
            assert_eq!(
                db.get(&batch_key(7, i)).unwrap(),
                None,
                "cut at {cut}: item {i}"
            );
        }
        drop(db);
        let _ = std::fs::remove_file(store.join("CHECKPOINT"));
    }
    std::fs::write(&seg, &whole).unwrap();
    let db = Db::open(&store, opts).unwrap();
    assert_eq!(db.get(&batch_key(7, 19)).unwrap(), Some(batch_value(7, 19)));
}

/// Salvage never keeps part of a batch: damage to one record in its middle
/// leaves the whole batch out, and keeps the records before and after it.
#[test]
fn salvage_leaves_out_a_damaged_batch_whole() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let db = Db::open(&store, Options::default().compaction_garbage(None)).unwrap();
    db.insert(b"before", b"kept").unwrap();
    let mut batch = WriteBatch::new();
    for i in 0..20 {
        batch.insert(&batch_key(7, i), &batch_value(7, i));
    }
    db.apply_batch(&batch).unwrap();
    db.insert(b"after", b"kept too").unwrap();
    db.close().unwrap();
    let seg = store.join("000000000000.seg");
    let mut bytes = std::fs::read(&seg).unwrap();
    let needle = batch_value(7, 10);
    let at = bytes
        .windows(needle.len())
        .position(|w| w == needle)
        .unwrap();
    bytes[at] ^= 0x01;
    std::fs::write(&seg, &bytes).unwrap();
    let mut got = std::collections::BTreeMap::new();
    let report = emberkv::salvage(&store, |k, v, _| {
        got.insert(k.to_vec(), v.to_vec());
        Ok(())
    })
    .unwrap();
    let keys: Vec<&[u8]> = got.keys().map(Vec::as_slice).collect();
    assert_eq!(keys, [&b"after"[..], b"before"], "{report:?}");
    assert_eq!(report.left_out.len(), 19, "{report:?}");
    assert_eq!(report.damaged.len(), 1, "{report:?}");
}
