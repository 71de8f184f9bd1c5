//! Group commit across event loops, for `appendfsync always`.
//!
//! An event loop whose round of reads ran a write asks, before it sends
//! that round's replies, for a sync that starts after the writes; one
//! loop at a time (the leader) runs the sync, and the others block until
//! it returns. Every connection served in a round shares its loop's one
//! wait, as redis-server's `always` shares one `fsync` among the clients
//! of an event-loop iteration. The sync that covers a waiter is the first
//! one that starts after it asked: its number (an epoch) is handed out
//! under the lock that the leader also takes to start a sync, so that a
//! waiter's writes happen before every sync numbered at or after its
//! ticket. A sync that fails covers no one: its leader returns the error,
//! and the loops that waited for it lead a sync of their own (a full disk
//! may have room again; a store that refuses writes after a failed
//! fdatasync fails each of them at once).
//!
//! The engine's own group commit still shares one fdatasync among the
//! syncs that meet there (the leader's, a checkpoint's, the flusher's).

use std::io;

use parking_lot::{Condvar, Mutex};

/// What every waiter watches.
#[derive(Clone, Copy, Debug, Default)]
struct Synced {
    /// The epoch of the newest sync started; taken by waiters for their
    /// ticket and raised by leaders.
    started: u64,
    /// A leader's sync is running.
    running: bool,
    /// The newest epoch whose sync returned `Ok`.
    done: u64,
}

/// Group commit across event loops (see the module docs).
#[derive(Debug, Default)]
pub struct GroupCommit {
    state: Mutex<Synced>,
    changed: Condvar,
}

/// A leader's turn: ends (waking the waiters) when dropped, whether its
/// sync returned or panicked.
struct Turn<'a> {
    commit: &'a GroupCommit,
    /// The epoch to mark done, once its sync succeeded.
    done: Option<u64>,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        let mut state = self.commit.state.lock();
        state.running = false;
        if let Some(epoch) = self.done {
            state.done = state.done.max(epoch);
        }
        self.commit.changed.notify_all();
    }
}

impl GroupCommit {
    /// Blocks until a sync that started after this call has returned
    /// `Ok`, running `sync` itself if no sync is running when it needs
    /// one. Returns the error of the sync it ran, if that failed.
    pub fn wait(&self, sync: impl FnOnce() -> emberkv::Result<()>) -> io::Result<()> {
        let mut state = self.state.lock();
        let ticket = state.started + 1;
        loop {
            if state.done >= ticket {
                return Ok(());
            }
            if !state.running {
                state.running = true;
                state.started += 1;
                let mut turn = Turn {
                    commit: self,
                    done: None,
                };
                let epoch = state.started;
                drop(state);
                let result = sync().map_err(io::Error::other);
                if result.is_ok() {
                    turn.done = Some(epoch);
                }
                // Its epoch covers this waiter's ticket.
                return result;
            }
            self.changed.wait(&mut state);
        }
    }

    /// The newest epoch whose sync succeeded.
    #[cfg(test)]
    fn done(&self) -> u64 {
        self.state.lock().done
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

    #[test]
    fn each_waiter_is_covered_by_a_sync_started_after_its_write() {
        let commit = Arc::new(GroupCommit::default());
        let written = Arc::new(AtomicU64::new(0));
        let synced = Arc::new(AtomicU64::new(0));
        let running = Arc::new(AtomicUsize::new(0));
        let syncs = Arc::new(AtomicU64::new(0));
        std::thread::scope(|scope| {
            for _ in 0..16 {
                scope.spawn(|| {
                    for _ in 0..20 {
                        let mine = written.fetch_add(1, Ordering::SeqCst) + 1;
                        commit
                            .wait(|| {
                                assert_eq!(
                                    running.fetch_add(1, Ordering::SeqCst),
                                    0,
                                    "syncs overlap"
                                );
                                let upto = written.load(Ordering::SeqCst);
                                std::thread::sleep(std::time::Duration::from_micros(200));
                                synced.fetch_max(upto, Ordering::SeqCst);
                                syncs.fetch_add(1, Ordering::SeqCst);
                                running.fetch_sub(1, Ordering::SeqCst);
                                Ok(())
                            })
                            .unwrap();
                        assert!(synced.load(Ordering::SeqCst) >= mine);
                    }
                });
            }
        });
        let syncs = syncs.load(Ordering::SeqCst);
        assert!(
            syncs < 16 * 20,
            "{syncs} syncs for 320 writes: no group formed"
        );
    }

    #[test]
    fn a_failed_sync_covers_no_one_and_a_later_one_can_succeed() {
        let commit = GroupCommit::default();
        let full = AtomicBool::new(true);
        let results: Vec<io::Result<()>> = std::thread::scope(|scope| {
            let waiters: Vec<_> = (0..16)
                .map(|_| {
                    scope.spawn(|| {
                        commit.wait(|| {
                            std::thread::sleep(std::time::Duration::from_millis(2));
                            // The disk has room again after the first sync.
                            if full.swap(false, Ordering::SeqCst) {
                                Err(emberkv::Error::Closed)
                            } else {
                                Ok(())
                            }
                        })
                    })
                })
                .collect();
            waiters.into_iter().map(|w| w.join().unwrap()).collect()
        });
        let failed = results.iter().filter(|r| r.is_err()).count();
        assert_eq!((failed, results.len() - failed), (1, 15));
        // A failed sync leaves what it would have covered uncovered.
        let covered = commit.done();
        assert!(commit.wait(|| Err(emberkv::Error::Closed)).is_err());
        assert_eq!(commit.done(), covered);
        assert!(commit.wait(|| Ok(())).is_ok());
        assert!(commit.done() > covered);
    }

    #[test]
    fn a_sync_that_panics_ends_its_turn() {
        let commit = GroupCommit::default();
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            commit.wait(|| panic!("a sync's bug"))
        }));
        assert!(unwound.is_err());
        assert!(commit.wait(|| Ok(())).is_ok());
    }
}
