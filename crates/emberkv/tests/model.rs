//! Property test: random operation sequences against a `HashMap` model,
//! with compactions and reopens (clean closes) in between.

use std::collections::HashMap;

use emberkv::{Db, Options};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Insert(Vec<u8>, Vec<u8>),
    Remove(Vec<u8>),
    Get(Vec<u8>),
    Reopen,
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
        1 => Just(Op::Reopen),
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
        for op in ops {
            let store = db.as_ref().unwrap();
            match op {
                Op::Insert(k, v) => {
                    store.insert(&k, &v).unwrap();
                    model.insert(k, v);
                }
                Op::Remove(k) => {
                    prop_assert_eq!(store.remove(&k).unwrap(), model.remove(&k).is_some());
                }
                Op::Get(k) => {
                    prop_assert_eq!(store.get(&k).unwrap(), model.get(&k).cloned());
                    prop_assert_eq!(store.contains_key(&k).unwrap(), model.contains_key(&k));
                }
                Op::Compact => {
                    store.compact().unwrap();
                }
                Op::Reopen => {
                    db.take().unwrap().close().unwrap();
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
