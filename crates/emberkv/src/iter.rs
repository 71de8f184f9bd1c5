//! Unordered iteration over live keys, and the resumable scan cursor.
//!
//! Both walk the index shard by shard and slot by slot, reading each
//! entry's record. A key keeps its slot while it is present (an overwrite
//! rewrites the entry in place), and a shard that grows is walked in the
//! table it had when the walk reached it (kept alive by `arc_swap`), so a
//! key present for the whole walk is returned exactly once. Keys inserted
//! or removed during the walk may or may not appear. A value is one the
//! key held at some moment since the walk reached its shard: not always
//! its newest when returned, since writes made after the shard grew go to
//! the new table, not the one walked (found by a helper's attack: values
//! overwritten after a growth came back as they were before).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::db::Db;
use crate::error::Result;
use crate::index::{SHARDS, Table};
use crate::{clock, record::Record};

/// Iterator over the live `(key, value)` pairs of a store, in no order;
/// see [`Db::iter`].
pub struct Iter<'a> {
    db: &'a Db,
    shard: usize,
    table: Arc<Table>,
    slot: usize,
    scratch: Vec<u8>,
}

impl<'a> Iter<'a> {
    pub(crate) fn new(db: &'a Db) -> Iter<'a> {
        db.core().iterators.fetch_add(1, Ordering::SeqCst);
        Iter {
            db,
            shard: 0,
            table: db.core().index.table(0),
            slot: 0,
            scratch: Vec::new(),
        }
    }
}

impl Drop for Iter<'_> {
    fn drop(&mut self) {
        let core = self.db.core();
        if core.iterators.fetch_sub(1, Ordering::SeqCst) == 1 {
            // Errors here are retried by the next compaction pass.
            let _ = core.delete_retired_files();
        }
    }
}

impl Iterator for Iter<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.slot == self.table.len() {
                // Stays at the end once there: a call after `None` (as
                // `chain`, `zip` and `Peekable` make) returns `None` again.
                if self.shard + 1 == SHARDS {
                    return None;
                }
                self.shard += 1;
                self.table = self.db.core().index.table(self.shard);
                self.slot = 0;
            }
            let i = self.slot;
            self.slot += 1;
            let Some(addr) = self.db.core().index.address_at(&self.table, i) else {
                continue;
            };
            let read = self
                .db
                .core()
                .log
                .with_record(addr, &mut self.scratch, |r| {
                    live(r)
                        .then(|| {
                            let mut value = Vec::new();
                            r.value_into(self.db.core().log.codec(), &mut value, addr)
                                .map(|()| (r.key.to_vec(), value))
                        })
                        .transpose()
                })
                .and_then(|read| read);
            match read {
                Ok(Some(pair)) => return Some(Ok(pair)),
                Ok(None) => {}
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

impl std::iter::FusedIterator for Iter<'_> {}

fn live(record: &Record<'_>) -> bool {
    record.is_live(if record.expires_at.is_some() {
        clock::now_ms()
    } else {
        0
    })
}

/// A scan cursor: shard (bits 56..64), table generation (bits 32..56) and
/// slot (bits 0..32). Cursor 0 starts a scan and a returned 0 ends it.
fn cursor(shard: usize, generation: u32, slot: usize) -> u64 {
    (shard as u64) << 56 | u64::from(generation & 0xFF_FFFF) << 32 | slot as u64
}

/// One step of a resumable scan; see [`Db::scan`].
pub(crate) fn scan(db: &Db, cursor_in: u64, count: usize) -> Result<(Vec<Vec<u8>>, u64)> {
    let mut shard = (cursor_in >> 56) as usize;
    let generation = ((cursor_in >> 32) & 0xFF_FFFF) as u32;
    let mut slot = (cursor_in & 0xFFFF_FFFF) as usize;
    let mut keys = Vec::new();
    let mut scratch = Vec::new();
    let mut table = db.core().index.table(shard.min(SHARDS - 1));
    if shard >= SHARDS || (slot != 0 && table.generation() & 0xFF_FFFF != generation) {
        // A malformed cursor, or the shard's table was rebuilt since: its
        // slots moved, so walk the shard again from its start (keys may
        // repeat; none present throughout is missed).
        shard = shard.min(SHARDS - 1);
        slot = 0;
    }
    let mut visited = 0;
    while visited < count.max(1) {
        if slot >= table.len() {
            shard += 1;
            if shard == SHARDS {
                return Ok((keys, 0));
            }
            table = db.core().index.table(shard);
            slot = 0;
            continue;
        }
        visited += 1;
        let log = &db.core().log;
        let read = |addr, scratch: &mut Vec<u8>| {
            log.with_record(addr, scratch, |r| live(r).then(|| r.key.to_vec()))
        };
        let key = match db
            .core()
            .index
            .address_at(&table, slot)
            .map(|addr| read(addr, &mut scratch))
        {
            // Compaction moved the record and deleted its segment since the
            // slot was read: the slot now points at the copy.
            Some(Err(e)) if e.is_missing_file() => match db.core().index.address_at(&table, slot) {
                Some(addr) => read(addr, &mut scratch)?,
                None => None,
            },
            Some(read) => read?,
            None => None,
        };
        keys.extend(key);
        slot += 1;
    }
    Ok((keys, cursor(shard, table.generation(), slot)))
}
