//! The stall detector of a worker process: an engine that stops making
//! progress (a livelock or a deadlock of its own) must cost the board its
//! cells, not the whole run. sled 0.34 once spun in `sched_yield` from
//! `Log::reserve` for 15 minutes of an `overwrite` cell on this project's
//! machine (every client thread inside one insert, the process at 200 %
//! system CPU), and the board, which waits for every worker, never ended.
//!
//! The driver beats at every step it finishes: each operation of a
//! client thread (on a counter of the thread's own, see
//! [`Watchdog::beat_client`]), each load batch, and each phase, sync,
//! open and close. [`Watchdog::watch`] runs a thread that calls its
//! handler once no beat came for the stall time, with what the driver
//! said it was doing; the worker's handler reports the cell as hung and
//! ends the process (see `worker::serve`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Counters of client threads' beats: thread `t` beats on `t % 64`.
const CLIENT_SLOTS: usize = 64;

/// A client thread's beat counter, alone on its cache lines (128 bytes:
/// two lines, as the adjacent-line prefetcher pairs them), so that a beat
/// per operation costs a load and a store no other thread contends for.
#[repr(align(128))]
struct Slot(AtomicU64);

/// The default stall time, in seconds (`--stall`): longer than any one
/// engine call of the board takes on this machine (the slowest, a FULL
/// load batch of 1,000 synced inserts, takes seconds), so that only a
/// hang trips it.
pub const DEFAULT_STALL_SECS: u64 = 300;

/// The worker's watchdog, which the driver beats.
pub static WATCHDOG: Watchdog = Watchdog::new();

/// Beats and the step under way.
pub struct Watchdog {
    beats: AtomicU64,
    clients: [Slot; CLIENT_SLOTS],
    doing: Mutex<String>,
}

impl Watchdog {
    /// A watchdog that no thread watches yet.
    pub const fn new() -> Watchdog {
        Watchdog {
            beats: AtomicU64::new(0),
            clients: [const { Slot(AtomicU64::new(0)) }; CLIENT_SLOTS],
            doing: Mutex::new(String::new()),
        }
    }

    /// Records progress.
    pub fn beat(&self) {
        self.beats.fetch_add(1, Ordering::Relaxed);
    }

    /// Records an operation of client thread `thread`: a plain load and
    /// store of the thread's own counter (threads 64 apart share one, and
    /// may overwrite each other's count, which still changes it).
    pub fn beat_client(&self, thread: usize) {
        let slot = &self.clients[thread % CLIENT_SLOTS].0;
        slot.store(
            slot.load(Ordering::Relaxed).wrapping_add(1),
            Ordering::Relaxed,
        );
    }

    /// Every beat so far, the clients' included (wrapping).
    fn total(&self) -> u64 {
        (self.clients.iter()).fold(self.beats.load(Ordering::Relaxed), |sum, slot| {
            sum.wrapping_add(slot.0.load(Ordering::Relaxed))
        })
    }

    /// Records progress and names the step starting now (reported if it
    /// stalls).
    pub fn doing(&self, what: String) {
        *self.doing.lock().unwrap_or_else(PoisonError::into_inner) = what;
        self.beat();
    }

    /// Starts a thread that calls `on_stall` with the step under way and
    /// the time since the last beat once no beat came for `stall`, and
    /// then ends; it checks 20 times per `stall` (at least every second).
    ///
    /// # Errors
    /// The standard library's, when the thread cannot be started.
    pub fn watch(
        &'static self,
        stall: Duration,
        on_stall: impl FnOnce(&str, Duration) + Send + 'static,
    ) -> std::io::Result<JoinHandle<()>> {
        let check = (stall / 20).min(Duration::from_secs(1));
        std::thread::Builder::new()
            .name("watchdog".into())
            .spawn(move || {
                let mut seen = self.total();
                let mut since = Instant::now();
                loop {
                    std::thread::sleep(check);
                    let now = self.total();
                    if now != seen {
                        seen = now;
                        since = Instant::now();
                    } else if since.elapsed() >= stall {
                        let doing = self
                            .doing
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .clone();
                        on_stall(&doing, since.elapsed());
                        return;
                    }
                }
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn a_stall_is_reported_once_with_the_step_under_way() {
        let dog: &'static Watchdog = Box::leak(Box::new(Watchdog::new()));
        dog.doing("sled overwrite".to_owned());
        let (tx, rx) = mpsc::channel();
        let watcher = dog
            .watch(Duration::from_millis(100), move |doing, quiet| {
                tx.send((doing.to_owned(), quiet)).unwrap();
            })
            .unwrap();
        let (doing, quiet) = rx.recv_timeout(Duration::from_secs(30)).unwrap();
        assert_eq!(doing, "sled overwrite");
        assert!(quiet >= Duration::from_millis(100), "{quiet:?}");
        watcher.join().unwrap();
        assert!(rx.try_recv().is_err(), "reported twice");
    }

    #[test]
    fn beats_keep_the_handler_from_running() {
        let dog: &'static Watchdog = Box::leak(Box::new(Watchdog::new()));
        let (tx, rx) = mpsc::channel();
        let _watcher = dog
            .watch(Duration::from_secs(2), move |doing, _| {
                let _ = tx.send(doing.to_owned());
            })
            .unwrap();
        // Two stall times of steady beats, then silence.
        let until = Instant::now() + Duration::from_secs(4);
        let mut n = 0;
        while Instant::now() < until {
            if n % 2 == 0 {
                dog.beat();
            } else {
                dog.beat_client(n);
            }
            n += 1;
            assert!(rx.try_recv().is_err(), "a beating worker taken for hung");
            std::thread::sleep(Duration::from_millis(10));
        }
        dog.doing("quiet now".to_owned());
        assert_eq!(
            rx.recv_timeout(Duration::from_secs(30)).unwrap(),
            "quiet now"
        );
    }
}
