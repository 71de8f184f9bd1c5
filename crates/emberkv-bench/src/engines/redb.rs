//! redb at its shipped defaults: `Database::create`, one table, one write
//! transaction per insert with the default durability.

use std::path::Path;

use ::redb::{Database, ReadableDatabase, TableDefinition};
use anyhow::Result;

use crate::engine::Engine;

const TABLE: TableDefinition<&[u8], &[u8]> = TableDefinition::new("bench");

struct Redb(Database);

/// Opens (creating if needed) the redb file `dir/redb.db` and its table.
pub fn open(dir: &Path) -> Result<Box<dyn Engine>> {
    let db = Database::create(dir.join("redb.db"))?;
    let txn = db.begin_write()?;
    txn.open_table(TABLE)?;
    txn.commit()?;
    Ok(Box::new(Redb(db)))
}

impl Engine for Redb {
    fn name(&self) -> &'static str {
        "redb"
    }

    fn insert(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.load_batch(&[(key.to_vec(), value.to_vec())])
    }

    fn get(&self, key: &[u8], buf: &mut Vec<u8>) -> Result<bool> {
        let txn = self.0.begin_read()?;
        let table = txn.open_table(TABLE)?;
        let Some(value) = table.get(key)? else {
            return Ok(false);
        };
        buf.clear();
        buf.extend_from_slice(value.value());
        Ok(true)
    }

    fn remove(&self, key: &[u8]) -> Result<()> {
        let txn = self.0.begin_write()?;
        txn.open_table(TABLE)?.remove(key)?;
        txn.commit()?;
        Ok(())
    }

    fn load_batch(&self, items: &[(Vec<u8>, Vec<u8>)]) -> Result<()> {
        let txn = self.0.begin_write()?;
        {
            let mut table = txn.open_table(TABLE)?;
            for (k, v) in items {
                table.insert(k.as_slice(), v.as_slice())?;
            }
        }
        txn.commit()?;
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        // Every commit is already durable (Durability::Immediate).
        Ok(())
    }

    fn settings(&self) -> String {
        "shipped defaults (Database::create, one write transaction per insert)".to_owned()
    }

    fn durability(&self) -> &'static str {
        "fsync per commit (Durability::Immediate, default)"
    }

    fn close(self: Box<Self>) -> Result<()> {
        drop(self);
        Ok(())
    }
}
