//! Runs workloads against one engine: client threads, warm-up, measured
//! window, read verification.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};

use crate::engine::Engine;
use crate::hist::Latencies;
use crate::workload::{
    KeyStream, ScrambledZipfian, VALUE_BYTES, Workload, ZIPF_THETA, fill_order, fill_share,
    fill_value, key, value_head,
};

/// Pairs per [`Engine::load_batch`] call when loading keys before reads.
pub const LOAD_BATCH: usize = 1_000;
/// Every this many reads per thread, the whole value is compared; the
/// others check its length and first 8 bytes.
const FULL_CHECK_EVERY: u64 = 64;

/// What every cell of a run shares.
#[derive(Clone, Debug)]
pub struct Config {
    /// Number of distinct keys.
    pub keys: u64,
    /// Number of client threads.
    pub threads: usize,
    /// Length of the measured window; a fill stops early when done.
    pub duration: Duration,
    /// Unmeasured warm-up before the window of a read workload.
    pub warmup: Duration,
    /// Seed of every generated key order, value and key stream.
    pub seed: u64,
}

/// The outcome of one measured cell.
#[derive(Debug)]
pub struct Measurement {
    /// Operations completed inside the measured window.
    pub ops: u64,
    /// Length of the measured window.
    pub elapsed: Duration,
    /// Latency of every measured operation.
    pub latencies: Latencies,
    /// For a fill: whether every key was inserted before the window closed.
    pub completed: bool,
}

impl Measurement {
    /// Measured throughput, in operations per second.
    pub fn ops_per_sec(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

const WARMUP: u8 = 0;
const MEASURE: u8 = 1;
const STOP: u8 = 2;

/// One engine's store under test, and which keys it holds.
pub struct Bench<'a> {
    engine: &'a dyn Engine,
    cfg: &'a Config,
    order: Vec<u64>,
    zipf: ScrambledZipfian,
    loaded: Vec<bool>,
}

/// What one client thread did.
struct ClientOut {
    ops: u64,
    inserted: usize,
    latencies: Latencies,
}

impl<'a> Bench<'a> {
    /// A bench over `engine`, whose store must start empty. First checks
    /// that the engine round-trips a probe key (insert, get, remove, get),
    /// so that a broken engine is never measured; the probe is longer than
    /// any benchmark key and is gone again afterwards.
    pub fn new(engine: &'a dyn Engine, cfg: &'a Config) -> Result<Self> {
        const PROBE: &[u8] = b"emberkv-bench pre-flight probe";
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
        Ok(Bench {
            engine,
            cfg,
            order: fill_order(cfg.seed, cfg.keys),
            zipf: ScrambledZipfian::new(cfg.keys, ZIPF_THETA),
            loaded: vec![false; cfg.keys as usize],
        })
    }

    /// Runs one measured cell of `workload`. Read workloads first load the
    /// keys the store lacks (unmeasured, in batches of [`LOAD_BATCH`]), then
    /// sync, warm up and measure. A wrong read is an error.
    pub fn run(&mut self, workload: Workload) -> Result<Measurement> {
        if !workload.is_fill() {
            self.load_missing()?;
        }
        let phase = AtomicU8::new(if workload.is_fill() { MEASURE } else { WARMUP });
        let threads = self.cfg.threads.max(1);
        let (done_tx, done_rx) = mpsc::channel();
        let (outs, elapsed) = thread::scope(|s| {
            let mut start = Instant::now();
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let stream = KeyStream::new(
                        workload,
                        self.cfg.seed,
                        t,
                        threads,
                        &self.order,
                        &self.zipf,
                    );
                    let (phase, done_tx, this) = (&phase, done_tx.clone(), &*self);
                    s.spawn(move || {
                        let out = this.client(workload, stream, phase);
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
            if !workload.is_fill() {
                wait(&done_rx, start + self.cfg.warmup, &mut running);
                phase.store(MEASURE, Ordering::Relaxed);
                start = Instant::now();
            }
            wait(&done_rx, start + self.cfg.duration, &mut running);
            phase.store(STOP, Ordering::Relaxed);
            let elapsed = start.elapsed();
            let outs: Vec<_> = handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(anyhow!("a client thread panicked")))
                })
                .collect();
            (outs, elapsed)
        });

        let mut m = Measurement {
            ops: 0,
            elapsed,
            latencies: Latencies::default(),
            completed: false,
        };
        let mut inserted = 0;
        for (t, out) in outs.into_iter().enumerate() {
            let out = out.with_context(|| format!("{} {workload}", self.engine.name()))?;
            for &i in &fill_share(&self.order, t, threads)[..out.inserted] {
                self.loaded[i as usize] = true;
            }
            inserted += out.inserted;
            m.ops += out.ops;
            m.latencies.merge(&out.latencies);
        }
        m.completed = workload.is_fill() && inserted == self.order.len();
        Ok(m)
    }

    /// One client thread: runs `stream` until it ends or `phase` says stop,
    /// recording latencies while `phase` says measure.
    fn client(
        &self,
        workload: Workload,
        stream: KeyStream<'_>,
        phase: &AtomicU8,
    ) -> Result<ClientOut> {
        let seed = self.cfg.seed;
        let mut out = ClientOut {
            ops: 0,
            inserted: 0,
            latencies: Latencies::default(),
        };
        let mut value = [0u8; VALUE_BYTES];
        let mut buf = Vec::with_capacity(VALUE_BYTES);
        for (n, index) in stream.enumerate() {
            let p = phase.load(Ordering::Relaxed);
            if p == STOP {
                break;
            }
            let k = key(index);
            let took = if workload.is_fill() {
                fill_value(seed, index, &mut value);
                let t0 = Instant::now();
                self.engine.insert(&k, &value)?;
                let took = t0.elapsed();
                out.inserted += 1;
                took
            } else {
                let t0 = Instant::now();
                let found = self.engine.get(&k, &mut buf)?;
                let took = t0.elapsed();
                if !found {
                    bail!("get of loaded key #{index} returned not found");
                }
                let full = (n as u64).is_multiple_of(FULL_CHECK_EVERY);
                if !value_matches(seed, index, &buf, full.then_some(&mut value)) {
                    bail!(
                        "get of key #{index} returned a wrong value ({} bytes)",
                        buf.len()
                    );
                }
                took
            };
            if p == MEASURE {
                out.latencies.record(took);
                out.ops += 1;
            }
        }
        Ok(out)
    }

    /// Inserts every key the store lacks, in batches, then syncs.
    fn load_missing(&mut self) -> Result<()> {
        let missing: Vec<u64> = (0..self.cfg.keys)
            .filter(|&i| !self.loaded[i as usize])
            .collect();
        let mut value = [0u8; VALUE_BYTES];
        for chunk in missing.chunks(LOAD_BATCH) {
            let items: Vec<_> = chunk
                .iter()
                .map(|&i| {
                    fill_value(self.cfg.seed, i, &mut value);
                    (key(i).to_vec(), value.to_vec())
                })
                .collect();
            self.engine
                .load_batch(&items)
                .with_context(|| format!("{}: loading keys", self.engine.name()))?;
            for &i in chunk {
                self.loaded[i as usize] = true;
            }
        }
        self.engine.sync()
    }
}

/// Whether `got` is the value of item `index`: its length and first 8
/// bytes always, every byte when `scratch` is given (it is overwritten).
fn value_matches(
    seed: u64,
    index: u64,
    got: &[u8],
    scratch: Option<&mut [u8; VALUE_BYTES]>,
) -> bool {
    if got.len() != VALUE_BYTES || got[..8] != value_head(seed, index) {
        return false;
    }
    match scratch {
        Some(expected) => {
            fill_value(seed, index, expected);
            got == &expected[..]
        }
        None => true,
    }
}

/// Waits until `deadline` or until all `running` threads have reported done;
/// decrements `running` for each report.
fn wait(done: &mpsc::Receiver<()>, deadline: Instant, running: &mut usize) {
    while *running > 0 {
        match done.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(()) => *running -= 1,
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Mutex;

    use super::*;

    /// An in-memory engine that can be told to corrupt byte 100 of every
    /// value it returns (past the 8 bytes checked on every read).
    #[derive(Default)]
    struct Mem {
        map: Mutex<HashMap<Vec<u8>, Vec<u8>>>,
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
        fn sync(&self) -> Result<()> {
            Ok(())
        }
        fn settings(&self) -> String {
            "test".to_owned()
        }
        fn durability(&self) -> &'static str {
            "none"
        }
        fn close(self: Box<Self>) -> Result<()> {
            Ok(())
        }
    }

    fn config() -> Config {
        Config {
            keys: 2_000,
            threads: 3,
            duration: Duration::from_millis(200),
            warmup: Duration::from_millis(20),
            seed: 5,
        }
    }

    #[test]
    fn fill_then_reads_measure_and_verify() {
        let (engine, cfg) = (Mem::default(), config());
        let mut bench = Bench::new(&engine, &cfg).unwrap();
        let fill = bench.run(Workload::FillRandom).unwrap();
        assert!(fill.completed);
        assert_eq!(fill.ops, 2_000);
        assert_eq!(engine.map.lock().unwrap().len(), 2_000);
        for w in [Workload::ReadRandom, Workload::YcsbC] {
            let m = bench.run(w).unwrap();
            assert!(m.ops > 0 && m.elapsed >= cfg.duration, "{w}: {m:?}");
        }
    }

    #[test]
    fn reads_load_missing_keys_first() {
        let (engine, cfg) = (Mem::default(), config());
        Bench::new(&engine, &cfg)
            .unwrap()
            .run(Workload::YcsbC)
            .unwrap();
        assert_eq!(engine.map.lock().unwrap().len(), 2_000);
    }

    #[test]
    fn a_wrong_value_aborts_the_run() {
        let engine = Mem {
            corrupt: true,
            ..Mem::default()
        };
        let cfg = config();
        let err = Bench::new(&engine, &cfg)
            .unwrap()
            .run(Workload::ReadRandom)
            .unwrap_err();
        assert!(format!("{err:#}").contains("wrong value"), "{err:#}");
    }
}
