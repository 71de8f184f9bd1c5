//! oxifaster (the Rust port of Microsoft FASTER) at its shipped defaults:
//! `FasterKvConfig::default()` over a `FileSystemDisk`, raw byte keys and
//! values (`RawBytes`), one session per client thread.
//!
//! oxifaster persists only through checkpoints, so `sync` and `close` take
//! one (fsynced: the harness sets `CheckpointDurability::FsyncOnCheckpoint`,
//! since its default does not fsync) and `open` recovers the newest. It has
//! no per-write sync or group commit, so it refuses FULL durability. In
//! out-of-cache mode the harness bounds its in-memory log.
//!
//! oxifaster 0.1.3 never evicts log pages to disk (its head address only
//! moves on an explicit `flush_and_shift_head`; its DEV.md says as much):
//! once the log outgrows `log_memory_size`, new pages reuse buffers that
//! still hold live records and those keys are lost without an error (with
//! an 8 MiB log, 20,000 inserts of 1 KiB left 11,996 keys unreadable). So
//! a write that could make the log wrap fails with an error instead.

use std::cell::RefCell;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};

use ::oxifaster::checkpoint::{find_latest_checkpoint, list_checkpoints};
use ::oxifaster::codec::RawBytes;
use ::oxifaster::device::FileSystemDisk;
use ::oxifaster::epoch::try_get_thread_id;
use ::oxifaster::status::Status;
use ::oxifaster::store::{CheckpointDurability, FasterKv, FasterKvConfig, Session};
use anyhow::{Context, Result, anyhow, bail};

use crate::engine::{Durability, Engine, OpenOptions, Unsupported, human_bytes};

type Store = FasterKv<RawBytes, RawBytes, FileSystemDisk>;
type StoreSession = Session<RawBytes, RawBytes, FileSystemDisk>;

/// Bytes a record takes in the log beyond its key and value, rounded up
/// (a record header and two lengths, aligned).
const RECORD_OVERHEAD: u64 = 64;

/// One thread's session on one open store.
struct Entry {
    /// The store's liveness token: dead once the adapter is closed.
    open: Weak<()>,
    session: StoreSession,
}

thread_local! {
    /// This thread's sessions, one per open store it has used. A session
    /// is bound to the thread that started it (oxifaster's epoch slot of
    /// that thread), so it never leaves this thread; it ends when its
    /// store is closed or the thread exits.
    static SESSIONS: RefCell<Vec<Entry>> = const { RefCell::new(Vec::new()) };
}

struct Oxifaster {
    store: Arc<Store>,
    /// Liveness token; this thread's and other threads' sessions on this
    /// store hold it weakly and are dropped once it is gone.
    open: Arc<()>,
    checkpoints: PathBuf,
    /// Pages of the in-memory log.
    log_pages: u32,
    page_bytes: u64,
    settings: String,
}

/// Opens (creating if needed) an oxifaster store in `dir/oxifaster`,
/// recovering its newest checkpoint if it has one.
pub fn open(dir: &Path, options: &OpenOptions) -> Result<Box<dyn Engine>> {
    if options.durability == Durability::Full {
        return Err(Unsupported(
            "FULL durability: oxifaster 0.1.3 persists writes only through checkpoints \
             (each a snapshot of its whole index and log), with no per-write sync or \
             group commit"
                .to_owned(),
        )
        .into());
    }
    let mut config = FasterKvConfig::default();
    let page_bytes = 1u64 << config.page_size_bits;
    let mut set = Vec::new();
    if let Some(budget) = options.resident_budget {
        if budget < 2 * page_bytes {
            return Err(Unsupported(format!(
                "a resident budget of {}: oxifaster's log needs at least two pages of {}",
                human_bytes(budget),
                human_bytes(page_bytes)
            ))
            .into());
        }
        set.push(format!(
            "log_memory_size = {} (its in-memory log, which holds every record; \
             default {})",
            human_bytes(budget),
            human_bytes(config.log_memory_size)
        ));
        config.log_memory_size = budget;
    }
    set.push(
        "checkpoint durability = FsyncOnCheckpoint (default FasterLike, which does not \
         fsync; sync() and close() must make writes durable)"
            .to_owned(),
    );
    let log_pages = u32::try_from(config.log_memory_size / page_bytes)?;

    let root = dir.join("oxifaster");
    let checkpoints = root.join("checkpoints");
    fs::create_dir_all(&checkpoints)?;
    let device = FileSystemDisk::single_file(root.join("hlog"))?;
    let store = match find_latest_checkpoint(&checkpoints) {
        Some(newest) => Store::recover(&checkpoints, newest.token, config, device)
            .with_context(|| format!("recovering checkpoint {}", newest.token))?,
        None => Store::new(config, device),
    };
    store.set_checkpoint_durability(CheckpointDurability::FsyncOnCheckpoint);
    Ok(Box::new(Oxifaster {
        store: Arc::new(store),
        open: Arc::new(()),
        checkpoints,
        log_pages,
        page_bytes,
        settings: super::describe(
            "FasterKvConfig::default(): 2^20 index buckets, a 512 MiB in-memory log of \
             4 MiB pages, no read cache; FileSystemDisk::single_file; RawBytes keys and \
             values; one session per client thread; sync() and close() take a full \
             checkpoint (LogCheckpointBackend::Snapshot, default) and delete the previous \
             one, open recovers the newest; a write fails once the log could outgrow its \
             memory, since 0.1.3 does not evict pages to disk",
            &set,
        ),
    }))
}

impl Oxifaster {
    /// Runs `op` with this thread's session on this store, starting one on
    /// first use; drops this thread's sessions on closed stores.
    fn with_session<R>(&self, op: impl FnOnce(&mut StoreSession) -> Result<R>) -> Result<R> {
        // Claim oxifaster's epoch slot for this thread before this
        // thread's session table exists: thread-local destructors run in
        // reverse order of first use, so at thread exit the sessions end
        // before the slot is freed for another thread.
        try_get_thread_id()
            .ok_or_else(|| anyhow!("no oxifaster thread slot left for this thread"))?;
        SESSIONS.with_borrow_mut(|sessions| {
            sessions.retain(|e| e.open.strong_count() > 0);
            let me = Arc::as_ptr(&self.open);
            let at = match sessions.iter().position(|e| e.open.as_ptr() == me) {
                Some(at) => at,
                None => {
                    let session = self
                        .store
                        .start_session()
                        .map_err(|s| anyhow!("starting a session: {s}"))?;
                    sessions.push(Entry {
                        open: Arc::downgrade(&self.open),
                        session,
                    });
                    sessions.len() - 1
                }
            };
            op(&mut sessions[at].session)
        })
    }

    /// Fails a write of `len` key and value bytes that could make the log
    /// wrap onto live records. It keeps a page of slack, more than the
    /// client threads can have in flight between this check and their
    /// allocations.
    fn check_room(&self, len: usize) -> Result<()> {
        if len as u64 + RECORD_OVERHEAD > self.page_bytes {
            bail!(
                "a record of {len} bytes does not fit in a log page ({})",
                human_bytes(self.page_bytes)
            );
        }
        let log = self.store.log_stats();
        if log.tail_address.page() + 1 >= log.head_address.page() + self.log_pages {
            bail!(
                "the log is full ({} pages of {} in memory): oxifaster 0.1.3 does not \
                 evict pages to disk, so a further write would overwrite live records",
                self.log_pages,
                human_bytes(self.page_bytes)
            );
        }
        Ok(())
    }

    /// Takes a full checkpoint, then deletes every older one.
    fn checkpoint(&self) -> Result<()> {
        let token = self
            .store
            .checkpoint(&self.checkpoints)
            .context("checkpoint")?;
        for old in list_checkpoints(&self.checkpoints) {
            if old.token != token {
                fs::remove_dir_all(&old.directory)
                    .with_context(|| format!("removing {}", old.directory.display()))?;
            }
        }
        Ok(())
    }
}

/// `Ok` for `Status::Ok`, otherwise an error naming `what`.
fn ok(status: Status, what: &str) -> Result<()> {
    match status {
        Status::Ok => Ok(()),
        other => bail!("{what}: {other}"),
    }
}

impl Engine for Oxifaster {
    fn name(&self) -> &'static str {
        "oxifaster"
    }

    fn insert(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.check_room(key.len() + value.len())?;
        let (key, value) = (RawBytes::from(key.to_vec()), RawBytes::from(value.to_vec()));
        ok(self.with_session(|s| Ok(s.upsert(key, value)))?, "upsert")
    }

    fn get(&self, key: &[u8], buf: &mut Vec<u8>) -> Result<bool> {
        let key = RawBytes::from(key.to_vec());
        // A record in memory is read where it lies (`read_view`), its value
        // copied once, into `buf`; one on disk (`NotSupported` there) is
        // read with `read`, which returns a copy of its own.
        let in_memory = self.with_session(|s| {
            let guard = s.pin();
            match s.read_view(&guard, &key) {
                Ok(Some(view)) => match view.value_bytes() {
                    Some(value) if !view.is_tombstone() => {
                        buf.clear();
                        buf.extend_from_slice(value);
                        Ok(Some(true))
                    }
                    _ => Ok(Some(false)),
                },
                Ok(None) => Ok(Some(false)),
                Err(Status::NotSupported) => Ok(None),
                Err(status) => bail!("read_view: {status}"),
            }
        })?;
        if let Some(found) = in_memory {
            return Ok(found);
        }
        let value = self.with_session(|s| {
            loop {
                match s.read(&key) {
                    Ok(value) => return Ok(value),
                    // The record is on disk: wait for its read, then retry.
                    Err(Status::Pending) => {
                        if !s.complete_pending(true) {
                            bail!("a read from disk did not complete");
                        }
                    }
                    Err(status) => bail!("read: {status}"),
                }
            }
        })?;
        let Some(value) = value else {
            return Ok(false);
        };
        buf.clear();
        buf.extend_from_slice(&value.0);
        Ok(true)
    }

    fn remove(&self, key: &[u8]) -> Result<()> {
        self.check_room(key.len())?;
        let key = RawBytes::from(key.to_vec());
        match self.with_session(|s| Ok(s.delete(&key)))? {
            Status::NotFound => Ok(()),
            status => ok(status, "delete"),
        }
    }

    fn sync(&self) -> Result<()> {
        self.checkpoint()
    }

    fn settings(&self) -> String {
        self.settings.clone()
    }

    fn durability(&self) -> String {
        "only at a checkpoint, which sync() and close() take (fsynced: \
         FsyncOnCheckpoint); until then a completed write is in memory only"
            .to_owned()
    }

    fn close(self: Box<Self>) -> Result<()> {
        self.checkpoint()?;
        let Oxifaster { store, open, .. } = *self;
        drop(open);
        // End this thread's session now; other threads' sessions on this
        // store end when they next use oxifaster or exit, and the last one
        // drops the store.
        SESSIONS.with_borrow_mut(|sessions| sessions.retain(|e| e.open.strong_count() > 0));
        drop(store);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::thread;

    use super::*;

    fn options(resident_budget: Option<u64>) -> OpenOptions {
        OpenOptions {
            durability: Durability::Default,
            resident_budget,
            threads: 4,
        }
    }

    fn value(i: u32) -> Vec<u8> {
        let mut v = vec![(i % 251) as u8; 1024];
        v[..4].copy_from_slice(&i.to_le_bytes());
        v
    }

    #[test]
    fn client_threads_share_the_store_and_a_reopen_keeps_their_writes() {
        let dir = tempfile::tempdir().unwrap();
        let e = open(dir.path(), &options(None)).unwrap();
        thread::scope(|s| {
            for t in 0..8u32 {
                let e = &*e;
                s.spawn(move || {
                    let mut buf = Vec::new();
                    for i in (t..4_000).step_by(8) {
                        e.insert(&i.to_be_bytes(), &value(i)).unwrap();
                        assert!(e.get(&i.to_be_bytes(), &mut buf).unwrap());
                        assert_eq!(buf, value(i));
                    }
                    for i in (t..4_000).step_by(8).filter(|i| i % 3 == 0) {
                        e.remove(&i.to_be_bytes()).unwrap();
                    }
                });
            }
        });
        e.close().unwrap();
        for _ in 0..2 {
            let e = open(dir.path(), &options(None)).unwrap();
            let mut buf = Vec::new();
            for i in 0..4_000u32 {
                let found = e.get(&i.to_be_bytes(), &mut buf).unwrap();
                assert_eq!(found, i % 3 != 0, "key {i}");
                if found {
                    assert_eq!(buf, value(i), "key {i}");
                }
            }
            e.close().unwrap();
        }
        let checkpoints = dir.path().join("oxifaster/checkpoints");
        assert_eq!(fs::read_dir(checkpoints).unwrap().count(), 1);
    }

    #[test]
    fn a_full_log_fails_writes_instead_of_losing_keys() {
        let dir = tempfile::tempdir().unwrap();
        let e = open(dir.path(), &options(Some(8 << 20))).unwrap();
        // 20,000 values of 1 KiB are about 2.5 times the log.
        let (inserted, err) = (0..20_000u32)
            .find_map(|i| {
                e.insert(&i.to_be_bytes(), &value(i))
                    .err()
                    .map(|err| (i, err))
            })
            .expect("a write fails once the log is full");
        assert!(err.to_string().contains("the log is full"), "{err:#}");
        assert!(inserted > 1_000, "{inserted}");
        let mut buf = Vec::new();
        for i in 0..inserted {
            assert!(e.get(&i.to_be_bytes(), &mut buf).unwrap(), "key {i}");
            assert_eq!(buf, value(i), "key {i}");
        }
    }

    #[test]
    fn full_durability_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let options = OpenOptions {
            durability: Durability::Full,
            ..options(None)
        };
        let err = open(dir.path(), &options).err().unwrap();
        assert!(err.downcast_ref::<Unsupported>().is_some(), "{err:#}");
    }
}
