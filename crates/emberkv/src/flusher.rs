//! The background flusher: the default (group commit) durability path.
//!
//! One thread per open store. It writes each sealed page to its segment
//! file as soon as the appender seals it (so the hot tier keeps room), and
//! every `flush_interval` writes out the rest of the published log and
//! fdatasyncs it. A write acknowledged at time `t` is therefore durable by
//! `t + flush_interval` plus the time of one write and fdatasync of at most
//! the hot tier's unflushed bytes (64 MiB, `log::MAX_UNFLUSHED_BYTES`).
//! With `sync_writes`, it also keeps zeros written ahead of the writes in
//! the active segment's file (`Log::write_zeros_ahead`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::log::Log;
use crate::sync::atomic::{AtomicBool, Ordering};
use crate::sync::thread::{self, JoinHandle};

/// Handle to the flusher thread; stopping it is the caller's job (see
/// [`Flusher::stop`]).
pub(crate) struct Flusher {
    stop: Arc<AtomicBool>,
    log: Arc<Log>,
    thread: Option<JoinHandle>,
}

impl Flusher {
    /// Starts the flusher of `log` with a group-commit window of `interval`.
    pub(crate) fn spawn(log: Arc<Log>, interval: Duration) -> std::io::Result<Flusher> {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (log, stop) = (Arc::clone(&log), Arc::clone(&stop));
            thread::spawn("emberkv-flusher", move || run(&log, &stop, interval))?
        };
        Ok(Flusher {
            stop,
            log,
            thread: Some(thread),
        })
    }

    /// Stops the thread and waits for it. The caller syncs the log after.
    pub(crate) fn stop(&mut self) {
        self.stop.store(true, Ordering::Release);
        {
            let _guard = self.log.page_sealed_lock.lock();
            self.log.page_sealed.notify_all();
        }
        if let Some(thread) = self.thread.take() {
            // A panic in the flusher has already been reported; the caller's
            // final sync reports the state of the log.
            let _ = thread.join();
        }
    }
}

impl Drop for Flusher {
    /// Stops the thread, if [`Flusher::stop`] did not: a `Db::open` that
    /// fails after spawning the flusher (its maintenance thread cannot be
    /// started) must not leave it running, writing zeros ahead into a
    /// store that another open may already be writing (review of the
    /// zeros written ahead, 2026-12-01).
    fn drop(&mut self) {
        self.stop();
    }
}

fn run(log: &Log, stop: &AtomicBool, interval: Duration) {
    let mut next_sync = Instant::now() + interval;
    while !stop.load(Ordering::Acquire) {
        {
            let mut guard = log.page_sealed_lock.lock();
            let wait = next_sync.saturating_duration_since(Instant::now());
            if !wait.is_zero() && !stop.load(Ordering::Acquire) {
                log.page_sealed.wait_for(&mut guard, wait);
            }
        }
        // Errors poison the log, and every later write reports them; the
        // flusher keeps running so that `sync` and `close` still answer.
        let _ = log.write_sealed();
        let _ = log.write_zeros_ahead();
        log.stock_pages();
        if Instant::now() >= next_sync {
            let _ = log.sync_all();
            let _ = log.mark_idle(false);
            next_sync = Instant::now() + interval;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A flusher dropped without `stop` stops its thread (which holds the
    /// log) before the drop returns.
    #[test]
    fn a_dropped_flusher_stops_its_thread() {
        let dir = tempfile::tempdir().unwrap();
        let log = Arc::new(crate::log::tests::log_in(dir.path(), 20, 4 << 20, 0));
        let flusher = Flusher::spawn(Arc::clone(&log), Duration::from_millis(1)).unwrap();
        assert!(Arc::strong_count(&log) > 1);
        drop(flusher);
        assert_eq!(Arc::strong_count(&log), 1);
    }
}
