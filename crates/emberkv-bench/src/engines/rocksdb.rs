//! RocksDB (the `rocksdb` crate, behind the `rocksdb` cargo feature) at
//! its shipped defaults plus `create_if_missing`; `WriteOptions::set_sync`
//! for FULL durability and an LRU block cache of the budget in
//! out-of-cache mode.

use std::path::Path;

use ::rocksdb::{
    BlockBasedOptions, Cache, DB, Direction, IteratorMode, Options, WriteBatch, WriteOptions,
};
use anyhow::Result;

use crate::engine::{Durability, Engine, OpenOptions, Visit, human_bytes};

struct Rocks {
    db: DB,
    write: WriteOptions,
    sync_each_write: bool,
    settings: String,
}

/// Opens (creating if needed) a RocksDB database in `dir/rocksdb`.
pub fn open(dir: &Path, options: &OpenOptions) -> Result<Box<dyn Engine>> {
    let mut opts = Options::default();
    opts.create_if_missing(true);
    let mut set = Vec::new();
    if let Some(budget) = options.resident_budget {
        let mut table = BlockBasedOptions::default();
        table.set_block_cache(&Cache::new_lru_cache(usize::try_from(budget)?));
        opts.set_block_based_table_factory(&table);
        set.push(format!(
            "block cache = {} LRU (default 32 MiB)",
            human_bytes(budget)
        ));
    }
    let sync_each_write = options.durability == Durability::Full;
    let mut write = WriteOptions::default();
    if sync_each_write {
        write.set_sync(true);
        set.push("WriteOptions::set_sync(true)".to_owned());
    }
    Ok(Box::new(Rocks {
        db: DB::open(&opts, dir.join("rocksdb"))?,
        write,
        sync_each_write,
        settings: super::describe("Options::default() with create_if_missing", &set),
    }))
}

impl Engine for Rocks {
    fn name(&self) -> &'static str {
        "rocksdb"
    }

    fn insert(&self, key: &[u8], value: &[u8]) -> Result<()> {
        Ok(self.db.put_opt(key, value, &self.write)?)
    }

    fn get(&self, key: &[u8], buf: &mut Vec<u8>) -> Result<bool> {
        let Some(value) = self.db.get_pinned(key)? else {
            return Ok(false);
        };
        buf.clear();
        buf.extend_from_slice(&value);
        Ok(true)
    }

    fn remove(&self, key: &[u8]) -> Result<()> {
        Ok(self.db.delete_opt(key, &self.write)?)
    }

    fn load_batch(&self, items: &[(Vec<u8>, Vec<u8>)]) -> Result<()> {
        let mut batch = WriteBatch::default();
        for (k, v) in items {
            batch.put(k, v);
        }
        Ok(self.db.write_opt(batch, &self.write)?)
    }

    fn scans(&self) -> bool {
        true
    }

    fn scan(&self, start: &[u8], limit: usize, visit: &mut Visit<'_>) -> Result<usize> {
        let mut n = 0;
        for item in self
            .db
            .iterator(IteratorMode::From(start, Direction::Forward))
            .take(limit)
        {
            let (k, v) = item?;
            visit(&k, &v)?;
            n += 1;
        }
        Ok(n)
    }

    fn sync(&self) -> Result<()> {
        Ok(self.db.flush_wal(true)?)
    }

    fn settings(&self) -> String {
        self.settings.clone()
    }

    fn durability(&self) -> String {
        if self.sync_each_write {
            "WAL fsynced before each write returns (WriteOptions::set_sync(true))".to_owned()
        } else {
            "WAL written to OS buffers per write (sync = false, default)".to_owned()
        }
    }

    fn close(self: Box<Self>) -> Result<()> {
        self.db.flush_wal(true)?;
        Ok(())
    }
}
