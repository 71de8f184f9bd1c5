//! The maintenance thread: background compaction and index checkpoints.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::compaction;
use crate::db::Core;

/// How often the maintenance thread wakes.
const INTERVAL: Duration = Duration::from_secs(1);

/// Log bytes appended since the last checkpoint that make the thread write
/// a new one: 64 MiB (so a crash replays at most about that much).
const CHECKPOINT_EVERY: u64 = 64 << 20;

/// Handle to the maintenance thread.
pub(crate) struct Maintenance {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl Maintenance {
    /// Starts a thread that, every [`INTERVAL`], compacts the sealed
    /// segments with at least `min_garbage` of garbage (when set) and writes
    /// an index checkpoint once [`CHECKPOINT_EVERY`] bytes were appended
    /// since the last. Failures are retried at the next interval; the
    /// foreground `compact`, `sync` and `close` report errors.
    pub(crate) fn spawn(core: Arc<Core>, min_garbage: Option<f64>) -> std::io::Result<Self> {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let thread = {
            let stop = Arc::clone(&stop);
            std::thread::Builder::new()
                .name("emberkv-maintenance".into())
                .spawn(move || {
                    let (lock, wake) = &*stop;
                    let mut stopped = lock.lock();
                    while !*stopped {
                        wake.wait_for(&mut stopped, INTERVAL);
                        if *stopped {
                            break;
                        }
                        drop(stopped);
                        if let Some(min_garbage) = min_garbage {
                            let _ = compaction::run(&core, min_garbage);
                        }
                        let since = core.log.tail() - core.checkpointed.load(Ordering::Relaxed);
                        if since >= CHECKPOINT_EVERY {
                            let _ = core.checkpoint();
                        }
                        stopped = lock.lock();
                    }
                })?
        };
        Ok(Maintenance {
            stop,
            thread: Some(thread),
        })
    }

    /// Stops the thread, waiting for work in progress to finish.
    pub(crate) fn stop(&mut self) {
        let (lock, wake) = &*self.stop;
        *lock.lock() = true;
        wake.notify_all();
        if let Some(thread) = self.thread.take() {
            // A panic in the thread leaves the store as a crash would.
            let _ = thread.join();
        }
    }
}
