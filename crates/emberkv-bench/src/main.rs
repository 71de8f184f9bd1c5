//! `emberkv-bench`: runs emberkv and its peers, each at its shipped
//! defaults, through identical seeded workloads and ranks them.

mod chart;
mod driver;
mod engine;
mod engines;
mod hist;
mod report;
mod watchdog;
mod worker;
mod workload;

use std::fs;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand};

use crate::driver::{Config, Stop};
use crate::engine::Durability;
use crate::engines::{Availability, Spec};
use crate::report::{
    BOARD_MD, EngineInfo, Environment, Harness, Missing, RESULTS_JSON, Report, SCALING_PAGE,
    Scenario, Status,
};
use crate::worker::Job;
use crate::workload::{MIN_VALUE_BYTES, Workload};

/// Unmeasured warm-up before each steady cell, in seconds.
const WARMUP_S: f64 = 0.5;
/// Measured window per cell of the full board, in seconds.
const BOARD_SECS: f64 = 5.0;
/// Repetitions per cell of the full board.
const BOARD_REPS: u32 = 3;
/// Measured window per cell of `board --quick` and of `run`, in seconds.
const QUICK_SECS: f64 = 2.0;
/// Keys of the cache-resident scenario (named so for continuity with
/// earlier results: each engine's caches are at their shipped sizes, and
/// not all of them hold this data) and of the write-ingest and
/// update-mix scenarios.
const RESIDENT_KEYS: u64 = 100_000;
/// Keys of the out-of-cache scenario.
const OUT_OF_CACHE_KEYS: u64 = 300_000;
/// Each engine's own cache budget in the out-of-cache scenario, in bytes.
const OUT_OF_CACHE_BUDGET: u64 = 32 << 20;
/// Directory of the SVG charts inside an output directory.
const CHARTS: &str = "charts";
/// Client-thread counts of the scaling page, besides the run's own.
const SCALING_THREADS: [usize; 3] = [1, 2, 4];

#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs the board's pages with every engine: read-heavy (readrandom
    /// and ycsb-c on 100,000 keys, each engine's caches at their default
    /// sizes; readrandom and readlatest
    /// on 300,000 keys with each engine's own caches bounded to 32 MiB),
    /// write-ingest (fillseq, fillrandom, overwrite on 100,000 keys),
    /// update mixes (ycsb-a, ycsb-b, ycsb-f on 100,000 keys) and scaling
    /// (readrandom on the 100,000 keys with 1, 2 and 4 client threads besides
    /// the run's own).
    #[command(long_about = "Runs the board's pages with every engine: read-heavy \
        (readrandom and ycsb-c on 100,000 keys, each engine's caches at their default sizes; \
        readrandom and readlatest on \
        300,000 keys with each engine's own caches bounded to 32 MiB), write-ingest \
        (fillseq, fillrandom, overwrite on 100,000 keys), update mixes (ycsb-a, ycsb-b, \
        ycsb-f on 100,000 keys) and scaling (readrandom on the 100,000 keys with \
        1, 2 and 4 client threads besides the run's own). Each engine runs each scenario in \
        its own child process.\n\nThe full board measures 5 s per cell, 3 times; --quick measures \
        2 s once and finishes in about 8 minutes on 2 cores.\n\nRocksDB is behind the \
        `rocksdb` cargo feature, since its C++ build takes many minutes: \
        `cargo run --release -p emberkv-bench --features rocksdb -- board`. Without it, \
        the board lists rocksdb as not run.")]
    Board {
        /// The quick board: 2 s per cell, one repetition.
        #[arg(long, conflicts_with_all = ["duration", "ops", "reps"])]
        quick: bool,
        /// Engines to run, comma-separated [default: every registered engine].
        #[arg(long, value_delimiter = ',')]
        engines: Option<Vec<String>>,
        #[command(flatten)]
        common: Common,
    },
    /// Runs the listed engines through the listed workloads on one store
    /// shape.
    Run {
        /// Engines to run, comma-separated [default: every registered engine].
        #[arg(long, value_delimiter = ',')]
        engines: Option<Vec<String>>,
        /// Workloads to run, comma-separated [default: every workload].
        #[arg(long, value_delimiter = ',')]
        workloads: Option<Vec<String>>,
        /// Number of keys loaded (or filled), at most one billion.
        #[arg(long, default_value_t = RESIDENT_KEYS, value_parser = clap::value_parser!(u64).range(1..=MAX_KEYS))]
        keys: u64,
        /// Out-of-cache mode: bound each engine's own caches to this many
        /// bytes (each adapter states what it set).
        #[arg(long)]
        resident_budget: Option<u64>,
        #[command(flatten)]
        common: Common,
    },
    /// Renders board.md and the SVG charts of a result directory.
    Report {
        /// A directory holding results.json (or the file itself).
        results: PathBuf,
    },
    /// Prints the ratios of result set B to result set A, cell by cell.
    Compare {
        /// The baseline: a directory holding results.json, or the file.
        a: PathBuf,
        /// The result set compared with it.
        b: PathBuf,
    },
    /// Runs one job sent on standard input (used by the harness itself).
    #[command(hide = true)]
    Worker,
}

#[derive(Args)]
struct Common {
    /// Client threads per cell.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..))]
    threads: u16,
    /// Measured window per cell, in seconds, from 0.001 to 86,400 [board: 5; run: 2].
    #[arg(long, conflicts_with = "ops")]
    duration: Option<f64>,
    /// Measure a fixed number of operations per cell instead of a window.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    ops: Option<u64>,
    /// Measured repetitions per cell; the median is reported [board: 3; run: 1].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    reps: Option<u32>,
    /// Value size, in bytes (16 to 1 GiB).
    #[arg(long, default_value_t = 1024)]
    value_size: usize,
    /// Share of each value that is a repeated pattern, from 0 to 1.
    #[arg(long, default_value_t = 0.5)]
    compressibility: f64,
    /// Seed of every generated key order, value and operation stream.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Seconds a store sits idle after an overwrite cell before its space
    /// amplification is measured again, at rest (after background
    /// compaction), at most 86,400; 0 measures it right away. Workloads after overwrite in
    /// the same run start on that settled store.
    #[arg(long, default_value_t = 5.0)]
    settle: f64,
    /// Seconds a worker may go without finishing an operation, a load
    /// batch or a step (open, sync, close) before it is taken for hung and
    /// stopped: its cell an error, the engine's later workloads in that
    /// scenario not run (1 to 86,400).
    #[arg(long, default_value_t = watchdog::DEFAULT_STALL_SECS,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    stall: u64,
    /// DEFAULT: each engine's shipped durability. FULL: every engine syncs
    /// every write in its own way (stated per engine in the report).
    #[arg(long, value_enum, default_value_t = Durability::Default)]
    durability: Durability,
    /// Directory for board.md, results.json, per-cell JSON, charts and the
    /// engines' temporary stores.
    #[arg(long, default_value = "bench-results")]
    out: PathBuf,
    /// No progress bars and no per-cell lines (progress bars are also off
    /// when standard output is not a terminal).
    #[arg(long)]
    quiet: bool,
}

/// Most keys a run may ask for (`--keys`): one billion (the key orders
/// alone take 8 bytes per key per workload).
const MAX_KEYS: u64 = 1_000_000_000;

/// Largest `--value-size`, in bytes: 1 GiB.
const MAX_VALUE_SIZE: usize = 1 << 30;

/// Longest `--duration` and `--settle`, in seconds: one day.
const MAX_SECS: f64 = 86_400.0;

/// Shortest `--duration`, in seconds: 1 ms.
const MIN_WINDOW_SECS: f64 = 0.001;

impl Common {
    fn config(&self, default_secs: f64, default_reps: u32) -> Result<Config> {
        if !(MIN_VALUE_BYTES..=MAX_VALUE_SIZE).contains(&self.value_size) {
            bail!("--value-size must be between {MIN_VALUE_BYTES} and {MAX_VALUE_SIZE} bytes");
        }
        if !(0.0..=1.0).contains(&self.compressibility) {
            bail!("--compressibility must be between 0 and 1");
        }
        if !(0.0..=MAX_SECS).contains(&self.settle) {
            bail!("--settle must be a number of seconds from 0 to {MAX_SECS}");
        }
        if self.out.to_str().is_none() {
            // The workers get their stores' paths in JSON, which holds
            // text only.
            bail!("--out must be a UTF-8 path: {}", self.out.display());
        }
        let stop = match (self.ops, self.duration) {
            (Some(n), _) => Stop::Ops(n),
            (None, secs) => {
                let secs = secs.unwrap_or(default_secs);
                if !(MIN_WINDOW_SECS..=MAX_SECS).contains(&secs) {
                    bail!(
                        "--duration must be a number of seconds from {MIN_WINDOW_SECS} to {MAX_SECS}"
                    );
                }
                Stop::Duration(Duration::from_secs_f64(secs))
            }
        };
        Ok(Config {
            threads: self.threads.into(),
            stop,
            warmup: Duration::from_secs_f64(WARMUP_S),
            seed: self.seed,
            value_size: self.value_size,
            compressibility: self.compressibility,
            reps: self.reps.unwrap_or(default_reps),
            settle: Duration::from_secs_f64(self.settle),
            stall: Duration::from_secs(self.stall),
            progress: !self.quiet && std::io::stdout().is_terminal(),
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
            common,
        } => {
            let (secs, reps) = if quick {
                (QUICK_SECS, 1)
            } else {
                (BOARD_SECS, BOARD_REPS)
            };
            let cfg = common.config(secs, reps)?;
            let specs = select_engines(engines)?;
            execute(&specs, &board_scenarios(cfg.threads), &cfg, &common)
        }
        Command::Run {
            engines,
            workloads,
            keys,
            resident_budget,
            common,
        } => {
            let cfg = common.config(QUICK_SECS, 1)?;
            let specs = select_engines(engines)?;
            let mut list = match workloads {
                Some(names) => names
                    .iter()
                    .map(|w| Workload::parse(w))
                    .collect::<Result<Vec<_>>>()?,
                None => Workload::ALL.to_vec(),
            };
            list.sort_unstable();
            list.dedup();
            let scenario = Scenario {
                page: "custom".to_owned(),
                name: "custom".to_owned(),
                keys,
                resident_budget,
                workloads: list,
                threads: None,
            };
            execute(&specs, &[scenario], &cfg, &common)
        }
        Command::Report { results } => {
            let report = Report::load(&results)?;
            let dir = if results.is_dir() {
                results
            } else {
                results.parent().map(Path::to_owned).unwrap_or_default()
            };
            render(&report, &dir)
        }
        Command::Compare { a, b } => print_out(&Report::load(&a)?.compare(&Report::load(&b)?)),
        Command::Worker => worker::serve(),
    }
}

/// The board's scenarios, for a run of `own_threads` client threads.
fn board_scenarios(own_threads: usize) -> Vec<Scenario> {
    let mut scenarios = vec![
        Scenario {
            page: "read-heavy".to_owned(),
            name: "cache-resident".to_owned(),
            keys: RESIDENT_KEYS,
            resident_budget: None,
            workloads: vec![Workload::ReadRandom, Workload::YcsbC],
            threads: None,
        },
        Scenario {
            page: "read-heavy".to_owned(),
            name: "out-of-cache".to_owned(),
            keys: OUT_OF_CACHE_KEYS,
            resident_budget: Some(OUT_OF_CACHE_BUDGET),
            workloads: vec![Workload::ReadRandom, Workload::ReadLatest],
            threads: None,
        },
        Scenario {
            page: "write-ingest".to_owned(),
            name: "ingest".to_owned(),
            keys: RESIDENT_KEYS,
            resident_budget: None,
            workloads: vec![Workload::FillSeq, Workload::FillRandom, Workload::Overwrite],
            threads: None,
        },
        Scenario {
            page: "update-mixes".to_owned(),
            name: "mixed".to_owned(),
            keys: RESIDENT_KEYS,
            resident_budget: None,
            workloads: vec![Workload::YcsbA, Workload::YcsbB, Workload::YcsbF],
            threads: None,
        },
    ];
    // The scaling page: readrandom on the cache-resident shape with fewer
    // client threads; the run's own thread count comes from the
    // cache-resident scenario above (so it is not run twice).
    for threads in SCALING_THREADS.into_iter().filter(|&t| t != own_threads) {
        scenarios.push(Scenario {
            page: SCALING_PAGE.to_owned(),
            name: format!("cache-resident-{threads}t"),
            keys: RESIDENT_KEYS,
            resident_budget: None,
            workloads: vec![Workload::ReadRandom],
            threads: Some(threads),
        });
    }
    scenarios
}

/// The engines called `names` (every registered engine by default), or
/// an error listing the valid names.
fn select_engines(names: Option<Vec<String>>) -> Result<Vec<Spec>> {
    let names = names.unwrap_or_else(|| engines::names().into_iter().map(String::from).collect());
    let mut specs: Vec<Spec> = Vec::new();
    for name in &names {
        let spec = engines::lookup(name)?;
        if !specs.iter().any(|s| s.name == spec.name) {
            specs.push(spec);
        }
    }
    if specs.is_empty() {
        bail!(
            "no engine given; valid engines: {}",
            engines::names().join(", ")
        );
    }
    Ok(specs)
}

/// Runs every ready engine through every scenario, each in a child
/// process, then writes and prints the results.
fn execute(specs: &[Spec], scenarios: &[Scenario], cfg: &Config, common: &Common) -> Result<()> {
    let out = &common.out;
    check_outputs(out)?;
    let stores = out.join("stores");
    fs::create_dir_all(&stores).with_context(|| format!("creating {}", stores.display()))?;
    let _lock = lock_out(out)?;
    remove_stale_stores(&stores)?;
    let mut report = Report {
        environment: Environment::detect(&stores),
        harness: Harness::new(common.durability, cfg),
        scenarios: scenarios.to_vec(),
        engines: Vec::new(),
        missing: Vec::new(),
        cells: Vec::new(),
    };
    for spec in specs {
        if let Availability::Missing(reason) = spec.availability {
            report.missing.push(Missing {
                name: spec.name.to_owned(),
                krate: spec.krate.to_owned(),
                reason: reason.to_owned(),
            });
        }
    }
    for scenario in scenarios {
        for spec in specs {
            if !matches!(spec.availability, Availability::Ready(_)) {
                continue;
            }
            let dir = tempfile::Builder::new()
                .prefix(&format!("{}-", spec.name))
                .tempdir_in(&stores)
                .with_context(|| format!("creating a store directory in {}", stores.display()))?;
            let job = Job {
                engine: spec.name.to_owned(),
                scenario: scenario.clone(),
                durability: common.durability,
                cfg: Config {
                    threads: scenario.threads.unwrap_or(cfg.threads),
                    ..cfg.clone()
                },
                dir: dir.path().to_owned(),
                verbose: !common.quiet,
            };
            let result = worker::spawn(&job, spec.kind)?;
            dir.close()
                .with_context(|| format!("removing the {} stores", spec.name))?;
            if let (Some(settings), Some(durability)) = (result.settings, result.durability) {
                report.engines.push(EngineInfo {
                    name: spec.name.to_owned(),
                    kind: spec.kind,
                    krate: spec.krate.to_owned(),
                    version: engines::version(spec.krate),
                    scenario: scenario.name.clone(),
                    settings,
                    durability,
                });
            }
            report.cells.extend(result.cells);
        }
    }
    fs::remove_dir(&stores).ok();
    report.write_json(out)?;
    render(&report, out)?;
    if !report.cells.iter().any(|c| c.status == Status::Ok) {
        bail!("no cell was measured (the board above says why)");
    }
    Ok(())
}

/// Takes the run's lock on `out` (an exclusive `flock` of `out/.lock`,
/// held until the returned file is dropped), so that a second run into
/// the same directory stops at once instead of removing the first one's
/// stores as stale and overwriting its results.
fn lock_out(out: &Path) -> Result<fs::File> {
    let path = out.join(".lock");
    let file = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(fs::TryLockError::WouldBlock) => bail!(
            "another run is using {} (it holds {}); give this run another --out",
            out.display(),
            path.display()
        ),
        Err(fs::TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("locking {}", path.display()))
        }
    }
}

/// Removes the store directories an interrupted run left in `stores`
/// (named as the run names them: an engine's name, a dash and a random
/// tail); anything else there is kept.
fn remove_stale_stores(stores: &Path) -> Result<()> {
    let listing = || format!("listing {}", stores.display());
    for entry in fs::read_dir(stores).with_context(listing)? {
        let path = entry.with_context(listing)?.path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let ours = engines::names().iter().any(|engine| {
            name.strip_prefix(engine)
                .is_some_and(|tail| tail.starts_with('-'))
        });
        if ours && path.is_dir() {
            fs::remove_dir_all(&path).with_context(|| format!("removing {}", path.display()))?;
        }
    }
    Ok(())
}

/// Fails before anything is measured when the run's outputs in `out`
/// could not be written at its end: `results.json` or `board.md` a
/// directory, `charts` not one.
fn check_outputs(out: &Path) -> Result<()> {
    for name in [RESULTS_JSON, BOARD_MD] {
        let path = out.join(name);
        if path.is_dir() {
            bail!(
                "{} is a directory: the run could not write its results",
                path.display()
            );
        }
    }
    let charts = out.join(CHARTS);
    if charts.exists() && !charts.is_dir() {
        bail!(
            "{} is not a directory: the run could not draw its charts",
            charts.display()
        );
    }
    Ok(())
}

/// Draws the charts of `report` into `dir/charts`, writes `dir/board.md`
/// and prints the board.
fn render(report: &Report, dir: &Path) -> Result<()> {
    let charts = dir.join(CHARTS);
    chart::draw_all(report, &charts)?;
    let md = report.markdown(Some(CHARTS));
    let path = dir.join(BOARD_MD);
    fs::write(&path, &md).with_context(|| format!("writing {}", path.display()))?;
    print_out(&md)
}

/// Prints `text` to standard output. A reader that went away (a closed
/// pipe, as `| head` leaves) ends the printing quietly; any other failure
/// is an error (the board is in the output directory all the same).
fn print_out(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(e).context("writing to standard output")
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `results.json` or `board.md` that is a directory, or a `charts`
    /// that is a file, used to fail the run only after every cell was
    /// measured, losing them all.
    #[test]
    fn outputs_that_cannot_be_written_are_refused_before_measuring() {
        for (path, dir) in [(RESULTS_JSON, true), (BOARD_MD, true), (CHARTS, false)] {
            let out = tempfile::tempdir().unwrap();
            if dir {
                fs::create_dir(out.path().join(path)).unwrap();
            } else {
                fs::write(out.path().join(path), b"").unwrap();
            }
            assert!(check_outputs(out.path()).is_err(), "{path}");
        }
        let out = tempfile::tempdir().unwrap();
        assert!(check_outputs(out.path()).is_ok());
        fs::create_dir(out.path().join(CHARTS)).unwrap();
        assert!(check_outputs(out.path()).is_ok());
    }

    /// Two runs into one `--out` raced: the second removed the first's
    /// stores as an interrupted run's, and each overwrote the other's
    /// results.
    #[test]
    fn a_second_run_into_the_same_directory_stops_while_the_first_runs() {
        let out = tempfile::tempdir().unwrap();
        let first = lock_out(out.path()).unwrap();
        let refused = lock_out(out.path()).unwrap_err().to_string();
        assert!(refused.contains("another run is using"), "{refused}");
        drop(first);
        assert!(lock_out(out.path()).is_ok());
    }

    /// An interrupted run left its stores in `stores/` (21 MB once), and
    /// the next run into the same directory kept them.
    #[test]
    fn a_run_removes_the_stores_an_interrupted_run_left_and_nothing_else() {
        let stores = tempfile::tempdir().unwrap();
        for dir in [
            "emberkv-mhS6hn/store-16",
            "redb-a1b2c3",
            "emberkvx-a1b2c3",
            "notes",
        ] {
            fs::create_dir_all(stores.path().join(dir)).unwrap();
        }
        fs::write(stores.path().join("fjall-file"), b"").unwrap();
        remove_stale_stores(stores.path()).unwrap();
        let mut left: Vec<String> = fs::read_dir(stores.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, ["emberkvx-a1b2c3", "fjall-file", "notes"]);
    }

    /// `board --threads 2` ran the 2-thread scaling scenario beside the
    /// cache-resident one of the same shape, and the page showed one.
    #[test]
    fn the_scaling_page_never_repeats_the_runs_own_thread_count() {
        for own in [1, 2, 4, 8] {
            let counts: Vec<usize> = board_scenarios(own)
                .iter()
                .filter(|s| s.page == SCALING_PAGE)
                .filter_map(|s| s.threads)
                .collect();
            let expected: Vec<usize> = SCALING_THREADS.into_iter().filter(|&t| t != own).collect();
            assert_eq!(counts, expected, "--threads {own}");
        }
    }

    /// The configuration `run` would measure with, from its arguments.
    fn run_config(args: &[&str]) -> Result<Config> {
        let cli = Cli::try_parse_from(["emberkv-bench", "run"].iter().chain(args))?;
        let Command::Run { common, .. } = cli.command else {
            unreachable!("parsed as run");
        };
        common.config(QUICK_SECS, 1)
    }

    /// A non-UTF-8 `--out` started a worker before the job failed to
    /// encode, and the user saw that error and the worker's ("parsing the
    /// job: EOF"); it is refused with one line, before anything runs.
    #[test]
    fn an_out_directory_that_is_not_utf8_is_refused_with_one_error() {
        use std::os::unix::ffi::OsStrExt;
        let out = std::ffi::OsStr::from_bytes(b"/tmp/bad\xff");
        let cli = Cli::try_parse_from([
            std::ffi::OsStr::new("emberkv-bench"),
            std::ffi::OsStr::new("run"),
            std::ffi::OsStr::new("--out"),
            out,
        ])
        .unwrap();
        let Command::Run { common, .. } = cli.command else {
            unreachable!("parsed as run");
        };
        let refused = common.config(QUICK_SECS, 1).unwrap_err().to_string();
        assert!(
            refused.starts_with("--out must be a UTF-8 path"),
            "{refused}"
        );
    }

    /// Values a user could type that used to pass the checks and then
    /// panicked (`--duration 1e20`, `--settle 1e20`: not a `Duration`),
    /// hung the worker (`--duration 1.5e19`: past the end of `Instant`)
    /// or allocated without bound.
    #[test]
    fn out_of_range_windows_sizes_and_key_counts_are_refused() {
        for args in [
            &["--duration", "1e20"][..],
            &["--duration", "1.5e19"],
            &["--duration", "86400.5"],
            &["--duration", "1e-12"],
            &["--duration", "NaN"],
            &["--settle", "1e20"],
            &["--settle", "inf"],
            &["--value-size", "18446744073709551615"],
            &["--value-size", "1073741825"],
            &["--value-size", "15"],
            &["--keys", "18446744073709551615"],
            &["--keys", "1000000001"],
            &["--stall", "0"],
            &["--stall", "86401"],
        ] {
            assert!(run_config(args).is_err(), "{args:?} accepted");
        }
        for args in [
            &["--duration", "86400"][..],
            &["--duration", "0.001"],
            &["--settle", "0"],
            &["--value-size", "1073741824"],
            &["--keys", "1000000000"],
            &["--stall", "1"],
            &["--stall", "86400"],
        ] {
            assert!(run_config(args).is_ok(), "{args:?} refused");
        }
    }
}
