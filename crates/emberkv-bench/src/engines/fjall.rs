//! fjall at its shipped defaults: default `Database` config and one keyspace
//! with default `KeyspaceCreateOptions`; `persist(SyncAll)` after every
//! write for FULL durability and `cache_size` in out-of-cache mode.

use std::path::Path;

use ::fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode};
use anyhow::Result;

use crate::engine::{Durability, Engine, OpenOptions, Visit, human_bytes};

struct Fjall {
    db: Database,
    keyspace: Keyspace,
    sync_each_write: bool,
    settings: String,
}

/// Opens (creating if needed) a fjall database in `dir/fjall` and its
/// keyspace.
pub fn open(dir: &Path, options: &OpenOptions) -> Result<Box<dyn Engine>> {
    let mut builder = Database::builder(dir.join("fjall"));
    let mut set = Vec::new();
    if let Some(budget) = options.resident_budget {
        builder = builder.cache_size(budget);
        set.push(format!(
            "cache_size = {} (default 32 MiB)",
            human_bytes(budget)
        ));
    }
    let sync_each_write = options.durability == Durability::Full;
    if sync_each_write {
        set.push("persist(PersistMode::SyncAll) after every write".to_owned());
    }
    let db = builder.open()?;
    let keyspace = db.keyspace("bench", KeyspaceCreateOptions::default)?;
    Ok(Box::new(Fjall {
        db,
        keyspace,
        sync_each_write,
        settings: super::describe(
            "Database::builder(path).open(), KeyspaceCreateOptions::default()",
            &set,
        ),
    }))
}

impl Fjall {
    fn after_write(&self) -> Result<()> {
        if self.sync_each_write {
            self.db.persist(PersistMode::SyncAll)?;
        }
        Ok(())
    }
}

impl Engine for Fjall {
    fn name(&self) -> &'static str {
        "fjall"
    }

    fn insert(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.keyspace.insert(key, value)?;
        self.after_write()
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
        self.keyspace.remove(key)?;
        self.after_write()
    }

    fn load_batch(&self, items: &[(Vec<u8>, Vec<u8>)]) -> Result<()> {
        let mut batch = self.db.batch();
        for (k, v) in items {
            batch.insert(&self.keyspace, k.as_slice(), v.as_slice());
        }
        batch.commit()?;
        self.after_write()
    }

    fn scans(&self) -> bool {
        true
    }

    fn scan(&self, start: &[u8], limit: usize, visit: &mut Visit<'_>) -> Result<usize> {
        let mut n = 0;
        for guard in self.keyspace.range(start..).take(limit) {
            let (k, v) = guard.into_inner()?;
            visit(&k, &v)?;
            n += 1;
        }
        Ok(n)
    }

    fn sync(&self) -> Result<()> {
        Ok(self.db.persist(PersistMode::SyncAll)?)
    }

    fn settings(&self) -> String {
        self.settings.clone()
    }

    fn durability(&self) -> String {
        if self.sync_each_write {
            "journal fsynced after every write (persist(PersistMode::SyncAll))".to_owned()
        } else {
            "journal written to OS buffers per write (PersistMode::Buffer, default); \
             fsync only on persist() or drop"
                .to_owned()
        }
    }

    fn close(self: Box<Self>) -> Result<()> {
        self.db.persist(PersistMode::SyncAll)?;
        Ok(())
    }
}
