//! The maintenance thread: background compaction and index checkpoints.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::compaction::{self, Wait};
use crate::db::Core;
use crate::error::Result;
use crate::expiry;
use crate::recovery::Chunk;
use crate::sync::atomic::{AtomicBool, Ordering};
use crate::sync::thread::{self, JoinHandle};

/// How often the maintenance thread wakes when the log reaches no
/// milestone (a sealed segment, or [`crate::log::MILESTONE_BYTES`]
/// appended).
const INTERVAL: Duration = Duration::from_secs(1);

/// Log bytes appended since the last checkpoint that make the thread write
/// a new one: 64 MiB (so a crash replays at most about that much).
const CHECKPOINT_EVERY: u64 = 64 << 20;

/// The segment being written is sealed early, for compaction, once it
/// holds at least this many bytes (8 MiB) and a sixteenth of the store's
/// live record bytes ([`seal_after`]), where its page ends, by the
/// appender itself (`Log::set_seal_after`, set for a store with
/// background compaction, see [`update_seal_after`]), whatever its
/// garbage: it cannot be compacted while it is written, under uniform
/// overwrites it holds garbage as much as any other, and after a bulk load the first
/// overwrites make garbage of all of it, so a segment large against the
/// data would use up much of the space bound alone (the first compaction
/// after a load of 100 MiB into one segment put the files at 2.1-2.5
/// times the logical bytes; sealed every 8 MiB, at 1.51-1.54, with
/// overwrites 5-15 % slower during it, docs/PERFORMANCE.md, 2026-12-06).
/// Each seal costs a segment change (an fdatasync of the segment sealed,
/// an fsync of its cut and of the next one's file and directory entry),
/// the flusher's unless the hot tier's unflushed bytes are at their bound
/// (a writer then writes the oldest page out itself, a segment change
/// with it), and a listing of the store's directory under the append lock
/// (`Log::check_span`): the fills' p99.9 rose from 111-133 µs to 284-585
/// µs with these seals, their rates did not move.
const SEAL_AT: u64 = 8 << 20;

/// Bytes of a segment past which its appender seals it where its page
/// ends, for a store of `live` live record bytes: [`SEAL_AT`] and a
/// sixteenth of them.
fn seal_after(live: u64) -> u64 {
    SEAL_AT.max(live / 16)
}

/// Sets where the appender seals the segment it writes
/// (`Log::set_seal_after`) to [`seal_after`] `live` bytes, for a store
/// with background compaction (one without it fills whole segments): at
/// open, then at each assessment (`assess`, which every pass of the
/// maintenance thread runs first).
fn update_seal_after(core: &Core, live: u64) {
    if core.space_bound.is_some() {
        core.log.set_seal_after(seal_after(live));
    }
}

/// Least share of garbage (dead records, as [`compaction::dead_bytes`]
/// counts them: not the header, pads or carried tombstones; 5 %, as
/// [`GREEDY_MIN_GARBAGE`]) that makes `assess` ask for the segment being
/// written, once past [`seal_after`], to be sealed at once when its page
/// has not ended for half an [`INTERVAL`] (the writers are slow or idle;
/// the seal then pads the rest of the page). With
/// [`crate::Options::compress_cold_segments`] any share (its raw values
/// are worth compressing), and past [`GREEDY_SHARE`] of the space bound's
/// room too (the segment that takes compaction's copies holds only live
/// records). A segment of records that are all live has nothing for
/// compaction to reclaim: it waits for its page to end.
const SEAL_GARBAGE: f64 = GREEDY_MIN_GARBAGE;

/// Share of the room the bound leaves for garbage (the files beyond the
/// live record bytes and the checkpoint's peak that
/// [`Options::max_space_amplification`] allows, see [`level`]) past which
/// compaction counts as behind and writers wait for it (0.97: for keys of
/// 16 bytes and values of 1 KiB, the files and the checkpoint's peak (a
/// new one beside the last) at about 1.485 times the logical bytes at the
/// default bound of 1.5, 1.97 at 2.0), counting with the files the copies
/// the next pass will make (`Footprint::next_copies`): the rest is
/// room for the records appended after a compactor with nothing to take
/// let writers go on (up to [`SEAL_AT`]) and for what writers append
/// while a pass runs. Until 2026-12-06 the share was 0.93 and the copies
/// were not counted: writers used up the room the next pass needed
/// before it began, and the files swung 0.05 to 0.2 above the level while
/// passes copied (more after a segment sealed late, of 17 to 50 MiB);
/// with the copies counted, 0.97 keeps the files' mean where 0.93 had it
/// (docs/PERFORMANCE.md).
///
/// A share of the room, not of the bound: compaction copies less the
/// closer to the bound it holds the files (greedy cleaning of uniform
/// overwrites copies about u/(1-u) bytes per byte written when the
/// segments it cleans are a share u live, and u falls as the garbage
/// allowed grows). With both levels at shares of the bound (waiting past
/// 1.86 and 1.395 times the live bytes, compacting greedily past 1.7 and
/// 1.275), a standalone run of 1,000,000 uniform overwrites of 100,000
/// keys of 1 KiB (8 threads) did 374k-448k overwrites/s at a bound of 2.0
/// and 197k-244k at 1.5, against 428k-485k and 244k-300k with both at
/// shares of the room (docs/PERFORMANCE.md).
///
/// [`Options::max_space_amplification`]: crate::Options::max_space_amplification
const THROTTLE_SHARE: f64 = 0.97;

/// Share of the room the bound leaves for garbage (see [`THROTTLE_SHARE`])
/// past which compaction takes the segments with the most garbage one at
/// a time, whatever their share of it (0.85: for keys of 16 bytes and
/// values of 1 KiB, past about 1.43 times the logical bytes at the default
/// bound of 1.5), so that it works before writers must wait.
const GREEDY_SHARE: f64 = 0.85;

/// Most copies the space bound keeps room for, in a store of `live` live
/// record bytes: the live bytes of two segments sealed early (each at
/// [`SEAL_AT`] or a sixteenth of the live bytes, if more: 16 MiB up to
/// 128 MiB live, an eighth of the live bytes past it). A segment with
/// more live bytes (the first segment of a store loaded before its
/// overwrites begin, up to 256 MiB) is compacted without such room,
/// since keeping it would stop the writers for its whole pass, until its
/// pass has moved all but this many of them.
///
/// Until 2026-12-06 it was 16 MiB at any size: in stores of 300 to 800
/// MiB, whose early seals come at 19 to 50 MiB, the copies of most
/// passes went unreserved and a helper's probes saw the files over 1.5
/// in 6-14 % of the samples (at most 1.51-1.61).
fn max_reserved_copies(live: u64) -> u64 {
    2 * SEAL_AT.max(live / 16)
}

/// Least share of garbage a segment needs for greedy compaction to take it
/// (5 %): below it, a copy reclaims too little to be worth it.
const GREEDY_MIN_GARBAGE: f64 = 0.05;

/// Least room for garbage the space bound leaves, as a share of the live
/// record bytes (0.3: segment files of 1.3 times the records, the least
/// bound [`Options::max_space_amplification`] takes), beside the records
/// and the checkpoint. The bound is over the logical bytes, so record
/// headers and the checkpoint use up part of its room: headers of 16
/// bytes a record (24 with an expiry) are 1.5 % of a record of a 16-byte
/// key and a 1 KiB value, but 40 % of one with a 16-byte key and an
/// 8-byte value, whose records alone are 1.67 times the logical bytes;
/// the checkpoint takes 8 bytes a key and a bit a slot of the index
/// (about 8.2 bytes a key), about twice that at its peak (see
/// [`crate::checkpoint::peak_bytes`]). Where the bound leaves less (at
/// 1.5, keys and values of under about 190 bytes together: the least
/// room is reached where 0.2 times the logical bytes a key fall under
/// 20.8 bytes plus the checkpoint's peak a key)
/// the store keeps this much room and its space amplification reads
/// above the bound: with less, the segment being written (which cannot
/// be compacted) and the pads would use up the room, and compaction would
/// copy several records for each one written.
///
/// [`Options::max_space_amplification`]: crate::Options::max_space_amplification
const MIN_ROOM: f64 = 0.3;

/// Files beyond the live record bytes and the checkpoint that never make
/// writers wait or compaction greedy (16 MiB, the segment being written
/// and one sealed): without it a small store would wait for compaction
/// at every seal.
const MIN_SLACK: u64 = 2 * SEAL_AT;

/// Writers count as quiet (and compaction takes the segments due at rest,
/// see [`REST_GARBAGE`], and cold segments get recompressed, see
/// [`compaction::recompress`]) while they append less than this (1 MiB)
/// over at least half an [`INTERVAL`] with no compaction to do.
const QUIET_BYTES: u64 = 1 << 20;

/// Share of [`crate::Options::compaction_garbage`] that makes a sealed
/// segment due while writers are quiet (two thirds: 0.33 at the default
/// of 0.5, the share every pass took until 2026-12-04). Cleaning is put
/// off to idle time (as Blackwell, Harris and Seltzer, "Heuristic
/// Cleaning Algorithms in Log-Structured File Systems", USENIX 1995,
/// found most of it can be): while writers are busy a segment waits for
/// more of its records to die, and compaction copies fewer records per
/// record written (u/(1-u) per record reclaimed from a segment a share u
/// live: 1 at half garbage, 2 at a third); once they are quiet it takes
/// the segments a third garbage, one per pass, so that the files at rest
/// come down as far as before. Under 50,000 uniform overwrites a second
/// of 100,000 keys of 1 KiB (`examples/paced_overwrite`, 600,000 writes),
/// 1.84 records appended per write against 2.74-2.76 with every pass at
/// 0.33, the maintenance thread's CPU 2.0-2.1 µs per write against
/// 2.8-3.1, the files at 1.44-1.45 times the logical bytes at the end of
/// the writes and 1.13-1.17 three seconds later (1.22-1.30 before,
/// unchanged at rest); docs/PERFORMANCE.md.
const REST_GARBAGE: f64 = 2.0 / 3.0;

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
    /// early, see [`SEAL_AT`], and keeping the files within the store's
    /// space bound, `Core::space_bound`, see [`assess`]), with
    /// `Core::compress_cold` also rewrites one sealed
    /// segment with compression while writers are quiet (see
    /// [`QUIET_BYTES`]), and
    /// sweeps the index for expired keys (within
    /// [`expiry::SWEEP_BUDGET`], at most every [`expiry::SWEEP_EVERY`], see
    /// [`expiry::Sweep`]), and
    /// writes an index checkpoint once
    /// [`CHECKPOINT_EVERY`] bytes were appended since the last. Failures are
    /// retried at the next wake; the foreground `compact`, `sync` and
    /// `close` report errors.
    pub(crate) fn spawn(core: Arc<Core>, min_garbage: Option<f64>) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (core, stop) = (Arc::clone(&core), Arc::clone(&stop));
            // The bound is set exactly when background compaction is on.
            let compaction = min_garbage
                .zip(core.space_bound)
                .map(|(min_garbage, bound)| Compaction { min_garbage, bound });
            update_seal_after(&core, core.index.live_bytes().by_segment.values().sum());
            thread::spawn("emberkv-maintenance", move || run(&core, &stop, compaction))?
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
        self.core.lift_append_limit();
        {
            let _milestones = self.core.log.milestones.lock();
            self.core.log.milestone_reached.notify_all();
        }
        if let Some(thread) = self.thread.take() {
            // A panic in the thread leaves the store as a crash would.
            let _ = thread.join();
        }
        // A last check of the thread's may have set a limit again.
        self.core.lift_append_limit();
    }
}

/// The background compaction's settings.
#[derive(Clone, Copy)]
struct Compaction {
    /// Share of garbage that makes a sealed segment due at any time
    /// ([`REST_GARBAGE`] of it while writers are quiet).
    min_garbage: f64,
    /// [`crate::Options::max_space_amplification`].
    bound: f64,
}

/// Lifts the writers' limit when dropped: no writer waits for a
/// maintenance thread that has ended, panicking included.
struct LiftLimitOnExit<'a>(&'a Core);

impl Drop for LiftLimitOnExit<'_> {
    fn drop(&mut self) {
        self.0.lift_append_limit();
    }
}

fn run(core: &Core, stop: &AtomicBool, compaction: Option<Compaction>) {
    let _lift = LiftLimitOnExit(core);
    let mut seen = *core.log.milestones.lock();
    // Where writers' quiet began (time and bytes appended; not the log
    // address, which jumps at every seal), the first segment not yet
    // considered for recompression, and the bytes appended at the last
    // checkpoint this thread wrote.
    let mut quiet_since = (Instant::now(), core.log.appended());
    let mut recompress_from = 0;
    let mut checkpointed = 0;
    // Compaction's reads (through the segments' maps, or a buffer
    // allocated once).
    let mut chunk = Chunk::mapping();
    let mut sweep = expiry::Sweep::default();
    let mut swept = Instant::now();
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
        if let Some(compaction) = compaction {
            worked = busy_passes(
                || {
                    matches!(
                        pass(core, compaction, Writers::Busy, &mut chunk),
                        Ok(Some(_))
                    )
                },
                || {
                    core.log.appended() - checkpointed >= CHECKPOINT_EVERY
                        || swept.elapsed() >= expiry::SWEEP_EVERY
                },
                stop,
            );
            let quiet = !worked
                && quiet_since.0.elapsed() >= INTERVAL / 2
                && core.log.appended() - quiet_since.1 < QUIET_BYTES;
            if quiet && !stop.load(Ordering::Acquire) {
                worked = at_rest(core, compaction, stop, &mut chunk);
            }
            if core.compress_cold && quiet && !worked && !stop.load(Ordering::Acquire) {
                if let Ok((_, next)) = compaction::recompress(core, recompress_from) {
                    recompress_from = next;
                }
                worked = true;
            }
        }
        if swept.elapsed() >= expiry::SWEEP_EVERY && !stop.load(Ordering::Acquire) {
            // Again while sweeps find many expired keys, for a while (as
            // Redis's active expiry repeats its cycle while a quarter of
            // the keys it samples have expired). Errors are retried at the
            // next sweep (past the record that failed); reads and writes
            // report their own.
            let began = Instant::now();
            while let Ok(removed) = sweep.run(core, expiry::SWEEP_BUDGET) {
                if removed < expiry::SWEEP_AGAIN
                    || began.elapsed() >= expiry::SWEEP_FOR
                    || stop.load(Ordering::Acquire)
                {
                    break;
                }
            }
            swept = Instant::now();
        }
        if worked || core.log.appended() - quiet_since.1 >= QUIET_BYTES {
            // The copies are not the writers' doing: quiet starts over
            // after them.
            quiet_since = (Instant::now(), core.log.appended());
        }
        // Bytes appended, not the log address's distance from the last
        // checkpoint's, which jumps by most of a segment at every early
        // seal: that wrote a checkpoint after each one.
        let appended = core.log.appended();
        if appended - checkpointed >= CHECKPOINT_EVERY
            && !stop.load(Ordering::Acquire)
            && core.checkpoint().is_ok()
        {
            checkpointed = appended;
        }
    }
}

/// Runs `pass` while it finds work (returns `true`): under a heavy
/// overwrite load one pass per wake would fall behind. But not past a due
/// checkpoint or expiry sweep (`due`), after at least one pass, so that a
/// checkpoint that keeps failing does not stop compaction; nor past
/// `stop`. Returns whether any pass found work.
///
/// Until 2026-12-06 the passes went on while they found work: with
/// compression, under 6 writers over 300,000 keys of 300 to 1,500 bytes
/// (a helper's probe), no checkpoint was written for 9 to 18 s on end,
/// nor expired keys swept; with this, checkpoints came at most 0.36 and
/// 0.49 s apart in two runs of that probe (17.5 s before).
fn busy_passes(mut pass: impl FnMut() -> bool, due: impl Fn() -> bool, stop: &AtomicBool) -> bool {
    let mut worked = false;
    while !stop.load(Ordering::Acquire) && pass() {
        worked = true;
        if due() {
            break;
        }
    }
    worked
}

/// Whether writers are appending, for a compaction [`pass`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Writers {
    /// They may be: a pass takes the segments past `min_garbage`.
    Busy,
    /// They have been quiet (see [`QUIET_BYTES`]): a pass takes the one
    /// segment with the most garbage past [`REST_GARBAGE`] of
    /// `min_garbage`.
    Quiet,
}

/// Passes of [`Writers::Quiet`], one segment each, until one finds nothing
/// to do or fails, writers append [`QUIET_BYTES`] (the copies do not
/// count), or the thread is stopped; returns whether any segment was
/// compacted. One segment at a time, so that writers that come back wait
/// for at most one segment's copies before the busy threshold holds
/// again.
fn at_rest(core: &Core, compaction: Compaction, stop: &AtomicBool, chunk: &mut Chunk) -> bool {
    let began = core.log.appended();
    let mut copied = 0;
    let mut worked = false;
    while !stop.load(Ordering::Acquire) && core.log.appended() - began < copied + QUIET_BYTES {
        let Ok(Some(bytes)) = pass(core, compaction, Writers::Quiet, chunk) else {
            break;
        };
        worked = true;
        copied += bytes;
    }
    worked
}

/// One compaction pass; returns the bytes it copied if it compacted any
/// segment. Before
/// the pass, at each log milestone during it and after each segment it
/// retires, [`assess`] sets where writers wait or seals the active
/// segment; a pass that finds nothing left to do, fails, or finds
/// compaction held off by a backup lets writers go on for [`SEAL_AT`]
/// bytes (one held off by a foreground [`crate::Db::compact`] leaves the
/// limit to it: it assesses after each segment it retires). Past
/// [`GREEDY_SHARE`] of the bound
/// the pass compacts the one segment with the most garbage (then assesses
/// again), else, while `writers` are busy, every segment past
/// `min_garbage`, and while they are quiet, the one with the most garbage
/// past [`REST_GARBAGE`] of it.
fn pass(
    core: &Core,
    compaction: Compaction,
    writers: Writers,
    chunk: &mut Chunk,
) -> Result<Option<u64>> {
    let worked = (|| {
        let (min_garbage, most) = if assess(core, compaction.bound)? {
            (GREEDY_MIN_GARBAGE.min(compaction.min_garbage), 1)
        } else if writers == Writers::Quiet {
            (REST_GARBAGE * compaction.min_garbage, 1)
        } else {
            (compaction.min_garbage, usize::MAX)
        };
        let report = compaction::run(core, min_garbage, most, Wait::No, chunk, &mut || {
            assess(core, compaction.bound).map(drop)
        })?;
        Ok(report.map(|r| (r.segments > 0).then_some(r.bytes_copied)))
    })();
    // Writers never wait long for a compactor that found nothing to do,
    // failed (it tries again at its next wake) or is held off by a backup:
    // they may append another `SEAL_AT` bytes, enough to fill a segment
    // compaction can take, and a milestone wakes it before they are done.
    let held_by_compact = matches!(worked, Ok(None)) && !core.backing_up.load(Ordering::Relaxed);
    if !held_by_compact && !matches!(worked, Ok(Some(Some(_)))) {
        core.raise_append_limit(core.log.appended().saturating_add(SEAL_AT));
    }
    worked.map(Option::flatten)
}

/// Sets where writers wait for compaction (see `Core::throttle`): once
/// the log grows by the room left under the [`level`] at
/// [`THROTTLE_SHARE`] of `bound`'s room (or under [`MIN_SLACK`] beyond
/// the live record bytes and the checkpoint, if more) beside the files,
/// the checkpoint at its peak and the next pass's copies
/// (`Footprint::next_copies`), at once if those are past it. Asks for
/// the active segment past [`seal_after`] that holds [`SEAL_GARBAGE`] of
/// garbage to be sealed where its page ends, or at once if that page
/// does not end within half an [`INTERVAL`]. Returns whether the files and those copies are past
/// [`GREEDY_SHARE`] of the bound (and the files past [`MIN_SLACK`]).
/// Holds `Core::assessing`. Run before each
/// pass, at milestones during one (compacting one large segment takes
/// long enough for fast writers to fill most of another) and after each
/// segment it retires.
pub(crate) fn assess(core: &Core, bound: f64) -> Result<bool> {
    let mut assessed = core.assessing.lock();
    assess_locked(core, bound, &mut assessed)
}

/// Log bytes appended since the last assessment without which a writer
/// at the limit does not assess again (1 MiB): while compaction is truly
/// behind, writers wait and append little, and do not each walk the
/// index's shards and the segment files at every write.
const REASSESS_BYTES: u64 = 1 << 20;

/// [`assess`], for a writer that reached the limit it set (see
/// `Core::throttle`), unless another thread is assessing (its new limit
/// wakes the writer), the limit was raised or lifted meanwhile, or less
/// than [`REASSESS_BYTES`] were appended since the last assessment.
///
/// # Errors
/// As for [`assess`].
pub(crate) fn reassess(core: &Core, bound: f64) -> Result<()> {
    let Some(mut assessed) = core.assessing.try_lock() else {
        return Ok(());
    };
    // The limit may have been raised or lifted since the writer read it
    // (by a pass with nothing to compact, or a maintenance thread that
    // ended): an assessment now would lower it again.
    if !core.compaction_is_behind()
        || core.log.appended().saturating_sub(*assessed) < REASSESS_BYTES
    {
        return Ok(());
    }
    assess_locked(core, bound, &mut assessed).map(drop)
}

/// [`assess`] under `core.assessing`, whose `assessed` it updates.
fn assess_locked(core: &Core, bound: f64, assessed: &mut u64) -> Result<bool> {
    let log = &core.log;
    // Read before the files: what is appended meanwhile counts twice (the
    // limit errs low), never not at all.
    let appended = log.appended();
    let files = footprint(core)?;
    let Footprint {
        on_disk,
        checkpoint,
        live,
        next_copies,
        active,
        written,
        active_live,
        ..
    } = files;
    *assessed = appended;
    update_seal_after(core, live);
    // Room is kept for the copies of the next compaction pass, which
    // stand on disk beside its segment until the pass ends. The slack is
    // the files' own: counted against the copies too, it held the writers
    // of a store of 17 MB live with 1.5 MB of garbage, and took a greedy
    // pass to copy 16 MB for it (found in review).
    let with_copies = on_disk + checkpoint + next_copies;
    let cap = |share: f64| {
        files
            .level(share, bound)
            .max(live + checkpoint + MIN_SLACK + next_copies)
    };
    core.set_append_limit(appended.saturating_add(cap(THROTTLE_SHARE).saturating_sub(with_copies)));
    // Sealed where the page ends, so that the seal pads nothing; at once
    // when a request has been pending for half an interval (no page filled
    // since: the writers are slow or idle).
    // Dead records only, as compaction counts them (pads alone are 12 % of
    // a segment of values of 300 KiB, three to a page).
    let garbage = compaction::dead_bytes(core, active, written, active_live, false) as f64;
    let greedy = with_copies > cap(GREEDY_SHARE);
    let worth_sealing = core.compress_cold || greedy || garbage >= SEAL_GARBAGE * written as f64;
    if written >= seal_after(live) && worth_sealing {
        log.seal_at_page_end(active, INTERVAL / 2)?;
    }
    Ok(greedy)
}

/// The bytes of files (segments and checkpoint) at `share` of the room
/// `bound` leaves for garbage beside `live` record bytes of `logical`
/// bytes of keys and values and `checkpoint` bytes of the checkpoint's
/// files at their peak: the room is `bound` times `logical`, less `live` and
/// `checkpoint` (the bound is on [`crate::Stats::space_amplification`],
/// files over logical bytes), and at least [`MIN_ROOM`] times `live`; the
/// level is `live` and `checkpoint` plus `share` of the room, and at
/// least [`MIN_SLACK`] beyond them. At most `u64::MAX` (`as` saturates);
/// an infinite bound never limits (not even with nothing live, where its
/// product would be NaN).
///
/// The checkpoint is kept out of the least room, as the live records
/// are: counted in it, the checkpoint (about 8.2 bytes a key, about
/// twice that at its peak) could use up all of the room of
/// a store of small values (a review found 16-byte keys with 8-byte
/// values, whose least room is 12 bytes a key, held at the level with no
/// garbage at all).
///
/// Until 2026-12-06 the room was `bound` - 1 times `live`: the files
/// stayed under the bound over record bytes, but the headers (1.5 % of a
/// record of a 16-byte key and a 1 KiB value) and the uncounted
/// checkpoint (about 1.5 % more) put the space amplification the store
/// reports, and the benchmark harness measures, at 1.40-1.53 at the end
/// of a burst of overwrites at the default bound of 1.5.
fn level(share: f64, bound: f64, live: u64, logical: u64, checkpoint: u64) -> u64 {
    let kept = live.saturating_add(checkpoint);
    if bound.is_infinite() {
        u64::MAX
    } else {
        let room = (bound * logical as f64 - kept as f64).max(MIN_ROOM * live as f64);
        ((kept as f64 + share * room) as u64).max(kept.saturating_add(MIN_SLACK))
    }
}

/// What the segment files hold, for [`assess`].
struct Footprint {
    /// Bytes of the segment files (the records' lengths, of the segment
    /// being written too).
    on_disk: u64,
    /// Bytes the index checkpoint's files take at their peak, a new one
    /// beside the last ([`crate::checkpoint::peak_bytes`]).
    checkpoint: u64,
    /// Live record bytes.
    live: u64,
    /// Bytes of the live records' keys and values.
    logical: u64,
    /// Live record bytes of the sealed segment compaction takes next (the
    /// most garbage, at least [`GREEDY_MIN_GARBAGE`] of it), which its pass
    /// copies to the tail before the segment's file goes (with the
    /// tombstones it carries on, not counted); 0 when they are more than
    /// [`max_reserved_copies`].
    next_copies: u64,
    /// The segment being written.
    active: u64,
    /// Its bytes.
    written: u64,
    /// Its live record bytes.
    active_live: u64,
}

impl Footprint {
    /// [`level`] at `share` of `bound`'s room for these files.
    fn level(&self, share: f64, bound: f64) -> u64 {
        level(share, bound, self.live, self.logical, self.checkpoint)
    }
}

fn footprint(core: &Core) -> Result<Footprint> {
    let log = &core.log;
    let storage = log.storage();
    // One read of the tail: a seal between two would count the addresses
    // it skipped as written.
    let tail = log.tail();
    let active = storage.segment_of(tail);
    let written = tail - storage.segment_start(active);
    let crate::index::LiveBytes {
        by_segment: live_by_segment,
        logical,
        checkpoint: next_checkpoint,
    } = core.index.live_bytes();
    let live: u64 = live_by_segment.values().sum();
    let active_live = live_by_segment.get(&active).copied().unwrap_or(0);
    let mut on_disk = written;
    // A sealed segment whose records are partly still in the hot tier (the
    // flusher's lag, up to `log::MAX_UNFLUSHED_BYTES`) counts at its sealed
    // length: counted as written so far, it let the files pass the bound
    // by a whole sealed segment (8 MiB in a probe of uniform overwrites).
    // Read before the files: a segment the flusher finishes meanwhile is
    // then whole in its file.
    let mut unwritten: HashMap<u64, u64> = log.sealed_unwritten().into_iter().collect();
    // Retired files still on disk (kept for a live iterator) do not count:
    // compaction is done with them.
    let retired = core.retired.lock().clone();
    // The garbage share and live bytes of the segment compaction takes
    // next.
    let mut next = (0.0, 0);
    for seg in storage
        .list()?
        .into_iter()
        .filter(|&s| s != active && !retired.contains(s))
    {
        // Retired and deleted since the listing (by a compaction that a
        // writer's assessment does not wait for): nothing on disk.
        let len = match storage.written_len(seg) {
            Err(e) if e.is_missing_file() => 0,
            len => len?,
        };
        let len = len.max(unwritten.remove(&seg).unwrap_or(0));
        on_disk += len;
        let seg_live = live_by_segment.get(&seg).copied().unwrap_or(0);
        let garbage = compaction::garbage_share(core, seg, len, seg_live, false);
        if garbage >= GREEDY_MIN_GARBAGE
            && garbage > next.0
            && !core.damaged_segments.lock().contains(&seg)
        {
            next = (garbage, seg_live);
        }
    }
    // Sealed segments whose files the flusher has not created yet.
    on_disk += unwritten
        .into_iter()
        .filter(|&(seg, _)| seg != active)
        .map(|(_, len)| len)
        .sum::<u64>();
    let next_copies = Some(next.1)
        .filter(|&bytes| bytes <= max_reserved_copies(live))
        .unwrap_or(0);
    Ok(Footprint {
        next_copies,
        on_disk,
        checkpoint: crate::checkpoint::peak_bytes(&core.dir, next_checkpoint)?,
        live,
        logical,
        active,
        written,
        active_live,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Db, Options};

    /// Inserts keys `keys` (little-endian `u32`s) with values of 1,000
    /// bytes.
    fn insert(db: &Db, keys: std::ops::Range<u32>) {
        let value = vec![7u8; 1000];
        for k in keys {
            db.insert(&k.to_le_bytes(), &value).unwrap();
        }
    }

    /// A store without background compaction whose segment 0 holds keys
    /// `0..keys`, sealed, and the first `overwritten` of them written again
    /// in segment 1, synced.
    fn sealed_then_overwritten(keys: u32, overwritten: u32) -> (tempfile::TempDir, Db) {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), Options::default().compaction_garbage(None)).unwrap();
        insert(&db, 0..keys);
        db.core().log.seal_segment().unwrap();
        insert(&db, 0..overwritten);
        db.sync().unwrap();
        (dir, db)
    }

    /// The segment the log's tail is in.
    fn active(core: &Core) -> u64 {
        core.log.storage().segment_of(core.log.tail())
    }

    /// Writers leave room under the bound for the copies of the sealed
    /// segment compaction takes next (the most garbage), which stand on
    /// disk beside that segment until its pass ends. Without it the files
    /// passed the bound by one segment's copies at each pass, and by more
    /// than 0.15 times the live bytes after a segment sealed late (of 17
    /// to 50 MiB, half live) under uniform overwrites of 100,000 keys of
    /// 1 KiB (docs/PERFORMANCE.md, 2026-12-06).
    #[test]
    fn writers_leave_room_for_the_next_passs_copies() {
        // A tenth of segment 0 overwritten, a twentieth of segment 1.
        let (_dir, db) = sealed_then_overwritten(12_000, 1_200);
        let core = db.core();
        core.log.seal_segment().unwrap();
        insert(&db, 0..60);
        db.sync().unwrap();
        let f = footprint(core).unwrap();
        let by_segment = core.index.live_by_segment();
        assert_eq!(f.next_copies, by_segment[&0]);
        assert!(f.next_copies > 10_000_000, "{}", f.next_copies);
        // Writers wait where the files and those copies reach the level
        // (above the slack at this bound).
        let bound = 4.0;
        let cap = f.level(THROTTLE_SHARE, bound);
        assert!(cap > f.live + f.checkpoint + MIN_SLACK + f.next_copies);
        let limit = core.log.appended() + cap - f.on_disk - f.checkpoint - f.next_copies;
        assert!(!assess(core, bound).unwrap());
        let mut k = 12_000;
        while !core.compaction_is_behind() {
            insert(&db, k..k + 1);
            k += 1;
        }
        let appended = core.log.appended();
        assert!(
            (limit..limit + 4096).contains(&appended),
            "{appended} for {limit}"
        );
    }

    /// The 16 MiB of slack that small stores get is the files' own: the
    /// copies counted beside them do not use it up. The exact case a
    /// review found: 17,000 keys of 1,000 bytes, 1,000 of them
    /// overwritten, held writers and made compaction greedy at a bound of
    /// 1.5 with the files 1.5 MB over the live bytes, and the greedy pass
    /// copied 16 MB to reclaim those.
    #[test]
    fn the_slack_is_the_files_own_not_the_copies() {
        let (_dir, db) = sealed_then_overwritten(17_000, 1_000);
        let core = db.core();
        let f = footprint(core).unwrap();
        assert!(f.on_disk < f.live + MIN_SLACK, "{} / {}", f.on_disk, f.live);
        let files = f.on_disk + f.checkpoint;
        assert!(files + f.next_copies > f.level(THROTTLE_SHARE, 1.5));
        assert!(!assess(core, 1.5).unwrap());
        assert!(!core.compaction_is_behind());
    }

    /// The space bound is on the space amplification the store reports
    /// (`Stats::space_amplification`: its files, the checkpoint's
    /// included, over the logical bytes). Writers that reach the limit of
    /// a store of 16-byte keys and 1 KiB values (the benchmark board's)
    /// leave it under a bound of 1.5, with room for a new checkpoint
    /// written beside the last (as at its peak, a copy of it beside it
    /// leaves it under the bound too). Until
    /// 2026-12-06 the bound was on the segment files over the live record
    /// bytes: they stopped at 1.485 times those, 1.508 times the logical
    /// bytes before the checkpoint's, and the harness measured 1.40-1.53 at
    /// the end of its burst of overwrites.
    #[test]
    fn writers_stop_under_the_bound_on_the_reported_space_amplification() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), Options::default().compaction_garbage(None)).unwrap();
        let core = db.core();
        let value = vec![7u8; 1024];
        let key = |k: u32| format!("{k:016}");
        // Enough for the level to pass the slack, few enough that the
        // maintenance thread writes no checkpoint of its own (every 64 MiB
        // appended) while the test runs.
        let keys = 40_000;
        for k in 0..keys {
            db.insert(key(k).as_bytes(), &value).unwrap();
        }
        core.log.seal_segment().unwrap();
        core.checkpoint().unwrap();
        let f = footprint(core).unwrap();
        assert!(f.checkpoint > 0);
        let bound = 1.5;
        assert!(f.level(THROTTLE_SHARE, bound) > f.live + f.checkpoint + MIN_SLACK);
        assert!(!assess(core, bound).unwrap());
        let mut k = 0;
        while !core.compaction_is_behind() {
            db.insert(key(k % keys).as_bytes(), &value).unwrap();
            k += 1;
        }
        db.sync().unwrap();
        assert!(core.log.appended() < CHECKPOINT_EVERY);
        let stats = db.stats().unwrap();
        assert!(
            (1.45..=bound).contains(&stats.space_amplification),
            "{stats:?}"
        );
        std::fs::copy(
            dir.path().join("CHECKPOINT"),
            dir.path().join("CHECKPOINT.tmp"),
        )
        .unwrap();
        let peak = db.stats().unwrap();
        assert!(peak.disk_bytes > stats.disk_bytes);
        assert!(peak.space_amplification <= bound, "{peak:?}");
    }

    /// The bound's room is `bound` times the logical bytes less the live
    /// record bytes and the checkpoint, and never under [`MIN_ROOM`] of
    /// the records: records of a 16-byte key and a 1 KiB value (1,056
    /// bytes, 1,040 logical) get files and checkpoint up to exactly 1.5
    /// times the logical bytes at a bound of 1.5, a checkpoint or not;
    /// records of a 16-byte key and an 8-byte value (40 bytes, 24
    /// logical: 1.67 times, past any bound under it) get 1.3 times their
    /// own bytes, with the checkpoint beside them (the case a review
    /// found: counted in the least room, a checkpoint of 16 bytes a key
    /// left these records no room for garbage at all).
    #[test]
    fn the_room_is_the_bound_over_logical_bytes_and_at_least_min_room() {
        let near = |got: u64, want: f64| (got as f64 - want).abs() < 16.0;
        let (live, logical) = (1_056 * 100_000, 1_040 * 100_000);
        for checkpoint in [0, 16 * 100_000] {
            let level = |share| level(share, 1.5, live, logical, checkpoint);
            assert!(near(level(1.0), 1.5 * logical as f64));
            let kept = (live + checkpoint) as f64;
            assert!(near(level(0.5), (kept + 1.5 * logical as f64) / 2.0));
        }
        let (live, logical) = (40 * 10_000_000, 24 * 10_000_000);
        assert!(near(level(1.0, 1.5, live, logical, 0), 1.3 * live as f64));
        let checkpoint = 16 * 10_000_000;
        assert!(near(
            level(0.5, 1.5, live, logical, checkpoint),
            1.15 * live as f64 + checkpoint as f64
        ));
        assert!(near(
            level(1.0, 3.0, live, logical, 0),
            3.0 * logical as f64
        ));
        assert_eq!(level(1.0, f64::INFINITY, live, logical, 0), u64::MAX);
        // Nothing logical (empty keys and values): the least room.
        assert!(near(level(1.0, 1.5, 16_000_000_000, 0, 0), 1.3 * 16e9));
    }

    /// Busy passes stop for a due checkpoint or sweep after the pass that
    /// finds it due, but always run one pass, and stop when the thread
    /// is stopped. The failing case: passes that always find work (as
    /// under compressed overwrites, where they went on for 18 s) ran
    /// through every due checkpoint.
    #[test]
    fn busy_passes_stop_for_a_due_checkpoint_or_sweep() {
        let stop = AtomicBool::new(false);
        // Always work, for up to 1,000 passes (the old loop ran them all).
        let run = |due_after: u32, stop: &AtomicBool| {
            let passes = std::cell::Cell::new(0);
            let worked = busy_passes(
                || {
                    passes.set(passes.get() + 1);
                    passes.get() <= 1_000
                },
                || passes.get() >= due_after,
                stop,
            );
            (worked, passes.get())
        };
        assert_eq!(run(3, &stop), (true, 3));
        // Due from the start: one pass all the same.
        assert_eq!(run(0, &stop), (true, 1));
        // Never due: until a pass finds nothing.
        assert_eq!(run(u32::MAX, &stop), (true, 1_001));
        stop.store(true, Ordering::Release);
        assert_eq!(run(3, &stop), (false, 0));
    }

    /// No room is kept for the copies of a segment with more than
    /// [`max_reserved_copies`] live bytes (16 MiB in a store of 20 MB):
    /// writers would wait for its whole pass (the first segment of a store
    /// loaded before its overwrites, up to 256 MiB).
    #[test]
    fn no_room_is_kept_for_more_than_16_mib_of_copies() {
        let (_dir, db) = sealed_then_overwritten(20_000, 2_000);
        let core = db.core();
        let live = core.index.live_bytes().by_segment;
        assert_eq!(max_reserved_copies(live.values().sum()), 2 * SEAL_AT);
        assert!(live[&0] > 2 * SEAL_AT);
        assert_eq!(footprint(core).unwrap().next_copies, 0);
    }

    /// In a store of 200 MB live, room is kept for the copies of a
    /// segment of 18 MB live (two early seals are 25 MB live there): with
    /// 16 MiB at any size, the copies of most passes in stores of 300 to
    /// 800 MiB went unreserved and took the files past the bound.
    #[test]
    fn room_is_kept_for_two_early_seals_of_copies_in_a_large_store() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), Options::default().compaction_garbage(None)).unwrap();
        let core = db.core();
        insert(&db, 0..180_000);
        core.log.seal_segment().unwrap();
        insert(&db, 180_000..200_000);
        core.log.seal_segment().unwrap();
        // A tenth of segment 1 garbage, none of segment 0.
        insert(&db, 180_000..182_000);
        db.sync().unwrap();
        let f = footprint(core).unwrap();
        let copies = core.index.live_by_segment()[&1];
        assert!(copies > 2 * SEAL_AT, "{copies}");
        assert!(max_reserved_copies(f.live) >= copies);
        assert_eq!(f.next_copies, copies);
    }

    /// A sealed segment counts at its sealed length while the flusher has
    /// written part of it, or none (its file not created yet). Counted at
    /// what its file held so far, it let the files pass the space bound
    /// by a whole sealed segment under uniform overwrites (8 MiB in a
    /// probe of 100,000 keys of 1 KiB).
    #[test]
    fn a_sealed_segment_not_yet_written_counts_whole() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), Options::default().compaction_garbage(None)).unwrap();
        let core = db.core();
        insert(&db, 0..1_000);
        let all = std::thread::scope(|s| {
            let held = core.log.hold_write_outs();
            // The writes run beside the hold, so that a writer that ever
            // wrote the log out here (and waited for the hold) fails the
            // test instead of hanging it.
            let (done, written) = std::sync::mpsc::channel();
            let db = &db;
            s.spawn(move || {
                insert(db, 1_000..3_000);
                core.log.seal_segment().unwrap();
                insert(db, 3_000..4_000);
                core.log.seal_segment().unwrap();
                insert(db, 4_000..4_500);
                done.send(()).unwrap();
            });
            if written.recv_timeout(Duration::from_secs(60)).is_err() {
                drop(held);
                panic!("a write waited for the held write-out");
            }
            assert_eq!(active(core), 2);
            assert!(core.log.storage().written_len(0).unwrap() < 3_000_000);
            assert!(!core.log.storage().list().unwrap().contains(&1));
            // Every byte appended, and segment 0's header.
            let all = core.log.appended() + crate::storage::SEGMENT_HEADER_BYTES;
            assert_eq!(footprint(core).unwrap().on_disk, all);
            all
        });
        db.sync().unwrap();
        assert_eq!(footprint(core).unwrap().on_disk, all);
    }

    /// The appender seals the segment it writes where a page ends once the
    /// segment holds `seal_after` bytes, whatever its garbage: a fresh
    /// store with background compaction takes 20,000 new keys of 1,000
    /// bytes (about 20.6 MB) into three segments, the first two each
    /// sealed within a page past 8 MiB; without compaction, into one. The
    /// maintenance thread did this alone until 2026-12-06, and a load of
    /// 100 MiB outran it into one segment, whose first compaction put the
    /// files at 2.1-2.5 times the logical bytes (docs/PERFORMANCE.md).
    #[test]
    fn pure_ingest_is_sealed_where_a_page_ends_past_seal_after() {
        for compaction in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let options = Options::default().compaction_garbage(compaction.then_some(0.5));
            let db = Db::open(dir.path(), options).unwrap();
            let core = db.core();
            insert(&db, 0..20_000);
            let storage = core.log.storage();
            if !compaction {
                assert_eq!(active(core), 0);
                continue;
            }
            assert_eq!(active(core), 2);
            db.sync().unwrap();
            for seg in 0..2 {
                let len = std::fs::metadata(storage.path(seg)).unwrap().len();
                let past = len - SEAL_AT;
                assert!(
                    past < crate::log::PAGE_BYTES as u64,
                    "segment {seg}: {len} bytes"
                );
            }
        }
    }

    /// The maintenance thread seals the segment written at once, mid-page,
    /// when it is past `seal_after`, holds garbage, and its page has not
    /// ended for half an interval (the writers are slow or idle). Not for
    /// pads: pure ingest of values of 300 KiB, whose pads at page ends
    /// (three records to a page of 1 MiB) pass 5 % of the segment, waits
    /// for its page to end (it was sealed at once, every 8 MiB, when pads
    /// counted as garbage). With `compress_cold_segments`, without
    /// garbage too. Without background compaction, so that only the
    /// test's assessments seal: 70 values of 300 KiB, or 20,000 of 1,000
    /// bytes with 2,000 of them overwritten (9 % garbage), or none (with
    /// compression).
    #[test]
    fn a_segment_with_garbage_is_sealed_at_once_when_its_page_does_not_end() {
        for (garbage, compress_cold) in [(false, false), (true, false), (false, true)] {
            let dir = tempfile::tempdir().unwrap();
            let options = Options::default()
                .compaction_garbage(None)
                .compress_cold_segments(compress_cold);
            let db = Db::open(dir.path(), options).unwrap();
            let core = db.core();
            if garbage || compress_cold {
                insert(&db, 0..20_000);
                if garbage {
                    insert(&db, 0..2_000);
                }
            } else {
                let value = vec![7u8; 300 << 10];
                for k in 0..70u32 {
                    db.insert(&k.to_le_bytes(), &value).unwrap();
                }
                let Footprint { written, .. } = footprint(core).unwrap();
                let pads = core.log.pad_bytes(0);
                assert!(
                    pads as f64 >= SEAL_GARBAGE * written as f64,
                    "{pads} of {written}"
                );
            }
            assert!(!assess(core, 2.0).unwrap());
            std::thread::sleep(INTERVAL / 2);
            assert!(!assess(core, 2.0).unwrap());
            let sealed = garbage || compress_cold;
            assert_eq!(active(core), u64::from(sealed), "{garbage} {compress_cold}");
        }
    }

    /// `assess` asks for the segment being written to be sealed, though
    /// it holds no garbage, once the files are past the greedy level of
    /// the space bound: the segment that takes compaction's copies holds
    /// only live records, and under a burst of overwrites after a bulk
    /// load it grew to 35-85 MiB before the rule. Below that level it
    /// does not (the appender seals such a segment itself, in a store
    /// with background compaction: `pure_ingest_is_sealed_where_a_page_ends_past_seal_after`).
    /// Without background compaction, so that only `assess` seals: 20,000
    /// keys of 1,000 bytes, sealed; then, after overwriting all of them or
    /// none, 9,000 new keys (past `SEAL_AT` and a sixteenth of the live
    /// bytes); assessed at a bound that puts the files past the greedy
    /// level or not.
    #[test]
    fn assess_seals_the_segment_written_past_the_greedy_level_whatever_its_garbage() {
        for (overwrite, bound, greedy) in
            [(false, 1.5, false), (true, 2.0, false), (true, 1.5, true)]
        {
            let dir = tempfile::tempdir().unwrap();
            let db = Db::open(dir.path(), Options::default().compaction_garbage(None)).unwrap();
            let core = db.core();
            let insert = |keys| insert(&db, keys);
            insert(0..20_000);
            core.log.seal_segment().unwrap();
            if overwrite {
                insert(0..20_000);
            }
            insert(20_000..29_000);
            let Footprint {
                written,
                active_live,
                ..
            } = footprint(core).unwrap();
            assert!(written >= SEAL_AT.max(29_000_000 / 16));
            // No garbage of its own (under 1 %: its header and pads).
            assert!((written - active_live) * 100 < written);
            assert_eq!(assess(core, bound).unwrap(), greedy, "{overwrite} {bound}");
            // No maintenance thread lifts the limit that assessment set.
            core.set_append_limit(u64::MAX);
            insert(29_000..31_000);
            assert_eq!(
                active(core),
                if greedy { 2 } else { 1 },
                "{overwrite} {bound}"
            );
        }
    }

    /// The space bound's two levels, on a store of 60,000 keys of 1,000
    /// bytes written into six segments of 10,000, then with 100 %, 70 %,
    /// 40 %, 20 %, 60 % and 60 % of their keys overwritten (and sealed):
    /// with the files' garbage under 85 % of the room the bound leaves for
    /// it, a pass compacts nothing short of `min_garbage`; between 85 %
    /// and 97 %, a pass compacts the one segment with the most garbage
    /// (the first, then the second), though none reaches `min_garbage`,
    /// and writers go on; past 97 %, writers wait.
    #[test]
    fn past_the_space_bound_compaction_takes_the_emptiest_segment_and_then_writers_wait() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), Options::default().compaction_garbage(None)).unwrap();
        let core = db.core();
        let value = vec![7u8; 1000];
        for k in 0..60_000u32 {
            db.insert(&k.to_le_bytes(), &value).unwrap();
            if k % 10_000 == 9_999 {
                core.log.seal_segment().unwrap();
            }
        }
        for (seg, share) in [(0u32, 10), (1, 7), (2, 4), (3, 2), (4, 6), (5, 6)] {
            for k in seg * 10_000..seg * 10_000 + share * 1_000 {
                db.insert(&k.to_le_bytes(), &value).unwrap();
            }
        }
        core.log.seal_segment().unwrap();
        db.sync().unwrap();
        // Past 64 MiB appended, the maintenance thread writes a checkpoint,
        // which the levels count: wait for it (liveness, not timing; it
        // wakes at least once a second), so that it is not written between
        // two looks at the files below (the next is 64 MiB away).
        assert!(core.log.appended() >= CHECKPOINT_EVERY);
        let written = || {
            dir.path().join("CHECKPOINT").exists() && !dir.path().join("CHECKPOINT.tmp").exists()
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while !written() {
            assert!(Instant::now() < deadline, "no checkpoint written");
            std::thread::sleep(Duration::from_millis(10));
        }
        let segments = |db: &Db| db.core().log.storage().list().unwrap();
        assert_eq!(segments(&db)[..4], [0, 1, 2, 3]);
        // The bound that puts the files' garbage at `share` of its room
        // (past the slack both levels need).
        let bound_at = |share: f64| {
            let f = footprint(core).unwrap();
            assert!(f.on_disk > f.live + MIN_SLACK, "{} / {}", f.on_disk, f.live);
            let room = (f.on_disk - f.live) as f64 / share;
            assert!(room > MIN_ROOM * f.live as f64, "{room} / {}", f.live);
            (f.live + f.checkpoint) as f64 / f.logical as f64 + room / f.logical as f64
        };
        // No segment is wholly garbage (each has its header).
        let min_garbage = 1.0;
        let pass_at = |bound| {
            pass(
                core,
                Compaction { min_garbage, bound },
                Writers::Busy,
                &mut Chunk::default(),
            )
            .unwrap()
            .is_some()
        };

        let under = bound_at(0.8);
        assert!(!assess(core, under).unwrap());
        assert!(!core.compaction_is_behind());
        assert!(!pass_at(under));
        assert_eq!(segments(&db)[..4], [0, 1, 2, 3]);

        let greedy = bound_at(0.89);
        assert!(assess(core, greedy).unwrap());
        assert!(!core.compaction_is_behind());
        assert!(pass_at(greedy));
        assert_eq!(segments(&db)[..3], [1, 2, 3], "the emptiest went first");
        let greedy = bound_at(0.89);
        assert!(pass_at(greedy));
        assert_eq!(segments(&db)[..2], [2, 3], "then the next emptiest");

        let throttle = bound_at(0.99);
        assert!(assess(core, throttle).unwrap());
        assert!(core.compaction_is_behind());
        for k in 0..60_000u32 {
            assert_eq!(
                db.get(&k.to_le_bytes()).unwrap().as_deref(),
                Some(&value[..])
            );
        }
    }

    /// Busy and quiet passes: on four segments of 10,000 keys of 1,000
    /// bytes, with 40 %, 36 %, 20 % and none of their keys overwritten
    /// (and sealed), a pass while writers are busy takes none of them at a
    /// `min_garbage` of 0.5; passes while they are quiet take the one with
    /// the most garbage past two thirds of it (0.33), then the next, then
    /// none (20 % is short of it). Every key reads its value throughout.
    #[test]
    fn at_rest_compaction_takes_segments_short_of_the_busy_share_one_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        // Uncompressed copies, so that what a pass copied counts records.
        let opts = Options::default()
            .compaction_garbage(None)
            .compression(crate::Compression::None);
        let db = Db::open(dir.path(), opts).unwrap();
        let core = db.core();
        for seg in 0..4u32 {
            insert(&db, seg * 10_000..seg * 10_000 + 10_000);
            core.log.seal_segment().unwrap();
        }
        insert(&db, 0..4_000);
        insert(&db, 10_000..13_600);
        insert(&db, 20_000..22_000);
        core.log.seal_segment().unwrap();
        db.sync().unwrap();
        let segments = || core.log.storage().list().unwrap();
        let compaction = Compaction {
            min_garbage: 0.5,
            bound: 2.0,
        };
        let pass_of = |writers| pass(core, compaction, writers, &mut Chunk::default()).unwrap();
        assert_eq!(pass_of(Writers::Busy), None);
        assert_eq!(segments()[..4], [0, 1, 2, 3]);
        let copied = pass_of(Writers::Quiet).expect("the emptiest segment");
        // Its 6,000 live records, each over 1,000 bytes.
        assert!((6_000_000..7_000_000).contains(&copied), "{copied}");
        assert_eq!(segments()[..3], [1, 2, 3]);
        assert!(pass_of(Writers::Quiet).is_some());
        assert_eq!(segments()[..2], [2, 3]);
        assert_eq!(pass_of(Writers::Quiet), None);
        assert_eq!(pass_of(Writers::Busy), None);
        assert_eq!(segments()[..2], [2, 3]);
        let value = vec![7u8; 1000];
        for k in 0..40_000u32 {
            assert_eq!(
                db.get(&k.to_le_bytes()).unwrap().as_deref(),
                Some(&value[..])
            );
        }
    }

    /// Writers wait where the room under the bound ends, not where the
    /// maintenance thread next looks: a store of 2 MiB under 4 writers
    /// grew to 66-134 times its live bytes when they waited only on a flag
    /// the thread set each time it looked. A compactor with nothing to
    /// take, or held off by a backup, lets them go on for [`SEAL_AT`] more
    /// bytes, not without end; one held off by a foreground compaction
    /// lets it set the limit (a loop of `Db::compact` on 1 MiB segments
    /// let a 2 MiB store grow to 800 MiB when it did not).
    #[test]
    fn writers_wait_where_the_room_under_the_bound_ends() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), Options::default().compaction_garbage(None)).unwrap();
        let core = db.core();
        let value = vec![7u8; 1000];
        let keys = 2_000u32;
        for k in 0..keys {
            db.insert(&k.to_le_bytes(), &value).unwrap();
        }
        let bound = 2.0;
        assert!(!assess(core, bound).unwrap());
        let f = footprint(core).unwrap();
        let (on_disk, checkpoint) = (f.on_disk, f.checkpoint);
        // No checkpoint file (the maintenance thread writes one every 64
        // MiB appended, more than this test appends): its peak is the next
        // one, which stays as it is (the index does not grow).
        assert!(!dir.path().join("CHECKPOINT").exists());
        assert_eq!(checkpoint, core.index.live_bytes().checkpoint);
        // 2 MB live: the slack is the larger cap.
        let cap = f.live + checkpoint + MIN_SLACK;
        assert_eq!(f.level(THROTTLE_SHARE, bound), cap);
        let waits = || db.stats().unwrap().write_waits;
        // Overwrites until `limit` bytes are appended: none waits before
        // it, the one that reaches it does (once), and it is passed by at
        // most that record and a pad before it.
        let overwrite_until = |limit: u64, k: &mut u32| {
            let waited = waits();
            while core.log.appended() < limit {
                assert!(
                    !core.compaction_is_behind(),
                    "behind at {}",
                    core.log.appended()
                );
                db.insert(&(*k % keys).to_le_bytes(), &value).unwrap();
                *k += 1;
            }
            assert!(core.compaction_is_behind());
            assert!(core.log.appended() - limit < 4096);
            assert_eq!(waits(), waited + 1);
        };
        let mut k = 0;
        overwrite_until(core.log.appended() + (cap - on_disk - checkpoint), &mut k);
        let Footprint { on_disk, .. } = footprint(core).unwrap();
        let files = on_disk + checkpoint;
        assert!((cap..cap + 4096).contains(&files), "{files} for {cap}");

        // Nothing sealed to compact: another `SEAL_AT` bytes, then wait.
        let nothing = Compaction {
            min_garbage: 1.0,
            bound,
        };
        assert!(
            pass(core, nothing, Writers::Busy, &mut Chunk::default())
                .unwrap()
                .is_none()
        );
        overwrite_until(core.log.appended() + SEAL_AT, &mut k);

        // Compaction held off by a foreground `Db::compact` (it sets the
        // limit itself): writers keep waiting. By a backup: another
        // `SEAL_AT` bytes, without waiting for it.
        {
            let _held = core.compaction_lock.lock();
            assert!(
                pass(core, nothing, Writers::Busy, &mut Chunk::default())
                    .unwrap()
                    .is_none()
            );
            assert!(core.compaction_is_behind());
            core.backing_up.store(true, Ordering::Relaxed);
            assert!(
                pass(core, nothing, Writers::Busy, &mut Chunk::default())
                    .unwrap()
                    .is_none()
            );
            overwrite_until(core.log.appended() + SEAL_AT, &mut k);
            core.backing_up.store(false, Ordering::Relaxed);
        }

        // An infinite bound never limits, even with nothing live (its
        // product with 0 is NaN).
        core.set_append_limit(u64::MAX);
        for k in 0..keys {
            db.remove(&k.to_le_bytes()).unwrap();
        }
        assert!(!assess(core, f64::INFINITY).unwrap());
        assert!(!core.compaction_is_behind());
    }
}
