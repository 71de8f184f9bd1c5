//! The emberkv store as the commands see it: the [`Db`] plus per-key
//! write locks, and the multi-key operations the engine has no call for
//! (flush, random key, pattern listing).
//!
//! # Write locks
//! Many Redis commands read a key and then write it depending on what they
//! read (SET NX, GETSET, SET with GET, GETEX, EXPIRE GT, MSETNX). The
//! engine's [`Db::update`] is atomic but keeps the key's expiry, and a read
//! followed by a write is not atomic on its own, so the server serialises
//! all writes to a key with a striped lock: **every command that writes a
//! key holds that key's stripe while it reads and writes** (multi-key
//! commands take their stripes in index order, so they cannot deadlock).
//! Reads take no lock. Each write is still one engine call (one record,
//! crash-atomic), or one [`emberkv::WriteBatch`] for multi-key writes.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use emberkv::{Db, Options};
use parking_lot::{Mutex, MutexGuard};

/// Number of lock stripes (a power of two).
const STRIPES: usize = 4096;

/// How a write sets the key's expiry.
#[derive(Clone, Copy, Debug)]
pub enum Expiry {
    /// No expiry (a plain SET clears any).
    Never,
    /// Expire at this Unix time in milliseconds.
    AtMs(i64),
    /// Keep the key's current expiry (KEEPTTL).
    Keep,
}

/// The store and its write locks.
pub struct Store {
    db: Db,
    path: PathBuf,
    stripes: Box<[Mutex<()>]>,
    /// Unix seconds of the last successful SAVE (or of the open).
    last_save: AtomicU64,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Unix milliseconds as a [`SystemTime`] (clamped at the epoch).
pub fn system_time(ms: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms.max(0) as u64)
}

/// A [`SystemTime`] as Unix milliseconds.
pub fn unix_ms(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_millis().min(i64::MAX as u128) as i64,
        Err(e) => -(e.duration().as_millis().min(i64::MAX as u128) as i64),
    }
}

impl Store {
    /// Opens (or creates) the store in directory `path` with a hot tier of
    /// `hot_bytes`. The engine always
    /// runs with background flushing; `appendfsync always` is the server's
    /// job (see [`crate::connection`]).
    ///
    /// # Errors
    /// As for [`Db::open`].
    pub fn open(path: &Path, hot_bytes: usize) -> emberkv::Result<Store> {
        let db = Db::open(path, Options::default().hot_bytes(hot_bytes))?;
        let stripes = (0..STRIPES).map(|_| Mutex::new(())).collect();
        Ok(Store {
            db,
            path: path.to_path_buf(),
            stripes,
            last_save: AtomicU64::new((now_ms() / 1000) as u64),
        })
    }

    /// The engine.
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// The store's directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn stripe(key: &[u8]) -> usize {
        xxhash_rust::xxh3::xxh3_64(key) as usize & (STRIPES - 1)
    }

    /// Locks `key` for a read-then-write.
    pub fn lock(&self, key: &[u8]) -> MutexGuard<'_, ()> {
        self.stripes[Self::stripe(key)].lock()
    }

    /// Locks several keys, stripes in index order.
    pub fn lock_all<'k>(&self, keys: impl Iterator<Item = &'k [u8]>) -> Vec<MutexGuard<'_, ()>> {
        let mut idx: Vec<usize> = keys.map(Self::stripe).collect();
        idx.sort_unstable();
        idx.dedup();
        idx.into_iter().map(|i| self.stripes[i].lock()).collect()
    }

    /// The value and expiry (Unix ms) of `key`, read consistently; the
    /// caller holds the key's stripe.
    ///
    /// # Errors
    /// As for [`Db::get`].
    pub fn entry(&self, key: &[u8]) -> emberkv::Result<Option<(Vec<u8>, Option<i64>)>> {
        let Some(value) = self.db.get(key)? else {
            return Ok(None);
        };
        // The key may expire between the two reads: then it is absent.
        Ok(self.db.expiry(key)?.map(|at| (value, at.map(unix_ms))))
    }

    /// Writes `value` under `key` with `expiry`; a deadline already past
    /// removes the key instead (as Redis does). The caller holds the key's
    /// stripe.
    ///
    /// # Errors
    /// As for [`Db::insert`].
    pub fn put(&self, key: &[u8], value: &[u8], expiry: Expiry) -> emberkv::Result<()> {
        match expiry {
            Expiry::Never => self.db.insert(key, value),
            Expiry::AtMs(at) if at <= now_ms() => self.db.remove(key).map(drop),
            Expiry::AtMs(at) => self.db.insert_with_expiry(key, value, system_time(at)),
            Expiry::Keep => self.db.update(key, |_| Some(value.to_vec())).map(drop),
        }
    }

    /// Sets the expiry of `key` to Unix ms `at`, removing it when `at` is
    /// past; returns whether the key existed. The caller holds the stripe.
    ///
    /// # Errors
    /// As for [`Db::insert`].
    pub fn expire_at(&self, key: &[u8], at: i64) -> emberkv::Result<bool> {
        if at <= now_ms() {
            self.db.remove(key)
        } else {
            self.db.expire_at(key, system_time(at))
        }
    }

    /// Removes every key, expired ones included, and returns how many were
    /// live: [`Db::clear`], which clears the engine's index shard by shard
    /// (not atomic as a whole: a concurrent reader may see some keys gone
    /// and others not yet).
    ///
    /// # Errors
    /// As for [`Db::clear`].
    pub fn flush(&self) -> emberkv::Result<u64> {
        self.db.clear()
    }

    /// Every live key, each once.
    ///
    /// # Errors
    /// As for [`Db::scan`].
    pub fn all_keys(&self) -> emberkv::Result<Vec<Vec<u8>>> {
        self.keys_matching(b"*")
    }

    /// The live keys matching the glob `pattern`, each once.
    ///
    /// # Errors
    /// As for [`Db::scan`].
    pub fn keys_matching(&self, pattern: &[u8]) -> emberkv::Result<Vec<Vec<u8>>> {
        if crate::glob::is_literal(pattern) {
            let found = self.db.contains_key(pattern)?;
            return Ok(if found {
                vec![pattern.to_vec()]
            } else {
                vec![]
            });
        }
        let all = pattern == b"*";
        let mut seen = std::collections::HashSet::new();
        let mut cursor = 0;
        loop {
            let (keys, next) = self.db.scan(cursor, 4096)?;
            for key in keys {
                if all || crate::glob::matches(pattern, &key) {
                    // A scan may return a key twice when its shard grew
                    // meanwhile; KEYS lists each once.
                    seen.insert(key);
                }
            }
            if next == 0 {
                return Ok(seen.into_iter().collect());
            }
            cursor = next;
        }
    }

    /// A random live key, or `None` when the store is empty: a scan from a
    /// random shard (not uniform over keys: keys in sparse parts of the
    /// index are likelier).
    ///
    /// # Errors
    /// As for [`Db::scan`].
    pub fn random_key(&self) -> emberkv::Result<Option<Vec<u8>>> {
        if self.db.is_empty() {
            return Ok(None);
        }
        // The engine's cursor keeps the shard in its top 8 bits; a shard
        // number past the last is clamped to the last shard.
        let start = fastrand::u64(0..256) << 56;
        let mut cursor = start;
        let mut wrapped = false;
        loop {
            let (keys, next) = self.db.scan(cursor, 64)?;
            if !keys.is_empty() {
                return Ok(Some(keys[fastrand::usize(0..keys.len())].clone()));
            }
            if next == 0 {
                if wrapped {
                    return Ok(None);
                }
                wrapped = true;
            }
            cursor = next;
        }
    }

    /// Makes every acknowledged write durable (SAVE, appendfsync always).
    ///
    /// # Errors
    /// As for [`Db::sync`].
    pub fn sync(&self) -> emberkv::Result<()> {
        self.db.sync()?;
        self.last_save
            .store((now_ms() / 1000) as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Unix seconds of the last successful [`Store::sync`] or of the open.
    pub fn last_save(&self) -> u64 {
        self.last_save.load(Ordering::Relaxed)
    }

    /// Closes the store: flushes, fdatasyncs and releases its lock.
    ///
    /// # Errors
    /// As for [`Db::close`].
    pub fn close(self) -> emberkv::Result<()> {
        self.db.close()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_entry_expire_and_flush() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s"), 64 << 20).unwrap();
        store.put(b"a", b"1", Expiry::Never).unwrap();
        let later = now_ms() + 100_000;
        store.put(b"b", b"2", Expiry::AtMs(later)).unwrap();
        store.put(b"b", b"3", Expiry::Keep).unwrap();
        assert_eq!(store.entry(b"a").unwrap(), Some((b"1".to_vec(), None)));
        let (v, at) = store.entry(b"b").unwrap().unwrap();
        assert_eq!(v, b"3");
        assert!((at.unwrap() - later).abs() <= 1, "KEEPTTL kept the expiry");
        store.put(b"c", b"x", Expiry::AtMs(now_ms() - 1)).unwrap();
        assert_eq!(store.entry(b"c").unwrap(), None);
        assert!(!store.expire_at(b"missing", later).unwrap());
        assert!(store.expire_at(b"a", 1).unwrap());
        assert_eq!(store.entry(b"a").unwrap(), None);

        for i in 0..2000 {
            store
                .put(format!("k{i}").as_bytes(), b"v", Expiry::Never)
                .unwrap();
        }
        let mut keys = store.keys_matching(b"k1??").unwrap();
        keys.sort();
        assert_eq!(keys.len(), 100);
        assert_eq!(store.keys_matching(b"k7").unwrap(), vec![b"k7".to_vec()]);
        assert!(store.random_key().unwrap().is_some());
        assert_eq!(store.flush().unwrap(), 2001);
        assert!(store.db().is_empty());
        assert_eq!(store.random_key().unwrap(), None);
        store.close().unwrap();
    }

    #[test]
    fn lock_all_dedups_stripes() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), 64 << 20).unwrap();
        let keys: Vec<&[u8]> = vec![b"a", b"a", b"b"];
        let guards = store.lock_all(keys.into_iter());
        assert!(guards.len() <= 2);
    }
}
