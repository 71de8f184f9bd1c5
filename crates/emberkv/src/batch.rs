//! [`WriteBatch`]: many inserts and removes applied atomically.
//!
//! A batch is appended as one contiguous run of records in one page (never
//! across a segment): every record but the last carries the batch flag, and
//! recovery applies the run only once it has read the last record, so a
//! crash leaves all of a batch or none of it.

use std::collections::HashMap;
use std::time::SystemTime;

/// Operations to apply together with [`crate::Db::apply_batch`].
///
/// ```
/// # fn main() -> emberkv::Result<()> {
/// # let dir = tempfile::tempdir()?;
/// let db = emberkv::Db::open(dir.path(), emberkv::Options::default())?;
/// let mut batch = emberkv::WriteBatch::new();
/// batch.insert(b"from", b"90");
/// batch.insert(b"to", b"110");
/// batch.remove(b"pending");
/// db.apply_batch(&batch)?;
/// assert_eq!(db.get(b"to")?.as_deref(), Some(&b"110"[..]));
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug, Default)]
pub struct WriteBatch {
    ops: Vec<BatchOp>,
}

/// One operation of a batch.
#[derive(Clone, Debug)]
pub(crate) enum BatchOp {
    /// Key, value, and expiry (Unix ms) if any.
    Insert(Vec<u8>, Vec<u8>, Option<u64>),
    Remove(Vec<u8>),
}

impl BatchOp {
    pub(crate) fn key(&self) -> &[u8] {
        match self {
            BatchOp::Insert(k, _, _) | BatchOp::Remove(k) => k,
        }
    }

    /// The value inserted, or `None` for a remove.
    pub(crate) fn value(&self) -> Option<&[u8]> {
        match self {
            BatchOp::Insert(_, v, _) => Some(v),
            BatchOp::Remove(_) => None,
        }
    }

    /// The expiry (Unix ms) of an insert that has one.
    pub(crate) fn expires_at(&self) -> Option<u64> {
        match self {
            BatchOp::Insert(_, _, at) => *at,
            BatchOp::Remove(_) => None,
        }
    }
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> WriteBatch {
        WriteBatch::default()
    }

    /// Adds an insert of `value` under `key` (clearing any expiry, as
    /// [`crate::Db::insert`] does).
    pub fn insert(&mut self, key: &[u8], value: &[u8]) -> &mut Self {
        self.ops
            .push(BatchOp::Insert(key.to_vec(), value.to_vec(), None));
        self
    }

    /// Adds an insert of `value` under `key` to expire at `at`, as
    /// [`crate::Db::insert_with_expiry`] does.
    pub fn insert_with_expiry(&mut self, key: &[u8], value: &[u8], at: SystemTime) -> &mut Self {
        self.ops.push(BatchOp::Insert(
            key.to_vec(),
            value.to_vec(),
            Some(crate::clock::to_ms(at)),
        ));
        self
    }

    /// Adds a remove of `key`.
    pub fn remove(&mut self, key: &[u8]) -> &mut Self {
        self.ops.push(BatchOp::Remove(key.to_vec()));
        self
    }

    /// Number of operations added.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether no operation was added.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Removes every operation.
    pub fn clear(&mut self) {
        self.ops.clear();
    }

    /// Every operation, in the order added.
    pub(crate) fn ops(&self) -> &[BatchOp] {
        &self.ops
    }

    /// The operations with only the last one kept for each key, in the
    /// order of those last operations.
    pub(crate) fn last_per_key(&self) -> Vec<&BatchOp> {
        let last: HashMap<&[u8], usize> = self
            .ops
            .iter()
            .enumerate()
            .map(|(i, op)| (op.key(), i))
            .collect();
        self.ops
            .iter()
            .enumerate()
            .filter(|(i, op)| last[op.key()] == *i)
            .map(|(_, op)| op)
            .collect()
    }
}
