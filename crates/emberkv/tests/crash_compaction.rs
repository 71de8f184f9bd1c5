//! SIGKILL during compaction: with `sync_writes`, nothing acknowledged is
//! lost and no removed key comes back, wherever the kill lands (copying,
//! fdatasync, manifest update, file deletion).
//!
//! The test re-runs its own binary as the writer process (the test
//! `compaction_crash_child`, active only when `EMBERKV_COMPACTION_CHILD` is
//! set), kills it with SIGKILL at a random moment, reopens the store and
//! checks it against the operations the child acknowledged.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use emberkv::{Compression, Db, Options};

const WRITERS: u64 = 3;
const KEYS_PER_WRITER: u64 = 150;
const CHILD_ENV: &str = "EMBERKV_COMPACTION_CHILD";
/// Set in the child's environment: compaction is left to the maintenance
/// thread, held to a tight space bound (greedy passes, writers throttled),
/// instead of a thread calling `Db::compact`.
const BOUND_ENV: &str = "EMBERKV_COMPACTION_BOUND";

fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Operation number `seq` of writer `w`: deterministic, so the parent can
/// recompute the one a killed writer had in flight.
#[derive(PartialEq)]
enum Op {
    Insert(Vec<u8>, Vec<u8>),
    Remove(Vec<u8>),
}

/// A short description: the kind, the key and the value's head.
impl std::fmt::Debug for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Op::Insert(k, v) => write!(
                f,
                "insert {} = {}..",
                String::from_utf8_lossy(k),
                String::from_utf8_lossy(&v[..v.len().min(24)])
            ),
            Op::Remove(k) => write!(f, "remove {}", String::from_utf8_lossy(k)),
        }
    }
}

fn op(w: u64, seq: u64) -> Op {
    let r = splitmix64(w << 40 ^ seq);
    let key = format!("w{w}:k{}", r % KEYS_PER_WRITER).into_bytes();
    if (r >> 20).is_multiple_of(5) {
        Op::Remove(key)
    } else {
        let mut value = format!("{}|{seq}|", String::from_utf8_lossy(&key)).into_bytes();
        value.resize(100 + ((r >> 40) % 3000) as usize, b'#');
        Op::Insert(key, value)
    }
}

fn options() -> Options {
    Options::default()
        .sync_writes(true)
        .segment_bytes(1 << 20)
        .hot_bytes(4 << 20)
        // The copies are compressed, so kills land mid-compression too.
        .compression(Compression::Zstd { level: 1 })
}

fn ack_path(dir: &Path, w: u64) -> PathBuf {
    dir.join(format!("acks-{w}"))
}

/// Sequence numbers a writer acknowledged (a torn last line is ignored).
fn acked(dir: &Path, w: u64) -> Vec<u64> {
    let text = std::fs::read_to_string(ack_path(dir, w)).unwrap_or_default();
    let mut lines: Vec<&str> = text.split('\n').collect();
    lines.pop(); // after the last '\n': empty, or a torn line
    lines.iter().map(|l| l.parse().unwrap()).collect()
}

#[test]
fn compaction_crash_child() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let dir = PathBuf::from(dir);
    let store = dir.join("store");
    let bound = std::env::var(BOUND_ENV).ok();
    let opts = match &bound {
        // No segment is wholly garbage (each has its header): only the
        // bound's greedy passes compact.
        Some(bound) => options()
            .compaction_garbage(Some(1.0))
            .max_space_amplification(bound.parse().unwrap()),
        None => options().compaction_garbage(Some(0.2)),
    };
    let db = Db::open(&store, opts).unwrap();
    std::thread::scope(|s| {
        for w in 0..WRITERS {
            let (db, dir) = (&db, &dir);
            s.spawn(move || {
                let mut acks = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(ack_path(dir, w))
                    .unwrap();
                let mut seq = acked(dir, w).last().map_or(0, |s| s + 1);
                loop {
                    match op(w, seq) {
                        Op::Insert(k, v) => db.insert(&k, &v).unwrap(),
                        Op::Remove(k) => {
                            db.remove(&k).unwrap();
                        }
                    }
                    acks.write_all(format!("{seq}\n").as_bytes()).unwrap();
                    seq += 1;
                }
            });
        }
        if bound.is_none() {
            s.spawn(|| {
                loop {
                    db.compact().unwrap();
                }
            });
        }
    });
}

/// Checks the reopened store against the acknowledged operations.
fn verify(dir: &Path, db: &Db) {
    for w in 0..WRITERS {
        let seqs = acked(dir, w);
        let in_flight = op(w, seqs.last().map_or(0, |s| s + 1));
        let mut last: HashMap<Vec<u8>, Op> = HashMap::new();
        for &seq in &seqs {
            let o = op(w, seq);
            let key = match &o {
                Op::Insert(k, _) | Op::Remove(k) => k.clone(),
            };
            last.insert(key, o);
        }
        for k in 0..KEYS_PER_WRITER {
            let key = format!("w{w}:k{k}").into_bytes();
            let found = db.get(&key).unwrap();
            let matches = |o: &Op| match (o, &found) {
                (Op::Insert(ok, v), Some(f)) => *ok == key && v == f,
                (Op::Remove(ok), None) => *ok == key,
                _ => false,
            };
            let ok = match last.get(&key) {
                Some(o) => matches(o) || matches(&in_flight),
                None => found.is_none() || matches(&in_flight),
            };
            assert!(
                ok,
                "writer {w} key {k}: found {:?}, last acknowledged {:?}, in flight {:?}",
                found.map(|v| String::from_utf8_lossy(&v[..v.len().min(24)]).into_owned()),
                last.get(&key),
                in_flight
            );
        }
    }
}

#[test]
fn sigkill_during_compaction_loses_nothing_and_resurrects_nothing() {
    kill_and_verify(None, 0x00C0_FFEE, 300..1_000);
}

/// As above, with compaction left to the maintenance thread under a space
/// bound of 1.3: the files pass the live bytes plus 16 MiB within about a
/// second of writes, so the kills land in greedy passes (one segment at a
/// time, most garbage first) and among writers waiting for them.
#[test]
fn sigkill_during_bounded_background_compaction_loses_nothing() {
    kill_and_verify(Some(1.3), 0xB0_0B5, 1_000..2_500);
}

/// Runs the writer child `cycles` times, killing it after a random time in
/// `after` ms, and checks the store after each kill.
fn kill_and_verify(bound: Option<f64>, mut seed: u64, after: std::ops::Range<u64>) {
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut acked_total = 0;
    for cycle in 0..8 {
        let mut command = Command::new(&exe);
        command
            .args([
                "compaction_crash_child",
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        if let Some(bound) = bound {
            command.env(BOUND_ENV, bound.to_string());
        }
        let mut child = command.spawn().unwrap();
        seed = splitmix64(seed);
        std::thread::sleep(Duration::from_millis(
            after.start + seed % (after.end - after.start),
        ));
        assert!(
            child.try_wait().unwrap().is_none(),
            "cycle {cycle}: the writer exited by itself"
        );
        child.kill().unwrap();
        child.wait().unwrap();
        // What the kill left checks sound (a torn tail and a retired
        // segment's file not yet deleted are no problem).
        let report = emberkv::check(dir.path().join("store")).unwrap();
        assert!(report.is_sound(), "cycle {cycle}, after the kill: {report}");
        let db = Db::open(dir.path().join("store"), options()).unwrap();
        verify(dir.path(), &db);
        db.close().unwrap();
        let report = emberkv::check(dir.path().join("store")).unwrap();
        assert!(report.is_clean(), "cycle {cycle}: {report}");
        acked_total = (0..WRITERS).map(|w| acked(dir.path(), w).len()).sum();
    }
    assert!(
        acked_total > 100,
        "only {acked_total} operations acknowledged"
    );
    let retired = dir.path().join("store").join("RETIRED");
    assert!(retired.exists(), "no segment was ever compacted");
}

/// Set in the child's environment for
/// [`sigkill_while_compacting_a_tombstone_away_from_its_older_value_resurrects_nothing`].
const TOMBSTONE_CHILD_ENV: &str = "EMBERKV_TOMBSTONE_CHILD";
/// Keys removed (and kept) in each round of the tombstone child.
const ROUND_KEYS: u32 = 40;

/// Values of keys written in round `round` as `name`: their lengths vary,
/// so that no write updates in place.
fn round_value(name: &str, round: u32, i: u32, len: usize) -> Vec<u8> {
    let mut value = format!("{name}:{round}:{i}|").into_bytes();
    value.resize(len + (i as usize * 7) % 50, b'.');
    value
}

/// Inserts keys `{name}:{round}:{j}` of 20,000 bytes until 1.2 MiB are
/// written (more than a segment of 1 MiB), and returns how many.
fn filler(db: &Db, name: &str, round: u32) -> u32 {
    let count = (1_200_000 / 20_000) as u32;
    for j in 0..count {
        let key = format!("{name}:{round}:{j}");
        db.insert(key.as_bytes(), &round_value(name, round, j, 20_000))
            .unwrap();
    }
    count
}

/// Options of the tombstone child: background compaction takes segments
/// half garbage or more, with no space bound (no greedy pass takes one
/// with less).
fn tombstone_options() -> Options {
    options()
        .compaction_garbage(Some(0.5))
        .max_space_amplification(f64::INFINITY)
}

/// The tombstone child: round after round, writes keys `gone:r:i` and
/// `keep:r:i` into one segment and seals it with filler that stays live
/// (so that the segment stays under a tenth garbage and compaction leaves
/// it), removes the `gone` keys (their tombstones in a later segment),
/// seals that one with filler too and removes that filler (so that
/// compaction takes the tombstones' segment while the older values'
/// segment stands: the tombstones must be carried on), and acknowledges
/// the round. Compaction runs in the background meanwhile.
#[test]
fn tombstone_crash_child() {
    let Ok(dir) = std::env::var(TOMBSTONE_CHILD_ENV) else {
        return;
    };
    let dir = PathBuf::from(dir);
    let db = Db::open(dir.join("store"), tombstone_options()).unwrap();
    let acks = dir.join("rounds");
    let text = std::fs::read_to_string(&acks).unwrap_or_default();
    let mut round = text.lines().count() as u32;
    let mut acks = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(acks)
        .unwrap();
    loop {
        for i in 0..ROUND_KEYS {
            db.insert(
                format!("gone:{round}:{i}").as_bytes(),
                &round_value("gone", round, i, 2_000),
            )
            .unwrap();
            db.insert(
                format!("keep:{round}:{i}").as_bytes(),
                &round_value("keep", round, i, 8_000),
            )
            .unwrap();
        }
        filler(&db, "fill", round);
        for i in 0..ROUND_KEYS {
            assert!(db.remove(format!("gone:{round}:{i}").as_bytes()).unwrap());
        }
        for j in 0..filler(&db, "more", round) {
            db.remove(format!("more:{round}:{j}").as_bytes()).unwrap();
        }
        acks.write_all(format!("{round}\n").as_bytes()).unwrap();
        round += 1;
    }
}

/// A removed key whose tombstone and older value sit in different
/// segments stays removed wherever a SIGKILL lands, in or after the
/// compactions that take the tombstone's segment (which must carry the
/// tombstone on while the older value's segment stands), and the keys
/// written beside the removed ones stay.
#[test]
fn sigkill_while_compacting_a_tombstone_away_from_its_older_value_resurrects_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut seed = 0x0070_7370_u64;
    let mut rounds = 0;
    for cycle in 0..8 {
        let mut child = Command::new(&exe)
            .args([
                "tombstone_crash_child",
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(TOMBSTONE_CHILD_ENV, dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        seed = splitmix64(seed);
        std::thread::sleep(Duration::from_millis(300 + seed % 1_700));
        assert!(
            child.try_wait().unwrap().is_none(),
            "cycle {cycle}: the child exited by itself"
        );
        child.kill().unwrap();
        child.wait().unwrap();
        let store = dir.path().join("store");
        let report = emberkv::check(&store).unwrap();
        assert!(report.is_sound(), "cycle {cycle}, after the kill: {report}");
        // Replay the log itself as well as from the checkpoint: a
        // checkpoint taken after the removes would hide a resurrection.
        for replay in [false, true] {
            if replay {
                let _ = std::fs::remove_file(store.join("CHECKPOINT"));
            }
            let db = Db::open(&store, tombstone_options()).unwrap();
            let text = std::fs::read_to_string(dir.path().join("rounds")).unwrap_or_default();
            rounds = text.lines().count() as u32;
            for round in 0..rounds {
                for i in 0..ROUND_KEYS {
                    let gone = db.get(format!("gone:{round}:{i}").as_bytes()).unwrap();
                    assert_eq!(gone, None, "cycle {cycle}: gone:{round}:{i} came back");
                    let kept = db.get(format!("keep:{round}:{i}").as_bytes()).unwrap();
                    assert_eq!(
                        kept,
                        Some(round_value("keep", round, i, 8_000)),
                        "cycle {cycle}: keep:{round}:{i}"
                    );
                }
            }
            db.close().unwrap();
        }
    }
    assert!(rounds > 8, "only {rounds} rounds acknowledged");
    let retired = dir.path().join("store").join("RETIRED");
    assert!(retired.exists(), "no segment was ever compacted");
}
