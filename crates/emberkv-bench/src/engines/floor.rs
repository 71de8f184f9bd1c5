//! The no-op floor rail: every operation succeeds and does nothing, and a
//! get finds nothing. It measures the harness itself: op generation,
//! timing and histograms.

use std::path::Path;

use anyhow::Result;

use crate::engine::{Engine, OpenOptions};

struct Floor;

/// The no-op engine (`dir` and `options` are not used).
pub fn open(_dir: &Path, _options: &OpenOptions) -> Result<Box<dyn Engine>> {
    Ok(Box::new(Floor))
}

impl Engine for Floor {
    fn name(&self) -> &'static str {
        "noop"
    }

    fn insert(&self, _key: &[u8], _value: &[u8]) -> Result<()> {
        Ok(())
    }

    fn get(&self, _key: &[u8], _buf: &mut Vec<u8>) -> Result<bool> {
        Ok(false)
    }

    fn remove(&self, _key: &[u8]) -> Result<()> {
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        Ok(())
    }

    fn settings(&self) -> String {
        "stores nothing (reference rail)".to_owned()
    }

    fn durability(&self) -> String {
        "none: stores nothing (reference rail)".to_owned()
    }

    fn close(self: Box<Self>) -> Result<()> {
        Ok(())
    }
}
