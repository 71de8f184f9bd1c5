//! sled 0.34 (its stable release line) at its shipped defaults; `flush()`
//! after every write for FULL durability and `cache_capacity` in
//! out-of-cache mode.

use std::path::Path;

use anyhow::Result;

use crate::engine::{Durability, Engine, OpenOptions, Visit, human_bytes};

struct Sled {
    db: ::sled::Db,
    flush_each_write: bool,
    settings: String,
}

/// Opens (creating if needed) a sled database in `dir/sled`.
pub fn open(dir: &Path, options: &OpenOptions) -> Result<Box<dyn Engine>> {
    let mut config = ::sled::Config::new().path(dir.join("sled"));
    let mut set = Vec::new();
    if let Some(budget) = options.resident_budget {
        config = config.cache_capacity(budget);
        set.push(format!(
            "cache_capacity = {} (default 1 GiB)",
            human_bytes(budget)
        ));
    }
    let flush_each_write = options.durability == Durability::Full;
    if flush_each_write {
        set.push("flush() after every write".to_owned());
    }
    Ok(Box::new(Sled {
        db: open_patiently(&config)?,
        flush_each_write,
        settings: super::describe("sled::Config::new().path(path).open()", &set),
    }))
}

/// Opens the database, retrying for up to 2 s while its file lock is still
/// held: sled releases the lock only when its background flusher thread,
/// which outlives the dropped handle for a moment, exits (and a child
/// process forked by another test thread holds it until it execs).
fn open_patiently(config: &::sled::Config) -> Result<::sled::Db> {
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        match config.open() {
            Err(e)
                if e.to_string().contains("could not acquire lock")
                    && std::time::Instant::now() < give_up =>
            {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            result => return Ok(result?),
        }
    }
}

impl Sled {
    fn after_write(&self) -> Result<()> {
        if self.flush_each_write {
            self.db.flush()?;
        }
        Ok(())
    }
}

impl Engine for Sled {
    fn name(&self) -> &'static str {
        "sled"
    }

    fn insert(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.db.insert(key, value)?;
        self.after_write()
    }

    fn get(&self, key: &[u8], buf: &mut Vec<u8>) -> Result<bool> {
        let Some(value) = self.db.get(key)? else {
            return Ok(false);
        };
        buf.clear();
        buf.extend_from_slice(&value);
        Ok(true)
    }

    fn remove(&self, key: &[u8]) -> Result<()> {
        self.db.remove(key)?;
        self.after_write()
    }

    fn load_batch(&self, items: &[(Vec<u8>, Vec<u8>)]) -> Result<()> {
        let mut batch = ::sled::Batch::default();
        for (k, v) in items {
            batch.insert(k.as_slice(), v.as_slice());
        }
        self.db.apply_batch(batch)?;
        self.after_write()
    }

    fn scans(&self) -> bool {
        true
    }

    fn scan(&self, start: &[u8], limit: usize, visit: &mut Visit<'_>) -> Result<usize> {
        let mut n = 0;
        for item in self.db.range(start..).take(limit) {
            let (k, v) = item?;
            visit(&k, &v)?;
            n += 1;
        }
        Ok(n)
    }

    fn sync(&self) -> Result<()> {
        self.db.flush()?;
        Ok(())
    }

    fn settings(&self) -> String {
        self.settings.clone()
    }

    fn durability(&self) -> String {
        if self.flush_each_write {
            "flushed and fsynced after every write (flush())".to_owned()
        } else {
            "flushed by a background thread every 500 ms (flush_every_ms, default)".to_owned()
        }
    }

    fn close(self: Box<Self>) -> Result<()> {
        self.db.flush()?;
        Ok(())
    }
}
