//! redb at its shipped defaults: `Database::create`, one table, one write
//! transaction per insert with the default durability (already an fsync
//! per commit, so FULL changes nothing), and `set_cache_size` in
//! out-of-cache mode.

use std::path::Path;

use ::redb::{Database, ReadableDatabase, TableDefinition};
use anyhow::Result;

use crate::engine::{Engine, OpenOptions, Visit, human_bytes};

const TABLE: TableDefinition<&[u8], &[u8]> = TableDefinition::new("bench");

struct Redb {
    db: Database,
    settings: String,
}

/// Opens (creating if needed) the redb file `dir/redb.db` and its table.
pub fn open(dir: &Path, options: &OpenOptions) -> Result<Box<dyn Engine>> {
    let mut builder = Database::builder();
    let mut set = Vec::new();
    if let Some(budget) = options.resident_budget {
        builder.set_cache_size(usize::try_from(budget)?);
        set.push(format!(
            "cache size = {} (default 1 GiB)",
            human_bytes(budget)
        ));
    }
    let db = builder.create(dir.join("redb.db"))?;
    let txn = db.begin_write()?;
    txn.open_table(TABLE)?;
    txn.commit()?;
    Ok(Box::new(Redb {
        db,
        settings: super::describe("Database::create, one write transaction per insert", &set),
    }))
}

impl Engine for Redb {
    fn name(&self) -> &'static str {
        "redb"
    }

    fn insert(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let txn = self.db.begin_write()?;
        txn.open_table(TABLE)?.insert(key, value)?;
        txn.commit()?;
        Ok(())
    }

    fn get(&self, key: &[u8], buf: &mut Vec<u8>) -> Result<bool> {
        let txn = self.db.begin_read()?;
        let table = txn.open_table(TABLE)?;
        let Some(value) = table.get(key)? else {
            return Ok(false);
        };
        buf.clear();
        buf.extend_from_slice(value.value());
        Ok(true)
    }

    fn remove(&self, key: &[u8]) -> Result<()> {
        let txn = self.db.begin_write()?;
        txn.open_table(TABLE)?.remove(key)?;
        txn.commit()?;
        Ok(())
    }

    fn load_batch(&self, items: &[(Vec<u8>, Vec<u8>)]) -> Result<()> {
        let txn = self.db.begin_write()?;
        {
            let mut table = txn.open_table(TABLE)?;
            for (k, v) in items {
                table.insert(k.as_slice(), v.as_slice())?;
            }
        }
        txn.commit()?;
        Ok(())
    }

    fn scans(&self) -> bool {
        true
    }

    fn scan(&self, start: &[u8], limit: usize, visit: &mut Visit<'_>) -> Result<usize> {
        let txn = self.db.begin_read()?;
        let table = txn.open_table(TABLE)?;
        let mut n = 0;
        for item in table.range(start..)?.take(limit) {
            let (k, v) = item?;
            visit(k.value(), v.value())?;
            n += 1;
        }
        Ok(n)
    }

    fn sync(&self) -> Result<()> {
        // Every commit is already durable (Durability::Immediate).
        Ok(())
    }

    fn settings(&self) -> String {
        self.settings.clone()
    }

    fn durability(&self) -> String {
        "fsync per commit (Durability::Immediate, default)".to_owned()
    }

    fn close(self: Box<Self>) -> Result<()> {
        drop(self);
        Ok(())
    }
}
