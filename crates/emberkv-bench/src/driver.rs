//! Runs workloads against one engine's store: client threads, warm-up,
//! measured window, read verification, fresh stores for fills, and the
//! bookkeeping of which keys the store holds.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use indicatif::{ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};

use crate::engine::Engine;
use crate::hist::Latencies;
use crate::watchdog::WATCHDOG;
use crate::workload::{
    KEY_BYTES, Op, OpStream, ScrambledZipfian, Shape, StreamSpec, Values, Workload, ZIPF_THETA,
    delete_order, fill_order, key, key_index, key_order, new_key_index, share,
};

/// Pairs per [`Engine::load_batch`] call when loading keys before a cell.
pub const LOAD_BATCH: usize = 1_000;
/// Every this many reads per thread, the whole value is compared; the
/// others check its length and its 16-byte header.
pub const FULL_CHECK_EVERY: u64 = 64;
/// How often the coordinator refreshes progress bars.
const TICK: Duration = Duration::from_millis(100);
/// Client threads publish their operation counts every this many ops.
const COUNT_EVERY: u64 = 1_024;

/// When a measured window ends.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stop {
    /// After this long (fills and deletes repeat until it is filled).
    Duration(Duration),
    /// After this many operations, split evenly across the threads.
    Ops(u64),
}

/// What every cell of a run shares.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Config {
    /// Number of client threads.
    pub threads: usize,
    /// The length of each measured window.
    pub stop: Stop,
    /// Unmeasured warm-up before the window of a steady workload.
    pub warmup: Duration,
    /// Seed of every generated key order, value and operation stream.
    pub seed: u64,
    /// Value length, in bytes.
    pub value_size: usize,
    /// Share of each value that is a repeated pattern (0 to 1).
    pub compressibility: f64,
    /// Measured repetitions of each cell.
    pub reps: u32,
    /// How long the store sits idle after a steady write-only cell
    /// (`overwrite`) before its space is measured a second time, "at rest":
    /// the space its background compaction leaves once writers stop.
    #[serde(default)]
    pub settle: Duration,
    /// How long a worker may go without finishing an operation, a load
    /// batch or a step before it is taken for hung (see
    /// [`crate::watchdog`]).
    pub stall: Duration,
    /// Whether to draw progress bars (on standard error).
    pub progress: bool,
}

/// The outcome of one cell over all its repetitions.
#[derive(Debug)]
pub struct Measurement {
    /// Operations completed inside the measured windows.
    pub ops: u64,
    /// Total length of the measured windows.
    pub elapsed: Duration,
    /// Latency of every measured operation.
    pub latencies: Latencies,
    /// Throughput of each repetition, in operations per second.
    pub rep_ops_per_sec: Vec<f64>,
    /// Fills and deletes: passes over the key set (fresh stores for fills),
    /// over all repetitions, the last of each possibly cut short.
    pub rounds: u32,
    /// Fills and deletes: whether every repetition got through the whole
    /// key set at least once.
    pub completed: bool,
    /// fsync/fdatasync calls the engine made inside the measured windows,
    /// when it reports them ([`crate::engine::Engine::syncs`]).
    pub syncs: Option<u64>,
    /// Fills: the store's bytes on disk and logical bytes (see
    /// [`Bench::space`]) after the last pass that went through the whole
    /// key set, measured (unmeasured time, after a sync) before the next
    /// pass replaced the store; `None` when no pass did. The store at the
    /// end of the cell holds only what the last pass inserted before the
    /// window closed, perhaps a few keys, whose space amplification says
    /// nothing (a fill once reported 338).
    pub space: Option<(u64, u64)>,
    /// Fills: how long the engine's sync took after each pass that went
    /// through the whole key set (unmeasured time, outside the rate): the
    /// work an engine that defers its writes (to a checkpoint, say) has
    /// left when its fill's clock stops.
    pub fill_syncs: Vec<Duration>,
    /// CPU time the process spent inside the measured windows (see
    /// [`CpuTime`]).
    pub cpu: CpuTime,
}

/// CPU time of the whole process (every thread: the engine's own
/// background threads and the harness's client threads), user and
/// kernel apart, as `getrusage(RUSAGE_SELF)` reports it. The harness's
/// share per operation is the same for every engine; a worker process
/// runs one engine only, so no other engine's threads are counted.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CpuTime {
    /// Time spent in user space.
    pub user: Duration,
    /// Time spent in the kernel on the process's behalf (system calls,
    /// page faults, zeroing fresh memory).
    pub system: Duration,
}

impl CpuTime {
    /// The process's CPU time so far; zero where `getrusage` fails (it
    /// cannot for `RUSAGE_SELF` on Linux).
    pub fn now() -> Self {
        use nix::sys::resource::{UsageWho, getrusage};
        let Ok(usage) = getrusage(UsageWho::RUSAGE_SELF) else {
            return CpuTime::default();
        };
        let d = |t: nix::sys::time::TimeVal| {
            Duration::new(
                t.tv_sec().max(0) as u64,
                (t.tv_usec().max(0) * 1_000) as u32,
            )
        };
        CpuTime {
            user: d(usage.user_time()),
            system: d(usage.system_time()),
        }
    }

    /// The time spent since `earlier` (zero for a part that went back).
    fn since(self, earlier: CpuTime) -> CpuTime {
        CpuTime {
            user: self.user.saturating_sub(earlier.user),
            system: self.system.saturating_sub(earlier.system),
        }
    }

    fn add(&mut self, other: CpuTime) {
        self.user += other.user;
        self.system += other.system;
    }
}

impl Measurement {
    /// The median throughput of the repetitions, in operations per second.
    pub fn ops_per_sec(&self) -> f64 {
        median(self.rep_ops_per_sec.clone())
    }

    /// Fills: the median of [`Measurement::fill_syncs`], in milliseconds;
    /// `None` when no pass went through every key.
    pub fn fill_sync_ms(&self) -> Option<f64> {
        (!self.fill_syncs.is_empty()).then(|| {
            median(
                self.fill_syncs
                    .iter()
                    .map(|d| d.as_secs_f64() * 1e3)
                    .collect(),
            )
        })
    }
}

/// The median of `v` (0 for none).
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The result of asking for a cell.
#[derive(Debug)]
pub enum Outcome {
    /// The cell ran.
    Measured(Box<Measurement>),
    /// The engine cannot run this workload, for this reason.
    Unsupported(String),
}

const WARMUP: u8 = 0;
const MEASURE: u8 = 1;
const STOP: u8 = 2;
/// Client threads wait while the others are still being started, so that
/// no operation runs before the clock starts.
const READY: u8 = 3;

/// Stops the client threads when dropped, so that a coordinator that
/// fails (a panic, or a thread that could not be started) never leaves
/// them running while the scope waits for them.
struct StopOnDrop<'a>(&'a AtomicU8);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(STOP, Ordering::Relaxed);
    }
}

/// What times each operation's latency, as the report states it: a read
/// of `quanta`'s raw counter costs about 10 ns here against 25 ns for
/// `std::time::Instant::now`, and two are taken per operation (the floor
/// rail's `readrandom` went from 32M to 63M operations/s with it).
pub const LATENCY_CLOCK: &str = "the CPU's time-stamp counter where it is invariant, else the \
    OS's monotonic clock (`quanta` 0.13's raw counter)";

/// Opens a store in the given (existing, empty or previously used)
/// directory.
pub type OpenStore<'a> = dyn Fn(&Path) -> Result<Box<dyn Engine>> + Sync + 'a;

/// One engine's store under test, and which keys it holds.
pub struct Bench<'a> {
    open: &'a OpenStore<'a>,
    root: PathBuf,
    store_no: u32,
    engine: Option<Box<dyn Engine>>,
    verify: bool,
    cfg: &'a Config,
    keys: u64,
    values: Values,
    fill_order: Vec<u64>,
    delete_order: Vec<u64>,
    key_order: Vec<u64>,
    zipf: ScrambledZipfian,
    present: Vec<bool>,
    present_count: u64,
    next_new: u64,
    /// Phases run on a store that outlives them (steady and delete
    /// phases): the `run` of their value versions, so that every engine
    /// writes the same values in its n-th such phase, however many passes
    /// its fills made.
    runs: u64,
    pristine: bool,
    /// Whether a fill left the store: a steady or delete cell then starts
    /// on a fresh one, loaded whole, not on whatever share of the keys the
    /// fill's last pass wrote before the window closed (which differs from
    /// engine to engine).
    filled: bool,
    label: String,
    /// The clock of every latency sample ([`LATENCY_CLOCK`]).
    clock: quanta::Clock,
}

/// What one client thread did.
struct ClientOut {
    ops: u64,
    taken: usize,
    inserted: u64,
    latencies: Latencies,
}

/// What one measured phase did.
struct PhaseOut {
    ops: u64,
    elapsed: Duration,
    latencies: Latencies,
    exhausted: bool,
    syncs: Option<u64>,
    cpu: CpuTime,
}

impl<'a> Bench<'a> {
    /// A bench of `keys` keys over a store that `open` creates in a fresh
    /// subdirectory of `root`. First checks that the engine round-trips a
    /// probe key (insert, get, remove, get), so that a broken engine is
    /// never measured; the probe is longer than any benchmark key and is
    /// gone again afterwards. With `verify` false (the floor rail) reads
    /// may find nothing.
    pub fn new(
        open: &'a OpenStore<'a>,
        root: &Path,
        keys: u64,
        cfg: &'a Config,
        verify: bool,
        label: &str,
    ) -> Result<Self> {
        // The key orders of a large `--keys` take a while to build.
        WATCHDOG.doing(format!(
            "{label}: building its key orders and opening its store"
        ));
        let mut bench = Bench {
            open,
            root: root.to_owned(),
            store_no: 0,
            engine: None,
            verify,
            cfg,
            keys,
            values: Values::new(cfg.seed, cfg.value_size, cfg.compressibility),
            fill_order: fill_order(cfg.seed, keys),
            delete_order: delete_order(cfg.seed, keys),
            key_order: key_order(keys),
            zipf: ScrambledZipfian::new(keys, ZIPF_THETA),
            present: vec![false; keys as usize],
            present_count: 0,
            next_new: keys,
            runs: 0,
            pristine: true,
            filled: false,
            label: label.to_owned(),
            clock: quanta::Clock::new(),
        };
        WATCHDOG.beat();
        bench.fresh_store()?;
        if verify {
            bench.probe()?;
        }
        Ok(bench)
    }

    fn engine(&self) -> &dyn Engine {
        self.engine.as_deref().expect("a store is open")
    }

    fn store_dir(&self) -> PathBuf {
        self.root.join(format!("store-{}", self.store_no))
    }

    fn probe(&self) -> Result<()> {
        const PROBE: &[u8] = b"emberkv-bench pre-flight probe";
        let engine = self.engine();
        let name = engine.name();
        let mut buf = Vec::new();
        engine.insert(PROBE, PROBE)?;
        if !engine.get(PROBE, &mut buf)? || buf != PROBE {
            bail!("{name}: pre-flight get did not return the value just inserted");
        }
        engine.remove(PROBE)?;
        if engine.get(PROBE, &mut buf)? {
            bail!("{name}: pre-flight get found a key just removed");
        }
        Ok(())
    }

    /// Closes the current store (if any), deletes it and opens an empty
    /// one in a new directory.
    fn fresh_store(&mut self) -> Result<()> {
        if let Some(engine) = self.engine.take() {
            engine.close().context("closing the store")?;
            let old = self.store_dir();
            fs::remove_dir_all(&old).with_context(|| format!("removing {}", old.display()))?;
            self.store_no += 1;
            WATCHDOG.beat();
        }
        let dir = self.store_dir();
        fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        self.engine = Some((self.open)(&dir).context("opening the store")?);
        WATCHDOG.beat();
        self.present.clear();
        self.present.resize(self.keys as usize, false);
        self.present_count = 0;
        self.next_new = self.keys;
        self.pristine = true;
        self.filled = false;
        Ok(())
    }

    /// Runs one cell of `workload`: `reps` measured repetitions. Steady
    /// workloads first load the keys the store lacks (unmeasured, in
    /// batches of [`LOAD_BATCH`]; into a fresh store when a fill left the
    /// current one), sync, warm up and measure. Fills insert
    /// every key into a fresh store, deletes remove every key from a fully
    /// loaded one, each repeated until the window is filled. A wrong read
    /// is an error.
    pub fn run(&mut self, workload: Workload) -> Result<Outcome> {
        WATCHDOG.doing(format!("{} {workload}", self.label));
        if workload.needs_scans() && !self.engine().scans() {
            return Ok(Outcome::Unsupported(
                "no ordered scans (keys are not kept in order)".to_owned(),
            ));
        }
        let mut m = Measurement {
            ops: 0,
            elapsed: Duration::ZERO,
            latencies: Latencies::default(),
            rep_ops_per_sec: Vec::new(),
            rounds: 0,
            completed: true,
            syncs: Some(0),
            space: None,
            fill_syncs: Vec::new(),
            cpu: CpuTime::default(),
        };
        for _ in 0..self.cfg.reps.max(1) {
            let (mut ops, mut elapsed) = (0, Duration::ZERO);
            let mut first_round = true;
            loop {
                let remaining = match self.cfg.stop {
                    Stop::Duration(d) => Stop::Duration(d.saturating_sub(elapsed)),
                    Stop::Ops(n) => Stop::Ops(n.saturating_sub(ops)),
                };
                match workload.shape() {
                    Shape::Fill if !self.pristine => self.fresh_store()?,
                    Shape::Fill => {}
                    Shape::Drain | Shape::Steady => {
                        if self.filled {
                            self.fresh_store()?;
                        }
                        self.load_missing()?;
                    }
                }
                // (No warm-up phase at all when it lasts 0 s: its threads
                // would run a number of operations that only timing sets.)
                let warmup = workload.shape() == Shape::Steady && !self.cfg.warmup.is_zero();
                let out = self.phase(workload, warmup, remaining)?;
                ops += out.ops;
                elapsed += out.elapsed;
                m.latencies.merge(&out.latencies);
                m.syncs = m.syncs.zip(out.syncs).map(|(a, b)| a + b);
                m.cpu.add(out.cpu);
                if workload.shape() == Shape::Steady {
                    break;
                }
                m.rounds += 1;
                if workload.shape() == Shape::Fill && out.exhausted {
                    let synced = Instant::now();
                    self.engine().sync()?;
                    WATCHDOG.beat();
                    m.fill_syncs.push(synced.elapsed());
                    m.space = Some(self.space_on_disk()?);
                }
                if first_round && !out.exhausted {
                    m.completed = false;
                }
                first_round = false;
                let filled = match self.cfg.stop {
                    Stop::Duration(d) => elapsed >= d,
                    Stop::Ops(n) => ops >= n,
                };
                if filled || !out.exhausted {
                    break;
                }
            }
            m.ops += ops;
            m.elapsed += elapsed;
            m.rep_ops_per_sec
                .push(ops as f64 / elapsed.as_secs_f64().max(1e-9));
        }
        self.engine().sync().context("sync after the cell")?;
        Ok(Outcome::Measured(Box::new(m)))
    }

    /// Bytes the store's directory occupies on disk after it sat idle for
    /// [`Config::settle`] and then a sync: what the engine's background
    /// work (compaction) leaves once writers stop.
    pub fn settled_disk_bytes(&self) -> Result<u64> {
        WATCHDOG.doing(format!("{}: settling, then its space", self.label));
        // In slices, each a beat: an idle store is not a hung one.
        let until = Instant::now() + self.cfg.settle;
        while let Some(left) = until.checked_duration_since(Instant::now()) {
            std::thread::sleep(left.min(Duration::from_secs(1)));
            WATCHDOG.beat();
        }
        Ok(self.space()?.0)
    }

    /// Bytes the store's directory occupies on disk (allocated blocks)
    /// and the logical bytes of the pairs it holds, after a sync.
    pub fn space(&self) -> Result<(u64, u64)> {
        self.engine().sync()?;
        self.space_on_disk()
    }

    /// As [`Bench::space`], without the sync first.
    fn space_on_disk(&self) -> Result<(u64, u64)> {
        let disk = dir_bytes(&self.store_dir())?;
        let logical = self.present_count * (KEY_BYTES + self.values.size()) as u64;
        Ok((disk, logical))
    }

    /// The open engine's settings and durability lines.
    pub fn describe(&self) -> (String, String) {
        (self.engine().settings(), self.engine().durability())
    }

    /// Closes the store.
    pub fn close(mut self) -> Result<()> {
        WATCHDOG.doing(format!("{}: closing its store", self.label));
        match self.engine.take() {
            Some(engine) => engine.close(),
            None => Ok(()),
        }
    }

    fn bar(&self, len: u64, what: &str) -> ProgressBar {
        if !self.cfg.progress {
            return ProgressBar::hidden();
        }
        let bar = ProgressBar::new(len);
        bar.set_style(
            ProgressStyle::with_template("{prefix:>24} {bar:30} {percent:>3}% {msg}")
                .expect("valid template"),
        );
        bar.set_prefix(format!("{} {what}", self.label));
        bar
    }

    /// One measured phase of `workload` with its client threads.
    fn phase(&mut self, workload: Workload, warmup: bool, stop: Stop) -> Result<PhaseOut> {
        let threads = self.cfg.threads.max(1);
        if workload.shape() != Shape::Fill {
            self.runs += 1;
        }
        let order: &[u64] = match workload {
            Workload::FillSeq => &self.key_order,
            Workload::FillRandom => &self.fill_order,
            Workload::DeleteRandom => &self.delete_order,
            _ => &[],
        };
        let spec = StreamSpec {
            workload,
            seed: self.cfg.seed,
            run: self.runs,
            keys: self.keys,
            threads,
            new_base: self.next_new,
            order,
            key_order: &self.key_order,
            zipf: &self.zipf,
        };
        let limits: Vec<Option<u64>> = (0..threads as u64)
            .map(|t| match stop {
                Stop::Duration(_) => None,
                Stop::Ops(n) => Some(n / threads as u64 + u64::from(t < n % threads as u64)),
            })
            .collect();
        let phase = AtomicU8::new(READY);
        let counted = AtomicU64::new(0);
        let (done_tx, done_rx) = mpsc::channel();
        let bar = match stop {
            Stop::Duration(d) => self.bar(d.as_millis() as u64, workload.name()),
            Stop::Ops(n) => self.bar(n, workload.name()),
        };
        let this = &*self;
        let (outs, elapsed, syncs, cpu) = thread::scope(|s| {
            let stop_clients = StopOnDrop(&phase);
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let (spec, phase, counted, done_tx) =
                        (&spec, &phase, &counted, done_tx.clone());
                    let limit = limits[t];
                    s.spawn(move || {
                        let out = this.client(spec, t, phase, limit, counted);
                        if out.is_err() {
                            phase.store(STOP, Ordering::Relaxed);
                        }
                        // The receiver outlives every client thread.
                        let _ = done_tx.send(());
                        out
                    })
                })
                .collect();
            let mut running = threads;
            let mut start = Instant::now();
            let mut cpu_start = CpuTime::now();
            phase.store(if warmup { WARMUP } else { MEASURE }, Ordering::Relaxed);
            if warmup {
                wait(&done_rx, start + self.cfg.warmup, &mut running, &mut || {});
                counted.store(0, Ordering::Relaxed);
                cpu_start = CpuTime::now();
                phase.store(MEASURE, Ordering::Relaxed);
                start = Instant::now();
            }
            let syncs_before = this.engine().syncs();
            let deadline = match stop {
                Stop::Duration(d) => start + d,
                Stop::Ops(_) => start + Duration::from_secs(u64::MAX / 4),
            };
            wait(&done_rx, deadline, &mut running, &mut || {
                let n = counted.load(Ordering::Relaxed);
                let secs = start.elapsed().as_secs_f64().max(1e-3);
                match stop {
                    Stop::Duration(_) => bar.set_position(start.elapsed().as_millis() as u64),
                    Stop::Ops(_) => bar.set_position(n),
                }
                bar.set_message(format!("{:.0} ops/s", n as f64 / secs));
            });
            drop(stop_clients);
            let elapsed = start.elapsed();
            let cpu = CpuTime::now().since(cpu_start);
            let syncs = syncs_before
                .zip(this.engine().syncs())
                .map(|(a, b)| b.saturating_sub(a));
            let outs: Vec<_> = handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(anyhow!("a client thread panicked")))
                })
                .collect();
            (outs, elapsed, syncs, cpu)
        });
        bar.finish_and_clear();

        let mut out = PhaseOut {
            ops: 0,
            elapsed,
            latencies: Latencies::default(),
            exhausted: true,
            syncs,
            cpu,
        };
        let mut results = Vec::with_capacity(threads);
        for o in outs {
            results.push(o.with_context(|| format!("{} {workload}", self.label))?);
        }
        let mut changes: Vec<(u64, bool)> = Vec::new();
        for (t, r) in results.iter().enumerate() {
            out.ops += r.ops;
            out.latencies.merge(&r.latencies);
            let mine = share(order, t, threads);
            if r.taken < mine.len() {
                out.exhausted = false;
            }
            match workload.shape() {
                Shape::Fill => changes.extend(mine[..r.taken].iter().map(|&i| (i, true))),
                Shape::Drain => changes.extend(mine[..r.taken].iter().map(|&i| (i, false))),
                Shape::Steady => changes.extend(
                    (0..r.inserted).map(|j| (new_key_index(spec.new_base, threads, t, j), true)),
                ),
            }
        }
        let inserted = results.iter().map(|r| r.inserted).max().unwrap_or(0);
        for (i, now_present) in changes {
            self.mark(i, now_present);
        }
        self.next_new += inserted * threads as u64;
        match workload.shape() {
            Shape::Fill => {
                self.pristine = false;
                self.filled = true;
            }
            Shape::Drain => {}
            Shape::Steady => out.exhausted = false,
        }
        Ok(out)
    }

    fn mark(&mut self, index: u64, now_present: bool) {
        let i = index as usize;
        if i >= self.present.len() {
            self.present.resize(i + 1, false);
        }
        if self.present[i] != now_present {
            self.present[i] = now_present;
            if now_present {
                self.present_count += 1;
            } else {
                self.present_count -= 1;
            }
        }
    }

    /// One client thread: runs its stream until it ends, its operation
    /// `limit` is reached or `phase` says stop, recording latencies while
    /// `phase` says measure.
    fn client(
        &self,
        spec: &StreamSpec<'_>,
        thread: usize,
        phase: &AtomicU8,
        limit: Option<u64>,
        counted: &AtomicU64,
    ) -> Result<ClientOut> {
        let mut stream = OpStream::new(spec, thread);
        let mut out = ClientOut {
            ops: 0,
            taken: 0,
            inserted: 0,
            latencies: Latencies::default(),
        };
        let mut io = Buffers {
            value: Vec::with_capacity(self.values.size()),
            buf: Vec::with_capacity(self.values.size()),
            scratch: Vec::with_capacity(self.values.size()),
            reads: 0,
        };
        let mut since_count = 0;
        loop {
            let p = phase.load(Ordering::Relaxed);
            if p == STOP || (p == MEASURE && limit.is_some_and(|l| out.ops >= l)) {
                break;
            }
            if p == READY {
                thread::yield_now();
                continue;
            }
            let Some(op) = stream.next() else {
                break;
            };
            out.taken += 1;
            let record = (p == MEASURE).then_some(&mut out.latencies);
            let n = self.execute(spec.workload, op, record, &mut io)?;
            WATCHDOG.beat_client(thread);
            if p == MEASURE {
                out.ops += n;
                since_count += n;
                if since_count >= COUNT_EVERY {
                    counted.fetch_add(since_count, Ordering::Relaxed);
                    since_count = 0;
                }
            }
        }
        out.inserted = stream.inserted();
        Ok(out)
    }

    /// Executes `op`, timing only the engine calls, and verifies what it
    /// reads. Returns the number of operations it counts for (pairs
    /// delivered for `readseq`, else 1).
    fn execute(
        &self,
        workload: Workload,
        op: Op,
        mut record: Option<&mut Latencies>,
        io: &mut Buffers,
    ) -> Result<u64> {
        let engine = self.engine();
        let clock = &self.clock;
        let mut took = |d: Duration| {
            if let Some(l) = record.as_deref_mut() {
                l.record(d);
            }
        };
        match op {
            Op::Insert { index, version } => {
                self.values.fill(index, version, &mut io.value);
                let t0 = clock.raw();
                engine.insert(&key(index), &io.value)?;
                took(clock.delta(t0, clock.raw()));
            }
            Op::Remove { index } => {
                let t0 = clock.raw();
                engine.remove(&key(index))?;
                took(clock.delta(t0, clock.raw()));
            }
            Op::Get { index } => {
                let t0 = clock.raw();
                let found = engine.get(&key(index), &mut io.buf)?;
                took(clock.delta(t0, clock.raw()));
                self.check_read(index, found, io)?;
            }
            Op::ReadModifyWrite { index, version } => {
                self.values.fill(index, version, &mut io.value);
                let k = key(index);
                let t0 = clock.raw();
                let found = engine.get(&k, &mut io.buf)?;
                engine.insert(&k, &io.value)?;
                took(clock.delta(t0, clock.raw()));
                self.check_read(index, found, io)?;
            }
            Op::Scan { index, len } => {
                let per_pair = workload == Workload::ReadSeq;
                let start = key(index);
                let mut prev: Option<Vec<u8>> = None;
                let mut engine_time = Duration::ZERO;
                let mut last = clock.raw();
                let visited = engine.scan(&start, len as usize, &mut |k, v| {
                    let dt = clock.delta(last, clock.raw());
                    if per_pair {
                        took(dt);
                    }
                    engine_time += dt;
                    let i = key_index(k)
                        .ok_or_else(|| anyhow!("scan returned a key not written: {k:02x?}"))?;
                    let in_order = match &prev {
                        Some(p) => p.as_slice() < k,
                        None => k >= start.as_slice(),
                    };
                    if !in_order {
                        bail!("scan from key #{index} returned key #{i} out of order");
                    }
                    io.reads += 1;
                    let full = io.reads.is_multiple_of(FULL_CHECK_EVERY);
                    if !self.values.matches(i, v, full.then_some(&mut io.scratch)) {
                        bail!(
                            "scan returned a wrong value for key #{i} ({} bytes)",
                            v.len()
                        );
                    }
                    prev = Some(k.to_vec());
                    last = clock.raw();
                    Ok(())
                })?;
                engine_time += clock.delta(last, clock.raw());
                if per_pair {
                    return Ok(visited as u64);
                }
                took(engine_time);
            }
        }
        Ok(1)
    }

    fn check_read(&self, index: u64, found: bool, io: &mut Buffers) -> Result<()> {
        if !self.verify {
            return Ok(());
        }
        if !found {
            bail!("get of present key #{index} returned not found");
        }
        io.reads += 1;
        let full = io.reads.is_multiple_of(FULL_CHECK_EVERY);
        if !self
            .values
            .matches(index, &io.buf, full.then_some(&mut io.scratch))
        {
            bail!(
                "get of key #{index} returned a wrong value ({} bytes)",
                io.buf.len()
            );
        }
        Ok(())
    }

    /// Inserts every key of `0..keys` the store lacks (version 0, in
    /// index order, in batches), then syncs. Unmeasured.
    fn load_missing(&mut self) -> Result<()> {
        let missing: Vec<u64> = (0..self.keys)
            .filter(|&i| !self.present[i as usize])
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        let bar = self.bar(missing.len() as u64, "load");
        let mut value = Vec::with_capacity(self.values.size());
        for chunk in missing.chunks(LOAD_BATCH) {
            let items: Vec<_> = chunk
                .iter()
                .map(|&i| {
                    self.values.fill(i, 0, &mut value);
                    (key(i).to_vec(), value.clone())
                })
                .collect();
            self.engine()
                .load_batch(&items)
                .with_context(|| format!("{}: loading keys", self.label))?;
            for &i in chunk {
                self.mark(i, true);
            }
            WATCHDOG.beat();
            bar.inc(chunk.len() as u64);
        }
        bar.finish_and_clear();
        self.pristine = false;
        self.engine().sync().context("sync after loading")
    }
}

/// Per-thread scratch buffers for values and reads.
struct Buffers {
    value: Vec<u8>,
    buf: Vec<u8>,
    scratch: Vec<u8>,
    reads: u64,
}

/// The bytes allocated on disk to every file under `dir`, recursively.
pub fn dir_bytes(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for entry in fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        total += entry_bytes(&entry?)?;
    }
    Ok(total)
}

/// Bytes allocated on disk for one directory entry (a directory's
/// contents, recursively); 0 for one deleted since it was listed: an
/// engine's background compaction deletes files while the store is
/// measured.
fn entry_bytes(entry: &fs::DirEntry) -> Result<u64> {
    let gone = |e: &std::io::Error| e.kind() == std::io::ErrorKind::NotFound;
    match entry.metadata() {
        Ok(meta) if meta.is_dir() => match dir_bytes(&entry.path()) {
            Err(e) if e.downcast_ref::<std::io::Error>().is_some_and(gone) => Ok(0),
            bytes => bytes,
        },
        Ok(meta) => Ok(meta.blocks() * 512),
        Err(e) if gone(&e) => Ok(0),
        Err(e) => Err(e).with_context(|| format!("measuring {}", entry.path().display())),
    }
}

/// Waits until `deadline` or until all `running` threads have reported
/// done, calling `tick` every [`TICK`]; decrements `running` for each
/// report.
fn wait(done: &mpsc::Receiver<()>, deadline: Instant, running: &mut usize, tick: &mut dyn FnMut()) {
    while *running > 0 {
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        match done.recv_timeout(TICK.min(deadline - now)) {
            Ok(()) => *running -= 1,
            Err(RecvTimeoutError::Timeout) => tick(),
            Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    use super::*;
    use crate::engine::Visit;

    /// Regression (2026-12-02): emberkv's `ycsb-a` cell failed with "No
    /// such file or directory" when compaction deleted a segment file
    /// between the listing of the store's directory and its measurement. A
    /// file or directory deleted after it was listed counts 0 bytes.
    #[test]
    fn entries_deleted_after_the_listing_count_nothing() -> Result<()> {
        let dir = tempfile::tempdir()?;
        fs::write(dir.path().join("kept"), vec![1u8; 10_000])?;
        fs::write(dir.path().join("deleted"), vec![1u8; 10_000])?;
        fs::create_dir(dir.path().join("sub"))?;
        fs::write(dir.path().join("sub").join("file"), vec![1u8; 10_000])?;
        let entries: Vec<fs::DirEntry> = fs::read_dir(dir.path())?.collect::<Result<_, _>>()?;
        fs::remove_file(dir.path().join("deleted"))?;
        fs::remove_dir_all(dir.path().join("sub"))?;
        let mut total = 0;
        for entry in &entries {
            let bytes = entry_bytes(entry)?;
            assert_eq!(bytes > 0, entry.file_name() == "kept", "{entry:?}");
            total += bytes;
        }
        assert_eq!(total, dir_bytes(dir.path())?);
        Ok(())
    }

    /// An ordered in-memory engine that can be told to corrupt byte 100 of
    /// every value it returns (past the 16 bytes checked on every read).
    #[derive(Default)]
    struct Mem {
        map: Mutex<BTreeMap<Vec<u8>, Vec<u8>>>,
        corrupt: bool,
    }

    impl Engine for Mem {
        fn name(&self) -> &'static str {
            "mem"
        }
        fn insert(&self, key: &[u8], value: &[u8]) -> Result<()> {
            self.map
                .lock()
                .unwrap()
                .insert(key.to_vec(), value.to_vec());
            Ok(())
        }
        fn get(&self, key: &[u8], buf: &mut Vec<u8>) -> Result<bool> {
            let map = self.map.lock().unwrap();
            let Some(v) = map.get(key) else {
                return Ok(false);
            };
            buf.clone_from(v);
            if self.corrupt && buf.len() > 100 {
                buf[100] ^= 1;
            }
            Ok(true)
        }
        fn remove(&self, key: &[u8]) -> Result<()> {
            self.map.lock().unwrap().remove(key);
            Ok(())
        }
        fn scans(&self) -> bool {
            true
        }
        fn scan(&self, start: &[u8], limit: usize, visit: &mut Visit<'_>) -> Result<usize> {
            let map = self.map.lock().unwrap();
            let mut n = 0;
            for (k, v) in map.range(start.to_vec()..).take(limit) {
                visit(k, v)?;
                n += 1;
            }
            Ok(n)
        }
        fn sync(&self) -> Result<()> {
            Ok(())
        }
        fn settings(&self) -> String {
            "test".to_owned()
        }
        fn durability(&self) -> String {
            "none".to_owned()
        }
        fn close(self: Box<Self>) -> Result<()> {
            Ok(())
        }
    }

    fn config(stop: Stop) -> Config {
        Config {
            threads: 3,
            stop,
            warmup: Duration::from_millis(20),
            seed: 5,
            value_size: 200,
            compressibility: 0.5,
            reps: 1,
            settle: Duration::ZERO,
            stall: Duration::from_secs(crate::watchdog::DEFAULT_STALL_SECS),
            progress: false,
        }
    }

    fn measured(o: Outcome) -> Measurement {
        match o {
            Outcome::Measured(m) => *m,
            Outcome::Unsupported(why) => panic!("unsupported: {why}"),
        }
    }

    #[test]
    fn every_workload_runs_and_fills_repeat_into_fresh_stores() {
        let root = tempfile::tempdir().unwrap();
        let cfg = config(Stop::Duration(Duration::from_millis(150)));
        let open = |_: &Path| -> Result<Box<dyn Engine>> { Ok(Box::new(Mem::default())) };
        let mut bench = Bench::new(&open, root.path(), 2_000, &cfg, true, "mem").unwrap();
        let fill = measured(bench.run(Workload::FillRandom).unwrap());
        assert!(fill.completed && fill.rounds > 1, "{fill:?}");
        assert_eq!(fill.space, Some((0, 2_000 * (16 + 200))));
        // A sync timed after each pass through every key: all but perhaps
        // the last, which the window may cut short.
        let full = fill.fill_syncs.len() as u32;
        assert!(
            full >= 1 && full >= fill.rounds - 1 && full <= fill.rounds,
            "{fill:?}"
        );
        assert!(fill.fill_sync_ms().is_some());
        assert!(fill.cpu.user + fill.cpu.system > Duration::ZERO, "{fill:?}");
        assert!(fill.elapsed >= Duration::from_millis(150));
        assert_eq!(bench.present_count, bench.keys.min(bench.present_count));
        for w in Workload::ALL {
            let m = measured(bench.run(w).unwrap());
            assert!(m.ops > 0, "{w}: {m:?}");
            let (disk, logical) = bench.space().unwrap();
            assert_eq!(disk, 0, "Mem keeps nothing on disk");
            assert_eq!(logical, bench.present_count * (16 + 200));
            if w == Workload::DeleteRandom {
                // At least one whole round removed every loaded key. (Which
                // keys are present at the end depends on where the clock
                // stopped the last round: it may reload them all and then
                // get no time to remove any, which once failed a check of
                // the end state on a loaded machine.)
                assert!(m.rounds >= 1 && m.ops >= 2_000, "{m:?}");
            }
        }
        bench.close().unwrap();
    }

    /// A steady cell after a fill starts on a fresh store loaded whole,
    /// and writes the same values whatever the fills did before it: one
    /// writer, 1,000 keys, fills of 2,500 operations (three passes, the
    /// last cut at 500 keys), one fill cell or two, then 2,500 overwrites
    /// in a store of their own; the two stores end with the same pairs,
    /// and some keys no overwrite reached hold the loaded value.
    #[test]
    fn a_steady_cell_after_fills_starts_afresh_with_the_same_values() {
        // One writer and no warm-up (whose length is time): the streams
        // alone decide what the store ends with.
        let cfg = Config {
            threads: 1,
            warmup: Duration::ZERO,
            ..config(Stop::Ops(2_500))
        };
        let open = |_: &Path| -> Result<Box<dyn Engine>> { Ok(Box::new(Mem::default())) };
        let pairs_after = |fills: u32| {
            let root = tempfile::tempdir().unwrap();
            let mut bench = Bench::new(&open, root.path(), 1_000, &cfg, true, "mem").unwrap();
            for _ in 0..fills {
                let fill = measured(bench.run(Workload::FillRandom).unwrap());
                assert_eq!(fill.rounds, 3, "{fill:?}");
            }
            measured(bench.run(Workload::Overwrite).unwrap());
            // Three stores per fill cell (the first pass of the first in
            // the store the bench opened), then one for the overwrite.
            assert_eq!(bench.store_no, 3 * fills, "a store of its own");
            let mut pairs = Vec::new();
            bench
                .engine()
                .scan(b"", usize::MAX, &mut |k, v| {
                    pairs.push((k.to_vec(), v.to_vec()));
                    Ok(())
                })
                .unwrap();
            let mut loaded = Vec::new();
            let untouched = (0..1_000u64)
                .filter(|&i| {
                    bench.values.fill(i, 0, &mut loaded);
                    pairs
                        .iter()
                        .any(|(k, v)| k[..] == key(i)[..] && *v == loaded)
                })
                .count();
            (pairs, untouched)
        };
        let (once, untouched) = pairs_after(1);
        assert_eq!(once.len(), 1_000);
        // About e^-2.5 of the keys (82 expected) are not overwritten.
        assert!((30..200).contains(&untouched), "{untouched}");
        assert!(once == pairs_after(2).0, "the same values after more fills");
    }

    #[test]
    fn a_fixed_operation_count_is_honoured() {
        let root = tempfile::tempdir().unwrap();
        let cfg = config(Stop::Ops(3_001));
        let engine_open = |_: &Path| -> Result<Box<dyn Engine>> { Ok(Box::new(Mem::default())) };
        let mut bench = Bench::new(&engine_open, root.path(), 1_000, &cfg, true, "mem").unwrap();
        for w in [Workload::ReadRandom, Workload::YcsbA, Workload::FillSeq] {
            let m = measured(bench.run(w).unwrap());
            assert_eq!(m.ops, 3_001, "{w}");
        }
    }

    #[test]
    fn scans_are_unsupported_without_order_and_reads_load_first() {
        struct Unordered(Mem);
        impl Engine for Unordered {
            fn name(&self) -> &'static str {
                "unordered"
            }
            fn insert(&self, k: &[u8], v: &[u8]) -> Result<()> {
                self.0.insert(k, v)
            }
            fn get(&self, k: &[u8], buf: &mut Vec<u8>) -> Result<bool> {
                self.0.get(k, buf)
            }
            fn remove(&self, k: &[u8]) -> Result<()> {
                self.0.remove(k)
            }
            fn sync(&self) -> Result<()> {
                Ok(())
            }
            fn settings(&self) -> String {
                String::new()
            }
            fn durability(&self) -> String {
                String::new()
            }
            fn close(self: Box<Self>) -> Result<()> {
                Ok(())
            }
        }
        let root = tempfile::tempdir().unwrap();
        let cfg = config(Stop::Duration(Duration::from_millis(50)));
        let open =
            |_: &Path| -> Result<Box<dyn Engine>> { Ok(Box::new(Unordered(Mem::default()))) };
        let mut bench = Bench::new(&open, root.path(), 500, &cfg, true, "u").unwrap();
        for w in [Workload::ReadSeq, Workload::YcsbE] {
            assert!(matches!(bench.run(w).unwrap(), Outcome::Unsupported(_)));
        }
        measured(bench.run(Workload::YcsbC).unwrap());
        assert_eq!(bench.present_count, 500);
    }

    #[test]
    fn a_wrong_value_aborts_the_cell() {
        let root = tempfile::tempdir().unwrap();
        let cfg = config(Stop::Duration(Duration::from_millis(100)));
        let open = |_: &Path| -> Result<Box<dyn Engine>> {
            Ok(Box::new(Mem {
                corrupt: true,
                ..Mem::default()
            }))
        };
        // The probe value is short, so the corruption passes it.
        let mut bench = Bench::new(&open, root.path(), 500, &cfg, true, "bad").unwrap();
        let err = bench.run(Workload::ReadRandom).unwrap_err();
        assert!(format!("{err:#}").contains("wrong value"), "{err:#}");
    }
}
