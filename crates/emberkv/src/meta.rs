//! The store's directory: its lock file and its meta file.
//!
//! `emberkv.meta` is written once, when the store is created (to a temporary
//! name, fsynced, renamed, and the directory fsynced), and holds 64 bytes:
//!
//! | offset | size | field                                      |
//! |-------:|-----:|--------------------------------------------|
//! | 0      | 8    | magic `EMBERKV\0`                          |
//! | 8      | 4    | format version                             |
//! | 12     | 4    | log2 of the segment size                   |
//! | 16     | 8    | hash seed (random per store)               |
//! | 24     | 8    | store id (random per store)                |
//! | 32     | 28   | reserved, zero                             |
//! | 60     | 4    | CRC32C of bytes 0..60                      |
//!
//! `LOCK` is held with an exclusive `flock` for as long as a writable
//! [`crate::Db`] is open, and with a shared one by a read-only `Db`,
//! `check` and `salvage`: a writable open from this or another process
//! fails with [`Error::Locked`] while any other handle has the store open,
//! and a read-only one while a writable one has. The store's directory is
//! locked the same way, first: a `LOCK` file deleted while the store is
//! open (by hand, taken for a stale one) would otherwise let a second
//! writer create a new one and lock that, while a directory that holds a
//! store cannot be unlinked. `LOCK` stays for older builds, which lock
//! only it.
//!
//! The handles of this process are also kept in a process-wide table (by
//! the directory's device and inode), which decides their conflicts at
//! once: an `flock` alone cannot tell a handle of this process from a
//! child process that another thread forked, which holds the lock of a
//! handle dropped since until it execs.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// Name of the meta file in the store directory.
pub(crate) const META_FILE: &str = "emberkv.meta";
const META_TMP: &str = "emberkv.meta.tmp";
const LOCK_FILE: &str = "LOCK";
const META_MAGIC: &[u8; 8] = b"EMBERKV\0";
const META_BYTES: usize = 64;

/// What the meta file records about a store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Meta {
    /// The format version the file states ([`crate::FORMAT_VERSION`] for
    /// a store created or opened for writing by this build).
    pub version: u32,
    pub segment_bits: u32,
    pub hash_seed: u64,
    pub store_id: u64,
}

impl Meta {
    pub(crate) fn encode(&self) -> [u8; META_BYTES] {
        let mut b = [0u8; META_BYTES];
        b[0..8].copy_from_slice(META_MAGIC);
        b[8..12].copy_from_slice(&self.version.to_le_bytes());
        b[12..16].copy_from_slice(&self.segment_bits.to_le_bytes());
        b[16..24].copy_from_slice(&self.hash_seed.to_le_bytes());
        b[24..32].copy_from_slice(&self.store_id.to_le_bytes());
        let crc = crate::checksum::crc32c(&b[..60]);
        b[60..64].copy_from_slice(&crc.to_le_bytes());
        b
    }

    fn decode(b: &[u8]) -> Result<Meta> {
        let bad = |reason: &str| Err(Error::corruption(0, format!("{META_FILE}: {reason}")));
        if b.len() != META_BYTES {
            return bad("wrong length");
        }
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        if &b[0..8] != META_MAGIC {
            return bad("bad magic");
        }
        if crate::checksum::crc32c(&b[..60]) != u32_at(60) {
            return bad("checksum mismatch");
        }
        if !(crate::OLDEST_READABLE_VERSION..=crate::FORMAT_VERSION).contains(&u32_at(8)) {
            return Err(Error::IncompatibleFormat {
                found: u32_at(8),
                expected: crate::FORMAT_VERSION,
            });
        }
        let segment_bits = u32_at(12);
        if !(20..=32).contains(&segment_bits) {
            return bad("segment size out of range");
        }
        Ok(Meta {
            version: u32_at(8),
            segment_bits,
            hash_seed: u64_at(16),
            store_id: u64_at(24),
        })
    }
}

/// How long [`lock`] keeps trying, when no handle of this process holds
/// the store, before it reports [`Error::Locked`]: 2 s. A lock released
/// by a handle of this process stays held by any child process that
/// another thread forked meanwhile, until it execs (the child shares the
/// open file description); under load on a 2-core machine that took
/// longer than the 200 ms waited until 2026-12-07 (a helper's
/// reproduction: a reopen right after a drop failed while a thread
/// spawned processes). A conflict with a handle of this process is
/// reported at once (see [`HELD`]).
const LOCK_PATIENCE: Duration = Duration::from_secs(2);

/// The stores this process holds open, by their directory's device and
/// inode numbers: how many read-only handles, or `None` for a writable
/// one.
static HELD: Mutex<BTreeMap<(u64, u64), Option<usize>>> = Mutex::new(BTreeMap::new());

/// The store's lock, held until dropped: an `flock` on the store's
/// directory and one on its `LOCK` file, both exclusive or both shared,
/// and its place in [`HELD`].
#[derive(Debug)]
pub(crate) struct StoreLock {
    _claim: Claim,
    _directory: File,
    /// `None` for a read-only handle on a store that has no `LOCK` file in
    /// a directory it may not write (see [`lock_shared`]).
    _file: Option<File>,
}

/// A place in [`HELD`], given back when dropped (a [`StoreLock`] drops
/// its claim before its files, so the `flock`s outlive it by a moment,
/// which [`try_lock`] waits out).
#[derive(Debug)]
struct Claim((u64, u64));

impl Claim {
    /// A place in [`HELD`] for the store whose directory `directory` is,
    /// taken as `share` says.
    ///
    /// # Errors
    /// [`Error::Locked`] at once when a handle of this process holds the
    /// store in a way `share` conflicts with; [`Error::Io`] when the
    /// directory cannot be read.
    fn take(dir: &Path, directory: &File, share: Share) -> Result<Claim> {
        let meta = directory.metadata()?;
        let id = (meta.dev(), meta.ino());
        let mut held = HELD.lock().unwrap_or_else(PoisonError::into_inner);
        match held.get_mut(&id) {
            None => {
                held.insert(id, (share == Share::Shared).then_some(1));
            }
            Some(Some(shared)) if share == Share::Shared => *shared += 1,
            Some(_) => {
                return Err(Error::Locked {
                    path: dir.to_path_buf(),
                });
            }
        }
        Ok(Claim(id))
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        let mut held = HELD.lock().unwrap_or_else(PoisonError::into_inner);
        match held.get_mut(&self.0) {
            Some(Some(shared)) if *shared > 1 => *shared -= 1,
            _ => {
                held.remove(&self.0);
            }
        }
    }
}

/// Takes the store's lock shared, for a handle that only reads an existing
/// store and must not create one: a read-only [`crate::Db`], `check` and
/// `salvage`. Shared holders keep out a writable open ([`lock`]), and it
/// keeps them out, but not each other.
///
/// `LOCK` is opened for writing (created when missing, as a writable open
/// would) where the directory allows it, and for reading where it does
/// not: a read-only file system (a failing disk the kernel remounted so,
/// say, where check and salvage are wanted most) or a directory this user
/// may not write. A store without a `LOCK` file in such a directory (one
/// never opened for writing: a copy) is held by its directory's lock
/// alone, which keeps out writable opens of this build all the same.
///
/// # Errors
/// [`Error::InvalidPath`] when `dir` holds no store (neither a meta file
/// nor a segment file); [`Error::Locked`] at once when a writable handle
/// of this process holds the store, and when one of another process holds
/// it for longer than [`LOCK_PATIENCE`]; [`Error::Io`].
pub(crate) fn lock_shared(dir: &Path) -> Result<StoreLock> {
    let store = dir.join(META_FILE).exists() || (dir.is_dir() && holds_segments(dir)?);
    if !store {
        return Err(Error::InvalidPath {
            path: dir.to_path_buf(),
            reason: "holds no emberkv store".into(),
        });
    }
    let directory = File::open(dir)?;
    let claim = Claim::take(dir, &directory, Share::Shared)?;
    let directory = try_lock(dir, directory, Share::Shared)?;
    let path = dir.join(LOCK_FILE);
    let file = match OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
    {
        Ok(file) => Some(file),
        Err(e)
            if e.raw_os_error() == Some(libc::EROFS)
                || e.kind() == std::io::ErrorKind::PermissionDenied =>
        {
            match File::open(&path) {
                Ok(file) => Some(file),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => return Err(e.into()),
            }
        }
        Err(e) => return Err(e.into()),
    };
    Ok(StoreLock {
        _claim: claim,
        _directory: directory,
        _file: file
            .map(|file| try_lock(dir, file, Share::Shared))
            .transpose()?,
    })
}

/// Takes the store's exclusive lock, creating the directory if needed.
///
/// # Errors
/// [`Error::InvalidPath`] when `dir` exists and is not a directory;
/// [`Error::Locked`] at once when another handle of this process, writable
/// or read-only, holds the store, and when one of another process holds it
/// for longer than [`LOCK_PATIENCE`].
pub(crate) fn lock(dir: &Path) -> Result<StoreLock> {
    if dir.exists() && !dir.is_dir() {
        return Err(Error::InvalidPath {
            path: dir.to_path_buf(),
            reason: "is not a directory".into(),
        });
    }
    fs::create_dir_all(dir)?;
    let directory = File::open(dir)?;
    let claim = Claim::take(dir, &directory, Share::Exclusive)?;
    let directory = try_lock(dir, directory, Share::Exclusive)?;
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(LOCK_FILE))?;
    Ok(StoreLock {
        _claim: claim,
        _directory: directory,
        _file: Some(try_lock(dir, file, Share::Exclusive)?),
    })
}

/// How a lock is held: by one writable handle, or by any number of
/// read-only ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Share {
    Exclusive,
    Shared,
}

/// Takes `file`'s lock for the store in `dir` as `share` says, within
/// [`LOCK_PATIENCE`].
fn try_lock(dir: &Path, file: File, share: Share) -> Result<File> {
    let give_up = Instant::now() + LOCK_PATIENCE;
    loop {
        let taken = match share {
            Share::Exclusive => file.try_lock(),
            Share::Shared => file.try_lock_shared(),
        };
        match taken {
            Ok(()) => return Ok(file),
            Err(fs::TryLockError::WouldBlock) if Instant::now() < give_up => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(fs::TryLockError::WouldBlock) => {
                return Err(Error::Locked {
                    path: dir.to_path_buf(),
                });
            }
            Err(fs::TryLockError::Error(e)) => return Err(e.into()),
        }
    }
}

/// Reads the meta file of an existing store. Call with the lock held.
///
/// # Errors
/// [`Error::Corruption`] when the file is damaged, or missing from a
/// directory that holds segment files; [`Error::InvalidPath`] when it is
/// missing from one that holds none; [`Error::IncompatibleFormat`];
/// [`Error::Io`].
pub(crate) fn load(dir: &Path) -> Result<Meta> {
    match fs::read(dir.join(META_FILE)) {
        Ok(bytes) => Meta::decode(&bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && holds_segments(dir)? => {
            // A new meta file would name another store: its segments would
            // all look foreign, to this open and to a later salvage.
            Err(Error::corruption(
                0,
                format!("{META_FILE} is missing but the directory holds segment files"),
            ))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Error::InvalidPath {
            path: dir.to_path_buf(),
            reason: "holds no emberkv store".into(),
        }),
        Err(e) => Err(e.into()),
    }
}

/// Reads the store's meta file, or creates it with `segment_bits` and fresh
/// random seeds when the store is new. Call with the lock held.
///
/// # Errors
/// [`Error::Corruption`] when the file is damaged, or missing from a
/// directory that holds segment files (nothing is created then);
/// [`Error::IncompatibleFormat`]; [`Error::Io`].
pub(crate) fn load_or_create(dir: &Path, segment_bits: u32) -> Result<Meta> {
    match load(dir) {
        Err(Error::InvalidPath { .. }) => {
            let mut seeds = [0u8; 16];
            getrandom::fill(&mut seeds).map_err(|e| Error::Io(std::io::Error::other(e)))?;
            let meta = Meta {
                version: crate::FORMAT_VERSION,
                segment_bits,
                hash_seed: u64::from_le_bytes(seeds[..8].try_into().expect("8 bytes")),
                store_id: u64::from_le_bytes(seeds[8..].try_into().expect("8 bytes")),
            };
            store(dir, &meta)?;
            Ok(meta)
        }
        loaded => loaded,
    }
}

/// Whether `dir` holds a segment file: a store that lost its meta file,
/// or a backup cut short before it (the meta file is copied last).
fn holds_segments(dir: &Path) -> Result<bool> {
    for entry in fs::read_dir(dir)? {
        let name = entry?.file_name();
        if name
            .to_string_lossy()
            .ends_with(crate::storage::SEGMENT_SUFFIX)
        {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Copies the meta file of the store in `src` to the directory `dest`
/// durably: under a temporary name, fsynced, renamed, and the directory
/// fsynced, so that a crash leaves it whole or absent. (Copied in place, a
/// backup killed after creating the file and before writing it left an
/// empty meta file, and the directory looked like a store that failed to
/// open: `crash_backup.rs`, seed 7, cycle 3, in a clean-clone CI run.)
///
/// # Errors
/// I/O errors.
pub(crate) fn copy(src: &Path, dest: &Path) -> Result<()> {
    let bytes = fs::read(src.join(META_FILE))?;
    crate::storage::replace_durably(dest, META_TMP, META_FILE, &bytes)
}

/// Marks a store of an older readable version as [`crate::FORMAT_VERSION`]
/// before anything is written to it, so that older builds refuse it.
/// Call with the lock held.
///
/// # Errors
/// I/O errors.
pub(crate) fn upgrade(dir: &Path, meta: &mut Meta) -> Result<()> {
    if meta.version < crate::FORMAT_VERSION {
        meta.version = crate::FORMAT_VERSION;
        store(dir, meta)?;
    }
    Ok(())
}

/// Writes the meta file durably: temporary name, fsync, rename, directory
/// fsync.
fn store(dir: &Path, meta: &Meta) -> Result<()> {
    crate::storage::replace_durably(dir, META_TMP, META_FILE, &meta.encode())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This process's handles decide their conflicts through [`HELD`]:
    /// read-only claims add up, a writable one conflicts with any, and
    /// each is given back when dropped. A second name of the same
    /// directory is the same store.
    #[test]
    fn claims_of_one_process_conflict_by_the_directory_not_its_name() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("store");
        fs::create_dir(&dir).unwrap();
        let alias = root.path().join("alias");
        std::os::unix::fs::symlink(&dir, &alias).unwrap();
        let take = |path: &Path, share| Claim::take(path, &File::open(path).unwrap(), share);
        let locked = |claim: Result<Claim>| matches!(claim, Err(Error::Locked { .. }));

        let first = take(&dir, Share::Shared).unwrap();
        let second = take(&alias, Share::Shared).unwrap();
        assert!(locked(take(&dir, Share::Exclusive)));
        drop(first);
        assert!(locked(take(&alias, Share::Exclusive)));
        drop(second);
        let writer = take(&alias, Share::Exclusive).unwrap();
        assert!(locked(take(&dir, Share::Shared)));
        assert!(locked(take(&dir, Share::Exclusive)));
        drop(writer);
        drop(take(&dir, Share::Exclusive).unwrap());
    }

    #[test]
    fn older_versions_are_read_and_upgraded_and_newer_ones_refused() {
        let dir = tempfile::tempdir().unwrap();
        let newest = crate::FORMAT_VERSION;
        for version in 1..newest {
            let old = Meta {
                version,
                segment_bits: 24,
                hash_seed: 3,
                store_id: 4,
            };
            fs::write(dir.path().join(META_FILE), old.encode()).unwrap();
            let mut meta = load_or_create(dir.path(), 30).unwrap();
            assert_eq!(meta, old);
            upgrade(dir.path(), &mut meta).unwrap();
            let upgraded = load_or_create(dir.path(), 30).unwrap();
            assert_eq!(
                upgraded,
                Meta {
                    version: newest,
                    ..old
                }
            );
            let newer = Meta {
                version: newest + 1,
                ..old
            };
            fs::write(dir.path().join(META_FILE), newer.encode()).unwrap();
            assert!(matches!(
                load_or_create(dir.path(), 30),
                Err(Error::IncompatibleFormat { found, expected })
                    if found == newest + 1 && expected == newest
            ));
        }
    }

    #[test]
    fn meta_roundtrip_and_damage() {
        let m = Meta {
            version: crate::FORMAT_VERSION,
            segment_bits: 30,
            hash_seed: 7,
            store_id: 9,
        };
        let b = m.encode();
        assert_eq!(Meta::decode(&b).unwrap(), m);
        for i in 0..META_BYTES {
            let mut bad = b;
            bad[i] ^= 0x10;
            assert!(Meta::decode(&bad).is_err(), "flip at {i} accepted");
        }
        assert!(Meta::decode(&b[..10]).is_err());
    }
}
