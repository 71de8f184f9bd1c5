//! Server counters for INFO stats, reset by CONFIG RESETSTAT.
//!
//! Connections count locally and add their counts here once per batch of
//! commands, so a pipelined burst costs a few atomic adds, not one per
//! command.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters shared by every connection.
#[derive(Debug, Default)]
pub struct Stats {
    /// Connections accepted.
    pub connections: AtomicU64,
    /// Connections refused (maxclients, protected mode).
    pub rejected: AtomicU64,
    /// Commands run.
    pub commands: AtomicU64,
    /// Error replies.
    pub errors: AtomicU64,
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
}

/// One connection's counts since its last flush into [`Stats`].
#[derive(Debug, Default, Clone, Copy)]
pub struct Local {
    /// Commands run.
    pub commands: u64,
    /// Error replies.
    pub errors: u64,
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
        add(&self.errors, local.errors);
        add(&self.net_in, local.net_in);
        add(&self.net_out, local.net_out);
        add(&self.hits, local.hits);
        add(&self.misses, local.misses);
        add(&self.changes, local.changes);
        *local = Local::default();
    }

    /// CONFIG RESETSTAT: zeroes the counters (not `changes`, which SAVE
    /// resets).
    pub fn reset(&self) {
        for c in [
            &self.connections,
            &self.rejected,
            &self.commands,
            &self.errors,
            &self.net_in,
            &self.net_out,
            &self.hits,
            &self.misses,
            &self.ops_per_sec,
        ] {
            c.store(0, Ordering::Relaxed);
        }
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
        s.reset();
        assert_eq!(Stats::get(&s.commands), 0);
        assert_eq!(Stats::get(&s.changes), 2);
    }
}
