//! The synchronisation primitives and background threads of the index,
//! the log, the flusher and the store, named in one place so that the
//! concurrency tests can swap them.
//!
//! A normal build re-exports `parking_lot`'s mutex and condition variable,
//! `arc_swap`'s `ArcSwap` and the standard atomics. Built with
//! `--cfg shuttle` (`scripts/shuttle.sh`), the same names are
//! [shuttle](https://github.com/awslabs/shuttle)'s instrumented versions:
//! every lock, wait and atomic access becomes a point where shuttle's
//! scheduler may switch threads, and its tests (`index::shuttle_tests`,
//! `log::shuttle_tests`, and `db::shuttle_tests` over a whole store,
//! whose background threads start through [`thread`]) run the real
//! protocols under thousands of
//! randomly chosen (PCT, "A Randomized Scheduler with Probabilistic
//! Guarantees of Finding Bugs", Burckhardt et al., ASPLOS 2010)
//! interleavings. Shuttle explores interleavings of sequentially
//! consistent operations; it does not model weaker memory orderings.

#[cfg(not(shuttle))]
pub(crate) use arc_swap::ArcSwap;
#[cfg(not(shuttle))]
pub(crate) use parking_lot::{Condvar, Mutex, MutexGuard};
#[cfg(shuttle)]
pub(crate) use shuttled::{
    ArcSwap, Condvar, Mutex, Mutex as SleepingMutex, MutexGuard, MutexGuard as SleepingMutexGuard,
};

/// The mutex of the write path's two locks, each index shard's and the
/// log's append lock: the standard library's, whose waiters spin briefly
/// and then sleep on a futex until the holder wakes them, behind a longer
/// spin of our own where the process has more than one CPU: a waiter
/// tries the lock again [`SPIN_TRIES`] times (about 13 µs on this
/// project's 2-CPU machine) before it waits in the standard library's
/// lock. A sleeping waiter is woken only to queue behind the other
/// runnable threads, so with 8 writers on 2 CPUs the spin took the p99
/// of `overwrite` from 42-51 µs to 2.9-3.8 µs, that of `ycsb-a` from
/// 6.8-10.2 µs to 2.5-3.0 µs and the fills' p99.9 from 0.9-1.8 ms to
/// 0.45-0.73 ms, at the same throughput (docs/PERFORMANCE.md,
/// 2026-12-04). On one CPU a waiter runs only while the holder does not,
/// so there it does not spin. `parking_lot`'s
/// waiters also yield the CPU (`sched_yield`) up to seven times before
/// they sleep: with more writers than CPUs, most of the writers' context
/// switches were those yields (`perf` with `sched_switch`), and a holder
/// that lost its CPU left the others yielding to each other. Measured
/// with the benchmark harness on 2 CPUs, 8 threads (docs/PERFORMANCE.md):
/// `fillrandom` 1.51M-1.63M inserts/s with this against 1.20M-1.24M with
/// `parking_lot`'s, and the p99 of `ycsb-a` 4-7 µs against 238-243 µs.
/// As with `parking_lot`'s, a panic while it is held does not poison
/// it: `lock` takes the guard back from a poisoned lock, so the write
/// path behaves after a panic as it did before this type.
#[cfg(not(shuttle))]
pub(crate) struct SleepingMutex<T>(std::sync::Mutex<T>);

/// The guard of a [`SleepingMutex`].
#[cfg(not(shuttle))]
pub(crate) type SleepingMutexGuard<'a, T> = std::sync::MutexGuard<'a, T>;

#[cfg(not(shuttle))]
impl<T> SleepingMutex<T> {
    pub(crate) const fn new(value: T) -> SleepingMutex<T> {
        SleepingMutex(std::sync::Mutex::new(value))
    }

    pub(crate) fn lock(&self) -> SleepingMutexGuard<'_, T> {
        if waiters_spin() {
            for _ in 0..SPIN_TRIES {
                match self.0.try_lock() {
                    Ok(guard) => return guard,
                    Err(std::sync::TryLockError::Poisoned(poisoned)) => {
                        return poisoned.into_inner();
                    }
                    Err(std::sync::TryLockError::WouldBlock) => std::hint::spin_loop(),
                }
            }
        }
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// How many times [`SleepingMutex::lock`] tries a held lock again, with a
/// spin-loop hint between tries, before it waits in the standard
/// library's lock (which spins 100 times more and then sleeps).
#[cfg(not(shuttle))]
const SPIN_TRIES: u32 = 500;

/// Whether a [`SleepingMutex`] waiter spins before it sleeps: only when
/// the process may run on more than one CPU, so that the holder can finish
/// meanwhile (on one CPU, a waiter runs only while the holder does not).
#[cfg(not(shuttle))]
fn waiters_spin() -> bool {
    static SPIN: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *SPIN.get_or_init(|| std::thread::available_parallelism().is_ok_and(|n| n.get() > 1))
}

/// Atomic integers and flags.
pub(crate) mod atomic {
    #[cfg(shuttle)]
    pub(crate) use shuttle::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, fence};
    pub(crate) use std::sync::atomic::Ordering;
    #[cfg(not(shuttle))]
    pub(crate) use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, fence};
}

/// The store's background threads (flusher, maintenance): the standard
/// library's, or shuttle's under `--cfg shuttle`, so that a schedule
/// runs a whole store, its background work included.
pub(crate) mod thread {
    /// A thread's handle: [`JoinHandle::join`] waits for it.
    pub(crate) struct JoinHandle(Inner);

    #[cfg(not(shuttle))]
    type Inner = std::thread::JoinHandle<()>;
    #[cfg(shuttle)]
    type Inner = shuttle::thread::JoinHandle<()>;

    /// Starts a thread named `name` running `f`.
    ///
    /// # Errors
    /// The standard library's, when the thread cannot be started.
    pub(crate) fn spawn(
        name: &str,
        f: impl FnOnce() + Send + 'static,
    ) -> std::io::Result<JoinHandle> {
        #[cfg(not(shuttle))]
        let inner = std::thread::Builder::new().name(name.into()).spawn(f)?;
        #[cfg(shuttle)]
        let inner = shuttle::thread::Builder::new().name(name.into()).spawn(f)?;
        Ok(JoinHandle(inner))
    }

    /// Gives the CPU to another thread (under shuttle, lets the schedule
    /// run another).
    pub(crate) fn yield_now() {
        #[cfg(not(shuttle))]
        std::thread::yield_now();
        #[cfg(shuttle)]
        shuttle::thread::yield_now();
    }

    impl JoinHandle {
        /// Waits for the thread; `Err` if it panicked.
        pub(crate) fn join(self) -> std::thread::Result<()> {
            self.0.join()
        }
    }
}

/// Runs `schedule` under shuttle's random scheduler, as many times as
/// `EMBERKV_SHUTTLE_ITERATIONS` says, else `default`.
#[cfg(all(test, shuttle))]
pub(crate) fn check_random(schedule: fn(), default: usize) {
    let scheduler = shuttle::scheduler::RandomScheduler::new(iterations(default));
    shuttle::Runner::new(scheduler, config()).run(schedule);
}

/// Runs `schedule` under shuttle's PCT scheduler (bug depth 3), as many
/// times as `EMBERKV_SHUTTLE_ITERATIONS` says, else `default`.
#[cfg(all(test, shuttle))]
pub(crate) fn check_pct(schedule: fn(), default: usize) {
    let scheduler = shuttle::scheduler::PctScheduler::new(3, iterations(default));
    shuttle::Runner::new(scheduler, config()).run(schedule);
}

/// Shuttle's defaults but for each thread's stack: 1 MiB instead of
/// 60 KiB, which a store's open in a debug build outgrew on 2026-12-07
/// (a `SIGSEGV` in `statx` under recovery, past the stack's guard page).
#[cfg(all(test, shuttle))]
fn config() -> shuttle::Config {
    let mut config = shuttle::Config::new();
    config.stack_size = 1 << 20;
    config
}

#[cfg(all(test, shuttle))]
fn iterations(default: usize) -> usize {
    std::env::var("EMBERKV_SHUTTLE_ITERATIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

/// Shuttle's primitives behind the API of `parking_lot` and `arc_swap`
/// that the crate uses.
#[cfg(shuttle)]
mod shuttled {
    use std::ops::{Deref, DerefMut};
    use std::sync::{Arc, PoisonError, TryLockError};
    use std::time::Duration;

    /// `parking_lot::Mutex` over shuttle's: `lock` returns the guard
    /// directly (a panic while locked fails the test anyway).
    #[derive(Default)]
    pub(crate) struct Mutex<T>(shuttle::sync::Mutex<T>);

    /// The guard of a [`Mutex`]; the option is empty only inside
    /// [`Condvar::wait`] and [`MutexGuard::unlocked`].
    pub(crate) struct MutexGuard<'a, T> {
        mutex: &'a shuttle::sync::Mutex<T>,
        guard: Option<shuttle::sync::MutexGuard<'a, T>>,
    }

    impl<T> Mutex<T> {
        pub(crate) fn new(value: T) -> Mutex<T> {
            Mutex(shuttle::sync::Mutex::new(value))
        }

        pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
            MutexGuard {
                mutex: &self.0,
                guard: Some(self.0.lock().unwrap_or_else(PoisonError::into_inner)),
            }
        }

        pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
            let guard = match self.0.try_lock() {
                Ok(guard) => guard,
                Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
                Err(TryLockError::WouldBlock) => return None,
            };
            Some(MutexGuard {
                mutex: &self.0,
                guard: Some(guard),
            })
        }

        pub(crate) fn get_mut(&mut self) -> &mut T {
            self.0.get_mut().unwrap_or_else(PoisonError::into_inner)
        }
    }

    impl<T> MutexGuard<'_, T> {
        /// Runs `f` with the mutex unlocked, as `parking_lot`'s does.
        pub(crate) fn unlocked<U>(guard: &mut Self, f: impl FnOnce() -> U) -> U {
            drop(guard.guard.take());
            let result = f();
            guard.guard = Some(guard.mutex.lock().unwrap_or_else(PoisonError::into_inner));
            result
        }

        /// Unlocks, as `parking_lot`'s does (shuttle's scheduler picks the
        /// next holder either way).
        pub(crate) fn unlock_fair(guard: Self) {
            drop(guard);
        }
    }

    impl<T> Deref for MutexGuard<'_, T> {
        type Target = T;
        fn deref(&self) -> &T {
            self.guard.as_ref().expect("guard held")
        }
    }

    impl<T> DerefMut for MutexGuard<'_, T> {
        fn deref_mut(&mut self) -> &mut T {
            self.guard.as_mut().expect("guard held")
        }
    }

    /// `parking_lot::Condvar` over shuttle's.
    #[derive(Default)]
    pub(crate) struct Condvar(shuttle::sync::Condvar);

    impl Condvar {
        pub(crate) fn new() -> Condvar {
            Condvar(shuttle::sync::Condvar::new())
        }

        pub(crate) fn wait<T>(&self, guard: &mut MutexGuard<'_, T>) {
            let held = guard.guard.take().expect("guard held");
            guard.guard = Some(self.0.wait(held).unwrap_or_else(PoisonError::into_inner));
        }

        /// Shuttle has no clock, and its own timed wait may never time
        /// out: a timed wait here is a time-out at a point the scheduler
        /// picks (the lock is released, other threads may run, and it is
        /// taken again), so that a caller's loop re-checks its condition
        /// and its real-time deadline as it would after a time-out.
        pub(crate) fn wait_for<T>(&self, guard: &mut MutexGuard<'_, T>, _timeout: Duration) {
            MutexGuard::unlocked(guard, shuttle::thread::yield_now);
        }

        pub(crate) fn notify_one(&self) {
            self.0.notify_one();
        }

        pub(crate) fn notify_all(&self) {
            self.0.notify_all();
        }
    }

    /// `arc_swap::ArcSwap` as a shuttle lock around an `Arc`: loads and
    /// stores are single atomic steps, as they are in `arc_swap`.
    pub(crate) struct ArcSwap<T>(shuttle::sync::RwLock<Arc<T>>);

    impl<T> ArcSwap<T> {
        pub(crate) fn from_pointee(value: T) -> ArcSwap<T> {
            ArcSwap(shuttle::sync::RwLock::new(Arc::new(value)))
        }

        pub(crate) fn load(&self) -> Arc<T> {
            self.load_full()
        }

        pub(crate) fn load_full(&self) -> Arc<T> {
            Arc::clone(&self.0.read().unwrap_or_else(PoisonError::into_inner))
        }

        pub(crate) fn store(&self, value: Arc<T>) {
            *self.0.write().unwrap_or_else(PoisonError::into_inner) = value;
        }
    }
}

#[cfg(all(test, not(shuttle)))]
mod tests {
    use super::SleepingMutex;
    use std::sync::Arc;

    /// Waiters that spin and waiters that sleep alike enter one at a time:
    /// no increment is lost.
    #[test]
    fn contended_waiters_hold_the_lock_one_at_a_time() {
        let per_thread = if cfg!(miri) { 50 } else { 20_000 };
        let counter = Arc::new(SleepingMutex::new(0u64));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let counter = Arc::clone(&counter);
                std::thread::spawn(move || {
                    for _ in 0..per_thread {
                        let mut guard = counter.lock();
                        let seen = *guard;
                        std::thread::yield_now();
                        *guard = seen + 1;
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(*counter.lock(), 4 * per_thread);
    }

    #[test]
    fn a_panic_while_it_is_held_does_not_poison_it() {
        let value = Arc::new(SleepingMutex::new(7));
        let holder = Arc::clone(&value);
        let panicked = std::thread::spawn(move || {
            let mut guard = holder.lock();
            *guard = 8;
            panic!("the holder panics");
        })
        .join();
        assert!(panicked.is_err());
        assert_eq!(*value.lock(), 8);
    }
}
