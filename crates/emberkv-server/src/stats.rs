//! Server counters for INFO stats, reset by CONFIG RESETSTAT.
//!
//! Connections count locally and add their counts here once per batch of
//! commands, so a pipelined burst costs a few atomic adds, not one per
//! command; the run times INFO latencystats needs are recorded into the
//! shared histograms under one lock per batch.

use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use hdrhistogram::Histogram;
use parking_lot::Mutex;

/// Counters shared by every connection.
#[derive(Debug, Default)]
pub struct Stats {
    /// Connections accepted.
    pub connections: AtomicU64,
    /// Connections refused (maxclients, protected mode).
    pub rejected: AtomicU64,
    /// Commands run.
    pub commands: AtomicU64,
    /// Bytes read from clients.
    pub net_in: AtomicU64,
    /// Bytes written to clients.
    pub net_out: AtomicU64,
    /// Reads that found their key.
    pub hits: AtomicU64,
    /// Reads that did not.
    pub misses: AtomicU64,
    /// Writes since the last SAVE.
    pub changes: AtomicU64,
    /// Commands per second over the last sampling interval.
    pub ops_per_sec: AtomicU64,
    /// The engine's count of expired keys removed
    /// (`Stats::expired_keys_removed`) at the last CONFIG RESETSTAT:
    /// INFO's `expired_keys` counts from there.
    pub expired_base: AtomicU64,
    /// Error replies per error code (the reply's first word, `ERR`,
    /// `NOAUTH`, ...), for INFO errorstats; their sum is
    /// [`Stats::errors`].
    pub error_codes: Mutex<BTreeMap<String, u64>>,
    /// Per command and subcommand (see [`crate::cmd::stat_slots`]), for
    /// INFO commandstats; sized at first use.
    per_command: OnceLock<Box<[CommandTotals]>>,
    /// Per command and subcommand slot, a histogram of its run times in
    /// nanoseconds, for INFO latencystats (made at the command's first
    /// recorded run).
    latencies: Mutex<Vec<Option<Box<Histogram<u64>>>>>,
}

/// The longest run time a latency histogram tells apart, in nanoseconds
/// (1 s; longer runs count as 1 s), and its precision in significant
/// digits: Redis 7's `LATENCY_HISTOGRAM_MAX_VALUE` and
/// `LATENCY_HISTOGRAM_PRECISION`. A histogram takes about 24 KiB.
const LATENCY_MAX_NANOS: u64 = 1_000_000_000;
const LATENCY_DIGITS: u8 = 2;

/// One command's counters for INFO commandstats, as Redis 7 keeps them.
#[derive(Debug, Default)]
pub struct CommandTotals {
    /// Times it ran (failed runs included).
    pub calls: AtomicU64,
    /// Nanoseconds it ran, in all.
    pub nanos: AtomicU64,
    /// Times it was refused before it ran (arity, authentication).
    pub rejected: AtomicU64,
    /// Runs that replied with an error.
    pub failed: AtomicU64,
}

/// One command's counts since the connection's last flush.
#[derive(Debug, Default, Clone, Copy)]
pub struct CommandCounts {
    /// Its slot (see [`crate::cmd::stat_slots`]).
    pub slot: usize,
    /// As in [`CommandTotals`].
    pub calls: u64,
    /// As in [`CommandTotals`].
    pub nanos: u64,
    /// As in [`CommandTotals`].
    pub rejected: u64,
    /// As in [`CommandTotals`].
    pub failed: u64,
}

/// One connection's counts since its last flush into [`Stats`].
#[derive(Debug, Default)]
pub struct Local {
    /// Commands run.
    pub commands: u64,
    /// Error replies per error code ([`Local::error`]).
    pub error_codes: Vec<(String, u64)>,
    /// Bytes read.
    pub net_in: u64,
    /// Bytes written.
    pub net_out: u64,
    /// Key hits.
    pub hits: u64,
    /// Key misses.
    pub misses: u64,
    /// Write commands.
    pub changes: u64,
    /// Counts of the commands run or refused, one entry per command seen
    /// since the flush (few: a linear search finds them).
    pub per_command: Vec<CommandCounts>,
    /// Run times to record for INFO latencystats: slot and nanoseconds.
    pub latencies: Vec<(usize, u64)>,
}

impl Local {
    fn counts(&mut self, slot: usize) -> &mut CommandCounts {
        let at = match self.per_command.iter().position(|c| c.slot == slot) {
            Some(at) => at,
            None => {
                self.per_command.push(CommandCounts {
                    slot,
                    ..CommandCounts::default()
                });
                self.per_command.len() - 1
            }
        };
        &mut self.per_command[at]
    }

    /// Counts a read of a key (Redis's `lookupKey` for reading: every
    /// command that reads a key's value, type, existence or expiry) that
    /// found it or not, for INFO's `keyspace_hits` and `keyspace_misses`.
    pub fn lookup(&mut self, found: bool) {
        self.hits += u64::from(found);
        self.misses += u64::from(!found);
    }

    /// Counts a run of the command in `slot` that took `nanos` and
    /// replied with an error or not.
    pub fn ran(&mut self, slot: usize, nanos: u64, failed: bool) {
        let c = self.counts(slot);
        c.calls += 1;
        c.nanos += nanos;
        c.failed += u64::from(failed);
    }

    /// Notes a run of the command in `slot` that took `nanos`, for INFO
    /// latencystats.
    pub fn timed(&mut self, slot: usize, nanos: u64) {
        self.latencies.push((slot, nanos));
    }

    /// Counts a refusal of the command in `slot` before it ran.
    pub fn rejected(&mut self, slot: usize) {
        self.counts(slot).rejected += 1;
    }

    /// Counts an error reply: `line` is its text without the leading `-`,
    /// its first word the error code.
    pub fn error(&mut self, line: impl AsRef<[u8]>) {
        let line = line.as_ref();
        let code = &line[..memchr::memchr(b' ', line).unwrap_or(line.len())];
        match self
            .error_codes
            .iter_mut()
            .find(|(c, _)| c.as_bytes() == code)
        {
            Some((_, n)) => *n += 1,
            None => self
                .error_codes
                .push((String::from_utf8_lossy(code).into_owned(), 1)),
        }
    }
}

impl Stats {
    /// Adds a connection's counts and zeroes them.
    pub fn add(&self, local: &mut Local) {
        let add = |c: &AtomicU64, n: u64| {
            if n != 0 {
                c.fetch_add(n, Ordering::Relaxed);
            }
        };
        add(&self.commands, local.commands);
        add(&self.net_in, local.net_in);
        add(&self.net_out, local.net_out);
        add(&self.hits, local.hits);
        add(&self.misses, local.misses);
        add(&self.changes, local.changes);
        if !local.error_codes.is_empty() {
            let mut codes = self.error_codes.lock();
            for (code, n) in local.error_codes.drain(..) {
                *codes.entry(code).or_default() += n;
            }
        }
        let totals = self.per_command();
        let mut per_command = std::mem::take(&mut local.per_command);
        for c in per_command.drain(..) {
            if let Some(t) = totals.get(c.slot) {
                add(&t.calls, c.calls);
                add(&t.nanos, c.nanos);
                add(&t.rejected, c.rejected);
                add(&t.failed, c.failed);
            }
        }
        let mut latencies = std::mem::take(&mut local.latencies);
        if !latencies.is_empty() {
            let mut histograms = self.latencies.lock();
            for (slot, nanos) in latencies.drain(..) {
                if histograms.len() <= slot {
                    histograms.resize_with(slot + 1, || None);
                }
                let h = histograms[slot].get_or_insert_with(|| {
                    Box::new(
                        Histogram::new_with_bounds(1, LATENCY_MAX_NANOS, LATENCY_DIGITS)
                            .expect("valid histogram bounds"),
                    )
                });
                h.saturating_record(nanos.max(1));
            }
        }
        *local = Local {
            per_command,
            latencies,
            ..Local::default()
        };
    }

    /// INFO latencystats' value of each command and subcommand with a
    /// recorded run, by slot (see [`crate::cmd::stat_slots`]): its run
    /// time at each of `percentiles` (`0.0..=100.0`), in microseconds,
    /// read from its histogram as Redis 7's `hdr_value_at_percentile`
    /// reads it (the highest value of the percentile's bucket).
    pub fn latency_percentiles(&self, percentiles: &[f64]) -> Vec<(usize, Vec<f64>)> {
        let histograms = self.latencies.lock();
        histograms
            .iter()
            .enumerate()
            .filter_map(|(slot, h)| Some((slot, h.as_deref().filter(|h| !h.is_empty())?)))
            .map(|(slot, h)| {
                let at = percentiles
                    .iter()
                    .map(|&p| h.value_at_percentile(p) as f64 / 1000.0)
                    .collect();
                (slot, at)
            })
            .collect()
    }

    /// The counters of every command and subcommand, by slot (see
    /// [`crate::cmd::stat_slots`]).
    pub fn per_command(&self) -> &[CommandTotals] {
        self.per_command.get_or_init(|| {
            (0..crate::cmd::stat_slots())
                .map(|_| CommandTotals::default())
                .collect()
        })
    }

    /// CONFIG RESETSTAT: zeroes the counters (not `changes`, which SAVE
    /// resets).
    pub fn reset(&self) {
        self.error_codes.lock().clear();
        self.latencies.lock().clear();
        for t in self.per_command() {
            for c in [&t.calls, &t.nanos, &t.rejected, &t.failed] {
                c.store(0, Ordering::Relaxed);
            }
        }
        for c in [
            &self.connections,
            &self.rejected,
            &self.commands,
            &self.net_in,
            &self.net_out,
            &self.hits,
            &self.misses,
            &self.ops_per_sec,
        ] {
            c.store(0, Ordering::Relaxed);
        }
    }

    /// Error replies, all codes together (INFO's `total_error_replies`).
    pub fn errors(&self) -> u64 {
        self.error_codes.lock().values().sum()
    }

    /// Reads a counter.
    pub fn get(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_and_reset() {
        let s = Stats::default();
        let mut l = Local {
            commands: 3,
            hits: 1,
            changes: 2,
            ..Local::default()
        };
        s.add(&mut l);
        assert_eq!(l.commands, 0);
        assert_eq!(Stats::get(&s.commands), 3);
        l.error("ERR syntax error");
        l.error("NOAUTH Authentication required.");
        l.error("ERR value is not an integer or out of range");
        s.add(&mut l);
        assert!(l.error_codes.is_empty());
        let codes: Vec<_> = s.error_codes.lock().clone().into_iter().collect();
        assert_eq!(codes, [("ERR".into(), 2), ("NOAUTH".into(), 1)]);
        assert_eq!(s.errors(), 3);
        s.reset();
        assert!(s.error_codes.lock().is_empty());
        assert_eq!(Stats::get(&s.commands), 0);
        assert_eq!(Stats::get(&s.changes), 2);
    }
}
