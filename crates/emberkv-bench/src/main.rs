//! `emberkv-bench`: runs emberkv and its peers, each at its shipped
//! defaults, through identical seeded workloads and ranks them.

mod driver;
mod engine;
mod engines;
mod hist;
mod report;
mod workload;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand};

use crate::driver::{Bench, Config};
use crate::report::{Cell, EngineInfo, Environment, Report};
use crate::workload::Workload;

/// Unmeasured warm-up before each read cell.
const WARMUP: Duration = Duration::from_millis(500);
/// Keys of the `--quick` board.
const QUICK_KEYS: u64 = 100_000;
/// Measured window of the `--quick` board, in seconds.
const QUICK_SECS: f64 = 2.0;

#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs every listed engine on every listed workload and ranks them.
    Board {
        /// The quick board: 100,000 keys and 2 s per cell, whatever the
        /// defaults of --keys and --duration become.
        #[arg(long, conflicts_with_all = ["keys", "duration"])]
        quick: bool,
        /// Engines to run, comma-separated [default: every registered engine].
        #[arg(long, value_delimiter = ',')]
        engines: Option<Vec<String>>,
        /// Workloads to run, comma-separated [default: every workload].
        #[arg(long, value_delimiter = ',')]
        workloads: Option<Vec<String>>,
        #[command(flatten)]
        common: Common,
    },
    /// Runs one engine on one workload.
    Run {
        /// The engine.
        #[arg(long)]
        engine: String,
        /// The workload.
        #[arg(long)]
        workload: String,
        #[command(flatten)]
        common: Common,
    },
}

#[derive(Args)]
struct Common {
    /// Number of distinct keys.
    #[arg(long, default_value_t = QUICK_KEYS, value_parser = clap::value_parser!(u64).range(1..))]
    keys: u64,
    /// Client threads per cell.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..))]
    threads: u16,
    /// Measured window per cell, in seconds (a fill stops early when done).
    #[arg(long, default_value_t = QUICK_SECS)]
    duration: f64,
    /// Seed of every generated key order, value and key stream.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Directory for board.md, results.json and the engines' temporary stores.
    #[arg(long, default_value = "bench-results")]
    out: PathBuf,
}

impl Common {
    fn config(&self) -> Result<Config> {
        if !(self.duration.is_finite() && self.duration > 0.0) {
            bail!("--duration must be a positive number of seconds");
        }
        Ok(Config {
            keys: self.keys,
            threads: self.threads.into(),
            duration: Duration::from_secs_f64(self.duration),
            warmup: WARMUP,
            seed: self.seed,
        })
    }
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Board {
            quick,
            engines,
            workloads,
            common,
        } => {
            let mut cfg = common.config()?;
            if quick {
                cfg.keys = QUICK_KEYS;
                cfg.duration = Duration::from_secs_f64(QUICK_SECS);
            }
            let engines =
                engines.unwrap_or_else(|| engines::names().into_iter().map(String::from).collect());
            let workloads = workloads
                .unwrap_or_else(|| Workload::ALL.iter().map(|w| w.name().to_owned()).collect());
            board(&engines, &workloads, &cfg, &common.out)
        }
        Command::Run {
            engine,
            workload,
            common,
        } => board(&[engine], &[workload], &common.config()?, &common.out),
    }
}

/// Runs each engine in a fresh temporary store under `out` through the
/// workloads (fills first), prints the board and writes it to `out`.
fn board(
    engine_names: &[String],
    workload_names: &[String],
    cfg: &Config,
    out: &Path,
) -> Result<()> {
    let mut openers = Vec::new();
    for name in engine_names {
        let open = engines::lookup(name)?;
        if !openers.iter().any(|(n, _)| n == name) {
            openers.push((name.as_str(), open));
        }
    }
    let mut workloads = workload_names
        .iter()
        .map(|w| Workload::parse(w))
        .collect::<Result<Vec<_>>>()?;
    workloads.sort_unstable();
    workloads.dedup();
    if openers.is_empty() || workloads.is_empty() {
        bail!("nothing to run: give at least one engine and one workload");
    }
    fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;

    let mut report = Report {
        environment: Environment::detect(),
        harness: cfg.into(),
        engines: Vec::new(),
        cells: Vec::new(),
    };
    for (name, open) in openers {
        let dir = tempfile::Builder::new()
            .prefix(&format!("{name}-"))
            .tempdir_in(out)
            .with_context(|| format!("creating a store directory in {}", out.display()))?;
        let engine = open(dir.path()).with_context(|| format!("opening {name}"))?;
        report.engines.push(EngineInfo {
            name: name.to_owned(),
            settings: engine.settings(),
            durability: engine.durability().to_owned(),
        });
        let mut bench = Bench::new(&*engine, cfg)?;
        for &w in &workloads {
            eprint!("{name:>8} {w:<10} ");
            let m = bench.run(w)?;
            let cell = Cell::new(name, w, &m);
            eprintln!(
                "{:>12.0} ops/s  p50 {:>9.2} µs  p99 {:>9.2} µs",
                cell.ops_per_sec, cell.p50_us, cell.p99_us
            );
            report.cells.push(cell);
        }
        engine.close().with_context(|| format!("closing {name}"))?;
        dir.close()
            .with_context(|| format!("removing the {name} store"))?;
    }
    print!("{}", report.markdown());
    report.write(out)
}
