//! The adapter trait every benchmarked engine implements, and what the
//! harness may ask of an engine when it opens one.

use std::fmt;

use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};

/// The durability a run asks every engine for.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    clap::ValueEnum,
)]
pub enum Durability {
    /// Each engine's shipped default, whatever it promises.
    #[serde(rename = "DEFAULT")]
    #[value(name = "DEFAULT")]
    Default,
    /// Every acknowledged write survives a power cut: each engine syncs
    /// every write in its own way.
    #[serde(rename = "FULL")]
    #[value(name = "FULL")]
    Full,
}

impl fmt::Display for Durability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            Durability::Default => "DEFAULT",
            Durability::Full => "FULL",
        })
    }
}

/// What the harness asks of an engine at open. Adapters honour it in the
/// engine's own way and state in [`Engine::settings`] what they set.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OpenOptions {
    /// The durability of the run.
    pub durability: Durability,
    /// Out-of-cache mode: the bytes each engine's own caches may hold
    /// (`None`: the engine's shipped cache sizes).
    pub resident_budget: Option<u64>,
    /// Number of client threads that will share the store.
    pub threads: usize,
}

/// The error an opener returns when its engine cannot honour what
/// [`OpenOptions`] asks (FULL durability from an engine that persists only
/// through checkpoints, say). The report shows the engine's cells as
/// unsupported, with this reason, instead of running them.
#[derive(Debug)]
pub struct Unsupported(pub String);

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unsupported: {}", self.0)
    }
}

impl std::error::Error for Unsupported {}

/// The callback of [`Engine::scan`]: called with each key and value.
pub type Visit<'a> = dyn FnMut(&[u8], &[u8]) -> Result<()> + 'a;

/// One open store, shared by all client threads.
///
/// Adapters open their engine at its shipped defaults plus only what
/// [`OpenOptions`] asks for, and say so in [`Engine::settings`] and
/// [`Engine::durability`].
pub trait Engine: Send + Sync {
    /// The engine's registry name.
    fn name(&self) -> &'static str;

    /// Inserts or overwrites `key` with `value`.
    fn insert(&self, key: &[u8], value: &[u8]) -> Result<()>;

    /// Looks `key` up. When found, copies its value into `buf` (replacing
    /// its contents) and returns `true`; otherwise returns `false`.
    fn get(&self, key: &[u8], buf: &mut Vec<u8>) -> Result<bool>;

    /// Deletes `key`; deleting a missing key is not an error.
    fn remove(&self, key: &[u8]) -> Result<()>;

    /// Inserts many pairs; engines with transactions or batches commit one
    /// per call. The harness calls it to load keys before read cells.
    fn load_batch(&self, items: &[(Vec<u8>, Vec<u8>)]) -> Result<()> {
        items.iter().try_for_each(|(k, v)| self.insert(k, v))
    }

    /// Whether the engine keeps keys in order and implements
    /// [`Engine::scan`].
    fn scans(&self) -> bool {
        false
    }

    /// Calls `visit` on up to `limit` pairs whose keys are `>= start`, in
    /// ascending key order, and returns how many it visited.
    fn scan(&self, start: &[u8], limit: usize, visit: &mut Visit<'_>) -> Result<usize> {
        let _ = (start, limit, visit);
        bail!("{} keeps no key order and cannot scan", self.name())
    }

    /// Makes every completed write durable.
    fn sync(&self) -> Result<()>;

    /// The number of fsync/fdatasync calls the engine has made on this
    /// store since it was opened, if the engine reports it (`None` for
    /// engines that do not; the harness never guesses it). The report
    /// divides a write-only cell's operations by it: writes per sync.
    fn syncs(&self) -> Option<u64> {
        None
    }

    /// The configuration the store runs with, naming every setting the
    /// harness changed from the engine's defaults.
    fn settings(&self) -> String;

    /// When a completed write becomes durable, at these settings.
    fn durability(&self) -> String;

    /// Closes the store cleanly, making every write durable.
    fn close(self: Box<Self>) -> Result<()>;
}

/// `bytes` in the largest binary unit that keeps it whole or to one
/// decimal: `32 MiB`, `1.5 GiB`, `512 B`.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if value.fract() == 0.0 {
        format!("{value} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_bytes_picks_the_unit() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(32 << 20), "32 MiB");
        assert_eq!(human_bytes(3 << 29), "1.5 GiB");
    }
}
