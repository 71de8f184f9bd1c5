//! fjall at its shipped defaults: default `Database` config and one keyspace
//! with default `KeyspaceCreateOptions`.

use std::path::Path;

use ::fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode};
use anyhow::Result;

use crate::engine::Engine;

struct Fjall {
    db: Database,
    keyspace: Keyspace,
}

/// Opens (creating if needed) a fjall database in `dir/fjall` and its
/// keyspace.
pub fn open(dir: &Path) -> Result<Box<dyn Engine>> {
    let db = Database::builder(dir.join("fjall")).open()?;
    let keyspace = db.keyspace("bench", KeyspaceCreateOptions::default)?;
    Ok(Box::new(Fjall { db, keyspace }))
}

impl Engine for Fjall {
    fn name(&self) -> &'static str {
        "fjall"
    }

    fn insert(&self, key: &[u8], value: &[u8]) -> Result<()> {
        Ok(self.keyspace.insert(key, value)?)
    }

    fn get(&self, key: &[u8], buf: &mut Vec<u8>) -> Result<bool> {
        let Some(value) = self.keyspace.get(key)? else {
            return Ok(false);
        };
        buf.clear();
        buf.extend_from_slice(&value);
        Ok(true)
    }

    fn remove(&self, key: &[u8]) -> Result<()> {
        Ok(self.keyspace.remove(key)?)
    }

    fn load_batch(&self, items: &[(Vec<u8>, Vec<u8>)]) -> Result<()> {
        let mut batch = self.db.batch();
        for (k, v) in items {
            batch.insert(&self.keyspace, k.as_slice(), v.as_slice());
        }
        Ok(batch.commit()?)
    }

    fn sync(&self) -> Result<()> {
        Ok(self.db.persist(PersistMode::SyncAll)?)
    }

    fn settings(&self) -> String {
        "shipped defaults (Database::builder(path).open(), KeyspaceCreateOptions::default())"
            .to_owned()
    }

    fn durability(&self) -> &'static str {
        "journal written to OS buffers per write (PersistMode::Buffer, default); \
         fsync only on persist() or drop"
    }

    fn close(self: Box<Self>) -> Result<()> {
        self.db.persist(PersistMode::SyncAll)?;
        Ok(())
    }
}
