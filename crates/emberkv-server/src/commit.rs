//! Group commit across connections, for `appendfsync always`.
//!
//! A connection that ran a write asks for a sync that starts after its
//! writes; one connection at a time (the leader) runs the sync on the
//! blocking pool, and the others wait for it asynchronously, without a
//! thread each. The sync that covers them is the first one that starts
//! after they asked: its number (an epoch) is handed out under a lock that
//! the leader also takes to start a sync, so that a connection's writes
//! happen before every sync numbered at or after its ticket. A sync that
//! fails covers no one: its leader returns the error, and the connections
//! that waited for it lead a sync of their own (a full disk may have room
//! again; a store that refuses writes after a failed fdatasync fails each
//! of them at once).
//!
//! Before this, each connection ran `Store::sync` on the blocking pool
//! itself: 50 clients of `redis-benchmark` kept about 460 threads in the
//! process, and context switches took half of the server's CPU
//! (docs/PERFORMANCE.md). The engine's own group commit still shares one
//! fdatasync among the syncs that meet there (the leader's, a checkpoint's,
//! the flusher's).

use std::io;

use parking_lot::Mutex;
use tokio::sync::watch;

/// The state every waiter watches.
#[derive(Clone, Copy, Debug, Default)]
struct Synced {
    /// A leader's sync is running.
    running: bool,
    /// The newest epoch whose sync returned `Ok`.
    done: u64,
}

/// Group commit across connections (see the module docs).
#[derive(Debug)]
pub struct GroupCommit {
    /// The epoch of the newest sync started; taken by waiters for their
    /// ticket and raised by leaders, under this lock.
    started: Mutex<u64>,
    state: watch::Sender<Synced>,
}

impl Default for GroupCommit {
    fn default() -> GroupCommit {
        GroupCommit {
            started: Mutex::new(0),
            state: watch::Sender::new(Synced::default()),
        }
    }
}

/// Ends a leader's turn: on drop (the sync returned, or the leader's
/// future was dropped mid-sync), the next waiter may lead.
struct Turn<'a> {
    commit: &'a GroupCommit,
    /// The epoch of the sync, once it returned `Ok`.
    done: Option<u64>,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        let done = self.done;
        self.commit.state.send_modify(|s| {
            s.running = false;
            if let Some(epoch) = done {
                s.done = s.done.max(epoch);
            }
        });
    }
}

impl GroupCommit {
    /// Returns once a run of `sync` that started after this call has
    /// returned `Ok`. The caller's writes must be done before it calls:
    /// they are then covered by that run.
    ///
    /// # Errors
    /// The error of the run of `sync` this call led (a panic in it as an
    /// error): a call leads when no run is going on and none that
    /// succeeded covers it yet, so a failed run's waiters each lead a run
    /// of their own.
    pub async fn wait(
        &self,
        sync: impl FnOnce() -> emberkv::Result<()> + Send + 'static,
    ) -> io::Result<()> {
        let ticket = *self.started.lock() + 1;
        let mut rx = self.state.subscribe();
        let mut sync = Some(sync);
        loop {
            let lead = {
                let s = *rx.borrow_and_update();
                if s.done >= ticket {
                    return Ok(());
                }
                !s.running
            };
            if lead
                && self
                    .state
                    .send_if_modified(|s| !std::mem::replace(&mut s.running, true))
            {
                let mut turn = Turn {
                    commit: self,
                    done: None,
                };
                let epoch = {
                    let mut started = self.started.lock();
                    *started += 1;
                    *started
                };
                let run = sync.take().expect("a waiter leads at most once");
                let result = tokio::task::spawn_blocking(run).await;
                let result = match result {
                    Ok(Ok(())) => Ok(()),
                    Ok(Err(e)) => Err(io::Error::other(e)),
                    Err(e) => Err(io::Error::other(e)),
                };
                if result.is_ok() {
                    turn.done = Some(epoch);
                }
                drop(turn);
                // Its epoch covers this waiter's ticket.
                return result;
            }
            if rx.changed().await.is_err() {
                return Err(io::Error::other("group commit stopped"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

    /// Every waiter returns only after a sync that saw its write, and
    /// syncs never overlap: 64 tasks on 4 threads, 20 writes each.
    #[test]
    fn each_waiter_is_covered_by_a_sync_started_after_its_write() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(4)
            .build()
            .unwrap();
        let commit = Arc::new(GroupCommit::default());
        let written = Arc::new(AtomicU64::new(0));
        let synced = Arc::new(AtomicU64::new(0));
        let running = Arc::new(AtomicUsize::new(0));
        let syncs = Arc::new(AtomicU64::new(0));
        runtime.block_on(async {
            let mut tasks = tokio::task::JoinSet::new();
            for _ in 0..64 {
                let (commit, written, synced, running, syncs) = (
                    Arc::clone(&commit),
                    Arc::clone(&written),
                    Arc::clone(&synced),
                    Arc::clone(&running),
                    Arc::clone(&syncs),
                );
                tasks.spawn(async move {
                    for _ in 0..20 {
                        let mine = written.fetch_add(1, Ordering::SeqCst) + 1;
                        let (w, s, r, n) = (
                            Arc::clone(&written),
                            Arc::clone(&synced),
                            Arc::clone(&running),
                            Arc::clone(&syncs),
                        );
                        commit
                            .wait(move || {
                                assert_eq!(r.fetch_add(1, Ordering::SeqCst), 0, "syncs overlap");
                                let upto = w.load(Ordering::SeqCst);
                                std::thread::sleep(std::time::Duration::from_micros(200));
                                s.fetch_max(upto, Ordering::SeqCst);
                                n.fetch_add(1, Ordering::SeqCst);
                                r.fetch_sub(1, Ordering::SeqCst);
                                Ok(())
                            })
                            .await
                            .unwrap();
                        assert!(synced.load(Ordering::SeqCst) >= mine);
                    }
                });
            }
            while let Some(done) = tasks.join_next().await {
                done.unwrap();
            }
        });
        let syncs = syncs.load(Ordering::SeqCst);
        assert!(
            syncs < 64 * 20,
            "{syncs} syncs for 1,280 writes: no group formed"
        );
    }

    /// A failed sync covers no one: its leader gets the error, and every
    /// connection that waited for it runs a sync of its own, which
    /// succeeds once the store can sync again (regression, review of
    /// 2026-12-01: a failure used to stick, and every later wait failed
    /// without a sync, also after a full disk had room again).
    #[test]
    fn a_failed_sync_covers_no_one_and_a_later_one_can_succeed() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .unwrap();
        let commit = Arc::new(GroupCommit::default());
        let full = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let (failed, ok) = runtime.block_on(async {
            let mut tasks = tokio::task::JoinSet::new();
            for _ in 0..16 {
                let (commit, full) = (Arc::clone(&commit), Arc::clone(&full));
                tasks.spawn(async move {
                    commit
                        .wait(move || {
                            std::thread::sleep(std::time::Duration::from_millis(2));
                            // The disk has room again after the first sync.
                            if full.swap(false, Ordering::SeqCst) {
                                Err(emberkv::Error::Closed)
                            } else {
                                Ok(())
                            }
                        })
                        .await
                });
            }
            let (mut failed, mut ok) = (0, 0);
            while let Some(result) = tasks.join_next().await {
                match result.unwrap() {
                    Ok(()) => ok += 1,
                    Err(_) => failed += 1,
                }
            }
            (failed, ok)
        });
        assert_eq!((failed, ok), (1, 15));
        // A failed sync leaves what it would have covered uncovered.
        let covered = commit.state.borrow().done;
        runtime.block_on(async {
            assert!(commit.wait(|| Err(emberkv::Error::Closed)).await.is_err());
            assert_eq!(commit.state.borrow().done, covered);
            assert!(commit.wait(|| Ok(())).await.is_ok());
            assert!(commit.state.borrow().done > covered);
        });
    }
}
