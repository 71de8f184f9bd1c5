//! The bound on segment files' open descriptors, and the pool that the
//! stores of one process share it in.
//!
//! Each open segment keeps its file's descriptor in a slot that a sweep
//! can empty (`storage::OpenSegments::sweep`, after CLOCK: Corbató, 1968);
//! a segment's map stays, so gets need no descriptor. A store whose
//! options set [`crate::Options::max_open_files`] has a bound of its own
//! ([`Bound::Own`]). The others share one ([`Bound::Shared`]): half the
//! process's soft `RLIMIT_NOFILE` as it was when a store (any, `check` and
//! `salvage` too) was last opened in the process, at least 16, over all
//! their descriptors together. A store that opens a
//! descriptor past the shared bound sweeps the other stores' segments
//! first ([`sweep_others`]), then its own, so that a store read only
//! through its maps, which never opens a descriptor, still gives back the
//! ones it holds, and the store that needs descriptors does not take back
//! its own at each open while another store keeps the rest. Until
//! 2026-12-07 the default bound was half the limit for each store, so two
//! stores at the default could together exhaust it. A sweep goes round
//! only the segments that hold a descriptor, so its cost follows the
//! descriptors open, not the segments.
//!
//! The pool's registry is a leaf lock (the standard library's, never held
//! while a store's lock is taken): a sweep of the other stores takes them
//! out of it first, then sweeps them one at a time.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use crate::storage::OpenSegments;

/// The bound a store's open segment descriptors are held to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Bound {
    /// At most this many descriptors of the store's own (at least 1).
    Own(usize),
    /// The process's shared bound ([`shared_bound`]) over every store
    /// that has this one.
    Shared,
}

/// The stores that share the process's bound, and their descriptors.
struct Pool {
    /// The sharing stores' open segments (dead ones are dropped at each
    /// join).
    members: Mutex<Vec<Weak<OpenSegments>>>,
    /// Descriptors the members hold open, in all.
    files: AtomicUsize,
    /// The shared bound (`usize::MAX` until a store joins).
    most: AtomicUsize,
    /// Where the next sweep of the other stores starts, so that the sweeps
    /// go round the members instead of always closing the first one's.
    next: AtomicUsize,
}

static POOL: Pool = Pool {
    members: Mutex::new(Vec::new()),
    files: AtomicUsize::new(0),
    most: AtomicUsize::new(usize::MAX),
    next: AtomicUsize::new(0),
};

/// The shared bound: half the process's soft `RLIMIT_NOFILE` (the rest
/// for the program's own files, sockets and stores with bounds of their
/// own), at least 16; no bound where the limit is infinite or cannot be
/// read.
fn shared_bound() -> usize {
    match rlimit::getrlimit(rlimit::Resource::NOFILE) {
        Ok((soft, _)) if soft != rlimit::INFINITY => {
            usize::try_from(soft / 2).map_or(usize::MAX, |half| half.max(16))
        }
        _ => usize::MAX,
    }
}

/// Adds `open` to the stores that share the bound, which is read again
/// from the process's limit as it is now.
pub(crate) fn join(open: &Arc<OpenSegments>) {
    POOL.most.store(shared_bound(), Ordering::Relaxed);
    let mut members = POOL.members.lock().unwrap_or_else(PoisonError::into_inner);
    members.retain(|m| m.strong_count() > 0);
    members.push(Arc::downgrade(open));
}

/// Counts a descriptor opened by a sharing store.
pub(crate) fn opened() {
    POOL.files.fetch_add(1, Ordering::Relaxed);
}

/// Counts `n` descriptors closed by sharing stores.
pub(crate) fn closed(n: usize) {
    POOL.files.fetch_sub(n, Ordering::Relaxed);
}

/// Whether the sharing stores hold more descriptors than the bound.
pub(crate) fn over() -> bool {
    POOL.files.load(Ordering::Relaxed) > POOL.most.load(Ordering::Relaxed)
}

/// Sweeps the sharing stores other than `me`, one after another (each
/// such sweep starting one store further round), until the pool is within
/// its bound or each was swept once. It takes each store's sweep hand and
/// file slots in turn, one store at a time, and never a store's lock for
/// opening segments, which its caller may hold for `me`; the hand and
/// slots of `me` it leaves alone.
pub(crate) fn sweep_others(me: &OpenSegments) {
    let (others, start) = {
        let members = POOL.members.lock().unwrap_or_else(PoisonError::into_inner);
        let others: Vec<Arc<OpenSegments>> = members
            .iter()
            .filter_map(Weak::upgrade)
            .filter(|m| !std::ptr::eq(Arc::as_ptr(m), me))
            .collect();
        (others, POOL.next.fetch_add(1, Ordering::Relaxed))
    };
    if others.is_empty() {
        return;
    }
    for i in 0..others.len() {
        if !over() {
            break;
        }
        others[(start + i) % others.len()].sweep(None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shared_bound_is_half_the_soft_limit_and_at_least_16() {
        let (soft, _) = rlimit::getrlimit(rlimit::Resource::NOFILE).unwrap();
        let bound = shared_bound();
        if soft == rlimit::INFINITY {
            assert_eq!(bound, usize::MAX);
        } else {
            assert_eq!(bound as u64, (soft / 2).max(16));
        }
    }
}
