//! The registry of benchmarked engines: the only place that names them.

use std::path::Path;

use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};

use crate::engine::{Engine, OpenOptions};

mod ceiling;
mod emberkv;
mod fjall;
mod floor;
mod lmdb;
mod oxifaster;
mod redb;
#[cfg(feature = "rocksdb")]
mod rocksdb;
mod sled;
mod sqlite;

include!(concat!(env!("OUT_DIR"), "/locked.rs"));

/// Opens (creating if needed) an engine's store inside an existing
/// directory that the engine owns.
pub type Opener = fn(&Path, &OpenOptions) -> Result<Box<dyn Engine>>;

/// What an entry of the board is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A real store, ranked against the others.
    Store,
    /// Reference rail: an in-memory concurrent map, what the harness
    /// reaches against a store that keeps nothing on disk. Not a bound: the
    /// harness's own work per operation (value generation and checks)
    /// dominates, and a store can match or pass it. Never ranked.
    Ceiling,
    /// Reference rail: an engine that stores nothing, the cost of the
    /// harness itself. Never ranked, and its reads are not verified.
    Floor,
}

/// Whether an engine can run in this build.
#[derive(Clone, Copy)]
pub enum Availability {
    /// It builds and passes the conformance test.
    Ready(Opener),
    /// It is on the board's list but cannot run, for this reason.
    Missing(&'static str),
}

/// One registered engine.
#[derive(Clone, Copy)]
pub struct Spec {
    /// Registry name.
    pub name: &'static str,
    /// Store or reference rail.
    pub kind: Kind,
    /// The crate that provides it, whose locked version the report shows.
    pub krate: &'static str,
    /// Whether and how it opens.
    pub availability: Availability,
}

#[cfg(feature = "rocksdb")]
const ROCKSDB: Availability = Availability::Ready(rocksdb::open);
#[cfg(not(feature = "rocksdb"))]
const ROCKSDB: Availability = Availability::Missing(
    "built without the `rocksdb` cargo feature (its C++ build takes many minutes); \
     enable it with `cargo run --release -p emberkv-bench --features rocksdb -- board`",
);

/// Every registered engine, in board order.
pub const ENGINES: [Spec; 11] = [
    Spec {
        name: "emberkv",
        kind: Kind::Store,
        krate: "emberkv",
        availability: Availability::Ready(emberkv::open),
    },
    Spec {
        name: "redb",
        kind: Kind::Store,
        krate: "redb",
        availability: Availability::Ready(redb::open),
    },
    Spec {
        name: "fjall",
        kind: Kind::Store,
        krate: "fjall",
        availability: Availability::Ready(fjall::open),
    },
    Spec {
        name: "sled",
        kind: Kind::Store,
        krate: "sled",
        availability: Availability::Ready(sled::open),
    },
    Spec {
        name: "lmdb",
        kind: Kind::Store,
        krate: "heed",
        availability: Availability::Ready(lmdb::open),
    },
    Spec {
        name: "sqlite",
        kind: Kind::Store,
        krate: "rusqlite",
        availability: Availability::Ready(sqlite::open),
    },
    Spec {
        name: "rocksdb",
        kind: Kind::Store,
        krate: "rocksdb",
        availability: ROCKSDB,
    },
    Spec {
        name: "oxifaster",
        kind: Kind::Store,
        krate: "oxifaster",
        availability: Availability::Ready(oxifaster::open),
    },
    Spec {
        name: "bitcasky",
        kind: Kind::Store,
        krate: "bitcasky",
        availability: Availability::Missing(
            "fails the conformance test: bitcasky 0.1.2 cannot open any store, since \
             Bitcasky::open opens its lock file with File::options().open(path), no access \
             mode given, which std rejects (`must specify at least one of read, write, or \
             append access`)",
        ),
    },
    Spec {
        name: "dashmap",
        kind: Kind::Ceiling,
        krate: "dashmap",
        availability: Availability::Ready(ceiling::open),
    },
    Spec {
        name: "noop",
        kind: Kind::Floor,
        krate: "emberkv-bench",
        availability: Availability::Ready(floor::open),
    },
];

/// The names of every registered engine.
pub fn names() -> Vec<&'static str> {
    ENGINES.iter().map(|s| s.name).collect()
}

/// The engine called `name`, or an error listing the valid names.
pub fn lookup(name: &str) -> Result<Spec> {
    match ENGINES.iter().find(|s| s.name == name) {
        Some(&spec) => Ok(spec),
        None => bail!(
            "unknown engine `{name}`; valid engines: {}",
            names().join(", ")
        ),
    }
}

/// The settings line of an adapter: the shipped defaults it opened with
/// (`base`) and every setting `set` by the harness.
fn describe(base: &str, set: &[String]) -> String {
    if set.is_empty() {
        format!("shipped defaults ({base})")
    } else {
        format!(
            "shipped defaults ({base}) except, set by the harness: {}",
            set.join("; ")
        )
    }
}

/// The locked version of crate `krate` (the harness's own for itself).
pub fn version(krate: &str) -> String {
    if krate == env!("CARGO_PKG_NAME") {
        return env!("CARGO_PKG_VERSION").to_owned();
    }
    LOCKED
        .iter()
        .find(|(name, _)| *name == krate)
        .map_or_else(|| "unknown".to_owned(), |(_, v)| (*v).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{Durability, Unsupported};

    fn get(e: &dyn Engine, key: &[u8]) -> Option<Vec<u8>> {
        let mut buf = vec![0xAA; 3];
        e.get(key, &mut buf).unwrap().then_some(buf)
    }

    fn scan(e: &dyn Engine, start: &[u8], limit: usize) -> Vec<Vec<u8>> {
        let mut keys = Vec::new();
        let n = e
            .scan(start, limit, &mut |k, _| {
                keys.push(k.to_vec());
                Ok(())
            })
            .unwrap();
        assert_eq!(n, keys.len());
        keys
    }

    /// The conformance test every store must pass, at `options`: insert,
    /// overwrite, get, remove, batches, ordered scans where offered, and
    /// everything still there after a reopen. The ceiling is checked
    /// without the reopen (it keeps nothing); the floor keeps nothing.
    fn conformance(spec: Spec, options: &OpenOptions) {
        let Availability::Ready(open) = spec.availability else {
            return;
        };
        let name = spec.name;
        let dir = tempfile::tempdir().unwrap();
        let e = match open(dir.path(), options) {
            Ok(e) => e,
            // An engine may refuse FULL durability (the report says why);
            // it must still conform at its default with the same budget.
            Err(err) if err.downcast_ref::<Unsupported>().is_some() => {
                assert_eq!(options.durability, Durability::Full, "{name}: {err}");
                let options = OpenOptions {
                    durability: Durability::Default,
                    ..options.clone()
                };
                return conformance(spec, &options);
            }
            Err(err) => panic!("{name}: {err:#}"),
        };
        assert_eq!(e.name(), name);
        assert!(!e.settings().is_empty() && !e.durability().is_empty());
        assert_ne!(version(spec.krate), "unknown", "{name}");
        if spec.kind == Kind::Floor {
            e.insert(b"k1", b"v").unwrap();
            assert_eq!(get(&*e, b"k1"), None);
            e.remove(b"k1").unwrap();
            e.sync().unwrap();
            return e.close().unwrap();
        }

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
        if e.scans() {
            let from = 1_000u32.to_be_bytes();
            let keys = scan(&*e, &from, 3);
            let want: Vec<Vec<u8>> = (1_000u32..1_003)
                .map(|i| i.to_be_bytes().to_vec())
                .collect();
            assert_eq!(keys, want, "{name}: scan");
            assert_eq!(
                scan(&*e, b"k2", 10),
                vec![b"k2".to_vec()],
                "{name}: scan end"
            );
        } else {
            assert!(e.scan(b"", 1, &mut |_, _| Ok(())).is_err());
        }
        e.sync().unwrap();
        e.close().unwrap();
        if spec.kind == Kind::Ceiling {
            return;
        }

        let e = open(dir.path(), options).unwrap();
        assert_eq!(get(&*e, b"k1"), None, "{name}: removed key came back");
        assert_eq!(get(&*e, b"k2"), Some(vec![7u8; 1024]), "{name}: lost k2");
        for (k, v) in &batch {
            assert_eq!(get(&*e, k).as_ref(), Some(v), "{name}: lost a batch item");
        }
        e.close().unwrap();
    }

    #[test]
    fn every_engine_conforms_at_defaults() {
        let options = OpenOptions {
            durability: Durability::Default,
            resident_budget: None,
            threads: 4,
        };
        for spec in ENGINES {
            conformance(spec, &options);
        }
    }

    #[test]
    fn every_engine_conforms_at_full_durability_and_a_budget() {
        let options = OpenOptions {
            durability: Durability::Full,
            resident_budget: Some(8 << 20),
            threads: 4,
        };
        for spec in ENGINES {
            conformance(spec, &options);
        }
    }

    #[test]
    fn unknown_engine_lists_valid_names() {
        let err = lookup("nosuchdb").err().unwrap().to_string();
        assert!(err.contains("nosuchdb"), "{err}");
        for name in names() {
            assert!(err.contains(name), "{err}");
        }
    }
}
