//! Results: the JSON of every cell, the ranked Markdown board, and the
//! comparison of two result sets.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::path::Path;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::driver::{Config, FULL_CHECK_EVERY, LATENCY_CLOCK, LOAD_BATCH, Measurement, Stop};
use crate::engine::{Durability, human_bytes};
use crate::engines::Kind;
use crate::workload::{KEY_BYTES, Shape, Workload, ZIPF_THETA};

/// The machine and toolchain a board ran on.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Environment {
    /// CPU model name from `/proc/cpuinfo`.
    pub cpu: String,
    /// Logical cores available to the process.
    pub cores: usize,
    /// Total memory, in GiB.
    pub memory_gib: f64,
    /// Kernel release.
    pub kernel: String,
    /// File system holding the stores: type, device and mount point.
    pub filesystem: String,
    /// The `rustc --version` that compiled the harness.
    pub rustc: String,
    /// When the run started, in seconds since the Unix epoch (UTC).
    pub started_unix_s: u64,
}

impl Environment {
    /// Reads the environment of this machine for stores under `data_dir`
    /// (`unknown` where unreadable).
    pub fn detect(data_dir: &Path) -> Self {
        let read = |path| fs::read_to_string(path).unwrap_or_default();
        let field = |text: &str, name: &str| {
            text.lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        };
        let memory_kib: Option<f64> = field(&read("/proc/meminfo"), "MemTotal")
            .and_then(|v| v.trim_end_matches("kB").trim().parse().ok());
        let kernel = read("/proc/sys/kernel/osrelease").trim().to_owned();
        Environment {
            cpu: field(&read("/proc/cpuinfo"), "model name").unwrap_or_else(|| "unknown".into()),
            cores: std::thread::available_parallelism().map_or(0, usize::from),
            memory_gib: memory_kib.map_or(0.0, |k| k / (1024.0 * 1024.0)),
            kernel: if kernel.is_empty() {
                "unknown".into()
            } else {
                kernel
            },
            filesystem: filesystem_of(data_dir, &read("/proc/mounts")),
            rustc: env!("EMBERKV_BENCH_RUSTC").to_owned(),
            started_unix_s: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        }
    }
}

/// The mount in `mounts` (the text of `/proc/mounts`) that holds `dir`.
fn filesystem_of(dir: &Path, mounts: &str) -> String {
    let dir = fs::canonicalize(dir).unwrap_or_else(|_| dir.to_owned());
    mounts
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            Some((f.next()?, f.next()?, f.next()?))
        })
        .filter(|(_, mount, _)| dir.starts_with(mount))
        .max_by_key(|(_, mount, _)| mount.len())
        .map_or_else(
            || "unknown".to_owned(),
            |(dev, mount, fstype)| format!("{fstype} ({dev} on {mount})"),
        )
}

/// The harness settings shared by every cell.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Harness {
    /// The durability every engine was asked for.
    pub durability: Durability,
    /// Client threads per cell.
    pub threads: usize,
    /// When a measured window ends.
    pub stop: Stop,
    /// Unmeasured warm-up before each steady cell, in seconds.
    pub warmup_s: f64,
    /// Measured repetitions per cell.
    pub reps: u32,
    /// Seed of all generated data and operation streams.
    pub seed: u64,
    /// Key length, in bytes.
    pub key_bytes: usize,
    /// Value length, in bytes.
    pub value_bytes: usize,
    /// Share of each value that is a repeated pattern.
    pub compressibility: f64,
    /// Pairs per batch when loading keys before a cell.
    pub load_batch: usize,
    /// Skew of the Zipfian distributions.
    pub zipf_theta: f64,
    /// Idle time before a steady write-only cell's space is measured at
    /// rest, in seconds (see [`Metrics::settled_disk_bytes`]); `None` in
    /// results of harnesses that did not measure it.
    #[serde(default)]
    pub settle_s: Option<f64>,
    /// What timed each operation's latency ([`LATENCY_CLOCK`]); `None` in
    /// results of harnesses that read `std::time::Instant` (the OS's
    /// monotonic clock) instead, until 2026-12-06.
    #[serde(default)]
    pub latency_clock: Option<String>,
}

impl Harness {
    /// The harness settings of a run at `durability` with `cfg`.
    pub fn new(durability: Durability, cfg: &Config) -> Self {
        Harness {
            durability,
            threads: cfg.threads,
            stop: cfg.stop,
            warmup_s: cfg.warmup.as_secs_f64(),
            reps: cfg.reps,
            seed: cfg.seed,
            key_bytes: KEY_BYTES,
            value_bytes: cfg.value_size,
            compressibility: cfg.compressibility,
            load_batch: LOAD_BATCH,
            zipf_theta: ZIPF_THETA,
            settle_s: Some(cfg.settle.as_secs_f64()),
            latency_clock: Some(LATENCY_CLOCK.to_owned()),
        }
    }

    fn window(&self) -> String {
        match self.stop {
            Stop::Duration(d) => format!("{} s", d.as_secs_f64()),
            Stop::Ops(n) => format!("{} operations", thousands(n)),
        }
    }
}

/// A set of workloads run on one store of one shape.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Scenario {
    /// The page of the board it belongs to (`read-heavy`, `write-ingest`,
    /// `update-mixes`, `scaling`, or `custom` for `run`).
    pub page: String,
    /// Its name, unique in a run.
    pub name: String,
    /// Keys loaded (or filled).
    pub keys: u64,
    /// Out-of-cache mode: each engine's own caches bounded to this many
    /// bytes.
    pub resident_budget: Option<u64>,
    /// The workloads, in the order they run on the store.
    pub workloads: Vec<Workload>,
    /// Client threads, when the scenario sets its own instead of the
    /// run's (the scaling page).
    #[serde(default)]
    pub threads: Option<usize>,
}

impl Scenario {
    /// `100,000 keys, default caches` (each engine's caches at their shipped
    /// sizes, which not every engine's hold the data in) or `300,000 keys,
    /// own caches ≤ 32 MiB`,
    /// and `, 2 threads` when the scenario sets its own thread count.
    pub fn shape(&self) -> String {
        let threads = match self.threads {
            Some(1) => ", 1 thread".to_owned(),
            Some(n) => format!(", {n} threads"),
            None => String::new(),
        };
        let keys = match self.resident_budget {
            Some(b) => format!(
                "{} keys, own caches ≤ {}",
                thousands(self.keys),
                human_bytes(b)
            ),
            None => format!("{} keys, default caches", thousands(self.keys)),
        };
        keys + &threads
    }
}

/// What one engine ran with in one scenario.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EngineInfo {
    /// Registry name.
    pub name: String,
    /// Store or reference rail.
    pub kind: Kind,
    /// The crate that provides it.
    pub krate: String,
    /// Its locked version.
    pub version: String,
    /// The scenario.
    pub scenario: String,
    /// Configuration it was opened with, naming what the harness set.
    pub settings: String,
    /// When a completed write becomes durable.
    pub durability: String,
}

/// An engine on the list that could not run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Missing {
    /// Registry name.
    pub name: String,
    /// The crate that would provide it.
    pub krate: String,
    /// Why it did not run.
    pub reason: String,
}

/// Whether a cell ran.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "status", content = "reason")]
pub enum Status {
    /// Measured.
    Ok,
    /// The engine cannot run the workload.
    Unsupported(String),
    /// The cell failed (a wrong read, an engine error, a crash).
    Error(String),
}

/// The measured numbers of a cell.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Metrics {
    /// Operations completed in the measured windows.
    pub ops: u64,
    /// Total length of the measured windows, in seconds.
    pub elapsed_s: f64,
    /// Median throughput over the repetitions, in operations per second.
    pub ops_per_sec: f64,
    /// Throughput of each repetition, in operations per second.
    pub rep_ops_per_sec: Vec<f64>,
    /// Median latency, in microseconds.
    pub p50_us: f64,
    /// 99th-percentile latency, in microseconds.
    pub p99_us: f64,
    /// 99.9th-percentile latency, in microseconds.
    pub p999_us: f64,
    /// Worst latency, in microseconds.
    pub max_us: f64,
    /// `(quantile, microseconds)` from the median to p99.99.
    pub latency_curve: Vec<(f64, f64)>,
    /// Fills and deletes: passes over the key set, over all repetitions.
    pub rounds: Option<u32>,
    /// Fills and deletes: whether each repetition got through every key.
    pub completed: Option<bool>,
    /// Bytes allocated on disk to the store after the cell (a fill's:
    /// after its last pass through every key) and a sync; 0 for a fill
    /// that never got through every key.
    pub disk_bytes: u64,
    /// Bytes of the keys and values the store holds (0 when `disk_bytes`
    /// is not measured).
    pub logical_bytes: u64,
    /// Cells [`measured_at_rest`] (`overwrite`): bytes allocated on disk
    /// to the store after it then sat idle for [`Harness::settle_s`] and a
    /// sync.
    #[serde(default)]
    pub settled_disk_bytes: Option<u64>,
    /// fsync/fdatasync calls inside the measured windows, for engines
    /// that report them.
    #[serde(default)]
    pub syncs: Option<u64>,
    /// Fills: the median time of the engine's sync after each pass that
    /// went through every key, in milliseconds (unmeasured, outside the
    /// rate; `None` in results of harnesses that did not time it, and
    /// when no pass went through every key).
    #[serde(default)]
    pub fill_sync_ms: Option<f64>,
    /// CPU time of the engine's worker process in user space inside the
    /// measured windows, in seconds: the engine's threads (background
    /// ones included) and the harness's client threads (see
    /// [`crate::driver::CpuTime`]); `None` in results of harnesses that did
    /// not measure it.
    #[serde(default)]
    pub cpu_user_s: Option<f64>,
    /// As [`Metrics::cpu_user_s`], in the kernel on the process's behalf.
    #[serde(default)]
    pub cpu_system_s: Option<f64>,
}

impl Metrics {
    /// The metrics of measurement `m` of `workload`, with the store's
    /// `disk_bytes` and `logical_bytes` after it.
    pub fn new(workload: Workload, m: &Measurement, disk_bytes: u64, logical_bytes: u64) -> Self {
        let counted = workload.shape() != Shape::Steady;
        Metrics {
            ops: m.ops,
            elapsed_s: m.elapsed.as_secs_f64(),
            ops_per_sec: m.ops_per_sec(),
            rep_ops_per_sec: m.rep_ops_per_sec.clone(),
            p50_us: m.latencies.quantile_us(0.5),
            p99_us: m.latencies.quantile_us(0.99),
            p999_us: m.latencies.quantile_us(0.999),
            max_us: m.latencies.quantile_us(1.0),
            latency_curve: m.latencies.curve(),
            rounds: counted.then_some(m.rounds),
            completed: counted.then_some(m.completed),
            disk_bytes,
            logical_bytes,
            settled_disk_bytes: None,
            syncs: m.syncs,
            fill_sync_ms: m.fill_sync_ms(),
            cpu_user_s: Some(m.cpu.user.as_secs_f64()),
            cpu_system_s: Some(m.cpu.system.as_secs_f64()),
        }
    }

    /// Whether the numbers could come from a measurement, so that a
    /// results file edited by hand is checked before `report` renders it
    /// (a negative rate, a p99 below the median, a rate of 1e308 shown as
    /// 18,446,744,073,709,551,615 were rendered as given): rates, times
    /// and latencies finite and not negative; the latencies and the curve
    /// in quantile order, below the worst, and the curve agreeing with
    /// p50, p99 and p99.9; the median rate among the repetitions' rates,
    /// and the operations over the measured time (an average of the
    /// repetitions' rates weighted by their windows) between the slowest
    /// and the fastest repetition.
    pub fn check(&self) -> std::result::Result<(), String> {
        let named = [
            ("elapsed_s", self.elapsed_s),
            ("ops_per_sec", self.ops_per_sec),
            ("p50_us", self.p50_us),
            ("p99_us", self.p99_us),
            ("p999_us", self.p999_us),
            ("max_us", self.max_us),
        ];
        let values = named
            .into_iter()
            .chain(self.rep_ops_per_sec.iter().map(|&r| ("rep_ops_per_sec", r)))
            .chain(
                self.latency_curve
                    .iter()
                    .map(|&(_, us)| ("latency_curve", us)),
            )
            .chain(self.fill_sync_ms.map(|ms| ("fill_sync_ms", ms)))
            .chain(self.cpu_user_s.map(|s| ("cpu_user_s", s)))
            .chain(self.cpu_system_s.map(|s| ("cpu_system_s", s)));
        for (name, value) in values {
            if !value.is_finite() || value.is_sign_negative() {
                return Err(format!("{name} is {value}"));
            }
        }
        if !(self.p50_us <= self.p99_us
            && self.p99_us <= self.p999_us
            && self.p999_us <= self.max_us)
        {
            return Err(format!(
                "latencies out of order: p50 {} us, p99 {} us, p99.9 {} us, max {} us",
                self.p50_us, self.p99_us, self.p999_us, self.max_us
            ));
        }
        let mut last = (0.0, 0.0);
        for &(q, us) in &self.latency_curve {
            if !(q > last.0 && q <= 1.0 && us >= last.1 && us <= self.max_us) {
                return Err(format!(
                    "latency_curve out of order at ({q}, {us} us): quantiles must rise within \
                     0 to 1, latencies not fall, none above max_us"
                ));
            }
            let stated = match q {
                0.5 => Some(self.p50_us),
                0.99 => Some(self.p99_us),
                0.999 => Some(self.p999_us),
                _ => None,
            };
            if let Some(stated) = stated.filter(|&stated| stated != us) {
                return Err(format!(
                    "latency_curve gives {us} us at {q}, the cell's quantile {stated} us"
                ));
            }
            last = (q, us);
        }
        if self.ops == 0 {
            return if self.ops_per_sec == 0.0 {
                Ok(())
            } else {
                Err(format!("{} ops/s from no operations", self.ops_per_sec))
            };
        }
        let reps = &self.rep_ops_per_sec;
        if reps.is_empty() || self.elapsed_s == 0.0 {
            return Err("operations without repetitions or measured time".into());
        }
        let (slowest, fastest) = reps.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &r| {
            (lo.min(r), hi.max(r))
        });
        // Rounding in the rates' last digits, not more.
        let within = |rate: f64| rate >= slowest * 0.999 && rate <= fastest * 1.001;
        if !within(self.ops_per_sec) {
            return Err(format!(
                "ops_per_sec {} is not among the repetitions' ({slowest} to {fastest})",
                self.ops_per_sec
            ));
        }
        let mean = self.ops as f64 / self.elapsed_s;
        if !within(mean) {
            return Err(format!(
                "{} ops in {} s make {mean} ops/s, outside the repetitions' {slowest} to {fastest}",
                self.ops, self.elapsed_s
            ));
        }
        Ok(())
    }

    /// Writes per fsync/fdatasync in the measured windows, for a
    /// write-only `workload` of an engine that reports its syncs.
    pub fn writes_per_sync(&self, workload: Workload) -> Option<f64> {
        let syncs = self.syncs.filter(|&n| n > 0)?;
        workload
            .writes_only()
            .then(|| self.ops as f64 / syncs as f64)
    }

    /// CPU time per operation in the measured windows, in microseconds,
    /// and the kernel's share of it (0 to 1); `None` when not measured or
    /// when no operation completed.
    pub fn cpu_per_op(&self) -> Option<(f64, f64)> {
        let (user, system) = (self.cpu_user_s?, self.cpu_system_s?);
        let total = user + system;
        (self.ops > 0).then(|| {
            let kernel = if total > 0.0 { system / total } else { 0.0 };
            (total * 1e6 / self.ops as f64, kernel)
        })
    }

    /// Bytes on disk per logical byte, when the store holds anything and
    /// keeps anything on disk.
    pub fn space_amp(&self) -> Option<f64> {
        (self.logical_bytes > 0 && self.disk_bytes > 0)
            .then(|| self.disk_bytes as f64 / self.logical_bytes as f64)
    }

    /// [`Metrics::space_amp`] of the store at rest (see
    /// [`Metrics::settled_disk_bytes`]), when measured.
    pub fn settled_space_amp(&self) -> Option<f64> {
        let disk = self.settled_disk_bytes.filter(|&d| d > 0)?;
        (self.logical_bytes > 0).then(|| disk as f64 / self.logical_bytes as f64)
    }
}

/// Removes the files ending in `.{extension}` from `dir`, the outputs of
/// an earlier run or rendering that the new ones replace (so that a
/// reused output directory holds no cell or chart the new results lack).
pub fn remove_outputs(dir: &Path, extension: &str) -> Result<()> {
    let entries = fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))?;
    for entry in entries {
        let path = entry
            .with_context(|| format!("listing {}", dir.display()))?
            .path();
        if path.extension().is_some_and(|e| e == extension) && path.is_file() {
            fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
        }
    }
    Ok(())
}

/// One engine on one workload of one scenario.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Cell {
    /// Engine name.
    pub engine: String,
    /// Store or reference rail.
    pub kind: Kind,
    /// Scenario name.
    pub scenario: String,
    /// Workload.
    pub workload: Workload,
    /// The durability of the run.
    pub durability: Durability,
    /// Whether it ran.
    #[serde(flatten)]
    pub status: Status,
    /// The numbers, when it ran.
    pub metrics: Option<Metrics>,
    /// Peak resident memory of the process that ran this engine through
    /// this scenario (loading and every cell), in bytes (`VmHWM`).
    pub peak_rss_bytes: Option<u64>,
}

/// Whether a cell's store is measured again at rest (see
/// [`Metrics::settled_disk_bytes`]): a store's steady write-only cells
/// (`overwrite`; rails have no background work to wait for).
pub fn measured_at_rest(kind: Kind, workload: Workload) -> bool {
    kind == Kind::Store && workload.shape() == Shape::Steady && workload.writes_only()
}

/// A whole run: environment, settings and every cell.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    /// Where it ran.
    pub environment: Environment,
    /// Harness settings.
    pub harness: Harness,
    /// The scenarios, in the order run.
    pub scenarios: Vec<Scenario>,
    /// Each engine's settings and durability, per scenario.
    pub engines: Vec<EngineInfo>,
    /// Engines on the list that could not run, with the reason.
    pub missing: Vec<Missing>,
    /// Every cell, in the order run.
    pub cells: Vec<Cell>,
}

/// The board page of the thread-scaling scenarios.
pub const SCALING_PAGE: &str = "scaling";

/// File name of the whole result set in an output directory.
pub const RESULTS_JSON: &str = "results.json";
/// File name of the Markdown board in an output directory.
pub const BOARD_MD: &str = "board.md";

impl Report {
    /// Reads `dir/results.json` (or the file `path` itself).
    pub fn load(path: &Path) -> Result<Report> {
        let file = if path.is_dir() {
            path.join(RESULTS_JSON)
        } else {
            path.to_owned()
        };
        let text =
            fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
        let report: Report =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", file.display()))?;
        for cell in &report.cells {
            if let Some(m) = &cell.metrics
                && let Err(why) = m.check()
            {
                bail!(
                    "{}: the cell of {} on {} ({}) cannot have been measured: {why}",
                    file.display(),
                    cell.engine,
                    cell.workload.name(),
                    cell.scenario
                );
            }
        }
        Ok(report)
    }

    /// Writes `results.json` and one JSON file per cell under
    /// `cells/` in `dir` (in place of the cells an earlier run left there).
    pub fn write_json(&self, dir: &Path) -> Result<()> {
        let cells = dir.join("cells");
        fs::create_dir_all(&cells).with_context(|| format!("creating {}", cells.display()))?;
        remove_outputs(&cells, "json")?;
        for c in &self.cells {
            let name = format!(
                "{}-{}-{}-{}.json",
                c.durability,
                slug(&c.scenario),
                c.workload,
                c.engine
            );
            let path = cells.join(name);
            fs::write(&path, serde_json::to_string_pretty(c)? + "\n")
                .with_context(|| format!("writing {}", path.display()))?;
        }
        let json = dir.join(RESULTS_JSON);
        fs::write(&json, serde_json::to_string_pretty(self)? + "\n")
            .with_context(|| format!("writing {}", json.display()))
    }

    /// The board as Markdown: environment, method, engines, then per
    /// page and scenario one table per workload with the stores ranked by
    /// throughput and the reference rails apart. `charts` names the
    /// directory (relative to the Markdown file) holding the SVG charts,
    /// when they were drawn.
    pub fn markdown(&self, charts: Option<&str>) -> String {
        let (e, h) = (&self.environment, &self.harness);
        let mut md = format!("# emberkv-bench board — durability {}\n\n", h.durability);
        md.push_str("## Environment\n\n");
        let _ = writeln!(md, "- Date: {}", utc_date(e.started_unix_s));
        let _ = writeln!(md, "- CPU: {} ({} cores)", e.cpu, e.cores);
        let _ = writeln!(md, "- Memory: {:.1} GiB", e.memory_gib);
        let _ = writeln!(md, "- Kernel: {}", e.kernel);
        let _ = writeln!(md, "- File system of the stores: {}", e.filesystem);
        let _ = writeln!(md, "- Compiler: {}", e.rustc);
        md.push_str("\n## Method\n\n");
        let settled = self.cells.iter().any(|c| {
            c.metrics
                .as_ref()
                .is_some_and(|m| m.settled_disk_bytes.is_some())
        });
        let at_rest = match h.settle_s {
            Some(secs) if settled => format!(
                " After `overwrite` the store then sits idle for {secs} s and is measured \
                 again, at rest (in brackets: what background compaction leaves once \
                 writers stop)."
            ),
            _ => String::new(),
        };
        let _ = writeln!(
            md,
            "{} client threads per cell (the scaling page varies them); keys of {} B; values of {} B, {:.0} % of each a \
             repeated pattern and the rest random, each value carrying its own version and \
             check word; seed {}. Every engine sees the same operation streams. Each cell \
             measures for {} after {} s of unmeasured warm-up (steady workloads), {} \
             repetition(s); the throughput shown is the median of the repetitions, latencies \
             are of every measured operation, timed by {} (HdrHistogram per thread, \
             merged). Keys a \
             cell needs are loaded before it, unmeasured, through the same calls for every \
             engine: groups of {} pairs, each committed as one transaction or write batch \
             where the engine's adapter implements one (and inserted pair by pair \
             otherwise). Every read is verified (length and check word; \
             every {}th byte for byte); a wrong answer fails the engine's cell. Space \
             amplification is bytes allocated on disk over logical bytes (keys plus \
             values held) after the cell (a fill's: after its last pass through every \
             key) and a sync.{} Peak RSS is `VmHWM` of a child \
             process that runs one engine through one scenario, loading included. CPU \
             µs/op is that process's CPU time in the measured windows (user and kernel, \
             `getrusage`) over the operations: the engine's threads, background ones \
             included, and the harness's client threads, the same driver for every \
             engine; work an engine leaves past the window (a fill's sync) is not in it. \
             On a machine with fewer CPUs than client threads it shows what an operation \
             costs where the rate shows who got the CPUs. The \
             OS page cache is not dropped between cells: out of cache means out of the \
             engine's own caches. Zipfian skew {}.",
            h.threads,
            h.key_bytes,
            thousands(h.value_bytes as u64),
            h.compressibility * 100.0,
            h.seed,
            h.window(),
            h.warmup_s,
            h.reps,
            h.latency_clock
                .as_deref()
                .unwrap_or("the OS's monotonic clock (`std::time::Instant`)"),
            thousands(h.load_batch as u64),
            FULL_CHECK_EVERY,
            at_rest,
            h.zipf_theta,
        );
        self.engines_markdown(&mut md);
        let mut pages: Vec<&str> = Vec::new();
        for s in &self.scenarios {
            if !pages.contains(&s.page.as_str()) {
                pages.push(&s.page);
            }
        }
        for page in pages {
            let _ = writeln!(md, "\n## {page}");
            if page == SCALING_PAGE {
                self.scaling_table(&mut md);
                continue;
            }
            for s in self.scenarios.iter().filter(|s| s.page == page) {
                for &w in &s.workloads {
                    self.table(&mut md, s, w, charts);
                }
            }
        }
        md
    }

    /// The scaling page: cache-resident readrandom throughput per engine
    /// at each thread count, from the scaling scenarios and the
    /// cache-resident scenario run at the run's own thread count.
    fn scaling_table(&self, md: &mut String) {
        let mut columns: Vec<(usize, &Scenario)> = self
            .scenarios
            .iter()
            .filter(|s| s.resident_budget.is_none() && s.workloads.contains(&Workload::ReadRandom))
            .filter(|s| s.page == SCALING_PAGE || s.threads.is_none())
            .map(|s| (s.threads.unwrap_or(self.harness.threads), s))
            .collect();
        columns.sort_by_key(|&(t, _)| t);
        columns.dedup_by_key(|&mut (t, _)| t);
        let Some(&(first, _)) = columns.first() else {
            return;
        };
        let (last, _) = columns[columns.len() - 1];
        let _ = writeln!(
            md,
            "\nreadrandom ops/sec on {} keys, default caches, by client threads (the \
             machine has {} cores). The last column is the throughput at {last} threads over \
             the throughput at {first}.\n",
            thousands(columns[0].1.keys),
            self.environment.cores
        );
        md.push_str("| engine | kind |");
        for (t, _) in &columns {
            let _ = write!(md, " {t} thr |");
        }
        let _ = writeln!(md, " {last}/{first} |");
        md.push_str("|---|---|");
        md.push_str(&"---:|".repeat(columns.len() + 1));
        md.push('\n');
        let mut engines: Vec<(&str, Kind)> = Vec::new();
        for c in &self.cells {
            if !engines.iter().any(|(e, _)| *e == c.engine) {
                engines.push((&c.engine, c.kind));
            }
        }
        for (engine, kind) in engines {
            let rates: Vec<Option<f64>> = columns
                .iter()
                .map(|(_, s)| {
                    self.cells
                        .iter()
                        .find(|c| {
                            c.engine == engine
                                && c.scenario == s.name
                                && c.workload == Workload::ReadRandom
                        })
                        .and_then(|c| c.metrics.as_ref().filter(|_| c.status == Status::Ok))
                        .map(|m| m.ops_per_sec)
                })
                .collect();
            if rates.iter().all(Option::is_none) {
                continue;
            }
            let _ = write!(md, "| {engine} | {} |", kind_name(kind));
            for r in &rates {
                let shown = r.map_or("—".to_owned(), |r| thousands(r.round() as u64));
                let _ = write!(md, " {shown} |");
            }
            let ratio = match (rates[0], rates[rates.len() - 1]) {
                (Some(a), Some(b)) if a > 0.0 => format!("{:.2}x", b / a),
                _ => "—".to_owned(),
            };
            let _ = writeln!(md, " {ratio} |");
        }
    }

    fn engines_markdown(&self, md: &mut String) {
        md.push_str(
            "\n## Engines\n\nEvery engine runs at its shipped defaults; whatever the \
             harness sets is named in its settings.\n\n",
        );
        md.push_str("| engine | kind | crate | scenarios | settings | durability |\n");
        md.push_str("|---|---|---|---|---|---|\n");
        let mut rows: Vec<(String, Vec<&str>, &EngineInfo)> = Vec::new();
        for info in &self.engines {
            let key = format!(
                "{}\u{0}{}\u{0}{}",
                info.name, info.settings, info.durability
            );
            match rows.iter_mut().find(|(k, _, _)| *k == key) {
                Some((_, scenarios, _)) => scenarios.push(&info.scenario),
                None => rows.push((key, vec![&info.scenario], info)),
            }
        }
        for (_, scenarios, info) in rows {
            let _ = writeln!(
                md,
                "| {} | {} | {} {} | {} | {} | {} |",
                info.name,
                kind_name(info.kind),
                info.krate,
                info.version,
                scenarios.join(", "),
                info.settings,
                info.durability
            );
        }
        if !self.missing.is_empty() {
            md.push_str("\nNot run:\n\n| engine | crate | reason |\n|---|---|---|\n");
            for m in &self.missing {
                let _ = writeln!(md, "| {} | {} | {} |", m.name, m.krate, m.reason);
            }
        }
    }

    fn table(&self, md: &mut String, s: &Scenario, w: Workload, charts: Option<&str>) {
        let cells: Vec<&Cell> = self
            .cells
            .iter()
            .filter(|c| c.scenario == s.name && c.workload == w)
            .collect();
        if cells.is_empty() {
            return;
        }
        let _ = writeln!(md, "\n### {w} — {}\n", s.shape());
        let _ = writeln!(md, "One operation: {}.\n", w.describe());
        let header = "| rank | engine | shape | ops/sec | p50 µs | p99 µs | p99.9 µs | max µs \
                      | CPU µs/op | space amp | peak RSS |\n\
                      |---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
        md.push_str(header);
        let mut stores: Vec<&Cell> = cells
            .iter()
            .copied()
            .filter(|c| c.kind == Kind::Store)
            .collect();
        stores.sort_by(|a, b| {
            let rate = |c: &Cell| c.metrics.as_ref().map_or(-1.0, |m| m.ops_per_sec);
            rate(b).total_cmp(&rate(a))
        });
        let mut rank = 0;
        for c in stores {
            let r = if c.status == Status::Ok {
                rank += 1;
                rank.to_string()
            } else {
                "—".to_owned()
            };
            md.push_str(&row(&r, c, s));
        }
        let rails: Vec<&Cell> = cells
            .iter()
            .copied()
            .filter(|c| c.kind != Kind::Store)
            .collect();
        if !rails.is_empty() {
            md.push_str("\nReference rails, not ranked:\n\n");
            md.push_str(header);
            for c in rails {
                md.push_str(&row(kind_name(c.kind), c, s));
            }
        }
        let notes = self.notes(&cells);
        if !notes.is_empty() {
            md.push('\n');
            md.push_str(&notes);
        }
        if let Some(dir) = charts {
            let base = chart_base(&s.name, w);
            let _ = writeln!(
                md,
                "\n![{w} throughput]({dir}/{base}-throughput.svg) \
                 ![{w} latency]({dir}/{base}-latency.svg)"
            );
        }
    }

    /// Notes under a table: fill and delete rounds, capped fills, errors.
    fn notes(&self, cells: &[&Cell]) -> String {
        let mut notes = String::new();
        for c in cells {
            if let Status::Error(e) = &c.status {
                let _ = writeln!(notes, "- **{}: error: {e}**", c.engine);
            }
            let Some(m) = &c.metrics else { continue };
            if let Some(per_sync) = m.writes_per_sync(c.workload) {
                let _ = writeln!(
                    notes,
                    "- {}: {per_sync:.1} writes per fsync/fdatasync ({} writes, {} syncs in \
                     the measured window, as the engine reports them).",
                    c.engine,
                    thousands(m.ops),
                    thousands(m.syncs.unwrap_or(0))
                );
            }
            match (m.rounds, m.completed) {
                (Some(_), Some(false)) => {
                    let _ = writeln!(
                        notes,
                        "- **{}: the window closed before every key was done once \
                         ({} operations); its rate is of those.**",
                        c.engine,
                        thousands(m.ops)
                    );
                }
                (Some(rounds), _) if rounds > self.harness.reps => {
                    let _ = writeln!(
                        notes,
                        "- {}: {} passes over the key set over {} repetition(s) to fill \
                         the window{}; set-up between passes unmeasured.",
                        c.engine,
                        rounds,
                        self.harness.reps,
                        if c.workload.shape() == Shape::Fill {
                            ", each into a fresh, empty store"
                        } else {
                            ", reloading the keys between passes"
                        }
                    );
                }
                _ => {}
            }
            if let Some(ms) = m.fill_sync_ms {
                let _ = writeln!(
                    notes,
                    "- {}: its sync after a pass through every key took {} ms (median; \
                     outside the rate, as is the work an engine leaves for it).",
                    c.engine,
                    millis(ms)
                );
            }
            let at_rest_due =
                self.harness.settle_s.is_some() && measured_at_rest(c.kind, c.workload);
            if at_rest_due && m.settled_disk_bytes.is_none() {
                let _ = writeln!(
                    notes,
                    "- **{}: space at rest not measured (the measurement failed; the \
                     run's log says why).**",
                    c.engine
                );
            }
        }
        let counted = |c: &&Cell| {
            c.metrics
                .as_ref()
                .is_some_and(|m| m.writes_per_sync(c.workload).is_some())
        };
        if cells.iter().any(counted) {
            let silent: Vec<&str> = cells
                .iter()
                .filter(|c| c.kind == Kind::Store && c.status == Status::Ok && !counted(c))
                .map(|c| c.engine.as_str())
                .collect();
            if !silent.is_empty() {
                let _ = writeln!(
                    notes,
                    "- {}: writes per fsync/fdatasync not reported (the engine does not \
                     count its syncs, and the harness does not guess them).",
                    silent.join(", ")
                );
            }
        }
        notes
    }

    /// Ratios of `other` to `self` (the baseline), per cell present in
    /// both, as Markdown.
    pub fn compare(&self, other: &Report) -> String {
        let mut md = String::from(
            "| durability | scenario | workload | engine | A ops/sec | B ops/sec | B/A | A p99 µs \
             | B p99 µs | B/A |\n|---|---|---|---|---:|---:|---:|---:|---:|---:|\n",
        );
        let index: BTreeMap<_, &Cell> = other
            .cells
            .iter()
            .map(|c| ((c.durability, &c.scenario, c.workload, &c.engine), c))
            .collect();
        let mut unmatched = Vec::new();
        for a in &self.cells {
            let Some(b) = index.get(&(a.durability, &a.scenario, a.workload, &a.engine)) else {
                unmatched.push(format!(
                    "{} {} {} (only in A)",
                    a.scenario, a.workload, a.engine
                ));
                continue;
            };
            let ((ra, ma), (rb, mb)) = (shown_rate(a), shown_rate(b));
            let ratio = |x: Option<f64>, y: Option<f64>| match (x, y) {
                (Some(x), Some(y)) if x > 0.0 => format!("{:.2}", y / x),
                _ => "—".to_owned(),
            };
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                a.durability,
                a.scenario,
                a.workload,
                a.engine,
                ra,
                rb,
                ratio(ma.map(|m| m.ops_per_sec), mb.map(|m| m.ops_per_sec)),
                ma.map_or("—".to_owned(), |m| micros(m.p99_us)),
                mb.map_or("—".to_owned(), |m| micros(m.p99_us)),
                ratio(ma.map(|m| m.p99_us), mb.map(|m| m.p99_us)),
            );
        }
        for b in &other.cells {
            if !self.cells.iter().any(|a| {
                (a.durability, &a.scenario, a.workload, &a.engine)
                    == (b.durability, &b.scenario, b.workload, &b.engine)
            }) {
                unmatched.push(format!(
                    "{} {} {} (only in B)",
                    b.scenario, b.workload, b.engine
                ));
            }
        }
        if !unmatched.is_empty() {
            let _ = writeln!(md, "\nNot compared: {}", unmatched.join("; "));
        }
        let differences = self.differences(other);
        if !differences.is_empty() {
            let _ = writeln!(
                md,
                "\nThe two runs differ (A / B): {}. Their ratios compare unlike runs.",
                differences.join("; ")
            );
        }
        md
    }

    /// How the run of `self` (A) and that of `other` (B) were set up
    /// differently: the harness's settings, and the shape of each scenario
    /// both ran. Each as `field A / B`, named as in `results.json`.
    fn differences(&self, other: &Report) -> Vec<String> {
        let mut out = Vec::new();
        differing_fields("", &self.harness, &other.harness, &mut out);
        for sa in &self.scenarios {
            if let Some(sb) = other.scenarios.iter().find(|sb| sb.name == sa.name) {
                differing_fields(&format!("{} ", sa.name), sa, sb, &mut out);
            }
        }
        out
    }
}

/// Appends `{prefix}{field} {a's} / {b's}` to `out` for each field in
/// which the serialized `a` and `b` differ.
fn differing_fields<T: Serialize>(prefix: &str, a: &T, b: &T, out: &mut Vec<String>) {
    let (Ok(Value::Object(a)), Ok(Value::Object(b))) =
        (serde_json::to_value(a), serde_json::to_value(b))
    else {
        return;
    };
    for (field, x) in &a {
        let y = b.get(field).unwrap_or(&Value::Null);
        if x != y {
            out.push(format!("{prefix}{field} {x} / {y}"));
        }
    }
}

/// The throughput of a cell as shown, and its metrics when it ran.
fn shown_rate(c: &Cell) -> (String, Option<&Metrics>) {
    match (&c.status, &c.metrics) {
        (Status::Ok, Some(m)) => (thousands(m.ops_per_sec.round() as u64), Some(m)),
        (Status::Unsupported(_), _) => ("unsupported".to_owned(), None),
        _ => ("error".to_owned(), None),
    }
}

fn row(rank: &str, c: &Cell, s: &Scenario) -> String {
    let shape = s.shape();
    let rss = c.peak_rss_bytes.map_or("—".to_owned(), human_bytes);
    match (&c.status, &c.metrics) {
        (Status::Ok, Some(m)) => format!(
            "| {rank} | {} | {shape} | {} | {} | {} | {} | {} | {} | {} | {rss} |\n",
            c.engine,
            thousands(m.ops_per_sec.round() as u64),
            micros(m.p50_us),
            micros(m.p99_us),
            micros(m.p999_us),
            micros(m.max_us),
            cpu_per_op(m),
            space_amp(m),
        ),
        (Status::Unsupported(why), _) => format!(
            "| {rank} | {} | {shape} | unsupported ({why}) | | | | | | | |\n",
            c.engine
        ),
        (Status::Error(_), _) | (Status::Ok, None) => format!(
            "| {rank} | {} | {shape} | error (see below) | | | | | | | {rss} |\n",
            c.engine
        ),
    }
}

/// The CPU column: microseconds per operation and the kernel's share.
fn cpu_per_op(m: &Metrics) -> String {
    match m.cpu_per_op() {
        Some((us, kernel)) => format!("{} ({:.0} % kernel)", micros(us), kernel * 100.0),
        None => "—".to_owned(),
    }
}

/// The space amplification column: after the cell, and at rest when
/// measured.
fn space_amp(m: &Metrics) -> String {
    match (m.space_amp(), m.settled_space_amp()) {
        (Some(a), Some(s)) => format!("{a:.2} ({s:.2} at rest)"),
        (Some(a), None) => format!("{a:.2}"),
        (None, _) => "—".to_owned(),
    }
}

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Store => "store",
        Kind::Ceiling => "ceiling rail",
        Kind::Floor => "floor rail",
    }
}

/// The file-name stem of the charts of workload `w` in scenario `scenario`.
pub fn chart_base(scenario: &str, w: Workload) -> String {
    format!("{}-{w}", slug(scenario))
}

/// `name` in lower case with every run of other characters than letters
/// and digits turned into one `-`.
pub fn slug(name: &str) -> String {
    let mut out = String::new();
    for ch in name.chars() {
        if ch.is_ascii_alphanumeric() {
            out.push(ch.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').to_owned()
}

/// The UTC date and time of `unix_s` seconds since the epoch.
fn utc_date(unix_s: u64) -> String {
    let days = (unix_s / 86_400) as i64;
    let secs = unix_s % 86_400;
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        secs / 3_600,
        secs % 3_600 / 60
    )
}

/// `n` with thousands separators.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// A latency in microseconds, to about 3 significant figures.
pub fn micros(us: f64) -> String {
    match us {
        x if x < 10.0 => format!("{x:.2}"),
        x if x < 100.0 => format!("{x:.1}"),
        x => thousands(x.round() as u64),
    }
}

/// A time in milliseconds, to about 3 significant figures (as [`micros`]).
fn millis(ms: f64) -> String {
    micros(ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metrics(ops_per_sec: f64, rounds: Option<u32>, completed: Option<bool>) -> Metrics {
        Metrics {
            ops: 1_234,
            elapsed_s: 1_234.0 / ops_per_sec,
            ops_per_sec,
            rep_ops_per_sec: vec![ops_per_sec],
            p50_us: 1.0,
            p99_us: 2.0,
            p999_us: 3.0,
            max_us: 4.0,
            latency_curve: vec![(0.5, 1.0), (0.99, 2.0)],
            rounds,
            completed,
            disk_bytes: 2_000,
            logical_bytes: 1_000,
            settled_disk_bytes: None,
            syncs: None,
            fill_sync_ms: None,
            cpu_user_s: Some(0.001_234),
            cpu_system_s: Some(0.000_617),
        }
    }

    fn cell(
        engine: &str,
        kind: Kind,
        workload: Workload,
        status: Status,
        m: Option<Metrics>,
    ) -> Cell {
        Cell {
            engine: engine.to_owned(),
            kind,
            scenario: "s".to_owned(),
            workload,
            durability: Durability::Default,
            status,
            metrics: m,
            peak_rss_bytes: Some(64 << 20),
        }
    }

    fn report() -> Report {
        let cfg = Config {
            threads: 8,
            stop: Stop::Duration(std::time::Duration::from_secs(2)),
            warmup: std::time::Duration::from_millis(500),
            seed: 42,
            value_size: 1024,
            compressibility: 0.5,
            reps: 1,
            settle: std::time::Duration::from_secs(5),
            stall: std::time::Duration::from_secs(300),
            progress: false,
        };
        Report {
            environment: Environment::detect(Path::new(".")),
            harness: Harness::new(Durability::Default, &cfg),
            scenarios: vec![Scenario {
                page: "read-heavy".to_owned(),
                name: "s".to_owned(),
                keys: 100_000,
                resident_budget: Some(32 << 20),
                workloads: vec![Workload::FillRandom, Workload::ReadSeq],
                threads: None,
            }],
            engines: Vec::new(),
            missing: vec![Missing {
                name: "gone".to_owned(),
                krate: "gone-crate".to_owned(),
                reason: "does not build".to_owned(),
            }],
            cells: vec![
                cell(
                    "slow",
                    Kind::Store,
                    Workload::FillRandom,
                    Status::Ok,
                    Some(Metrics {
                        settled_disk_bytes: Some(1_500),
                        ..metrics(10.0, Some(1), Some(false))
                    }),
                ),
                cell(
                    "fast",
                    Kind::Store,
                    Workload::FillRandom,
                    Status::Ok,
                    Some(Metrics {
                        syncs: Some(200),
                        fill_sync_ms: Some(12.345),
                        ..metrics(1_000.0, Some(4), Some(true))
                    }),
                ),
                cell(
                    "ceil",
                    Kind::Ceiling,
                    Workload::FillRandom,
                    Status::Ok,
                    Some(metrics(9_999.0, Some(9), Some(true))),
                ),
                cell(
                    "bad",
                    Kind::Store,
                    Workload::FillRandom,
                    Status::Error("wrong value".to_owned()),
                    None,
                ),
                cell(
                    "hash",
                    Kind::Store,
                    Workload::ReadSeq,
                    Status::Unsupported("no order".to_owned()),
                    None,
                ),
            ],
        }
    }

    #[test]
    fn a_fill_s_note_gives_its_sync_after_a_full_pass_and_checks_it() {
        let md = report().markdown(None);
        assert!(
            md.contains("- fast: its sync after a pass through every key took 12.3 ms"),
            "{md}"
        );
        assert!(!md.contains("- ceil: its sync"), "{md}");
        let m = Metrics {
            fill_sync_ms: Some(-1.0),
            ..metrics(1_000.0, Some(4), Some(true))
        };
        assert_eq!(m.check(), Err("fill_sync_ms is -1".to_owned()));
    }

    #[test]
    fn the_method_names_the_clock_that_timed_the_latencies() {
        let md = report().markdown(None);
        assert!(md.contains("timed by the CPU's time-stamp counter"), "{md}");
        let mut old = report();
        old.harness.latency_clock = None;
        let md = old.markdown(None);
        assert!(md.contains("timed by the OS's monotonic clock"), "{md}");
        assert!(
            old.compare(&report()).contains("latency_clock"),
            "compare names the clock when two runs differ in it"
        );
    }

    #[test]
    fn results_without_a_measurement_at_rest_do_not_claim_one() {
        let mut old = report();
        old.harness.settle_s = None;
        let md = old.markdown(None);
        assert!(!md.contains("sits idle"), "{md}");
        let mut none = report();
        for c in &mut none.cells {
            if let Some(m) = &mut c.metrics {
                m.settled_disk_bytes = None;
            }
        }
        let md = none.markdown(None);
        assert!(!md.contains("sits idle"), "{md}");
        assert!(!md.contains("at rest"), "{md}");
    }

    /// Under a write-only table where one engine reports its syncs, the
    /// others are named as not reporting them; an overwrite cell whose
    /// measurement at rest failed says so.
    #[test]
    fn notes_name_engines_without_syncs_and_failed_measurements_at_rest() {
        let mut r = report();
        r.scenarios[0].workloads = vec![Workload::Overwrite];
        r.cells = vec![
            cell(
                "counts",
                Kind::Store,
                Workload::Overwrite,
                Status::Ok,
                Some(Metrics {
                    syncs: Some(200),
                    settled_disk_bytes: Some(1_500),
                    ..metrics(1_000.0, None, None)
                }),
            ),
            cell(
                "silent",
                Kind::Store,
                Workload::Overwrite,
                Status::Ok,
                Some(metrics(500.0, None, None)),
            ),
            cell(
                "ceil",
                Kind::Ceiling,
                Workload::Overwrite,
                Status::Ok,
                Some(metrics(9_999.0, None, None)),
            ),
        ];
        let md = r.markdown(None);
        assert!(
            md.contains("- counts: 6.2 writes per fsync/fdatasync"),
            "{md}"
        );
        assert!(
            md.contains("- silent: writes per fsync/fdatasync not reported"),
            "{md}"
        );
        assert!(
            md.contains("- **silent: space at rest not measured"),
            "{md}"
        );
        assert!(!md.contains("counts: space at rest not"), "{md}");
        assert!(!md.contains("ceil: space at rest not"), "{md}");
        assert!(!md.contains("ceil, "), "{md}");
    }

    #[test]
    fn tables_rank_stores_apart_from_rails_and_never_show_zero() {
        let md = report().markdown(Some("charts"));
        let fast = md.find("| 1 | fast | 100,000 keys, own caches ≤ 32 MiB | 1,000 | 1.00 | 2.00 | 3.00 | 4.00 | 1.50 (33 % kernel) | 2.00 | 64 MiB |");
        let slow = md.find("| 2 | slow |");
        let bad = md.find("| — | bad |");
        let rails = md.find("Reference rails, not ranked");
        let ceil = md.find("| ceiling rail | ceil |");
        assert!(
            fast < slow && slow < bad && bad < rails && rails < ceil,
            "{md}"
        );
        assert!(fast.is_some() && ceil.is_some(), "{md}");
        assert!(
            md.contains("**slow: the window closed before every key was done once"),
            "{md}"
        );
        assert!(md.contains("fast: 4 passes over the key set"), "{md}");
        assert!(md.contains("| 2.00 (1.50 at rest) | 64 MiB |"), "{md}");
        assert!(
            md.contains("sits idle for 5 s and is measured again"),
            "{md}"
        );
        assert!(
            md.contains("- fast: 6.2 writes per fsync/fdatasync (1,234 writes, 200 syncs"),
            "{md}"
        );
        assert!(!md.contains("slow: 6.2 writes"), "{md}");
        assert!(md.contains("**bad: error: wrong value**"), "{md}");
        assert!(
            md.contains(
                "| — | hash | 100,000 keys, own caches ≤ 32 MiB | unsupported (no order) |"
            ),
            "{md}"
        );
        assert!(
            md.contains("| gone | gone-crate | does not build |"),
            "{md}"
        );
        assert!(md.contains("(charts/s-fillrandom-throughput.svg)"), "{md}");
        assert!(md.contains("durability DEFAULT"), "{md}");
        let mut old = report();
        old.cells[1].metrics.as_mut().unwrap().cpu_user_s = None;
        let md = old.markdown(None);
        assert!(md.contains("| 4.00 | — | 2.00 | 64 MiB |"), "{md}");
    }

    /// `report` rendered a hand-edited results.json as given: a negative
    /// rate, a p99 below the median. Each is refused, naming the cell.
    #[test]
    fn impossible_numbers_in_a_results_file_are_refused() {
        type Edit = fn(&mut Metrics);
        let edits: [(&str, Edit); 14] = [
            ("ops_per_sec is -5", |m| m.ops_per_sec = -5.0),
            ("rep_ops_per_sec is -1", |m| m.rep_ops_per_sec = vec![-1.0]),
            ("p50_us is -0", |m| m.p50_us = -0.0),
            ("latencies out of order", |m| m.p99_us = 0.5),
            ("latency_curve is -2", |m| {
                m.latency_curve = vec![(0.5, -2.0)]
            }),
            ("out of order at (2, 1 us)", |m| {
                m.latency_curve = vec![(2.0, 1.0)]
            }),
            ("out of order at (0.9, 0.5 us)", |m| {
                m.latency_curve = vec![(0.5, 1.0), (0.9, 0.5)]
            }),
            ("out of order at (0.99, 9 us)", |m| {
                m.latency_curve = vec![(0.5, 1.0), (0.99, 9.0)]
            }),
            ("gives 1.5 us at 0.5", |m| {
                m.latency_curve = vec![(0.5, 1.5)]
            }),
            ("not among the repetitions'", |m| m.ops_per_sec = 1e308),
            ("not among the repetitions'", |m| {
                m.rep_ops_per_sec = vec![1.0; 3]
            }),
            ("without repetitions", |m| m.rep_ops_per_sec.clear()),
            ("outside the repetitions'", |m| m.elapsed_s = 1e-6),
            ("cpu_system_s is -0.5", |m| m.cpu_system_s = Some(-0.5)),
        ];
        for (why, edit) in edits {
            let dir = tempfile::tempdir().unwrap();
            let mut r = report();
            edit(r.cells[1].metrics.as_mut().unwrap());
            r.write_json(dir.path()).unwrap();
            let refused = format!("{:#}", Report::load(dir.path()).unwrap_err());
            assert!(refused.contains(why), "{why}: {refused}");
            assert!(
                refused.contains("the cell of fast on fillrandom (s)"),
                "{refused}"
            );
        }
        assert!(
            report()
                .cells
                .iter()
                .flat_map(|c| &c.metrics)
                .all(|m| m.check().is_ok())
        );
    }

    #[test]
    fn json_round_trips_and_compare_prints_ratios() {
        let dir = tempfile::tempdir().unwrap();
        let a = report();
        a.write_json(dir.path()).unwrap();
        assert!(
            dir.path()
                .join("cells/DEFAULT-s-fillrandom-fast.json")
                .exists()
        );
        let back = Report::load(dir.path()).unwrap();
        assert_eq!(back.cells.len(), a.cells.len());
        // A later run into the same directory leaves none of the cells
        // the earlier one wrote and it did not measure.
        let mut fewer = a.clone();
        fewer.cells.truncate(1);
        fewer.write_json(dir.path()).unwrap();
        assert_eq!(fs::read_dir(dir.path().join("cells")).unwrap().count(), 1);
        a.write_json(dir.path()).unwrap();
        let mut b = back.clone();
        b.cells[1].metrics.as_mut().unwrap().ops_per_sec = 1_500.0;
        b.cells.pop();
        let cmp = a.compare(&b);
        assert!(
            cmp.contains("| DEFAULT | s | fillrandom | fast | 1,000 | 1,500 | 1.50 |"),
            "{cmp}"
        );
        assert!(cmp.contains("| bad | error | error | — |"), "{cmp}");
        assert!(cmp.contains("s readseq hash (only in A)"), "{cmp}");
        assert!(!cmp.contains("differ"), "{cmp}");
    }

    /// Two `run`s of different shapes (both scenarios named "custom") used
    /// to compare as if alike.
    #[test]
    fn compare_names_what_differs_between_the_runs() {
        let a = report();
        let mut b = a.clone();
        b.harness.threads = 2;
        b.harness.value_bytes = 16;
        b.scenarios[0].keys += 1;
        let cmp = a.compare(&b);
        let keys = a.scenarios[0].keys;
        let name = &a.scenarios[0].name;
        for difference in [
            "threads 8 / 2".to_owned(),
            format!("value_bytes {} / 16", a.harness.value_bytes),
            format!("{name} keys {keys} / {}", keys + 1),
        ] {
            assert!(cmp.contains(&difference), "{difference}: {cmp}");
        }
    }

    #[test]
    fn formatting_helpers() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(micros(0.456), "0.46");
        assert_eq!(micros(45.66), "45.7");
        assert_eq!(micros(12_345.4), "12,345");
        assert_eq!(slug("Out of cache, 32 MiB"), "out-of-cache-32-mib");
        assert_eq!(utc_date(0), "1970-01-01 00:00 UTC");
        assert_eq!(utc_date(1_700_000_000), "2023-11-14 22:13 UTC");
        let mounts = "/dev/vda / ext4 rw 0 0\ntmpfs /tmp tmpfs rw 0 0\n";
        assert_eq!(
            filesystem_of(Path::new("/tmp/x"), mounts),
            "tmpfs (tmpfs on /tmp)"
        );
        assert_eq!(
            filesystem_of(Path::new("/work"), mounts),
            "ext4 (/dev/vda on /)"
        );
    }

    #[test]
    fn the_scaling_page_lines_up_thread_counts_per_engine() {
        let mut r = report();
        let scenario = |name: &str, threads: Option<usize>| Scenario {
            page: if threads.is_some() {
                SCALING_PAGE
            } else {
                "read-heavy"
            }
            .to_owned(),
            name: name.to_owned(),
            keys: 100_000,
            resident_budget: None,
            workloads: vec![Workload::ReadRandom],
            threads,
        };
        r.scenarios = vec![
            scenario("resident", None),
            scenario("resident-1t", Some(1)),
            scenario("resident-2t", Some(2)),
        ];
        r.cells.clear();
        for (name, rate) in [
            ("resident-1t", 100.0),
            ("resident-2t", 180.0),
            ("resident", 300.0),
        ] {
            let mut c = cell("kv", Kind::Store, Workload::ReadRandom, Status::Ok, None);
            c.scenario = name.to_owned();
            c.metrics = Some(metrics(rate, None, None));
            r.cells.push(c);
        }
        let mut c = cell("other", Kind::Store, Workload::ReadRandom, Status::Ok, None);
        c.scenario = "resident-2t".to_owned();
        c.metrics = Some(metrics(50.0, None, None));
        r.cells.push(c);
        let md = r.markdown(None);
        assert!(
            md.contains("| engine | kind | 1 thr | 2 thr | 8 thr | 8/1 |"),
            "{md}"
        );
        assert!(
            md.contains("| kv | store | 100 | 180 | 300 | 3.00x |"),
            "{md}"
        );
        assert!(md.contains("| other | store | — | 50 | — | — |"), "{md}");
        assert!(
            md.contains("### readrandom — 100,000 keys, default caches\n"),
            "{md}"
        );
        assert!(
            !md.contains("### readrandom — 100,000 keys, default caches, 1 thread"),
            "{md}"
        );
    }
}
