//! The maintenance thread: background compaction and index checkpoints.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::compaction;
use crate::db::Core;
use crate::error::Result;
use crate::sync::atomic::{AtomicBool, Ordering};
use crate::sync::thread::{self, JoinHandle};

/// How often the maintenance thread wakes when the log reaches no
/// milestone (a sealed segment, or [`crate::log::MILESTONE_BYTES`]
/// appended).
const INTERVAL: Duration = Duration::from_secs(1);

/// Log bytes appended since the last checkpoint that make the thread write
/// a new one: 64 MiB (so a crash replays at most about that much).
const CHECKPOINT_EVERY: u64 = 64 << 20;

/// The segment being written is sealed early, for compaction, once it holds
/// at least this many bytes (8 MiB) and a quarter of the store's live
/// record bytes: under uniform overwrites garbage spreads over every
/// segment, so a segment far larger than the data would hold most of the
/// space amplification by itself.
const SEAL_AT: u64 = 8 << 20;

/// Compaction counts as behind, and throttles writers, while the segment
/// files hold more than twice the live record bytes plus this slack
/// (64 MiB). Steady-state compaction keeps sealed segments under 1.5 times
/// their live bytes (at the default 0.33 threshold) and the active segment
/// under a quarter of the live bytes, so only writers outrunning the
/// compactor cross it.
const BEHIND_SLACK: u64 = 64 << 20;

/// Writers count as quiet, and cold segments get recompressed (see
/// [`compaction::recompress`]), while they append less than this (1 MiB)
/// over at least half an [`INTERVAL`] with no compaction to do.
const QUIET_BYTES: u64 = 1 << 20;

/// Handle to the maintenance thread.
pub(crate) struct Maintenance {
    stop: Arc<AtomicBool>,
    core: Arc<Core>,
    thread: Option<JoinHandle>,
}

impl Maintenance {
    /// Starts a thread that, at each log milestone and at least every
    /// [`INTERVAL`], compacts the sealed segments with at least
    /// `min_garbage` of garbage (when set; also sealing the active segment
    /// early, see [`SEAL_AT`]), with `compress_cold` rewrites one sealed
    /// segment with compression while writers are quiet (see
    /// [`QUIET_BYTES`]), and
    /// writes an index checkpoint once
    /// [`CHECKPOINT_EVERY`] bytes were appended since the last. Failures are
    /// retried at the next wake; the foreground `compact`, `sync` and
    /// `close` report errors.
    pub(crate) fn spawn(
        core: Arc<Core>,
        min_garbage: Option<f64>,
        compress_cold: bool,
    ) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (core, stop) = (Arc::clone(&core), Arc::clone(&stop));
            thread::spawn("emberkv-maintenance", move || {
                run(&core, &stop, min_garbage, compress_cold)
            })?
        };
        Ok(Maintenance {
            stop,
            core,
            thread: Some(thread),
        })
    }

    /// Stops the thread, waiting for work in progress to finish.
    pub(crate) fn stop(&mut self) {
        self.stop.store(true, Ordering::Release);
        self.core.set_compaction_behind(false);
        {
            let _milestones = self.core.log.milestones.lock();
            self.core.log.milestone_reached.notify_all();
        }
        if let Some(thread) = self.thread.take() {
            // A panic in the thread leaves the store as a crash would.
            let _ = thread.join();
        }
    }
}

fn run(core: &Core, stop: &AtomicBool, min_garbage: Option<f64>, compress_cold: bool) {
    let mut seen = *core.log.milestones.lock();
    // Where writers' quiet began (time and tail), and the first segment
    // not yet considered for recompression.
    let mut quiet_since = (Instant::now(), core.log.tail());
    let mut recompress_from = 0;
    while !stop.load(Ordering::Acquire) {
        {
            let mut milestones = core.log.milestones.lock();
            if *milestones == seen && !stop.load(Ordering::Acquire) {
                core.log
                    .milestone_reached
                    .wait_for(&mut milestones, INTERVAL);
            }
            seen = *milestones;
        }
        let mut worked = false;
        if let Some(min_garbage) = min_garbage {
            // Keep going while passes find work: under a heavy overwrite
            // load one pass per wake would fall behind.
            while !stop.load(Ordering::Acquire) && matches!(pass(core, min_garbage), Ok(true)) {
                worked = true;
            }
            let quiet = !worked
                && quiet_since.0.elapsed() >= INTERVAL / 2
                && core.log.tail() - quiet_since.1 < QUIET_BYTES;
            if compress_cold && quiet && !stop.load(Ordering::Acquire) {
                if let Ok((_, next)) = compaction::recompress(core, recompress_from) {
                    recompress_from = next;
                }
                worked = true;
            }
        }
        if worked || core.log.tail() - quiet_since.1 >= QUIET_BYTES {
            // The copies are not the writers' doing: quiet starts over
            // after them.
            quiet_since = (Instant::now(), core.log.tail());
        }
        let since = core.log.tail() - core.checkpointed.load(Ordering::Relaxed);
        if since >= CHECKPOINT_EVERY && !stop.load(Ordering::Acquire) {
            let _ = core.checkpoint();
        }
    }
}

/// One compaction pass; returns whether any segment was compacted. Before
/// the pass, and at each log milestone during it, [`assess`] throttles
/// writers or seals the active segment; a pass that finds nothing left to
/// do ends the throttling.
fn pass(core: &Core, min_garbage: f64) -> Result<bool> {
    assess(core)?;
    let worked = compaction::run(core, min_garbage, &mut || assess(core))?.segments > 0;
    if !worked {
        core.set_compaction_behind(false);
    }
    Ok(worked)
}

/// Sets whether compaction is behind (the segment files hold more than
/// twice the live bytes plus [`BEHIND_SLACK`]), and seals the active
/// segment once it holds [`SEAL_AT`] bytes and a quarter of the live
/// bytes (where its current page ends). Run at milestones during a pass as well: compacting one large
/// segment takes long enough for fast writers to fill most of another.
fn assess(core: &Core) -> Result<()> {
    let log = &core.log;
    let storage = log.storage();
    let active = storage.segment_of(log.tail());
    let written = log.tail() - storage.segment_start(active);
    let live: u64 = core.index.live_by_segment().values().sum();
    let mut on_disk = written;
    // Retired files still on disk (kept for a live iterator) do not count:
    // compaction is done with them.
    let retired = core.retired.lock().clone();
    for seg in storage
        .list()?
        .into_iter()
        .filter(|&s| s != active && !retired.contains(s))
    {
        on_disk += storage.written_len(seg)?;
    }
    core.set_compaction_behind(on_disk > 2 * live + BEHIND_SLACK);
    // Sealed where the page ends, so that the seal pads nothing; at once
    // when a request of an earlier wake is still pending (no page filled
    // since: the writers are slow or idle).
    if written >= SEAL_AT.max(live / 4) && log.seal_at_page_end() {
        log.seal_segment()?;
    }
    Ok(())
}
