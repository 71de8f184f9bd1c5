//! The board: Markdown tables ranked by throughput, and JSON of every cell.

use std::fmt::Write as _;
use std::fs;
use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;

use crate::driver::{Config, LOAD_BATCH, Measurement};
use crate::workload::{KEY_BYTES, VALUE_BYTES, Workload, ZIPF_THETA};

/// The machine and toolchain a board ran on.
#[derive(Debug, Serialize)]
pub struct Environment {
    /// CPU model name from `/proc/cpuinfo`.
    pub cpu: String,
    /// Logical cores available to the process.
    pub cores: usize,
    /// Total memory, in GiB.
    pub memory_gib: f64,
    /// Kernel release.
    pub kernel: String,
    /// The `rustc --version` that compiled the harness.
    pub rustc: String,
}

impl Environment {
    /// Reads the environment of this machine (`unknown` where unreadable).
    pub fn detect() -> Self {
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
            rustc: env!("EMBERKV_BENCH_RUSTC").to_owned(),
        }
    }
}

/// The harness settings shared by every cell.
#[derive(Debug, Serialize)]
pub struct Harness {
    /// Number of distinct keys.
    pub keys: u64,
    /// Key length, in bytes.
    pub key_bytes: usize,
    /// Value length, in bytes (half random, half a repeated pattern).
    pub value_bytes: usize,
    /// Client threads per cell.
    pub threads: usize,
    /// Measured window per cell, in seconds (fills stop early when done).
    pub duration_s: f64,
    /// Unmeasured warm-up before each read cell, in seconds.
    pub warmup_s: f64,
    /// Seed of all generated data and key streams.
    pub seed: u64,
    /// Pairs per batch when loading keys before reads.
    pub load_batch: usize,
    /// Skew of the `ycsb-c` scrambled Zipfian.
    pub zipf_theta: f64,
}

impl From<&Config> for Harness {
    fn from(cfg: &Config) -> Self {
        Harness {
            keys: cfg.keys,
            key_bytes: KEY_BYTES,
            value_bytes: VALUE_BYTES,
            threads: cfg.threads,
            duration_s: cfg.duration.as_secs_f64(),
            warmup_s: cfg.warmup.as_secs_f64(),
            seed: cfg.seed,
            load_batch: LOAD_BATCH,
            zipf_theta: ZIPF_THETA,
        }
    }
}

/// What one engine ran with.
#[derive(Debug, Serialize)]
pub struct EngineInfo {
    /// Registry name.
    pub name: String,
    /// Configuration the harness opened it with.
    pub settings: String,
    /// When a completed write becomes durable.
    pub durability: String,
}

/// One engine on one workload.
#[derive(Debug, Serialize)]
pub struct Cell {
    /// Engine name.
    pub engine: String,
    /// Workload.
    pub workload: Workload,
    /// Operations completed in the measured window.
    pub ops: u64,
    /// Length of the measured window, in seconds.
    pub elapsed_s: f64,
    /// Throughput, in operations per second.
    pub ops_per_sec: f64,
    /// Median latency, in microseconds.
    pub p50_us: f64,
    /// 99th-percentile latency, in microseconds.
    pub p99_us: f64,
    /// Worst latency, in microseconds.
    pub max_us: f64,
    /// For fills: whether every key was inserted within the window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completed: Option<bool>,
}

impl Cell {
    /// The cell of `engine` on `workload` from its measurement.
    pub fn new(engine: &str, workload: Workload, m: &Measurement) -> Self {
        Cell {
            engine: engine.to_owned(),
            workload,
            ops: m.ops,
            elapsed_s: m.elapsed.as_secs_f64(),
            ops_per_sec: m.ops_per_sec(),
            p50_us: m.latencies.quantile_us(0.5),
            p99_us: m.latencies.quantile_us(0.99),
            max_us: m.latencies.quantile_us(1.0),
            completed: workload.is_fill().then_some(m.completed),
        }
    }
}

/// A whole board: environment, settings and every cell.
#[derive(Debug, Serialize)]
pub struct Report {
    /// Where it ran.
    pub environment: Environment,
    /// Harness settings.
    pub harness: Harness,
    /// Each engine's settings and durability.
    pub engines: Vec<EngineInfo>,
    /// Every cell, in the order run.
    pub cells: Vec<Cell>,
}

impl Report {
    /// The board as Markdown: environment, engines, then one table per
    /// workload ranked by throughput.
    pub fn markdown(&self) -> String {
        let (e, h) = (&self.environment, &self.harness);
        let mut md = String::from("# emberkv-bench board\n\n## Environment\n\n");
        let _ = writeln!(md, "- CPU: {} ({} cores)", e.cpu, e.cores);
        let _ = writeln!(md, "- Memory: {:.1} GiB", e.memory_gib);
        let _ = writeln!(md, "- Kernel: {}", e.kernel);
        let _ = writeln!(md, "- Compiler: {}", e.rustc);
        let _ = writeln!(
            md,
            "- Harness: {} keys of {} B, values of {} B (half random, half a repeated \
             pattern), {} client threads, {} s measured per cell after {} s of warm-up \
             (read cells), seed {}; keys missing before a read cell are loaded unmeasured \
             in batches of {}; `ycsb-c` draws keys from a scrambled Zipfian (theta {}); \
             latency per operation from HdrHistogram (3 significant figures)",
            thousands(h.keys),
            h.key_bytes,
            thousands(h.value_bytes as u64),
            h.threads,
            h.duration_s,
            h.warmup_s,
            h.seed,
            thousands(h.load_batch as u64),
            h.zipf_theta,
        );
        md.push_str("\n## Engines (shipped defaults; the harness tunes no engine)\n\n");
        md.push_str("| engine | settings | durability |\n|---|---|---|\n");
        for info in &self.engines {
            let _ = writeln!(
                md,
                "| {} | {} | {} |",
                info.name, info.settings, info.durability
            );
        }
        for w in Workload::ALL {
            let mut cells: Vec<&Cell> = self.cells.iter().filter(|c| c.workload == w).collect();
            if cells.is_empty() {
                continue;
            }
            cells.sort_by(|a, b| b.ops_per_sec.total_cmp(&a.ops_per_sec));
            let _ = writeln!(md, "\n## {w}\n");
            md.push_str("| rank | engine | ops/sec | p50 µs | p99 µs | durability |\n");
            md.push_str("|---:|---|---:|---:|---:|---|\n");
            for (rank, c) in cells.iter().enumerate() {
                let durability = self
                    .engines
                    .iter()
                    .find(|i| i.name == c.engine)
                    .map_or("", |i| i.durability.as_str());
                let _ = writeln!(
                    md,
                    "| {} | {} | {} | {} | {} | {} |",
                    rank + 1,
                    c.engine,
                    thousands(c.ops_per_sec.round() as u64),
                    micros(c.p50_us),
                    micros(c.p99_us),
                    durability
                );
            }
            md.push('\n');
            md.push_str(&self.note(w, &cells));
        }
        md
    }

    /// The note under the table of `w`.
    fn note(&self, w: Workload, cells: &[&Cell]) -> String {
        let d = self.harness.duration_s;
        if !w.is_fill() {
            return format!(
                "Gets of loaded keys over {d} s after {} s of warm-up; every value \
                 checked (length and first 8 bytes; every 64th read byte for byte).\n",
                self.harness.warmup_s
            );
        }
        let mut note = format!(
            "Inserts of every key once, in a seeded random order, into an empty store; \
             no warm-up; measured until all keys are in or {d} s pass, whichever is first."
        );
        for c in cells.iter().filter(|c| c.completed == Some(false)) {
            let _ = write!(
                note,
                " **{}: capped at {d} s with {} of {} keys inserted; its rate is of those.**",
                c.engine,
                thousands(c.ops),
                thousands(self.harness.keys)
            );
        }
        note.push('\n');
        note
    }

    /// Writes `board.md` and `results.json` into `dir`.
    pub fn write(&self, dir: &Path) -> Result<()> {
        let md = dir.join("board.md");
        fs::write(&md, self.markdown()).with_context(|| format!("writing {}", md.display()))?;
        let json = dir.join("results.json");
        let text = serde_json::to_string_pretty(self)?;
        fs::write(&json, text + "\n").with_context(|| format!("writing {}", json.display()))
    }
}

/// `n` with thousands separators.
fn thousands(n: u64) -> String {
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
fn micros(us: f64) -> String {
    match us {
        x if x < 10.0 => format!("{x:.2}"),
        x if x < 100.0 => format!("{x:.1}"),
        x => thousands(x.round() as u64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(engine: &str, workload: Workload, ops_per_sec: f64, completed: Option<bool>) -> Cell {
        Cell {
            engine: engine.to_owned(),
            workload,
            ops: 1_234,
            elapsed_s: 1.0,
            ops_per_sec,
            p50_us: 1.0,
            p99_us: 2.0,
            max_us: 3.0,
            completed,
        }
    }

    #[test]
    fn tables_rank_by_throughput_and_flag_capped_fills() {
        let info = |name: &str| EngineInfo {
            name: name.to_owned(),
            settings: "defaults".to_owned(),
            durability: format!("{name}-durability"),
        };
        let report = Report {
            environment: Environment::detect(),
            harness: Harness::from(&Config {
                keys: 100_000,
                threads: 8,
                duration: std::time::Duration::from_secs(2),
                warmup: std::time::Duration::from_millis(500),
                seed: 42,
            }),
            engines: vec![info("slow"), info("fast")],
            cells: vec![
                cell("slow", Workload::FillRandom, 10.0, Some(false)),
                cell("fast", Workload::FillRandom, 1_000.0, Some(true)),
                cell("slow", Workload::YcsbC, 5.0, None),
            ],
        };
        let md = report.markdown();
        assert!(
            md.contains("| 1 | fast | 1,000 | 1.00 | 2.00 | fast-durability |"),
            "{md}"
        );
        assert!(md.contains("| 2 | slow | 10 |"), "{md}");
        assert!(
            md.contains("slow: capped at 2 s with 1,234 of 100,000 keys"),
            "{md}"
        );
        assert!(!md.contains("fast: capped"), "{md}");
        assert!(
            md.contains("## ycsb-c") && !md.contains("## readrandom"),
            "{md}"
        );
        let json: serde_json::Value = serde_json::to_value(&report).unwrap();
        assert_eq!(json["cells"][2]["workload"], "ycsb-c");
        assert_eq!(json["harness"]["keys"], 100_000);
    }

    #[test]
    fn number_formatting() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(micros(0.456), "0.46");
        assert_eq!(micros(45.66), "45.7");
        assert_eq!(micros(12_345.4), "12,345");
    }
}
