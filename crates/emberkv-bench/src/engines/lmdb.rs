//! LMDB through heed at its shipped defaults (every commit fsynced), one
//! write transaction per insert. The harness sets the map size: LMDB's
//! default map of 1 MiB cannot hold a data set, and the map size is an
//! address-space reservation, not a cache. LMDB has no cache of its own
//! (reads go through its memory map to the OS page cache), so out-of-cache
//! mode has nothing to bound in it.

use std::ops::Bound;
use std::path::Path;

use ::heed::types::Bytes;
use ::heed::{Database, Env, EnvOpenOptions};
use anyhow::Result;

use crate::engine::{Engine, OpenOptions, Visit, human_bytes};

/// The map size the harness gives LMDB, in bytes.
const MAP_BYTES: u64 = 64 << 30;

struct Lmdb {
    env: Env,
    db: Database<Bytes, Bytes>,
    settings: String,
}

/// Opens (creating if needed) an LMDB environment in `dir/lmdb`.
pub fn open(dir: &Path, options: &OpenOptions) -> Result<Box<dyn Engine>> {
    let path = dir.join("lmdb");
    std::fs::create_dir_all(&path)?;
    // SAFETY: heed requires that no other handle in this or another
    // process maps the same files while they are changed from outside;
    // the directory belongs to this adapter alone, and the previous handle
    // is fully closed (close() waits for it) before any reopen.
    let env = unsafe {
        EnvOpenOptions::new()
            .map_size(usize::try_from(MAP_BYTES)?)
            .open(&path)?
    };
    let mut txn = env.write_txn()?;
    let db = env.create_database(&mut txn, None)?;
    txn.commit()?;
    let mut set = vec![format!(
        "map_size = {} (default 1 MiB; a reservation of address space)",
        human_bytes(MAP_BYTES)
    )];
    if options.resident_budget.is_some() {
        set.push(
            "no cache of its own to bound: reads go through the memory map to the \
             OS page cache"
                .to_owned(),
        );
    }
    Ok(Box::new(Lmdb {
        env,
        db,
        settings: super::describe("EnvOpenOptions::new(), no flags", &set),
    }))
}

impl Engine for Lmdb {
    fn name(&self) -> &'static str {
        "lmdb"
    }

    fn insert(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let mut txn = self.env.write_txn()?;
        self.db.put(&mut txn, key, value)?;
        txn.commit()?;
        Ok(())
    }

    fn get(&self, key: &[u8], buf: &mut Vec<u8>) -> Result<bool> {
        let txn = self.env.read_txn()?;
        let Some(value) = self.db.get(&txn, key)? else {
            return Ok(false);
        };
        buf.clear();
        buf.extend_from_slice(value);
        Ok(true)
    }

    fn remove(&self, key: &[u8]) -> Result<()> {
        let mut txn = self.env.write_txn()?;
        self.db.delete(&mut txn, key)?;
        txn.commit()?;
        Ok(())
    }

    fn load_batch(&self, items: &[(Vec<u8>, Vec<u8>)]) -> Result<()> {
        let mut txn = self.env.write_txn()?;
        for (k, v) in items {
            self.db.put(&mut txn, k, v)?;
        }
        txn.commit()?;
        Ok(())
    }

    fn scans(&self) -> bool {
        true
    }

    fn scan(&self, start: &[u8], limit: usize, visit: &mut Visit<'_>) -> Result<usize> {
        let txn = self.env.read_txn()?;
        let range = (Bound::Included(start), Bound::Unbounded);
        let mut n = 0;
        for item in self.db.range(&txn, &range)?.take(limit) {
            let (k, v) = item?;
            visit(k, v)?;
            n += 1;
        }
        Ok(n)
    }

    fn sync(&self) -> Result<()> {
        Ok(self.env.force_sync()?)
    }

    fn settings(&self) -> String {
        self.settings.clone()
    }

    fn durability(&self) -> String {
        "fsync per commit (no MDB_NOSYNC, default)".to_owned()
    }

    fn close(self: Box<Self>) -> Result<()> {
        let Lmdb { env, .. } = *self;
        env.force_sync()?;
        env.prepare_for_closing().wait();
        Ok(())
    }
}
