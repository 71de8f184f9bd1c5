//! The child process that runs one engine through one scenario, so that
//! each engine's peak RSS is its own and a crash costs only its cells.
//!
//! The parent writes a [`Job`] as one line of JSON to the child's standard
//! input, which it keeps open until the child has ended (so the child takes
//! the input's end for the parent's death, and stops), and reads a
//! [`JobResult`] as JSON from its standard output.

use std::io::{BufRead, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use crate::driver::{Bench, Config, Outcome};
use crate::engine::{Durability, Engine, OpenOptions, Unsupported};
use crate::engines::{self, Availability, Kind};
use crate::report::{Cell, Metrics, Scenario, Status, measured_at_rest, micros, thousands};
use crate::watchdog::WATCHDOG;
use crate::workload::Shape;

/// One engine through one scenario.
#[derive(Debug, Serialize, Deserialize)]
pub struct Job {
    /// Registry name of the engine.
    pub engine: String,
    /// The scenario.
    pub scenario: Scenario,
    /// The durability asked of the engine.
    pub durability: Durability,
    /// Harness settings.
    pub cfg: Config,
    /// An empty directory for the engine's stores.
    pub dir: PathBuf,
    /// Whether to print a line per cell on standard error.
    pub verbose: bool,
}

/// What a job produced.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct JobResult {
    /// The engine's settings line, when it opened.
    pub settings: Option<String>,
    /// The engine's durability line, when it opened.
    pub durability: Option<String>,
    /// One cell per workload of the scenario.
    pub cells: Vec<Cell>,
}

/// The file this process runs from, for its workers. On Linux,
/// `/proc/self/exe`, which names the running executable even after its
/// path has been replaced: a `cargo build` into the same target directory
/// during a run made every later worker the new build (or no build, while
/// the linker wrote it), and the run was lost.
fn own_executable() -> Result<std::path::PathBuf> {
    let proc_exe = std::path::Path::new("/proc/self/exe");
    if cfg!(target_os = "linux") && proc_exe.exists() {
        return Ok(proc_exe.to_path_buf());
    }
    std::env::current_exe().context("locating the harness executable")
}

/// Runs `job` in a child process of this executable and returns its
/// result; a child that dies yields an error cell per workload.
pub fn spawn(job: &Job, kind: Kind) -> Result<JobResult> {
    let mut input = serde_json::to_vec(job).context("encoding the job")?;
    input.push(b'\n');
    let mut child = Command::new(own_executable()?)
        .arg("worker")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("starting a worker process")?;
    // Held open until the worker has ended: the worker takes the end of
    // its input for the end of this process (see `serve`).
    let mut job_pipe = child.stdin.take().expect("piped");
    job_pipe
        .write_all(&input)
        .context("sending the job to the worker")?;
    let mut output = String::new();
    child
        .stdout
        .take()
        .expect("piped")
        .read_to_string(&mut output)
        .context("reading the worker's result")?;
    let status = child.wait()?;
    drop(job_pipe);
    match serde_json::from_str(&output) {
        Ok(result) if status.success() => Ok(result),
        _ => Ok(JobResult {
            settings: None,
            durability: None,
            cells: job
                .scenario
                .workloads
                .iter()
                .map(|&w| {
                    cell(
                        job,
                        kind,
                        w,
                        Status::Error(format!("worker process died ({status})")),
                        None,
                    )
                })
                .collect(),
        }),
    }
}

/// The worker's side: reads a job from standard input, runs it, writes
/// the result to standard output.
pub fn serve() -> Result<()> {
    let mut input = String::new();
    std::io::stdin().lock().read_line(&mut input)?;
    let job: Job = serde_json::from_str(&input).context("parsing the job")?;
    // The harness keeps the job's pipe open until this process ends, so
    // its end means the harness is gone (killed or interrupted): stop, and
    // take the stores along rather than run on alone.
    let dir = job.dir.clone();
    std::thread::spawn(move || {
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
        let _ = std::fs::remove_dir_all(&dir);
        std::process::exit(1);
    });
    // The cells so far, for the watchdog's handler to hand back if the
    // engine hangs; whichever of it and this thread gets here first
    // writes the result, once.
    let partial: &'static Mutex<Partial> = Box::leak(Box::default());
    let job: &'static Job = Box::leak(Box::new(job));
    let kind = engines::lookup(&job.engine)?.kind;
    WATCHDOG
        .watch(job.cfg.stall, move |doing, quiet| {
            let mut partial = partial.lock().unwrap_or_else(PoisonError::into_inner);
            if partial.written {
                return;
            }
            add_hung_cells(&mut partial.result, job, kind, doing, quiet);
            let code = i32::from(partial.write().is_err());
            log_line(&format!("{}: hung ({doing}), stopped", job.engine));
            // The process ends here, the hung engine's threads with it,
            // without the exit handlers and static destructors of the
            // engines' C and C++ libraries, which could crash or wait on
            // those threads.
            // SAFETY: `_exit` ends the process at once; the result is
            // flushed to standard output above, and nothing else of this
            // process needs to run.
            unsafe { libc::_exit(code) }
        })
        .context("starting the watchdog")?;
    run_into(job, partial)?;
    partial
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .write()
}

/// Completes the cells of `result` when the worker hung in the workload
/// after its last cell, `doing` it, with nothing finished for `quiet`: an
/// error cell for that workload, and one for each later workload, which
/// is not run.
fn add_hung_cells(result: &mut JobResult, job: &Job, kind: Kind, doing: &str, quiet: Duration) {
    let done = result.cells.len();
    let workloads = &job.scenario.workloads;
    let hung = workloads.get(done).map(|w| w.name());
    for (i, &w) in workloads.iter().enumerate().skip(done) {
        let why = if i == done {
            format!(
                "hung: nothing finished for {} s ({doing}); the worker was stopped",
                quiet.as_secs()
            )
        } else {
            format!(
                "not run: the worker was stopped when {} hung",
                hung.unwrap_or("a workload")
            )
        };
        result
            .cells
            .push(cell(job, kind, w, Status::Error(why), None));
    }
}

/// A worker's result so far, and whether it went to standard output.
#[derive(Default)]
struct Partial {
    result: JobResult,
    written: bool,
}

impl Partial {
    /// Writes the result to standard output (once), each cell with this
    /// process's peak RSS.
    fn write(&mut self) -> Result<()> {
        if self.written {
            return Ok(());
        }
        self.written = true;
        let rss = peak_rss_bytes();
        for c in &mut self.result.cells {
            c.peak_rss_bytes = rss;
        }
        let mut out = std::io::stdout().lock();
        serde_json::to_writer(&mut out, &self.result)?;
        out.flush()?;
        Ok(())
    }
}

/// Writes one progress line to standard error. A line that cannot be
/// written (a full or closed stderr) is dropped: losing it must not lose
/// the measurements the worker hands back on standard output.
fn log_line(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

fn cell(
    job: &Job,
    kind: Kind,
    workload: crate::workload::Workload,
    status: Status,
    metrics: Option<Metrics>,
) -> Cell {
    Cell {
        engine: job.engine.clone(),
        kind,
        scenario: job.scenario.name.clone(),
        workload,
        durability: job.durability,
        status,
        metrics,
        peak_rss_bytes: None,
    }
}

/// Runs `job` in this process.
#[cfg(test)]
pub fn run(job: &Job) -> Result<JobResult> {
    let partial = Mutex::default();
    run_into(job, &partial)?;
    Ok(partial
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner)
        .result)
}

/// Runs `job` in this process, each cell into `partial` as it is done.
fn run_into(job: &Job, partial: &Mutex<Partial>) -> Result<()> {
    let locked = || partial.lock().unwrap_or_else(PoisonError::into_inner);
    let spec = engines::lookup(&job.engine)?;
    let Availability::Ready(open) = spec.availability else {
        bail!("{} cannot run in this build", job.engine);
    };
    let options = OpenOptions {
        durability: job.durability,
        resident_budget: job.scenario.resident_budget,
        threads: job.cfg.threads,
    };
    let open_store = |dir: &Path| -> Result<Box<dyn Engine>> { open(dir, &options) };
    let mut bench = match Bench::new(
        &open_store,
        &job.dir,
        job.scenario.keys,
        &job.cfg,
        spec.kind != Kind::Floor,
        &job.engine,
    ) {
        Ok(bench) => bench,
        Err(e) => {
            let status = match e.downcast_ref::<Unsupported>() {
                Some(Unsupported(why)) => Status::Unsupported(why.clone()),
                None => Status::Error(format!("{e:#}")),
            };
            locked().result.cells = (job.scenario.workloads.iter())
                .map(|&w| cell(job, spec.kind, w, status.clone(), None))
                .collect();
            return Ok(());
        }
    };
    let (settings, durability) = bench.describe();
    {
        let mut partial = locked();
        partial.result.settings = Some(settings);
        partial.result.durability = Some(durability);
    }
    for &w in &job.scenario.workloads {
        let outcome = bench
            .run(w)
            .and_then(|o| match o {
                Outcome::Measured(m) => {
                    let (disk, logical) = match (m.space, w.shape()) {
                        (Some(space), _) => space,
                        // A fill that never got through its keys: the
                        // store holds what a cut pass wrote, whose space
                        // says nothing (see `Measurement::space`).
                        (None, Shape::Fill) => (0, 0),
                        (None, _) => bench.space()?,
                    };
                    let mut metrics = Metrics::new(w, &m, disk, logical);
                    // A failed measurement at rest leaves the cell's own
                    // figures.
                    if measured_at_rest(spec.kind, w) {
                        metrics.settled_disk_bytes = bench
                            .settled_disk_bytes()
                            .inspect_err(|e| {
                                log_line(&format!(
                                    "{}: space at rest not measured: {e:#}",
                                    job.engine
                                ));
                            })
                            .ok();
                    }
                    Ok((Status::Ok, Some(metrics)))
                }
                Outcome::Unsupported(why) => Ok((Status::Unsupported(why), None)),
            })
            .unwrap_or_else(|e| (Status::Error(format!("{e:#}")), None));
        let c = cell(job, spec.kind, w, outcome.0, outcome.1);
        if job.verbose {
            log_line(&summary(&c));
        }
        locked().result.cells.push(c);
    }
    // A store that fails to close keeps the cells measured before.
    if let Err(e) = bench.close() {
        log_line(&format!("{}: closing the store failed: {e:#}", job.engine));
    }
    Ok(())
}

/// One line about a cell, for the console.
pub fn summary(c: &Cell) -> String {
    let head = format!(
        "{:>9} {:<15} {:<12}",
        c.engine,
        c.scenario,
        c.workload.name()
    );
    match (&c.status, &c.metrics) {
        (Status::Ok, Some(m)) => format!(
            "{head} {:>11} ops/s  p50 {:>7} µs  p99 {:>7} µs  p99.9 {:>7} µs",
            thousands(m.ops_per_sec.round() as u64),
            micros(m.p50_us),
            micros(m.p99_us),
            micros(m.p999_us)
        ),
        (Status::Unsupported(why), _) => format!("{head} unsupported: {why}"),
        (Status::Error(e), _) => format!("{head} ERROR: {e}"),
        (Status::Ok, None) => format!("{head} no measurement"),
    }
}

/// The peak resident set size of this process (`VmHWM`), in bytes.
fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line
        .trim_start_matches("VmHWM:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::driver::Stop;
    use crate::workload::Workload;

    fn job(workloads: Vec<Workload>, dir: &Path) -> Job {
        Job {
            engine: "emberkv".to_owned(),
            scenario: Scenario {
                page: "custom".to_owned(),
                name: "custom".to_owned(),
                keys: 1_000,
                resident_budget: None,
                workloads,
                threads: None,
            },
            durability: Durability::Default,
            cfg: Config {
                threads: 1,
                stop: Stop::Ops(10),
                warmup: Duration::ZERO,
                seed: 1,
                value_size: 64,
                compressibility: 0.5,
                reps: 1,
                settle: Duration::ZERO,
                stall: Duration::from_secs(crate::watchdog::DEFAULT_STALL_SECS),
                progress: false,
            },
            dir: dir.to_owned(),
            verbose: false,
        }
    }

    /// The cells a hung worker hands back: those done, the hung one, and
    /// the later ones as not run.
    #[test]
    fn a_hung_worker_keeps_its_cells_and_names_the_hung_one() {
        let dir = tempfile::tempdir().unwrap();
        let mut result = run(&job(vec![Workload::FillSeq], dir.path())).unwrap();
        assert_eq!(result.cells.len(), 1);
        let job = job(
            vec![Workload::FillSeq, Workload::Overwrite, Workload::ReadRandom],
            dir.path(),
        );
        add_hung_cells(
            &mut result,
            &job,
            Kind::Store,
            "sled overwrite",
            Duration::from_secs(301),
        );
        let statuses: Vec<_> = (result.cells.iter())
            .map(|c| (c.workload, c.status.clone()))
            .collect();
        assert_eq!(statuses[0], (Workload::FillSeq, Status::Ok));
        let Status::Error(hung) = &statuses[1].1 else {
            panic!("{statuses:?}")
        };
        assert_eq!(statuses[1].0, Workload::Overwrite);
        assert!(
            hung.contains("hung: nothing finished for 301 s (sled overwrite)"),
            "{hung}"
        );
        assert_eq!(
            statuses[2],
            (
                Workload::ReadRandom,
                Status::Error("not run: the worker was stopped when overwrite hung".to_owned())
            )
        );
        assert!(result.cells.iter().all(|c| c.scenario == "custom"));
    }

    /// A fill whose window closed before any pass got through every key
    /// used to report the space of the cut pass's store (an emberkv fill
    /// of FULL durability once showed 1.08 for 45,722 of 100,000 keys).
    #[test]
    fn a_fill_cut_before_its_first_pass_ends_reports_no_space() {
        let dir = tempfile::tempdir().unwrap();
        let job = job(vec![Workload::FillRandom], dir.path());
        let result = run(&job).unwrap();
        let metrics = result.cells[0].metrics.as_ref().expect("measured");
        assert_eq!(metrics.ops, 10);
        assert_eq!(metrics.space_amp(), None);
    }
}
