//! Server counters for INFO stats, reset by CONFIG RESETSTAT.
//!
//! Connections count locally and add their counts here once per batch of
//! commands, so a pipelined burst costs a few atomic adds, not one per
//! command.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

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
}

impl Local {
    /// Counts an error reply: `line` is its text without the leading `-`,
    /// its first word the error code.
    pub fn error(&mut self, line: &str) {
        let code = line.split(' ').next().unwrap_or_default();
        match self.error_codes.iter_mut().find(|(c, _)| c == code) {
            Some((_, n)) => *n += 1,
            None => self.error_codes.push((code.to_owned(), 1)),
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
        *local = Local::default();
    }

    /// CONFIG RESETSTAT: zeroes the counters (not `changes`, which SAVE
    /// resets).
    pub fn reset(&self) {
        self.error_codes.lock().clear();
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
