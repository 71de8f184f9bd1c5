//! [`Db`]: the public face of the store.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::flusher::Flusher;
use crate::index::{Index, KeyHasher, Slot};
use crate::log::Log;
use crate::options::Options;
use crate::record::{FLAG_TOMBSTONE, HEADER_BYTES};
use crate::storage::Segments;
use crate::{MAX_KEY_BYTES, MAX_VALUE_BYTES, meta, recovery};

/// An open emberkv store: a hash index in memory over a log on disk.
///
/// `Db` is `Send + Sync`: share it between threads with an `Arc` (or
/// scoped threads). Reads take no lock; writes to keys in different index
/// shards proceed in parallel.
///
/// Dropping a `Db` flushes and fdatasyncs everything and releases the
/// store's lock; call [`Db::close`] instead to see an error.
pub struct Db {
    index: Index,
    log: Arc<Log>,
    hasher: KeyHasher,
    sync_writes: bool,
    flusher: Mutex<Option<Flusher>>,
    /// Holds the store's exclusive `flock` until the `Db` is gone.
    _lock: File,
}

const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Db>();
};

impl Db {
    /// Opens the store in directory `path`, creating it if missing, and
    /// recovers it: the index is rebuilt by replaying the segment files, and
    /// a torn or corrupt tail of the newest segment is cut off.
    ///
    /// # Errors
    /// - [`Error::Locked`] when another handle (this process or another)
    ///   has the store open;
    /// - [`Error::InvalidOptions`] for options out of their documented range;
    /// - [`Error::Corruption`] for damage recovery cannot cut off (a sealed
    ///   segment, a missing segment, the meta file);
    /// - [`Error::IncompatibleFormat`] for a store of another format version;
    /// - [`Error::Io`] for failed system calls.
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        Self::open_with(path.as_ref(), options, KeyHasher::new)
    }

    fn open_with(
        dir: &Path,
        options: Options,
        hasher: impl FnOnce(u64) -> KeyHasher,
    ) -> Result<Db> {
        options.validate()?;
        let lock = meta::lock(dir)?;
        let meta = meta::load_or_create(dir, options.segment_bytes.trailing_zeros())?;
        let hasher = hasher(meta.hash_seed);
        let storage = Segments::new(dir, meta.segment_bits, meta.store_id);
        let index = Index::with_capacity(options.key_capacity);
        let tail = recovery::replay(&storage, &index, &hasher)?;
        let log = Arc::new(Log::new(storage, options.hot_bytes, tail));
        let flusher = Flusher::spawn(Arc::clone(&log), options.flush_interval)?;
        Ok(Db {
            index,
            log,
            hasher,
            sync_writes: options.sync_writes,
            flusher: Mutex::new(Some(flusher)),
            _lock: lock,
        })
    }

    /// Inserts `value` under `key`, replacing any previous value.
    ///
    /// With `sync_writes` it returns after an fdatasync covering the record;
    /// otherwise once the record is in the hot tier (durable within the
    /// flush window, see the crate docs).
    ///
    /// # Errors
    /// [`Error::KeyTooLarge`] above [`MAX_KEY_BYTES`], [`Error::ValueTooLarge`]
    /// above [`MAX_VALUE_BYTES`] (or what one segment holds); nothing is
    /// written then. [`Error::Closed`] after a failed write or fdatasync;
    /// [`Error::Io`].
    pub fn insert(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.check_sizes(key, value)?;
        self.write(key, value, 0)?;
        Ok(())
    }

    /// Removes `key`; returns whether it was present. A present key gets a
    /// tombstone record (durable as an insert is); an absent one writes
    /// nothing.
    ///
    /// # Errors
    /// As for [`Db::insert`].
    pub fn remove(&self, key: &[u8]) -> Result<bool> {
        self.check_sizes(key, b"")?;
        self.write(key, b"", FLAG_TOMBSTONE)
    }

    /// Appends a record for `key` and points the index at it (or removes
    /// the key, for a tombstone). Returns whether the key was present.
    fn write(&self, key: &[u8], value: &[u8], flags: u8) -> Result<bool> {
        let hash = self.hasher.hash(key);
        let mut scratch = Vec::new();
        let end = {
            let mut writer = self.index.writer(hash);
            let slot = writer.slot(
                |addr| self.log.with_record(addr, &mut scratch, |r| r.key == key),
                |addr| {
                    self.log
                        .with_record(addr, &mut Vec::new(), |r| self.hasher.hash(r.key))
                },
            )?;
            let present = matches!(slot, Slot::Occupied { .. });
            if flags & FLAG_TOMBSTONE != 0 {
                if !present {
                    return Ok(false);
                }
                self.log.append(flags, key, value)?;
                writer.clear(slot);
            } else {
                let addr = self.log.append(flags, key, value)?;
                writer.set(slot, addr);
            }
            (self.log.tail(), present)
        };
        if self.sync_writes {
            self.log.make_durable(end.0)?;
        }
        Ok(end.1)
    }

    fn check_sizes(&self, key: &[u8], value: &[u8]) -> Result<()> {
        if key.len() > MAX_KEY_BYTES {
            return Err(Error::KeyTooLarge {
                len: key.len(),
                max: MAX_KEY_BYTES,
            });
        }
        let max = MAX_VALUE_BYTES.min(self.log.max_record_bytes() - HEADER_BYTES - key.len());
        if value.len() > max {
            return Err(Error::ValueTooLarge {
                len: value.len(),
                max,
            });
        }
        Ok(())
    }

    /// Returns a copy of the value of `key`, or `None`.
    ///
    /// # Errors
    /// [`Error::Corruption`] when the record fails its checksum (a wrong
    /// value is never returned); [`Error::Io`].
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut out = Vec::new();
        Ok(self.get_into(key, &mut out)?.then_some(out))
    }

    /// Reads the value of `key` into `out` (replacing its contents) and
    /// returns `true`, or returns `false` when the key is absent (`out` is
    /// then unspecified). Allocates nothing for a key in the hot tier when
    /// `out` has the capacity; a cold read also reuses `out` as its buffer.
    ///
    /// # Errors
    /// As for [`Db::get`].
    pub fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        let hash = self.hasher.hash(key);
        let found = self
            .index
            .find(hash, |addr| self.log.read_value(addr, key, out))?;
        Ok(found == Some(true))
    }

    /// Whether `key` is present.
    ///
    /// # Errors
    /// As for [`Db::get`].
    pub fn contains_key(&self, key: &[u8]) -> Result<bool> {
        let hash = self.hasher.hash(key);
        let mut scratch = Vec::new();
        let found = self.index.find(hash, |addr| {
            self.log
                .with_record(addr, &mut scratch, |r| (r.key == key).then_some(()))
        })?;
        Ok(found.is_some())
    }

    /// Number of live keys.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether the store holds no key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Writes out and fdatasyncs every write acknowledged so far.
    ///
    /// # Errors
    /// [`Error::Io`] when the write or fdatasync fails (the store then
    /// refuses further writes), [`Error::Closed`] after an earlier failure.
    pub fn sync(&self) -> Result<()> {
        self.log.sync_all()
    }

    /// Flushes, fdatasyncs and closes the store, releasing its lock.
    ///
    /// # Errors
    /// As for [`Db::sync`].
    pub fn close(self) -> Result<()> {
        self.shutdown()
    }

    fn shutdown(&self) -> Result<()> {
        if let Some(mut flusher) = self.flusher.lock().take() {
            flusher.stop();
        }
        self.log.sync_all()
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        // Errors cannot be returned from drop; `close` reports them.
        let _ = self.shutdown();
    }
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db")
            .field("len", &self.len())
            .field("tail", &self.log.tail())
            .field("durable", &self.log.durable())
            .field("index_bytes", &self.index.memory_bytes())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sharing_hash_tag_and_slot_stay_apart_across_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let open = || {
            Db::open_with(dir.path(), Options::default(), |s| {
                KeyHasher::colliding(s, 0)
            })
        };
        let db = open().unwrap();
        for i in 0..50u32 {
            db.insert(format!("key{i}").as_bytes(), &i.to_le_bytes())
                .unwrap();
        }
        assert!(db.remove(b"key7").unwrap());
        db.insert(b"key8", b"eight").unwrap();
        let check = |db: &Db| {
            assert_eq!(db.len(), 49);
            assert_eq!(db.get(b"key7").unwrap(), None);
            assert_eq!(db.get(b"key8").unwrap().unwrap(), b"eight");
            assert_eq!(db.get(b"key9").unwrap().unwrap(), 9u32.to_le_bytes());
            assert_eq!(db.get(b"key50").unwrap(), None);
        };
        check(&db);
        db.close().unwrap();
        check(&open().unwrap());
    }
}
