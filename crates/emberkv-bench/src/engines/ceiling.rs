//! The in-memory ceiling rail: a `dashmap::DashMap` hashed with
//! `foldhash` (the fast hasher of `hashbrown`; DashMap's default, SipHash
//! 1-3, resists hash flooding at several times the cost per short key, and
//! a store that hashes faster could pass a ceiling built on it). It keeps
//! nothing on disk and ignores durability and budgets: it shows how fast
//! the harness can go against a concurrent hash map.

use std::path::Path;

use anyhow::Result;
use dashmap::DashMap;
use foldhash::fast::RandomState;

use crate::engine::{Engine, OpenOptions};

struct Ceiling(DashMap<Box<[u8]>, Box<[u8]>, RandomState>);

/// A new, empty map (`dir` and `options` are not used: nothing persists).
pub fn open(_dir: &Path, _options: &OpenOptions) -> Result<Box<dyn Engine>> {
    Ok(Box::new(Ceiling(DashMap::with_hasher(
        RandomState::default(),
    ))))
}

impl Engine for Ceiling {
    fn name(&self) -> &'static str {
        "dashmap"
    }

    fn insert(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.0.insert(key.into(), value.into());
        Ok(())
    }

    fn get(&self, key: &[u8], buf: &mut Vec<u8>) -> Result<bool> {
        let Some(value) = self.0.get(key) else {
            return Ok(false);
        };
        buf.clear();
        buf.extend_from_slice(&value);
        Ok(true)
    }

    fn remove(&self, key: &[u8]) -> Result<()> {
        self.0.remove(key);
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        Ok(())
    }

    fn settings(&self) -> String {
        "DashMap::new() of boxed byte slices, in memory only".to_owned()
    }

    fn durability(&self) -> String {
        "none: in memory only (reference rail)".to_owned()
    }

    fn close(self: Box<Self>) -> Result<()> {
        Ok(())
    }
}
