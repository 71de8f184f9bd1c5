//! emberkv at its shipped defaults (`emberkv::Options::default()`), with
//! `sync_writes(true)` for FULL durability and, in out-of-cache mode, the
//! budget given to the hot tier, the read cache off: at the default
//! `map_cold_reads = true` gets read cold records through memory maps of
//! the segment files (the OS page cache, as LMDB's reads), and the read
//! cache serves only gets by `pread`, which then do not happen. (Until
//! 2026-12-04 a quarter of the budget went to that idle cache.) With
//! `map_cold_reads` off, the budget would be split: three quarters hot
//! tier, a quarter read cache.

use std::path::Path;

use anyhow::Result;

use crate::engine::{Durability, Engine, OpenOptions, Unsupported, human_bytes};

/// emberkv's smallest hot tier, in bytes (4 pages of 1 MiB).
const MIN_HOT_BYTES: u64 = 4 << 20;

struct Emberkv {
    db: ::emberkv::Db,
    settings: String,
    durability: &'static str,
}

/// Opens an emberkv store in `dir/emberkv`.
pub fn open(dir: &Path, options: &OpenOptions) -> Result<Box<dyn Engine>> {
    let mut opts = ::emberkv::Options::default();
    let defaults = ::emberkv::Options::default();
    let mut set = Vec::new();
    if let Some(budget) = options.resident_budget {
        let cache = if defaults.map_cold_reads {
            0
        } else {
            budget / 4
        };
        let hot = budget - cache;
        if hot < MIN_HOT_BYTES {
            return Err(Unsupported(format!(
                "a resident budget of {}: emberkv's hot tier needs at least {}",
                human_bytes(budget),
                human_bytes(MIN_HOT_BYTES)
            ))
            .into());
        }
        opts = opts
            .hot_bytes(usize::try_from(hot)?)
            .read_cache_bytes(usize::try_from(cache)?);
        set.push(format!(
            "hot_bytes = {} (its in-memory hot tier; default {})",
            human_bytes(hot),
            human_bytes(defaults.hot_bytes as u64)
        ));
        set.push(format!(
            "read_cache_bytes = {} (its cache of cold records; default {})",
            human_bytes(cache),
            human_bytes(defaults.read_cache_bytes as u64)
        ));
        if defaults.map_cold_reads {
            set.push(
                "map_cold_reads = true, unchanged: cold gets read through memory maps \
                 of the segment files (the OS page cache, as LMDB's reads do), which \
                 the read cache would not serve, so it is off and the whole budget is \
                 the hot tier's"
                    .to_owned(),
            );
        }
    }
    let durability = match options.durability {
        Durability::Default => {
            "background group commit within a 100 ms window (sync_writes = false, default)"
        }
        Durability::Full => {
            opts = opts.sync_writes(true);
            set.push("sync_writes = true".to_owned());
            "fdatasync before each write returns, shared by concurrent writers \
             (sync_writes = true)"
        }
    };
    let db = ::emberkv::Db::open(dir.join("emberkv"), opts)?;
    Ok(Box::new(Emberkv {
        db,
        settings: super::describe("Options::default()", &set),
        durability,
    }))
}

impl Engine for Emberkv {
    fn name(&self) -> &'static str {
        "emberkv"
    }

    fn insert(&self, key: &[u8], value: &[u8]) -> Result<()> {
        Ok(self.db.insert(key, value)?)
    }

    fn get(&self, key: &[u8], buf: &mut Vec<u8>) -> Result<bool> {
        Ok(self.db.get_into(key, buf)?)
    }

    fn remove(&self, key: &[u8]) -> Result<()> {
        self.db.remove(key)?;
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        Ok(self.db.sync()?)
    }

    fn syncs(&self) -> Option<u64> {
        self.db.stats().ok().map(|s| s.fdatasyncs)
    }

    fn settings(&self) -> String {
        self.settings.clone()
    }

    fn durability(&self) -> String {
        self.durability.to_owned()
    }

    fn close(self: Box<Self>) -> Result<()> {
        Ok(self.db.close()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Opens a store with `resident_budget` and closes it again.
    fn with_budget(resident_budget: u64) -> Result<()> {
        let dir = tempfile::tempdir().unwrap();
        let options = OpenOptions {
            durability: Durability::Default,
            resident_budget: Some(resident_budget),
            threads: 1,
        };
        open(dir.path(), &options)?.close()
    }

    /// `--resident-budget 0` used to run emberkv with its 4 MiB hot tier
    /// and rank it against engines that kept to the budget.
    #[test]
    fn a_budget_below_the_smallest_hot_tier_is_refused_not_exceeded() {
        for budget in [0, MIN_HOT_BYTES - 1] {
            let err = with_budget(budget).expect_err("refused");
            assert!(err.downcast_ref::<Unsupported>().is_some(), "{err:#}");
        }
        assert!(with_budget(MIN_HOT_BYTES).is_ok());
    }
}
