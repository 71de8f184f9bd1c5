//! The files behind the log: one segment file per `segment_bytes` of log
//! address space, read and written by offset.
//!
//! A segment file is named by its segment number in decimal, zero-padded to
//! at least 12 digits (`{:012}.seg`; 14 digits at most), and starts
//! with a 64-byte header:
//!
//! | offset | size | field                                   |
//! |-------:|-----:|-----------------------------------------|
//! | 0      | 8    | magic `EMBERSEG`                        |
//! | 8      | 4    | format version                          |
//! | 12     | 4    | log2 of the segment size                |
//! | 16     | 8    | segment number                          |
//! | 24     | 8    | store id (from the store's meta file)   |
//! | 32     | 8    | length of the previous segment's file   |
//! | 40     | 20   | reserved, zero                          |
//! | 60     | 4    | CRC32C of bytes 0..60                   |
//!
//! The byte at file offset `o` of segment `s` holds log address
//! `s << segment_bits | o`. The previous segment's length (0 for the
//! first) is known when a segment is created, since the appender never
//! writes to a segment again once it moved on; recovery checks it, so a
//! sealed segment cut at a record boundary is detected.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::RwLock;

use crate::error::{Error, Result};

/// Size of a segment file's header, in bytes.
pub(crate) const SEGMENT_HEADER_BYTES: u64 = 64;
const SEGMENT_MAGIC: &[u8; 8] = b"EMBERSEG";
const SEGMENT_SUFFIX: &str = ".seg";

/// The segment files of one store.
pub(crate) struct Segments {
    dir: PathBuf,
    segment_bits: u32,
    store_id: u64,
    files: RwLock<BTreeMap<u64, Arc<File>>>,
    /// Test hook: the segment whose fdatasyncs fail with `EIO`.
    #[cfg(test)]
    pub(crate) fail_sync_of: std::sync::atomic::AtomicU64,
    /// Test hook: writes reaching past this log address fail with
    /// `ENOSPC`, as on a full disk.
    #[cfg(test)]
    pub(crate) full_from: std::sync::atomic::AtomicU64,
}

impl Segments {
    pub(crate) fn new(dir: &Path, segment_bits: u32, store_id: u64) -> Segments {
        Segments {
            dir: dir.to_path_buf(),
            segment_bits,
            store_id,
            files: RwLock::new(BTreeMap::new()),
            #[cfg(test)]
            fail_sync_of: std::sync::atomic::AtomicU64::new(u64::MAX),
            #[cfg(test)]
            full_from: std::sync::atomic::AtomicU64::new(u64::MAX),
        }
    }

    /// log2 of the segment size.
    pub(crate) fn segment_bits(&self) -> u32 {
        self.segment_bits
    }

    /// Size of a segment, in bytes.
    pub(crate) fn segment_size(&self) -> u64 {
        1 << self.segment_bits
    }

    /// The segment number holding log address `addr`.
    pub(crate) fn segment_of(&self, addr: u64) -> u64 {
        addr >> self.segment_bits
    }

    /// The log address of segment `seg`'s first byte.
    pub(crate) fn segment_start(&self, seg: u64) -> u64 {
        seg << self.segment_bits
    }

    fn offset_in_segment(&self, addr: u64) -> u64 {
        addr & ((1 << self.segment_bits) - 1)
    }

    /// The file name of segment `seg`.
    pub(crate) fn file_name(&self, seg: u64) -> String {
        format!("{seg:012}{SEGMENT_SUFFIX}")
    }

    fn path(&self, seg: u64) -> PathBuf {
        self.dir.join(self.file_name(seg))
    }

    /// Segment numbers of the segment files in the directory, ascending.
    pub(crate) fn list(&self) -> Result<Vec<u64>> {
        let mut found = Vec::new();
        for entry in std::fs::read_dir(&self.dir)? {
            let name = entry?.file_name();
            let Some(name) = name.to_str() else { continue };
            if let Some(num) = name.strip_suffix(SEGMENT_SUFFIX)
                && num.len() >= 12
                && num.bytes().all(|b| b.is_ascii_digit())
                && let Ok(seg) = num.parse::<u64>()
            {
                if seg >= self.segment_of(u64::MAX) {
                    return Err(Error::corruption(
                        0,
                        format!("segment file {name} lies beyond the log address space"),
                    ));
                }
                found.push(seg);
            }
        }
        found.sort_unstable();
        Ok(found)
    }

    /// Opens an existing segment file for reading and writing.
    pub(crate) fn open(&self, seg: u64) -> Result<Arc<File>> {
        if let Some(f) = self.files.read().get(&seg) {
            return Ok(Arc::clone(f));
        }
        let file = Arc::new(
            OpenOptions::new()
                .read(true)
                .write(true)
                .open(self.path(seg))?,
        );
        self.files.write().insert(seg, Arc::clone(&file));
        Ok(file)
    }

    /// Creates segment `seg` (or resets a file holding less than a header)
    /// with a fresh header recording `prev_len`, the previous segment's
    /// length, and makes the file and its directory entry durable.
    pub(crate) fn create(&self, seg: u64, prev_len: u64) -> Result<Arc<File>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(self.path(seg))?;
        if file.metadata()?.len() > SEGMENT_HEADER_BYTES {
            return Err(Error::corruption(
                self.segment_start(seg),
                "segment file to be created already holds records",
            ));
        }
        let written = (|| {
            file.set_len(0)?;
            file.write_all_at(&self.header(seg, prev_len, crate::FORMAT_VERSION), 0)?;
            file.sync_all()?;
            sync_dir(&self.dir)
        })();
        if let Err(e) = written {
            // Leave no file without a sound header for a retry to open as
            // it is (a full disk can fail the header's write).
            let _ = std::fs::remove_file(self.path(seg));
            return Err(e);
        }
        let file = Arc::new(file);
        self.files.write().insert(seg, Arc::clone(&file));
        Ok(file)
    }

    /// Opens segment `seg`, creating it with `prev_len()` as the previous
    /// segment's length if it does not exist yet.
    pub(crate) fn open_or_create(
        &self,
        seg: u64,
        prev_len: impl FnOnce() -> u64,
    ) -> Result<Arc<File>> {
        match self.open(seg) {
            Ok(f) => Ok(f),
            Err(Error::Io(e)) if e.kind() == io::ErrorKind::NotFound => {
                self.create(seg, prev_len())
            }
            Err(e) => Err(e),
        }
    }

    fn header(&self, seg: u64, prev_len: u64, version: u32) -> [u8; SEGMENT_HEADER_BYTES as usize] {
        let mut h = [0u8; SEGMENT_HEADER_BYTES as usize];
        h[0..8].copy_from_slice(SEGMENT_MAGIC);
        h[8..12].copy_from_slice(&version.to_le_bytes());
        h[12..16].copy_from_slice(&self.segment_bits.to_le_bytes());
        h[16..24].copy_from_slice(&seg.to_le_bytes());
        h[24..32].copy_from_slice(&self.store_id.to_le_bytes());
        h[32..40].copy_from_slice(&prev_len.to_le_bytes());
        let crc = crate::checksum::crc32c(&h[..60]);
        h[60..64].copy_from_slice(&crc.to_le_bytes());
        h
    }

    /// Checks the header of segment `seg` read from `bytes` and returns
    /// the previous segment's length it records.
    ///
    /// # Errors
    /// [`Error::Corruption`] naming the segment's first address when the
    /// header does not belong to this segment of this store.
    pub(crate) fn check_header(&self, seg: u64, bytes: &[u8]) -> Result<u64> {
        let at = self.segment_start(seg);
        if bytes.len() < SEGMENT_HEADER_BYTES as usize {
            return Err(Error::corruption(at, "segment header truncated"));
        }
        let prev_len = u64::from_le_bytes(bytes[32..40].try_into().expect("8 bytes"));
        let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
        let readable = (crate::OLDEST_READABLE_VERSION..=crate::FORMAT_VERSION).contains(&version);
        if !readable || bytes[..64] != self.header(seg, prev_len, version) {
            let crc_ok = crate::checksum::crc32c(&bytes[..60]).to_le_bytes() == bytes[60..64];
            if crc_ok && &bytes[..8] == SEGMENT_MAGIC && !readable {
                return Err(Error::IncompatibleFormat {
                    found: version,
                    expected: crate::FORMAT_VERSION,
                });
            }
            return Err(Error::corruption(
                at,
                "segment header is damaged or belongs to another store",
            ));
        }
        Ok(prev_len)
    }

    /// Reads into `buf` from log address `addr`; returns the bytes read,
    /// fewer than `buf.len()` only at the end of the segment file.
    pub(crate) fn read_at(&self, addr: u64, buf: &mut [u8]) -> Result<usize> {
        let file = self.open(self.segment_of(addr))?;
        let mut off = self.offset_in_segment(addr);
        let mut done = 0;
        while done < buf.len() {
            match file.read_at(&mut buf[done..], off) {
                Ok(0) => break,
                Ok(n) => {
                    done += n;
                    off += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(done)
    }

    /// Writes `bytes` at log address `addr` (the segment must exist).
    pub(crate) fn write_at(&self, addr: u64, bytes: &[u8]) -> Result<()> {
        #[cfg(test)]
        if addr + bytes.len() as u64 > self.full_from.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(io::Error::from_raw_os_error(28).into());
        }
        let file = self.open(self.segment_of(addr))?;
        file.write_all_at(bytes, self.offset_in_segment(addr))?;
        Ok(())
    }

    /// fdatasyncs segment `seg`.
    pub(crate) fn sync(&self, seg: u64) -> Result<()> {
        #[cfg(test)]
        if self.fail_sync_of.load(std::sync::atomic::Ordering::Relaxed) == seg {
            return Err(io::Error::from_raw_os_error(5).into());
        }
        self.open(seg)?.sync_data()?;
        Ok(())
    }

    /// Length of segment `seg`'s file, in bytes.
    pub(crate) fn file_len(&self, seg: u64) -> Result<u64> {
        Ok(self.open(seg)?.metadata()?.len())
    }

    /// Forgets segment `seg` and deletes its file. Readers that already
    /// hold its handle finish their reads; later ones get `NotFound`.
    pub(crate) fn retire(&self, seg: u64) -> Result<()> {
        self.files.write().remove(&seg);
        match std::fs::remove_file(self.path(seg)) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e.into()),
        }
        sync_dir(&self.dir)
    }

    /// Cuts segment `seg` at log address `addr` (dropping a torn tail) and
    /// makes the cut durable. `addr` may be the segment's end (not masked
    /// to offset 0 of the next segment).
    pub(crate) fn truncate(&self, seg: u64, addr: u64) -> Result<()> {
        debug_assert!(self.segment_of(addr) == seg || addr == self.segment_start(seg + 1));
        let file = self.open(seg)?;
        file.set_len(addr - self.segment_start(seg))?;
        file.sync_all()?;
        Ok(())
    }
}

/// Replaces file `name` in `dir` with `bytes`, durably and atomically:
/// written to `tmp` (a name in the same directory), fsynced, renamed over
/// `name`, and the directory fsynced. A crash leaves the old file or the
/// new one, never a mix.
///
/// # Errors
/// I/O errors.
pub(crate) fn replace_durably(dir: &Path, tmp: &str, name: &str, bytes: &[u8]) -> Result<()> {
    let tmp = dir.join(tmp);
    let mut f = File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    fs::rename(&tmp, dir.join(name))?;
    sync_dir(dir)
}

/// fsyncs a directory, making the creation or renaming of its entries
/// durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)?.sync_all()?;
    Ok(())
}
