//! Property test: random operation sequences (insert, remove, get, update,
//! compare-and-swap, batches, expire, persist) against a `HashMap` model,
//! with compactions and reopens (clean closes) in between.

use std::collections::{HashMap, HashSet};

use emberkv::{Db, Options};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Insert(Vec<u8>, Vec<u8>),
    Remove(Vec<u8>),
    Get(Vec<u8>),
    /// Appends the byte to the value (creating the key), or removes the key
    /// when the byte is 0.
    Update(Vec<u8>, u8),
    /// compare_and_swap with the current value (`true`) or a wrong one.
    Swap(Vec<u8>, bool, Option<Vec<u8>>),
    /// A batch: inserts (`Some`) and removes (`None`).
    Batch(Vec<(Vec<u8>, Option<Vec<u8>>)>),
    /// Gives the key an expiry an hour away (never reached in the test).
    Expire(Vec<u8>),
    Persist(Vec<u8>),
    /// A clean close and open; with `true`, the checkpoint is deleted in
    /// between, so open replays the whole log.
    Reopen(bool),
    Compact,
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    // A small key space so that overwrites and removes hit existing keys.
    prop_oneof![
        (0u8..24).prop_map(|k| vec![k]),
        proptest::collection::vec(any::<u8>(), 0..40),
    ]
}

fn value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => proptest::collection::vec(any::<u8>(), 0..300),
        1 => (0usize..200_000).prop_map(|n| vec![(n % 256) as u8; n]),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (key(), value()).prop_map(|(k, v)| Op::Insert(k, v)),
        3 => key().prop_map(Op::Remove),
        4 => key().prop_map(Op::Get),
        2 => (key(), any::<u8>()).prop_map(|(k, b)| Op::Update(k, b)),
        2 => (key(), any::<bool>(), proptest::option::of(value()))
            .prop_map(|(k, right, v)| Op::Swap(k, right, v)),
        2 => proptest::collection::vec((key(), proptest::option::of(value())), 0..12)
            .prop_map(Op::Batch),
        2 => key().prop_map(Op::Expire),
        1 => key().prop_map(Op::Persist),
        1 => any::<bool>().prop_map(Op::Reopen),
        1 => Just(Op::Compact),
    ]
}

fn options() -> Options {
    // Small segments and hot tier, so sequences cross pages, segments and
    // the hot/cold boundary.
    Options::default()
        .segment_bytes(1 << 20)
        .hot_bytes(4 << 20)
        .key_capacity(16)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn matches_hashmap_model(ops in proptest::collection::vec(op(), 1..120)) {
        let dir = tempfile::tempdir().unwrap();
        let mut db = Some(Db::open(dir.path(), options()).unwrap());
        let mut model: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
        // Keys of the model that have an expiry.
        let mut expiring: HashSet<Vec<u8>> = HashSet::new();
        for op in ops {
            let store = db.as_ref().unwrap();
            match op {
                Op::Insert(k, v) => {
                    store.insert(&k, &v).unwrap();
                    expiring.remove(&k);
                    model.insert(k, v);
                }
                Op::Expire(k) => {
                    let hour = std::time::Duration::from_secs(3600);
                    prop_assert_eq!(store.expire(&k, hour).unwrap(), model.contains_key(&k));
                    if model.contains_key(&k) {
                        expiring.insert(k);
                    }
                }
                Op::Persist(k) => {
                    prop_assert_eq!(store.persist(&k).unwrap(), expiring.remove(&k));
                }
                Op::Remove(k) => {
                    expiring.remove(&k);
                    prop_assert_eq!(store.remove(&k).unwrap(), model.remove(&k).is_some());
                }
                Op::Get(k) => {
                    prop_assert_eq!(store.get(&k).unwrap(), model.get(&k).cloned());
                    let ttl = store.ttl(&k).unwrap();
                    prop_assert_eq!(ttl.is_some(), model.contains_key(&k));
                    prop_assert_eq!(ttl.flatten().is_some(), expiring.contains(&k));
                    prop_assert_eq!(store.contains_key(&k).unwrap(), model.contains_key(&k));
                }
                Op::Update(k, b) => {
                    let new = store
                        .update(&k, |old| {
                            (b != 0).then(|| [old.unwrap_or_default(), &[b]].concat())
                        })
                        .unwrap();
                    let expected = (b != 0)
                        .then(|| [model.get(&k).map_or(&[][..], Vec::as_slice), &[b]].concat());
                    prop_assert_eq!(&new, &expected);
                    match expected {
                        Some(v) => model.insert(k, v),
                        None => {
                            expiring.remove(&k);
                            model.remove(&k)
                        }
                    };
                }
                Op::Swap(k, right, new) => {
                    let current = model.get(&k).cloned();
                    let expected = if right {
                        current.clone()
                    } else {
                        Some([current.clone().unwrap_or_default(), b"x".to_vec()].concat())
                    };
                    let swapped = store
                        .compare_and_swap(&k, expected.as_deref(), new.as_deref())
                        .unwrap();
                    prop_assert_eq!(swapped, right);
                    if swapped {
                        expiring.remove(&k);
                        match new {
                            Some(v) => model.insert(k, v),
                            None => model.remove(&k),
                        };
                    }
                }
                Op::Batch(ops) => {
                    let mut batch = emberkv::WriteBatch::new();
                    for (k, v) in &ops {
                        match v {
                            Some(v) => batch.insert(k, v),
                            None => batch.remove(k),
                        };
                    }
                    store.apply_batch(&batch).unwrap();
                    for (k, v) in ops {
                        expiring.remove(&k);
                        match v {
                            Some(v) => model.insert(k, v),
                            None => model.remove(&k),
                        };
                    }
                }
                Op::Compact => {
                    store.compact().unwrap();
                }
                Op::Reopen(replay_all) => {
                    db.take().unwrap().close().unwrap();
                    if replay_all {
                        std::fs::remove_file(dir.path().join("CHECKPOINT")).unwrap();
                    }
                    db = Some(Db::open(dir.path(), options()).unwrap());
                }
            }
            prop_assert_eq!(db.as_ref().unwrap().len(), model.len());
        }
        let store = db.take().unwrap();
        store.close().unwrap();
        let store = Db::open(dir.path(), options()).unwrap();
        prop_assert_eq!(store.len(), model.len());
        for (k, v) in &model {
            prop_assert_eq!(store.get(k).unwrap(), Some(v.clone()));
        }
    }
}
