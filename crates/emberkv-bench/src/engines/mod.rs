//! The registry of benchmarked engines: the only place that names them.

use std::path::Path;

use anyhow::{Result, bail};

use crate::engine::Engine;

mod emberkv;
mod fjall;
mod redb;

/// Opens (creating if needed) an engine's store inside an existing
/// directory that the engine owns.
pub type Opener = fn(&Path) -> Result<Box<dyn Engine>>;

/// Every registered engine, by name, in board order.
pub const ENGINES: [(&str, Opener); 3] = [
    ("emberkv", emberkv::open),
    ("redb", redb::open),
    ("fjall", fjall::open),
];

/// The names of every registered engine.
pub fn names() -> Vec<&'static str> {
    ENGINES.iter().map(|&(name, _)| name).collect()
}

/// The opener of the engine called `name`, or an error listing the valid
/// names.
pub fn lookup(name: &str) -> Result<Opener> {
    match ENGINES.iter().find(|&&(n, _)| n == name) {
        Some(&(_, open)) => Ok(open),
        None => bail!(
            "unknown engine `{name}`; valid engines: {}",
            names().join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(e: &dyn Engine, key: &[u8]) -> Option<Vec<u8>> {
        let mut buf = vec![0xAA; 3];
        e.get(key, &mut buf).unwrap().then_some(buf)
    }

    /// The conformance test every registered engine must pass.
    fn conformance(name: &str) {
        let dir = tempfile::tempdir().unwrap();
        let open = lookup(name).unwrap();
        let e = open(dir.path()).unwrap();
        assert_eq!(e.name(), name);
        assert!(!e.settings().is_empty() && !e.durability().is_empty());

        assert_eq!(get(&*e, b"k1"), None);
        e.insert(b"k1", b"first").unwrap();
        assert_eq!(get(&*e, b"k1").as_deref(), Some(&b"first"[..]));
        e.insert(b"k1", b"second, longer value").unwrap();
        assert_eq!(
            get(&*e, b"k1").as_deref(),
            Some(&b"second, longer value"[..])
        );
        e.insert(b"k2", &[7u8; 1024]).unwrap();
        e.remove(b"k1").unwrap();
        assert_eq!(get(&*e, b"k1"), None);
        e.remove(b"never inserted").unwrap();

        let batch: Vec<_> = (0u32..2_500)
            .map(|i| (i.to_be_bytes().to_vec(), i.to_le_bytes().repeat(3)))
            .collect();
        for chunk in batch.chunks(1_000) {
            e.load_batch(chunk).unwrap();
        }
        e.sync().unwrap();
        e.close().unwrap();

        let e = open(dir.path()).unwrap();
        assert_eq!(get(&*e, b"k1"), None, "{name}: removed key came back");
        assert_eq!(get(&*e, b"k2"), Some(vec![7u8; 1024]), "{name}: lost k2");
        for (k, v) in &batch {
            assert_eq!(get(&*e, k).as_ref(), Some(v), "{name}: lost a batch item");
        }
        e.close().unwrap();
    }

    #[test]
    fn every_engine_conforms() {
        for name in names() {
            conformance(name);
        }
    }

    #[test]
    fn unknown_engine_lists_valid_names() {
        let err = lookup("rocksdb").err().unwrap().to_string();
        assert!(err.contains("rocksdb"), "{err}");
        for name in names() {
            assert!(err.contains(name), "{err}");
        }
    }
}
