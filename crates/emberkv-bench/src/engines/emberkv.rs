//! emberkv at its shipped defaults (`emberkv::Options::default()`).

use std::path::Path;

use anyhow::Result;

use crate::engine::Engine;

struct Emberkv(::emberkv::Db);

/// Opens an emberkv store in `dir/emberkv` with default options.
pub fn open(dir: &Path) -> Result<Box<dyn Engine>> {
    let db = ::emberkv::Db::open(dir.join("emberkv"), ::emberkv::Options::default())?;
    Ok(Box::new(Emberkv(db)))
}

impl Engine for Emberkv {
    fn name(&self) -> &'static str {
        "emberkv"
    }

    fn insert(&self, key: &[u8], value: &[u8]) -> Result<()> {
        Ok(self.0.insert(key, value)?)
    }

    fn get(&self, key: &[u8], buf: &mut Vec<u8>) -> Result<bool> {
        Ok(self.0.get_into(key, buf)?)
    }

    fn remove(&self, key: &[u8]) -> Result<()> {
        self.0.remove(key)?;
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        Ok(self.0.sync()?)
    }

    fn settings(&self) -> String {
        "shipped defaults (Options::default())".to_owned()
    }

    fn durability(&self) -> &'static str {
        "background group commit, 100 ms window (sync_writes = false, default)"
    }

    fn close(self: Box<Self>) -> Result<()> {
        Ok(self.0.close()?)
    }
}
