//! The emberkv store as the commands see it: the [`Db`] plus per-key
//! lock stripes with their watched keys, and the multi-key operations the
//! engine has no call for (flush, random key, pattern listing).
//!
//! # Write locks
//! Many Redis commands read a key and then write it depending on what they
//! read (SET NX, GETSET, SET with GET, GETEX, EXPIRE GT, MSETNX). The
//! engine's [`Db::update`] is atomic but keeps the key's expiry, and a read
//! followed by a write is not atomic on its own, so the server serialises
//! all writes to a key with a striped lock: **every command that writes a
//! key holds that key's stripe while it reads and writes** (multi-key
//! commands take their stripes in index order, so they cannot deadlock).
//! Each write is still one engine call (one record, crash-atomic), or one
//! [`emberkv::WriteBatch`] for multi-key writes.
//!
//! # Watched keys (WATCH)
//! Each stripe keeps the keys of its stripe that some client watches,
//! each with the number of writes that changed it since it was first
//! watched ([`Watches`]). The write methods here count a change after the
//! engine call, while the writer still holds the stripe, and only when
//! the stripe has a watched key (an atomic load otherwise). WATCH
//! registers its keys and notes their counts; EXEC compares them with the
//! stripes locked: a change of a watched key since WATCH always shows, and
//! a write of another key never does (as in Redis, which keeps a table of
//! watched keys too). A counted change also sets each watcher's flag `d`
//! of CLIENT LIST (its EXEC will fail), as a flush does for the watchers
//! of the keys it removed.
//!
//! # Exclusive sections and isolated reads
//! EXEC, FLUSHDB and every multi-key write (MSET, MSETNX, DEL of several
//! keys, RENAME, COPY, BITOP: `Kv::lock_all`) run as an [`Exclusive`]
//! section: they lock every stripe they touch, in index order, for their
//! whole run, and count themselves in a gate (begun, ended). Reads take no lock: a read-only
//! command runs through [`Store::read`], which runs it lock-free when no
//! section was running before and none began during the read (three
//! atomic loads of a line only sections write), and otherwise again under
//! its keys' stripes, so it never sees half of an EXEC.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use emberkv::{Db, MAX_KEY_BYTES, Options, WriteBatch};
use parking_lot::{Mutex, MutexGuard};

/// Number of lock stripes (a power of two).
pub const STRIPES: usize = 4096;

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

/// One write of an atomic batch ([`Store::apply`], [`crate::kv::Kv::apply`]).
#[derive(Clone, Copy, Debug)]
pub enum Write<'a> {
    /// Sets the value, with the expiry (Unix ms) given, or none.
    Put(&'a [u8], Option<i64>),
    /// Removes the key.
    Remove,
}

/// One lock stripe: the lock a write of its keys holds, and its keys that
/// clients watch.
#[derive(Default)]
#[repr(align(16))]
struct Stripe {
    lock: Mutex<()>,
    /// Entries in `watched`, read without its lock by every write (while
    /// it holds the stripe, which a registration holds too).
    watched_keys: AtomicU32,
    /// Each watched key: its watchers and the writes that changed it.
    watched: Mutex<HashMap<Vec<u8>, Watch>>,
}

/// A watched key's watchers and changes.
#[derive(Debug)]
struct Watch {
    /// The watchers, by the address of their flag `d` of CLIENT LIST
    /// ([`Watches::register`]).
    watchers: HashMap<usize, Watcher>,
    /// Every watcher's flag is set already: a change has no one left to
    /// mark (flags are cleared only after their registrations are
    /// released), so a key written often under many watchers costs one
    /// pass over them, not one per write (a SET of a key 3,000 clients
    /// watched ran at a fifth of the rate when each write marked them all
    /// again).
    all_marked: bool,
    changes: u64,
}

/// One client's registration of a watched key.
#[derive(Debug)]
struct Watcher {
    /// The client's flag `d` (`ClientHandle::dirty_cas`).
    dirty: Arc<AtomicBool>,
    /// When the key was to expire, as of WATCH (Unix ms; `None` when it
    /// had no expiry or did not exist). Until a counted change, which
    /// marks the watcher anyway, that is when it expires.
    expires_at: Option<i64>,
}

impl Watch {
    /// Counts a change: every watcher's EXEC will fail, which CLIENT LIST
    /// shows as flag `d` (Redis's `CLIENT_DIRTY_CAS`).
    fn changed(&mut self) {
        self.changes += 1;
        self.mark_watchers();
    }

    fn mark_watchers(&mut self) {
        if !self.all_marked {
            for w in self.watchers.values() {
                w.dirty.store(true, Ordering::Relaxed);
            }
            self.all_marked = true;
        }
    }
}

/// The stripes' tables of watched keys, shared with the sessions that
/// watch (a session's watched keys are given back when it lets go of
/// them, however it ends).
#[derive(Clone)]
pub struct Watches(Arc<[Stripe]>);

impl std::fmt::Debug for Watches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watches").finish_non_exhaustive()
    }
}

impl Watches {
    /// Registers one more watcher of `key` and returns the count of its
    /// changes, which [`Watches::changes`] compares later. Each later
    /// change of the key sets `dirty` (the watcher's flag `d` of CLIENT
    /// LIST) until [`Watches::release`], and so does its removal by a flush
    /// ([`Store::flush`]), or its expiry at `expires_at` (Unix ms: the
    /// expiry of the key, if it is present now and has one; see
    /// [`Store::mark_expired_watches`]). The caller holds the key's stripe
    /// (no write of it is half done), and registers a key once per flag.
    pub fn register(&self, key: &[u8], dirty: &Arc<AtomicBool>, expires_at: Option<i64>) -> u64 {
        let stripe = &self.0[stripe_of(key)];
        let mut watched = stripe.watched.lock();
        let watch = watched.entry(key.to_vec()).or_insert_with(|| {
            stripe.watched_keys.fetch_add(1, Ordering::Relaxed);
            Watch {
                watchers: HashMap::new(),
                all_marked: false,
                changes: 0,
            }
        });
        let watcher = Watcher {
            dirty: Arc::clone(dirty),
            expires_at,
        };
        watch.watchers.insert(Arc::as_ptr(dirty) as usize, watcher);
        watch.all_marked = false;
        watch.changes
    }

    /// The count of changes of `key`, which the caller watches (it holds a
    /// registration) and whose stripe it holds.
    pub fn changes(&self, key: &[u8]) -> u64 {
        let stripe = &self.0[stripe_of(key)];
        stripe
            .watched
            .lock()
            .get(key)
            .map_or(u64::MAX, |w| w.changes)
    }

    /// Gives back the registration of `key` made with `dirty`; the key
    /// leaves the table with its last watcher.
    pub fn release(&self, key: &[u8], dirty: &Arc<AtomicBool>) {
        let stripe = &self.0[stripe_of(key)];
        let mut watched = stripe.watched.lock();
        if let Some(watch) = watched.get_mut(key) {
            watch.watchers.remove(&(Arc::as_ptr(dirty) as usize));
            if watch.watchers.is_empty() {
                watched.remove(key);
                stripe.watched_keys.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }
}

/// Exclusive sections begun and ended, on a cache line of their own (only
/// sections write it; every isolated read loads it).
#[derive(Default)]
#[repr(align(64))]
struct Gate {
    begun: AtomicU64,
    ended: AtomicU64,
}

/// The store, its lock stripes and the gate of exclusive sections.
pub struct Store {
    db: Db,
    path: PathBuf,
    stripes: Arc<[Stripe]>,
    gate: Gate,
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

/// The stripes of an [`Exclusive`] section, locked; when dropped it
/// unlocks them and counts the section as ended.
pub struct Exclusive<'a> {
    store: &'a Store,
    guards: Vec<MutexGuard<'a, ()>>,
}

impl Drop for Exclusive<'_> {
    fn drop(&mut self) {
        self.guards.clear();
        self.store.gate.ended.fetch_add(1, Ordering::Release);
    }
}

/// The stripe of `key`: an index below [`STRIPES`].
pub fn stripe_of(key: &[u8]) -> usize {
    xxhash_rust::xxh3::xxh3_64(key) as usize & (STRIPES - 1)
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
        Store::open_with(path, Options::default().hot_bytes(hot_bytes))
    }

    /// Opens (or creates) the store in directory `path` with `options`
    /// (the server's come from [`crate::config::Config::engine_options`]).
    ///
    /// # Errors
    /// As for [`Db::open`].
    pub fn open_with(path: &Path, options: Options) -> emberkv::Result<Store> {
        let db = Db::open(path, options)?;
        let stripes = (0..STRIPES).map(|_| Stripe::default()).collect();
        Ok(Store {
            db,
            path: path.to_path_buf(),
            stripes,
            gate: Gate::default(),
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

    /// Locks `key` for a read-then-write.
    pub fn lock(&self, key: &[u8]) -> MutexGuard<'_, ()> {
        self.stripes[stripe_of(key)].lock.lock()
    }

    /// Locks several keys, stripes in index order.
    pub fn lock_all<'k>(&self, keys: impl Iterator<Item = &'k [u8]>) -> Vec<MutexGuard<'_, ()>> {
        let mut idx: Vec<usize> = keys.map(stripe_of).collect();
        idx.sort_unstable();
        idx.dedup();
        idx.into_iter()
            .map(|i| self.stripes[i].lock.lock())
            .collect()
    }

    /// Begins an exclusive section over `stripes` (any order, repeats
    /// allowed): counts it in the gate, then locks them in index order.
    pub fn exclusive(&self, stripes: impl IntoIterator<Item = usize>) -> Exclusive<'_> {
        let mut idx: Vec<usize> = stripes.into_iter().map(|i| i & (STRIPES - 1)).collect();
        idx.sort_unstable();
        idx.dedup();
        self.gate.begun.fetch_add(1, Ordering::SeqCst);
        let guards = idx
            .into_iter()
            .map(|i| self.stripes[i].lock.lock())
            .collect();
        Exclusive {
            store: self,
            guards,
        }
    }

    /// Begins an exclusive section over every stripe (FLUSHDB, and an EXEC
    /// that reads or writes the whole keyspace).
    pub fn exclusive_all(&self) -> Exclusive<'_> {
        self.exclusive(0..STRIPES)
    }

    /// Runs the read `f` of `key` isolated from exclusive sections: it sees
    /// the store as it was before or after each EXEC, never in between.
    #[inline]
    pub fn read<T>(&self, key: &[u8], f: impl FnMut() -> T) -> T {
        self.read_all(std::iter::once(key), f)
    }

    /// Runs the read `f` of `keys` isolated from exclusive sections, as
    /// [`Store::read`]; `f` may run twice (the first result is dropped).
    #[inline]
    pub fn read_all<'k, T>(
        &self,
        keys: impl Iterator<Item = &'k [u8]>,
        mut f: impl FnMut() -> T,
    ) -> T {
        // `ended` first: if `begun` then equals it, no section was running
        // when `ended` was loaded, and none began before `begun` was.
        let ended = self.gate.ended.load(Ordering::Acquire);
        let begun = self.gate.begun.load(Ordering::Acquire);
        if begun == ended {
            let t = f();
            // A section whose writes `f` saw counted itself in `begun`
            // before writing, so this load sees the count move.
            if self.gate.begun.load(Ordering::Acquire) == begun {
                return t;
            }
        }
        self.read_locked(keys, f)
    }

    /// A read while a section runs: under the keys' stripes.
    #[cold]
    #[inline(never)]
    fn read_locked<'k, T>(
        &self,
        keys: impl Iterator<Item = &'k [u8]>,
        mut f: impl FnMut() -> T,
    ) -> T {
        let _guards = self.lock_all(keys);
        f()
    }

    /// The tables of watched keys.
    pub fn watches(&self) -> Watches {
        Watches(Arc::clone(&self.stripes))
    }

    /// Counts a change of `key` if a client watches it; the caller holds
    /// the stripe and has made the change.
    pub fn touch(&self, key: &[u8]) {
        let stripe = &self.stripes[stripe_of(key)];
        // Registrations hold the stripe too: no stale zero here.
        if stripe.watched_keys.load(Ordering::Relaxed) != 0
            && let Some(watch) = stripe.watched.lock().get_mut(key)
        {
            watch.changed();
        }
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

    /// The expiry (Unix ms) of `key`: `None` when absent, `Some(None)` when
    /// it has none.
    ///
    /// # Errors
    /// As for [`Db::get`].
    pub fn expiry(&self, key: &[u8]) -> emberkv::Result<Option<Option<i64>>> {
        Ok(self.db.expiry(key)?.map(|at| at.map(unix_ms)))
    }

    /// Writes `value` under `key` with `expiry`; a deadline already past
    /// removes the key instead (as Redis does). Counts a change of the key
    /// either way. The caller holds the key's stripe.
    ///
    /// # Errors
    /// As for [`Db::insert`].
    pub fn put(&self, key: &[u8], value: &[u8], expiry: Expiry) -> emberkv::Result<()> {
        match expiry {
            Expiry::Never => self.db.insert(key, value)?,
            // The key ends absent, but the SET counts as a change of it
            // for WATCH (Redis's setKey signals it before the expiry
            // removes it), whether or not it was there.
            Expiry::AtMs(at) if at <= now_ms() => {
                self.db.remove(key)?;
            }
            Expiry::AtMs(at) => self.db.insert_with_expiry(key, value, system_time(at))?,
            Expiry::Keep => {
                self.db.update(key, |_| Some(value.to_vec()))?;
            }
        }
        self.touch(key);
        Ok(())
    }

    /// Removes `key`; returns whether it was there. The caller holds the
    /// stripe.
    ///
    /// # Errors
    /// As for [`Db::remove`].
    pub fn remove(&self, key: &[u8]) -> emberkv::Result<bool> {
        // No key longer than the engine takes exists: none to remove (the
        // engine would refuse the call), as reads find none.
        if key.len() > MAX_KEY_BYTES {
            return Ok(false);
        }
        let removed = self.db.remove(key)?;
        if removed {
            self.touch(key);
        }
        Ok(removed)
    }

    /// [`Db::update`] of `key` to the first result of `f`, keeping its
    /// expiry; counts a change of the key when the second result is true
    /// (when false, `f` hands back the current value, and the engine writes
    /// nothing). The caller holds the stripe.
    ///
    /// # Errors
    /// As for [`Db::update`].
    pub fn update(
        &self,
        key: &[u8],
        f: impl FnOnce(Option<&[u8]>) -> (Option<Vec<u8>>, bool),
    ) -> emberkv::Result<Option<Vec<u8>>> {
        let mut changed = false;
        let new = self.db.update(key, |old| {
            let (new, change) = f(old);
            changed = change;
            new
        })?;
        if changed {
            self.touch(key);
        }
        Ok(new)
    }

    /// Sets the expiry of `key` to Unix ms `at`, removing it when `at` is
    /// past; returns whether the key existed. The caller holds the stripe.
    ///
    /// # Errors
    /// As for [`Db::insert`].
    pub fn expire_at(&self, key: &[u8], at: i64) -> emberkv::Result<bool> {
        if at <= now_ms() {
            return self.remove(key);
        }
        let existed = self.db.expire_at(key, system_time(at))?;
        if existed {
            self.touch(key);
        }
        Ok(existed)
    }

    /// Clears the expiry of `key`; returns whether it had one. The caller
    /// holds the stripe.
    ///
    /// # Errors
    /// As for [`Db::persist`].
    pub fn persist(&self, key: &[u8]) -> emberkv::Result<bool> {
        if key.len() > MAX_KEY_BYTES {
            return Ok(false);
        }
        let had = self.db.persist(key)?;
        if had {
            self.touch(key);
        }
        Ok(had)
    }

    /// Applies `ops` as one atomic [`WriteBatch`]; the caller holds every
    /// key's stripe.
    ///
    /// # Errors
    /// As for [`Db::apply_batch`].
    pub fn apply(&self, ops: &[(&[u8], Write<'_>)]) -> emberkv::Result<()> {
        let mut batch = WriteBatch::new();
        for (key, write) in ops {
            match *write {
                Write::Put(v, None) => batch.insert(key, v),
                Write::Put(v, Some(at)) => batch.insert_with_expiry(key, v, system_time(at)),
                Write::Remove => batch.remove(key),
            };
        }
        self.db.apply_batch(&batch)?;
        for (key, _) in ops {
            self.touch(key);
        }
        Ok(())
    }

    /// Removes every key, expired ones included, and returns how many were
    /// live: [`Db::clear`], which clears the engine's index shard by shard.
    /// The caller holds every stripe (an [`Exclusive`] section), so no
    /// command sees it half done. The watchers of each watched key it
    /// removed get their flag `d`, as Redis 7's `touchAllWatchedKeysInDb`
    /// sets it (their EXEC fails: see `cmd::multi`). That is every watcher
    /// of such a key: one that found it absent at WATCH was marked by the
    /// write that created it since.
    ///
    /// # Errors
    /// As for [`Db::clear`].
    pub fn flush(&self) -> emberkv::Result<u64> {
        let mut existed = Vec::new();
        for stripe in self.stripes.iter() {
            if stripe.watched_keys.load(Ordering::Relaxed) != 0 {
                for key in stripe.watched.lock().keys() {
                    // The flag is CLIENT LIST's; EXEC checks the keys
                    // itself: a read that fails marks no one.
                    if self.db.contains_key(key).unwrap_or(false) {
                        existed.push(key.clone());
                    }
                }
            }
        }
        let cleared = self.db.clear();
        for key in existed {
            if !self.db.contains_key(&key).unwrap_or(true)
                && let Some(watch) = self.stripes[stripe_of(&key)].watched.lock().get_mut(&key)
            {
                watch.mark_watchers();
            }
        }
        cleared
    }

    /// Sets flag `d` for the watchers of each watched key that had an
    /// expiry at their WATCH which has passed (and so expired, unless a
    /// counted change marked them already), as redis-server sets it when
    /// it deletes an expired key. Called before CLIENT LIST and CLIENT
    /// INFO describe clients; compares the expiries noted at WATCH with
    /// the clock and reads nothing from the store: 12 ms a call with
    /// 200,000 watched keys, measured (reading each key took 132 ms).
    /// EXEC checks the keys themselves.
    pub fn mark_expired_watches(&self) {
        let now = now_ms();
        for stripe in self.stripes.iter() {
            if stripe.watched_keys.load(Ordering::Relaxed) == 0 {
                continue;
            }
            for watch in stripe.watched.lock().values() {
                if watch.all_marked {
                    continue;
                }
                for w in watch.watchers.values() {
                    if w.expires_at.is_some_and(|at| at <= now) {
                        w.dirty.store(true, Ordering::Relaxed);
                    }
                }
            }
        }
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

    /// Makes durable every write a read may have seen, acknowledged or not
    /// (`appendfsync always`: a round of reads sends its replies after
    /// this). Two atomic loads when nothing waits for a sync; otherwise it
    /// joins the engine's group commit. Unlike [`Store::sync`], not a save.
    ///
    /// # Errors
    /// As for [`Db::sync`].
    pub fn sync_visible(&self) -> emberkv::Result<()> {
        self.db.sync()
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

    /// Flag `d` of CLIENT LIST: set for each watcher of a key a write
    /// changed, that a flush removed, or that expired, and for no one else;
    /// a released registration hears of no change. (A flag is cleared only
    /// once its registrations are released, so each phase takes new ones.)
    #[test]
    fn a_change_a_flush_or_an_expiry_marks_the_watchers_of_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), 64 << 20).unwrap();
        let watches = store.watches();
        let flags = || [(); 3].map(|()| Arc::new(AtomicBool::new(false)));
        let marked = |d: &Arc<AtomicBool>| d.load(Ordering::Relaxed);
        let [a, b, c] = flags();
        watches.register(b"k", &a, None);
        watches.register(b"k", &b, None);
        watches.register(b"other", &c, None);
        store.put(b"unwatched", b"v", Expiry::Never).unwrap();
        assert!(!marked(&a) && !marked(&b) && !marked(&c));
        store.put(b"k", b"v", Expiry::Never).unwrap();
        assert!(marked(&a) && marked(&b) && !marked(&c));
        // A watcher registered after the others were marked is marked by
        // the next change too.
        let [late, released, _] = flags();
        watches.register(b"k", &late, None);
        watches.register(b"k", &released, None);
        watches.release(b"k", &released);
        store.put(b"k", b"w", Expiry::Never).unwrap();
        assert!(marked(&late) && !marked(&released));
        for f in [&a, &b, &late] {
            watches.release(b"k", f);
        }
        watches.release(b"other", &c);
        assert_eq!(watches.changes(b"k"), u64::MAX, "the key left the table");

        // A flush marks the watchers of the keys it removed: "other" did
        // not exist, so its watcher's EXEC would still run.
        let [a, c, _] = flags();
        watches.register(b"k", &a, None);
        watches.register(b"other", &c, None);
        store.flush().unwrap();
        assert!(marked(&a) && !marked(&c));
        watches.release(b"k", &a);
        watches.release(b"other", &c);

        // An expiry marks the watchers that noted it at WATCH, once CLIENT
        // LIST asks.
        let at = now_ms() + 50;
        store.put(b"e", b"v", Expiry::AtMs(at)).unwrap();
        let [a, b, _] = flags();
        watches.register(b"e", &a, Some(at));
        watches.register(b"e", &b, None);
        store.mark_expired_watches();
        assert!(!marked(&a) && !marked(&b), "not expired yet");
        while store.db().contains_key(b"e").unwrap() || now_ms() < at {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        store.mark_expired_watches();
        assert!(marked(&a) && !marked(&b));
    }

    #[test]
    fn lock_all_dedups_stripes() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), 64 << 20).unwrap();
        let keys: Vec<&[u8]> = vec![b"a", b"a", b"b"];
        let guards = store.lock_all(keys.into_iter());
        assert!(guards.len() <= 2);
    }

    #[test]
    fn writes_that_change_a_watched_key_count_once_each() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), 64 << 20).unwrap();
        let watches = store.watches();
        let (first, second) = (Arc::default(), Arc::default());
        assert_eq!(watches.register(b"k", &first, None), 0);
        let mut last = 0;
        let mut changed = |store: &Store| {
            let now = store.watches().changes(b"k");
            let moved = now != last;
            last = now;
            moved
        };
        store.put(b"k", b"v", Expiry::Never).unwrap();
        assert!(changed(&store));
        assert!(store.expire_at(b"k", now_ms() + 100_000).unwrap());
        assert!(changed(&store));
        assert!(store.persist(b"k").unwrap());
        assert!(changed(&store));
        assert!(!store.persist(b"k").unwrap());
        assert!(!changed(&store), "nothing to persist: no change");
        store.update(b"k", |_| (Some(b"w".to_vec()), true)).unwrap();
        assert!(changed(&store));
        store
            .update(b"k", |v| (v.map(<[u8]>::to_vec), false))
            .unwrap();
        assert!(!changed(&store), "an update that counts no change");
        assert!(store.remove(b"k").unwrap());
        assert!(changed(&store));
        assert!(!store.remove(b"k").unwrap());
        assert!(!store.expire_at(b"k", now_ms() + 100_000).unwrap());
        assert!(!changed(&store), "removing or expiring a missing key");
        store
            .apply(&[(b"k", Write::Put(b"x", None)), (b"other", Write::Remove)])
            .unwrap();
        assert!(changed(&store));
        store.flush().unwrap();
        assert!(!changed(&store), "a flush: WATCH finds the keys gone");
        // Another key of the same stripe, or one nobody watches, counts
        // nowhere.
        let neighbour = (0u32..)
            .map(|i| format!("n{i}").into_bytes())
            .find(|n| stripe_of(n) == stripe_of(b"k"))
            .unwrap();
        store.put(&neighbour, b"v", Expiry::Never).unwrap();
        assert!(!changed(&store), "a write of another key of the stripe");
        // The key leaves the table with its last watcher.
        assert_eq!(
            watches.register(b"k", &second, None),
            6,
            "six changes counted above"
        );
        watches.release(b"k", &first);
        watches.release(b"k", &second);
        assert_eq!(store.stripes[stripe_of(b"k")].watched.lock().len(), 0);
        assert_eq!(watches.register(b"k", &first, None), 0);
    }

    #[test]
    fn a_read_never_sees_an_exclusive_section_half_done() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), 64 << 20).unwrap();
        store
            .apply(&[
                (b"a", Write::Put(b"0", None)),
                (b"b", Write::Put(b"0", None)),
            ])
            .unwrap();
        let read = |store: &Store| {
            let keys: [&[u8]; 2] = [b"a", b"b"];
            store.read_all(keys.into_iter(), || {
                (store.db().get(b"a").unwrap(), store.db().get(b"b").unwrap())
            })
        };
        assert_eq!(read(&store), (Some(b"0".to_vec()), Some(b"0".to_vec())));
        std::thread::scope(|s| {
            let section = store.exclusive([stripe_of(b"a"), stripe_of(b"b")]);
            // Begun before the reader starts: it waits for the section.
            let reader = s.spawn(|| read(&store));
            store.put(b"a", b"1", Expiry::Never).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(20));
            store.put(b"b", b"1", Expiry::Never).unwrap();
            drop(section);
            let seen = reader.join().unwrap();
            assert_eq!(seen, (Some(b"1".to_vec()), Some(b"1".to_vec())));
        });
        // Readers and sections racing: every read sees a == b.
        std::thread::scope(|s| {
            let writer = s.spawn(|| {
                for i in 2..300u32 {
                    let v = i.to_string();
                    let _section = store.exclusive([stripe_of(b"a"), stripe_of(b"b")]);
                    store.put(b"a", v.as_bytes(), Expiry::Never).unwrap();
                    store.put(b"b", v.as_bytes(), Expiry::Never).unwrap();
                }
            });
            while !writer.is_finished() {
                let (a, b) = read(&store);
                assert_eq!(a, b);
            }
        });
    }
}
