//! Handles inherited across `fork`.
//!
//! A child process forked while its parent holds a store gets copies of
//! the parent's `Db` handles: their memory (the index and the hot tier as
//! they stood at the fork), descriptors and locks, but none of their
//! threads. A write through such a copy appended at the tail the child's
//! copy of the hot tier remembered, over records the parent had written
//! and fdatasynced since, and made it durable there: an attack helper
//! (2026-12-07) lost 1,100 of 1,200 acknowledged `sync_writes` keys that
//! way, and its child aborted when it dropped the handle (the threads it
//! joined were not there). So the process counts the forks it is a child
//! of ([`generation`], raised in the child by a `pthread_atfork` handler),
//! every store remembers the count it was opened under, and a handle whose
//! count differs refuses every call with [`crate::Error::Forked`] and, when
//! dropped, leaves the parent's threads, files and locks alone. A child
//! opens the store afresh once the parent has closed it (while the parent
//! holds it, the child's open fails with [`crate::Error::Locked`]).
//!
//! The module's `unsafe` is the foreign call that registers the handler;
//! Miri cannot run it (nor fork), so under Miri forks go uncounted and
//! the test is ignored.

use std::sync::Once;
use std::sync::atomic::{AtomicU64, Ordering};

/// Forks this process is a child of (0 in a process that was not forked
/// since it first opened a store).
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// Registers the handler that counts forks, once per process.
static COUNTING: Once = Once::new();

/// Run by `fork` in the child, on its one thread, before `fork` returns.
#[cfg(not(miri))]
extern "C" fn in_child() {
    GENERATION.fetch_add(1, Ordering::Relaxed);
}

/// The count of forks this process is a child of, counting from the first
/// call (which registers the handler; `Db::open` calls it). An atomic load
/// after the first call: cheap enough for every get.
pub(crate) fn generation() -> u64 {
    COUNTING.call_once(|| {
        #[cfg(not(miri))]
        // SAFETY: `in_child` is an `extern "C" fn()` that lives as long
        // as the process, touches nothing but an atomic (async-signal
        // safe, as a handler run by `fork` in a multithreaded process must
        // be), and is registered once. The other two handlers are none.
        // The call fails only for want of memory (`ENOMEM`): then forks
        // go uncounted, as before this module.
        unsafe {
            libc::pthread_atfork(None, None, Some(in_child));
        }
    });
    GENERATION.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The count rises in a forked child only, and stays in the parent.
    #[test]
    #[cfg_attr(miri, ignore = "Miri cannot fork")]
    fn a_forked_child_counts_one_more_generation() {
        let before = generation();
        // SAFETY: the child only loads an atomic and calls `_exit`, both
        // async-signal safe, as the child of a multithreaded process may.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            let code = if GENERATION.load(Ordering::Relaxed) == before + 1 {
                0
            } else {
                1
            };
            // SAFETY: ends the child at once, running nothing of the
            // parent's (no destructors, no test harness).
            unsafe { libc::_exit(code) };
        }
        let mut status = 0;
        // SAFETY: waits for the child made above, writing its status here.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "child saw no new generation"
        );
        assert_eq!(generation(), before);
    }
}
