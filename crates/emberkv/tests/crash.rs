//! Crash tests: a child process writes to a store from several threads and
//! is killed with SIGKILL at a random moment; the parent reopens the store
//! and checks what survived against what the child acknowledged.
//!
//! The child is this test binary re-executed with `crash_child` as the test
//! filter and the `EMBERKV_CRASH_*` variables set. Each writer thread
//! appends one line to its ack file after each operation returns `Ok`, so
//! an ack file is a lower bound of the acknowledged operations; the one
//! operation a writer had in flight may also have reached the log.
//!
//! Every value names its writer, cycle and sequence number and carries
//! padding derived from them, so a value is checked byte for byte against
//! the one operation that could have written it.
//!
//! Set `EMBERKV_CRASH_SEED` to vary (or reproduce) the operation streams
//! and kill times; every failure message names the seed and cycle.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use emberkv::{Db, Options};

const ENV_MODE: &str = "EMBERKV_CRASH_CHILD";
const ENV_DIR: &str = "EMBERKV_CRASH_DIR";
const ENV_ACKS: &str = "EMBERKV_CRASH_ACKS";
const ENV_CYCLE: &str = "EMBERKV_CRASH_CYCLE";
const ENV_SEED: &str = "EMBERKV_CRASH_SEED";
const ENV_START: &str = "EMBERKV_CRASH_START";

/// A child runs at most this long, should its parent be gone.
const CHILD_LIFETIME: Duration = Duration::from_secs(30);
const WRITERS: u64 = 4;
const CYCLES: u64 = 8;
/// Group-commit window of the default-mode scenario.
const FLUSH_INTERVAL: Duration = Duration::from_millis(20);
/// An acknowledged default-mode write older than this at the kill must
/// have survived: the documented bound is the flush interval plus one
/// write and fdatasync; the rest is slack for a loaded machine.
const DURABILITY_GRACE: Duration = Duration::from_millis(1000);

// ---------------------------------------------------------------- scenarios

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// `sync_writes = true`, overwrites and removes over a key range.
    Sync,
    /// Default mode: each writer inserts fresh keys `f{w}-{seq}`.
    Flush,
    /// `sync_writes = true` with 1 MiB segments and values up to 100 KiB.
    SmallSegments,
    /// As `SmallSegments`, with a thread running `Db::compact` in a loop.
    Compaction,
    /// As `Compaction`, with expiry: inserts already expired or to expire
    /// within 1 ms, or in an hour, and `expire` of existing keys.
    Expiry,
    /// Default mode: each writer overwrites its few keys in turn with
    /// values of one length, so that most writes rewrite their key's
    /// record in place.
    Updates,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Sync => "sync",
            Mode::Flush => "flush",
            Mode::SmallSegments => "segments",
            Mode::Compaction => "compaction",
            Mode::Expiry => "expiry",
            Mode::Updates => "updates",
        }
    }

    fn parse(s: &str) -> Mode {
        match s {
            "sync" => Mode::Sync,
            "flush" => Mode::Flush,
            "segments" => Mode::SmallSegments,
            "compaction" => Mode::Compaction,
            "expiry" => Mode::Expiry,
            "updates" => Mode::Updates,
            _ => panic!("unknown crash mode {s:?}"),
        }
    }

    fn options(self) -> Options {
        match self {
            Mode::Sync => Options::default().sync_writes(true),
            Mode::Flush | Mode::Updates => Options::default().flush_interval(FLUSH_INTERVAL),
            Mode::SmallSegments | Mode::Compaction | Mode::Expiry => Options::default()
                .sync_writes(true)
                .segment_bytes(1 << 20)
                .hot_bytes(4 << 20),
        }
    }

    /// Keys per writer (overwrite modes).
    fn keys(self) -> u64 {
        match self {
            Mode::SmallSegments | Mode::Compaction | Mode::Expiry => 16,
            Mode::Updates => UPDATE_KEYS,
            _ => 50,
        }
    }

    fn pad_len(self, h: u64) -> usize {
        match self {
            Mode::Sync | Mode::Flush | Mode::Updates => (h % 3000) as usize,
            // Half small, half up to 100 KiB: about ten records a segment.
            Mode::SmallSegments | Mode::Compaction | Mode::Expiry if h & 1 == 0 => {
                ((h >> 1) % 3000) as usize
            }
            Mode::SmallSegments | Mode::Compaction | Mode::Expiry => {
                ((h >> 1) % (100 << 10)) as usize
            }
        }
    }

    /// Whether a thread runs `Db::compact` in a loop beside the writers.
    fn compacts(self) -> bool {
        matches!(self, Mode::Compaction | Mode::Expiry)
    }
}

fn base_seed() -> u64 {
    std::env::var(ENV_SEED)
        .ok()
        .map(|s| s.parse().expect("EMBERKV_CRASH_SEED is a u64"))
        .unwrap_or(0x00C0_FFEE_D15E_A5E5)
}

// ---------------------------------------------------------------- data

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn hash(parts: &[u64]) -> u64 {
    parts.iter().fold(0x5EED, |acc, &p| mix(acc ^ p))
}

fn padding(out: &mut Vec<u8>, len: usize, seed: u64) {
    let mut x = seed;
    let target = out.len() + len;
    while out.len() < target {
        x = mix(x);
        let take = (target - out.len()).min(8);
        out.extend_from_slice(&x.to_le_bytes()[..take]);
    }
}

/// Operation `n` of writer `w` in cycle `cycle` of an overwrite mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Op {
    key: u64,
    kind: Kind,
    pad: usize,
}

/// What an operation of an overwrite mode does to its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Insert,
    Remove,
    /// `insert_with_expiry` at a time long past.
    InsertExpired,
    /// `insert_with_ttl` of [`SHORT_TTL`]: expired by the time the parent
    /// reads the key, but not when written.
    InsertShortTtl,
    /// `insert_with_ttl` of an hour.
    InsertLongTtl,
    /// `expire` of [`SHORT_TTL`] (the key may be absent).
    Expire,
}

/// The time to live of [`Kind::InsertShortTtl`] and [`Kind::Expire`]; the
/// parent waits longer than this after a kill before it reads.
const SHORT_TTL: Duration = Duration::from_millis(1);

impl Op {
    /// Whether the key holds this operation's value after it, at the time
    /// the parent reads it.
    fn leaves_value(self) -> bool {
        matches!(self.kind, Kind::Insert | Kind::InsertLongTtl)
    }
}

fn op(mode: Mode, seed: u64, w: u64, cycle: u64, n: u64) -> Op {
    let h = hash(&[seed, w, cycle, n]);
    let kind = if (h >> 20).is_multiple_of(10) {
        Kind::Remove
    } else if mode != Mode::Expiry {
        Kind::Insert
    } else {
        match (h >> 40) % 20 {
            0..=8 => Kind::Insert,
            9..=10 => Kind::InsertExpired,
            11..=14 => Kind::InsertShortTtl,
            15..=16 => Kind::InsertLongTtl,
            _ => Kind::Expire,
        }
    };
    Op {
        key: h % mode.keys(),
        kind,
        pad: mode.pad_len(h >> 24),
    }
}

fn sync_key(w: u64, k: u64) -> Vec<u8> {
    format!("w{w}-k{k:03}").into_bytes()
}

/// `V1 | w | cycle | n | key | padding`.
fn sync_value(mode: Mode, seed: u64, w: u64, cycle: u64, n: u64) -> Vec<u8> {
    let o = op(mode, seed, w, cycle, n);
    let key = sync_key(w, o.key);
    let mut v = Vec::with_capacity(26 + key.len() + o.pad);
    v.extend_from_slice(b"V1");
    v.extend_from_slice(&w.to_le_bytes());
    v.extend_from_slice(&cycle.to_le_bytes());
    v.extend_from_slice(&n.to_le_bytes());
    v.extend_from_slice(&key);
    padding(&mut v, o.pad, hash(&[seed, w, cycle, n, 1]));
    v
}

fn u64_at(v: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(v.get(at..at + 8)?.try_into().ok()?))
}

/// The (cycle, n) of the insert that wrote `value` under writer `w`'s key
/// `k`, or `None` when no insert of this test wrote exactly these bytes
/// under this key.
fn parse_sync_value(mode: Mode, seed: u64, w: u64, k: u64, value: &[u8]) -> Option<(u64, u64)> {
    if value.get(..2)? != b"V1" || u64_at(value, 2)? != w {
        return None;
    }
    let (cycle, n) = (u64_at(value, 10)?, u64_at(value, 18)?);
    if cycle >= CYCLES || n > 1 << 40 {
        return None;
    }
    let o = op(mode, seed, w, cycle, n);
    (o.key == k && o.leaves_value() && sync_value(mode, seed, w, cycle, n) == value)
        .then_some((cycle, n))
}

fn flush_key(w: u64, seq: u64) -> Vec<u8> {
    format!("f{w}-{seq}").into_bytes()
}

/// `V2 | w | cycle | seq | clock | padding`; `clock` is the writer's
/// reading of the child's shared counter just before the insert.
fn flush_value(seed: u64, w: u64, cycle: u64, seq: u64, clock: u64) -> Vec<u8> {
    let pad = Mode::Flush.pad_len(hash(&[seed, w, seq]));
    let mut v = Vec::with_capacity(34 + pad);
    v.extend_from_slice(b"V2");
    for x in [w, cycle, seq, clock] {
        v.extend_from_slice(&x.to_le_bytes());
    }
    padding(&mut v, pad, hash(&[seed, w, seq, 2]));
    v
}

/// (cycle, clock) of the insert that wrote `value` under `f{w}-{seq}`.
fn parse_flush_value(seed: u64, w: u64, seq: u64, value: &[u8]) -> Option<(u64, u64)> {
    if value.get(..2)? != b"V2" || u64_at(value, 2)? != w || u64_at(value, 18)? != seq {
        return None;
    }
    let (cycle, clock) = (u64_at(value, 10)?, u64_at(value, 26)?);
    (cycle < CYCLES && flush_value(seed, w, cycle, seq, clock) == value).then_some((cycle, clock))
}

/// Keys per writer of the updates scenario, written in turn.
const UPDATE_KEYS: u64 = 4;
/// Length of every value of the updates scenario, in bytes.
const UPDATE_VALUE_BYTES: usize = 300;

fn update_key(w: u64, n: u64) -> Vec<u8> {
    format!("u{w}-k{}", n % UPDATE_KEYS).into_bytes()
}

/// `V3 | w | n | padding`, [`UPDATE_VALUE_BYTES`] long.
fn update_value(seed: u64, w: u64, n: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(UPDATE_VALUE_BYTES);
    v.extend_from_slice(b"V3");
    v.extend_from_slice(&w.to_le_bytes());
    v.extend_from_slice(&n.to_le_bytes());
    padding(&mut v, UPDATE_VALUE_BYTES - 18, hash(&[seed, w, n, 3]));
    v
}

/// The `n` of the write of writer `w` that left `value` under key `k`.
fn parse_update_value(seed: u64, w: u64, k: u64, value: &[u8]) -> Option<u64> {
    let n = u64_at(value, 10)?;
    (n % UPDATE_KEYS == k && update_value(seed, w, n) == value).then_some(n)
}

fn unix_nanos(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64
}

// ---------------------------------------------------------------- child

static CLOCK: AtomicU64 = AtomicU64::new(0);

/// The child half of the crash tests: writes until killed. Does nothing in
/// a normal test run.
#[test]
fn crash_child() {
    let Ok(mode) = std::env::var(ENV_MODE) else {
        return;
    };
    let mode = Mode::parse(&mode);
    let var = |name: &str| std::env::var(name).unwrap_or_else(|_| panic!("{name} not set"));
    let dir = PathBuf::from(var(ENV_DIR));
    let acks = PathBuf::from(var(ENV_ACKS));
    let cycle: u64 = var(ENV_CYCLE).parse().unwrap();
    let seed: u64 = var(ENV_SEED).parse().unwrap();
    let start: Vec<u64> = var(ENV_START)
        .split(',')
        .map(|s| s.parse().unwrap())
        .collect();
    let deadline = Instant::now() + CHILD_LIFETIME;

    let db = Db::open(&dir, mode.options()).unwrap_or_else(|e| child_fail(&format!("open: {e}")));
    File::create(acks.join(format!("ready-{cycle}"))).unwrap();
    std::thread::scope(|s| {
        if mode.compacts() {
            s.spawn(|| {
                while Instant::now() < deadline {
                    db.compact()
                        .unwrap_or_else(|e| child_fail(&format!("compact: {e}")));
                    std::thread::sleep(Duration::from_millis(5));
                }
            });
        }
        for w in 0..WRITERS {
            let (db, acks, start) = (&db, &acks, &start);
            s.spawn(move || {
                let mut ack = File::create(acks.join(format!("ack-{cycle}-{w}"))).unwrap();
                let mut n = start[w as usize];
                // Default modes: the writes whose durability the store has
                // not yet reported, with the marks taken after each, and
                // the count of those it has (writes start.. were reported
                // durable before the kill when a line says so).
                let mut unconfirmed = std::collections::VecDeque::new();
                let mut durable_to = n;
                while Instant::now() < deadline {
                    let line = if mode == Mode::Updates {
                        db.insert(&update_key(w, n), &update_value(seed, w, n))
                            .unwrap_or_else(|e| child_fail(&format!("insert: {e}")));
                        if w == 0 && n.is_multiple_of(64) {
                            let stats = db.stats().unwrap();
                            let path = acks.join(format!("in-place-{cycle}"));
                            fs::write(path, stats.records_updated_in_place.to_string()).unwrap();
                        }
                        confirm(db, &mut unconfirmed, &mut durable_to, n);
                        format!("{n} {} {durable_to}\n", unix_nanos(SystemTime::now()))
                    } else if mode == Mode::Flush {
                        let clock = CLOCK.fetch_add(1, Ordering::SeqCst);
                        let value = flush_value(seed, w, cycle, n, clock);
                        db.insert(&flush_key(w, n), &value)
                            .unwrap_or_else(|e| child_fail(&format!("insert: {e}")));
                        let acked = CLOCK.fetch_add(1, Ordering::SeqCst);
                        let now = unix_nanos(SystemTime::now());
                        confirm(db, &mut unconfirmed, &mut durable_to, n);
                        format!("{n} {acked} {now} {durable_to}\n")
                    } else {
                        let o = op(mode, seed, w, cycle, n);
                        let key = sync_key(w, o.key);
                        let value = || sync_value(mode, seed, w, cycle, n);
                        let hour = Duration::from_secs(3600);
                        match o.kind {
                            Kind::Remove => db.remove(&key).map(drop),
                            Kind::Insert => db.insert(&key, &value()),
                            Kind::InsertExpired => {
                                db.insert_with_expiry(&key, &value(), UNIX_EPOCH)
                            }
                            Kind::InsertShortTtl => db.insert_with_ttl(&key, &value(), SHORT_TTL),
                            Kind::InsertLongTtl => db.insert_with_ttl(&key, &value(), hour),
                            Kind::Expire => db.expire(&key, SHORT_TTL).map(drop),
                        }
                        .unwrap_or_else(|e| child_fail(&format!("{:?}: {e}", o.kind)));
                        format!("{n}\n")
                    };
                    ack.write_all(line.as_bytes()).unwrap();
                    ack.flush().unwrap();
                    n += 1;
                    if matches!(mode, Mode::Flush | Mode::Updates) && n.is_multiple_of(4) {
                        // Keep the volume (and the parent's check) bounded.
                        std::thread::sleep(Duration::from_micros(100));
                    }
                }
            });
        }
    });
}

/// After write `n` returned: notes its [`emberkv::WriteMark`], and moves
/// `durable_to` past every write the store now reports durable
/// ([`Db::is_durable`]), so that the parent can check that each of them
/// survived, however late the flusher ran on a loaded machine.
fn confirm(
    db: &Db,
    unconfirmed: &mut std::collections::VecDeque<(u64, emberkv::WriteMark)>,
    durable_to: &mut u64,
    n: u64,
) {
    let mark = db
        .write_mark()
        .unwrap_or_else(|e| child_fail(&format!("write_mark: {e}")));
    unconfirmed.push_back((n, mark));
    while let Some(&(n, mark)) = unconfirmed.front() {
        let durable = db
            .is_durable(mark)
            .unwrap_or_else(|e| child_fail(&format!("is_durable: {e}")));
        if !durable {
            break;
        }
        *durable_to = n + 1;
        unconfirmed.pop_front();
    }
}

fn child_fail(msg: &str) -> ! {
    eprintln!("crash child: {msg}");
    std::process::abort();
}

// ---------------------------------------------------------------- parent

/// Kills the child when dropped (a failing parent leaves no writer behind).
struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

struct Harness {
    mode: Mode,
    seed: u64,
    _root: tempfile::TempDir,
    dir: PathBuf,
    acks: PathBuf,
}

/// What one kill left: the lines of each writer's ack file, and when the
/// child was killed.
struct Cycle {
    acks: Vec<Vec<String>>,
    killed_at: SystemTime,
    delay: Duration,
    waited_for_ready: bool,
}

impl Harness {
    fn new(mode: Mode) -> Harness {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("store");
        let acks = root.path().join("acks");
        fs::create_dir_all(&acks).unwrap();
        Harness {
            mode,
            seed: base_seed() ^ hash(&[mode as u64]),
            _root: root,
            dir,
            acks,
        }
    }

    fn ctx(&self, cycle: u64) -> String {
        format!(
            "[{} mode, {ENV_SEED}={}, cycle {cycle}]",
            self.mode.name(),
            base_seed()
        )
    }

    /// Runs the child for cycle `cycle` and kills it.
    fn run(&self, cycle: u64, start: &[u64]) -> Cycle {
        let h = hash(&[self.seed, cycle, 99]);
        // Usually kill mid-write, some time after the store is open; once,
        // kill at a random moment from the start (maybe during recovery).
        let waited_for_ready = cycle != 3;
        let delay = if !waited_for_ready {
            Duration::from_millis(h % 120)
        } else if matches!(self.mode, Mode::Flush | Mode::Updates) && cycle >= CYCLES - 2 {
            // Long enough for the durability-window check to bite.
            Duration::from_millis(1600 + h % 600)
        } else {
            Duration::from_millis(50 + h % 350)
        };
        let stderr_path = self.acks.join(format!("stderr-{cycle}"));
        let start: Vec<String> = start.iter().map(u64::to_string).collect();
        let child = Command::new(std::env::current_exe().unwrap())
            .args(["crash_child", "--exact", "--nocapture", "--test-threads=1"])
            .env(ENV_MODE, self.mode.name())
            .env(ENV_DIR, &self.dir)
            .env(ENV_ACKS, &self.acks)
            .env(ENV_CYCLE, cycle.to_string())
            .env(ENV_SEED, self.seed.to_string())
            .env(ENV_START, start.join(","))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(&stderr_path).unwrap())
            .spawn()
            .unwrap();
        let mut child = ChildGuard(child);
        let early_exit = |child: &mut ChildGuard| {
            if let Some(status) = child.0.try_wait().unwrap() {
                panic!(
                    "{} the child exited by itself ({status}) before the kill:\n{}",
                    self.ctx(cycle),
                    fs::read_to_string(&stderr_path).unwrap_or_default()
                );
            }
        };
        if waited_for_ready {
            let ready = self.acks.join(format!("ready-{cycle}"));
            let give_up = Instant::now() + Duration::from_secs(60);
            while !ready.exists() {
                early_exit(&mut child);
                assert!(
                    Instant::now() < give_up,
                    "{} child never opened the store",
                    self.ctx(cycle)
                );
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        std::thread::sleep(delay);
        early_exit(&mut child);
        let killed_at = SystemTime::now();
        child.0.kill().unwrap();
        let status = child.0.wait().unwrap();
        assert!(
            !status.success(),
            "{} the child was not killed",
            self.ctx(cycle)
        );
        drop(child);
        let acks = (0..WRITERS)
            .map(|w| read_lines(&self.acks.join(format!("ack-{cycle}-{w}"))))
            .collect();
        Cycle {
            acks,
            killed_at,
            delay,
            waited_for_ready,
        }
    }

    /// Reopens the store after the kill. On odd cycles the index
    /// checkpoint (which the previous clean close in this process left, if
    /// the engine writes them) is deleted first, so that recovery replays
    /// the whole log rather than only the log after the checkpoint.
    fn reopen(&self, cycle: u64) -> Db {
        if cycle % 2 == 1 {
            match fs::remove_file(self.dir.join("CHECKPOINT")) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => panic!("{e}"),
                _ => {}
            }
        }
        let replay = if cycle % 2 == 1 {
            " (checkpoint removed: full replay)"
        } else {
            ""
        };
        // A check and a read-only open first: the check must find the
        // store sound (a torn tail or a segment whose creation was cut
        // short are repairs the next open makes, not problems), the
        // read-only open must see what the recovering open sees, and both
        // must leave every file as the kill left it.
        let files = files(&self.dir);
        let report = emberkv::check(&self.dir).unwrap_or_else(|e| {
            panic!(
                "{} check after the kill failed{replay}: {e:?}",
                self.ctx(cycle)
            )
        });
        assert!(
            report.is_sound(),
            "{} check after the kill{replay}: {report}",
            self.ctx(cycle)
        );
        let read_only =
            Db::open(&self.dir, self.mode.options().read_only(true)).unwrap_or_else(|e| {
                panic!(
                    "{} read-only open after the kill failed{replay}: {e:?}",
                    self.ctx(cycle)
                )
            });
        let seen = contents(&read_only);
        drop(read_only);
        assert!(
            files == self::files(&self.dir),
            "{} the check or the read-only open changed the store's files",
            self.ctx(cycle)
        );
        let db = Db::open(&self.dir, self.mode.options()).unwrap_or_else(|e| {
            panic!(
                "{} reopening after the kill failed{replay}: {e:?}",
                self.ctx(cycle)
            )
        });
        assert!(
            seen == contents(&db),
            "{} the read-only open saw other keys or values than the recovering open{replay}",
            self.ctx(cycle)
        );
        db
    }
}

/// Every file of `dir` by name, with its length and a hash of its bytes.
fn files(dir: &Path) -> BTreeMap<PathBuf, (u64, u64)> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let path = e.unwrap().path();
            let bytes = fs::read(&path).unwrap();
            let mut h = std::hash::DefaultHasher::new();
            bytes.hash(&mut h);
            (path, (bytes.len() as u64, h.finish()))
        })
        .collect()
}

/// Every live key of `db` with its value.
fn contents(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    db.iter().map(Result::unwrap).collect()
}

/// The complete (newline-terminated) lines of an ack file; none when the
/// child died before creating it.
fn read_lines(path: &Path) -> Vec<String> {
    let text = fs::read_to_string(path).unwrap_or_default();
    let complete = text.rfind('\n').map_or("", |i| &text[..=i]);
    complete.lines().map(str::to_owned).collect()
}

/// Parses a writer's ack lines: their first fields must be consecutive
/// sequence numbers from `start`.
fn acked_seqs(lines: &[String], start: u64, ctx: &str) -> Vec<Vec<u64>> {
    let rows: Vec<Vec<u64>> = lines
        .iter()
        .map(|l| l.split(' ').map(|f| f.parse().unwrap()).collect())
        .collect();
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(
            row[0],
            start + i as u64,
            "{ctx} test harness: ack file out of order"
        );
    }
    rows
}

// ---------------------------------------------------------------- overwrite modes

/// Runs `CYCLES` kill/reopen cycles of an overwrite mode and checks, after
/// each, that every key holds the result of its last acknowledged
/// operation or of its writer's in-flight one.
fn run_overwrite_mode(mode: Mode) {
    let h = Harness::new(mode);
    let keys = mode.keys();
    // state[w][k]: the (cycle, n) of the insert the key holds, or None.
    let mut state: Vec<Vec<Option<(u64, u64)>>> = vec![vec![None; keys as usize]; WRITERS as usize];
    let mut total_acked = 0;
    let mut summary = Vec::new();
    for cycle in 0..CYCLES {
        let run = h.run(cycle, &[0; WRITERS as usize]);
        let ctx = h.ctx(cycle);
        // Whatever was written to expire within SHORT_TTL has expired.
        std::thread::sleep(SHORT_TTL * 5);
        let db = h.reopen(cycle);
        let mut live = 0;
        let mut cycle_acked = Vec::new();
        for w in 0..WRITERS {
            let acked = acked_seqs(&run.acks[w as usize], 0, &ctx).len() as u64;
            total_acked += acked;
            cycle_acked.push(acked);
            // The state after the acknowledged ops 0..acked, and the op
            // that may have been in flight.
            let mut after_acked = state[w as usize].clone();
            for n in 0..acked {
                let o = op(mode, h.seed, w, cycle, n);
                after_acked[o.key as usize] = match o.kind {
                    // An expire leaves a present key's value to expire, and
                    // an absent key absent.
                    Kind::Expire => None,
                    _ => o.leaves_value().then_some((cycle, n)),
                };
            }
            let in_flight = op(mode, h.seed, w, cycle, acked);
            for k in 0..keys {
                let key = sync_key(w, k);
                let found =
                    get_parsed(&db, &key, &ctx, |v| parse_sync_value(mode, h.seed, w, k, v));
                let expected = after_acked[k as usize];
                let in_flight_result = (in_flight.key == k)
                    .then(|| in_flight.leaves_value().then_some((cycle, acked)));
                assert!(
                    found == expected || Some(found) == in_flight_result,
                    "{ctx} key {}: found {}, but writer {w} acknowledged ops 0..{acked} of \
                     this cycle, after which the key holds {}{}",
                    show(&key),
                    describe(found),
                    describe(expected),
                    match in_flight_result {
                        Some(r) => format!(", or {} after the in-flight op {acked}", describe(r)),
                        None => String::new(),
                    }
                );
                state[w as usize][k as usize] = found;
                live += usize::from(found.is_some());
            }
        }
        if mode == Mode::Expiry {
            // Expired keys count until a sweep or a write removes them.
            assert!(db.len() >= live, "{ctx} len() after recovery");
        } else {
            assert_eq!(db.len(), live, "{ctx} len() after recovery");
        }
        db.close().unwrap();
        summary.push(format!(
            "cycle {cycle}: killed {} ms after {}, acked {cycle_acked:?}, {live} live keys, \
             {} segment files",
            run.delay.as_millis(),
            if run.waited_for_ready {
                "open"
            } else {
                "spawn"
            },
            segment_count(&h.dir)
        ));
    }
    eprintln!("{} mode:\n  {}", mode.name(), summary.join("\n  "));
    if mode.compacts() {
        assert!(
            !h.dir.join("000000000000.seg").exists(),
            "{} mode: segment 0 was never compacted away; the test did not exercise compaction",
            mode.name()
        );
    }
    assert!(
        total_acked >= CYCLES,
        "{} mode: only {total_acked} ops acknowledged over {CYCLES} cycles; the test checked \
         almost nothing",
        mode.name()
    );
}

fn segment_count(dir: &Path) -> usize {
    fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "seg")
        })
        .count()
}

/// The value under `key`, as `parse` reads it (the write that left it);
/// panics, naming `ctx`, when the get fails or the value is one no
/// operation wrote under the key.
fn get_parsed<T>(
    db: &Db,
    key: &[u8],
    ctx: &str,
    parse: impl FnOnce(&[u8]) -> Option<T>,
) -> Option<T> {
    let got = db
        .get(key)
        .unwrap_or_else(|e| panic!("{ctx} get({}) failed: {e:?}", show(key)));
    got.map(|v| {
        parse(&v).unwrap_or_else(|| {
            panic!(
                "{ctx} key {} holds a value of {} bytes that no operation wrote under it \
                 (starts {:?})",
                show(key),
                v.len(),
                show(&v[..v.len().min(40)])
            )
        })
    })
}

fn show(key: &[u8]) -> String {
    String::from_utf8_lossy(key).into_owned()
}

fn describe(v: Option<(u64, u64)>) -> String {
    match v {
        None => "no value".into(),
        Some((c, n)) => format!("the value of op {n} of cycle {c}"),
    }
}

/// `sync_writes = true`: every acknowledged operation survives SIGKILL.
#[test]
fn sync_writes_survive_sigkill() {
    run_overwrite_mode(Mode::Sync);
}

/// `sync_writes = true` with 1 MiB segments and values up to 100 KiB, so
/// that kills land around segment switches.
#[test]
fn small_segments_survive_sigkill() {
    run_overwrite_mode(Mode::SmallSegments);
}

/// As `small_segments_survive_sigkill`, with compaction running all the
/// time, so that kills land in the middle of compaction passes: no
/// acknowledged write may be lost and no removed key may come back.
#[test]
fn compaction_survives_sigkill() {
    run_overwrite_mode(Mode::Compaction);
}

/// As `compaction_survives_sigkill`, with keys that expire (some already
/// when written, some a millisecond later, while compaction and the expiry
/// sweep run): an expired key never comes back, nor an older value of it,
/// and every acknowledged write that has not expired survives.
#[test]
fn expiry_survives_sigkill() {
    run_overwrite_mode(Mode::Expiry);
}

// ---------------------------------------------------------------- default mode

/// Default mode: what survives SIGKILL is a prefix of the log, so of each
/// writer's operations, and everything acknowledged more than the
/// durability window before the kill.
#[test]
fn default_mode_keeps_a_prefix_after_sigkill() {
    let h = Harness::new(Mode::Flush);
    let seed = h.seed;
    // survived[w]: writer w's keys 0..survived[w] exist.
    let mut survived = vec![0u64; WRITERS as usize];
    let mut summary = Vec::new();
    let mut checked_window = 0;
    let mut checked_reported = 0;
    for cycle in 0..CYCLES {
        let run = h.run(cycle, &survived);
        let ctx = h.ctx(cycle);
        let db = h.reopen(cycle);
        let acks: Vec<Vec<Vec<u64>>> = (0..WRITERS as usize)
            .map(|w| acked_seqs(&run.acks[w], survived[w], &ctx))
            .collect();
        let mut now_survived = Vec::new();
        // Largest pre-insert clock reading among each writer's survivors.
        let mut newest_clock = Vec::new();
        for w in 0..WRITERS {
            let start = survived[w as usize];
            let acked_to = start + acks[w as usize].len() as u64;
            let get = |seq: u64| {
                get_parsed(&db, &flush_key(w, seq), &ctx, |v| {
                    parse_flush_value(seed, w, seq, v)
                })
            };
            // Earlier cycles' survivors stay (sampled).
            for seq in (0..start).step_by(7).chain(start.checked_sub(1)) {
                let found = get(seq);
                assert!(
                    matches!(found, Some((c, _)) if c < cycle),
                    "{ctx} key {} survived an earlier cycle but now holds {found:?}",
                    show(&flush_key(w, seq))
                );
            }
            let mut end = start;
            let mut clock = None;
            while let Some((c, k)) = get(end) {
                assert_eq!(
                    c,
                    cycle,
                    "{ctx} key {} is from cycle {c}",
                    show(&flush_key(w, end))
                );
                clock = Some(k);
                end += 1;
            }
            assert!(
                end <= acked_to + 1,
                "{ctx} writer {w}: keys up to seq {} survived, but the writer had acknowledged \
                 only up to {} (so at most {} could be in flight)",
                end - 1,
                acked_to as i64 - 1,
                acked_to
            );
            // No holes: nothing after the first missing key.
            for seq in end..acked_to + 16 {
                assert!(
                    get(seq).is_none(),
                    "{ctx} writer {w}: seq {seq} survived but seq {end} did not: what \
                     survives must be a prefix of each writer's writes"
                );
            }
            now_survived.push(end);
            newest_clock.push(clock);
        }
        let live: u64 = now_survived.iter().sum();
        assert_eq!(db.len() as u64, live, "{ctx} len() after recovery");
        db.close().unwrap();

        // Across writers: if writer a's write that began at clock t
        // survived, every write acknowledged (by any writer) before t was
        // earlier in the log, so it survived too.
        for (a, t) in newest_clock.iter().enumerate() {
            let Some(t) = *t else { continue };
            for (b, rows) in acks.iter().enumerate() {
                for row in rows {
                    let (seq, acked_clock) = (row[0], row[1]);
                    assert!(
                        acked_clock > t || seq < now_survived[b],
                        "{ctx} writer {b}'s seq {seq} was acknowledged (clock {acked_clock}) \
                         before writer {a} began a write that survived (clock {t}), yet it is \
                         lost: the survivors are not a prefix of the log"
                    );
                }
            }
        }
        // What the store reported durable before the kill survived.
        for (w, rows) in acks.iter().enumerate() {
            let reported = rows.last().map_or(0, |row| row[3]);
            checked_reported += u64::from(reported > survived[w]);
            assert!(
                reported <= now_survived[w],
                "{ctx} writer {w}: the store reported seqs up to {} durable before the kill, \
                 but only seqs up to {} survived",
                reported as i64 - 1,
                now_survived[w] as i64 - 1
            );
        }
        // The durability window.
        for (w, rows) in acks.iter().enumerate() {
            for row in rows {
                let (seq, at) = (row[0], UNIX_EPOCH + Duration::from_nanos(row[2]));
                let age = run.killed_at.duration_since(at).unwrap_or_default();
                if age > DURABILITY_GRACE {
                    checked_window += 1;
                    assert!(
                        seq < now_survived[w],
                        "{ctx} writer {w}'s seq {seq} was acknowledged {} ms before the kill \
                         but is lost (flush_interval is {} ms)",
                        age.as_millis(),
                        FLUSH_INTERVAL.as_millis()
                    );
                }
            }
        }
        let acked: Vec<usize> = acks.iter().map(Vec::len).collect();
        let kept: Vec<u64> = now_survived
            .iter()
            .zip(&survived)
            .map(|(n, s)| n - s)
            .collect();
        summary.push(format!(
            "cycle {cycle}: killed {} ms after {}, acked {acked:?}, kept {kept:?}",
            run.delay.as_millis(),
            if run.waited_for_ready {
                "open"
            } else {
                "spawn"
            }
        ));
        survived = now_survived;
    }
    eprintln!("flush mode:\n  {}", summary.join("\n  "));
    assert!(
        survived.iter().sum::<u64>() > 0 && checked_window > 0 && checked_reported > 0,
        "default mode: nothing survived, or no write was old enough to check the window, or \
         none was reported durable (survived {survived:?}, {checked_window} checked against \
         the window, {checked_reported} writers' reports)"
    );
}

/// Default mode with updates in place: each writer rewrites its keys in
/// turn with values of one length, so most writes rewrite an unflushed
/// record where it stands. What survives must still be a prefix of each
/// writer's writes: every key holds the writer's last write to it at or
/// before the newest write of the writer that survived. An update that
/// reached the file without the records appended before it would break
/// that. Every write acknowledged longer than the durability window before
/// the kill survives.
#[test]
fn updates_in_place_keep_a_prefix_after_sigkill() {
    let h = Harness::new(Mode::Updates);
    let seed = h.seed;
    // survived[w]: writer w's writes 0..survived[w] survived.
    let mut survived = vec![0u64; WRITERS as usize];
    let mut in_place = 0u64;
    let mut checked_reported = 0u64;
    for cycle in 0..CYCLES {
        let run = h.run(cycle, &survived);
        let ctx = h.ctx(cycle);
        let db = h.reopen(cycle);
        for w in 0..WRITERS {
            let held: Vec<Option<u64>> = (0..UPDATE_KEYS)
                .map(|k| {
                    get_parsed(&db, &update_key(w, k), &ctx, |v| {
                        parse_update_value(seed, w, k, v)
                    })
                })
                .collect();
            let next = held.iter().flatten().max().map_or(0, |&n| n + 1);
            for (k, &n) in (0..UPDATE_KEYS).zip(&held) {
                // The last write to key k before `next`.
                let expected = (next > k).then(|| k + (next - 1 - k) / UPDATE_KEYS * UPDATE_KEYS);
                assert_eq!(
                    n, expected,
                    "{ctx} writer {w}: key {k} holds write {n:?}, but after writes 0..{next} \
                     it holds {expected:?}: what survived is not a prefix of the writes"
                );
            }
            assert!(
                next >= survived[w as usize],
                "{ctx} writer {w}: writes up to {} had survived, now only up to {next}",
                survived[w as usize]
            );
            // (write, acknowledged at, writes reported durable by then).
            let acked: Vec<(u64, u64, u64)> =
                acked_seqs(&run.acks[w as usize], survived[w as usize], &ctx)
                    .into_iter()
                    .map(|row| (row[0], row[1], row[2]))
                    .collect();
            let reported = acked.last().map_or(0, |&(_, _, reported)| reported);
            checked_reported += u64::from(reported > survived[w as usize]);
            assert!(
                reported <= next,
                "{ctx} writer {w}: the store reported writes up to {} durable before the kill, \
                 but only writes up to {} survived",
                reported as i64 - 1,
                next as i64 - 1
            );
            if let Some(&(last, _, _)) = acked.last() {
                assert!(
                    next <= last + 2,
                    "{ctx} writer {w}: write {} survived, past the one in flight after {last}",
                    next - 1
                );
            }
            let deadline =
                unix_nanos(run.killed_at).saturating_sub(DURABILITY_GRACE.as_nanos() as u64);
            for &(n, at, _) in &acked {
                assert!(
                    at >= deadline || n < next,
                    "{ctx} writer {w}: write {n}, acknowledged {} ms before the kill, was lost",
                    (unix_nanos(run.killed_at) - at) / 1_000_000
                );
            }
            survived[w as usize] = next;
        }
        db.close().unwrap();
        if let Ok(count) = fs::read_to_string(h.acks.join(format!("in-place-{cycle}"))) {
            // A kill can leave the file empty.
            in_place += count.trim().parse::<u64>().unwrap_or(0);
        }
    }
    assert!(
        in_place > 0,
        "no write went in place: the scenario tests nothing new"
    );
    assert!(
        checked_reported > 0,
        "no write was reported durable before a kill: the check of the reports tests nothing"
    );
}
