//! Online backup: copy a durable prefix of the log.
//!
//! Records are only ever appended, so the bytes below a durable address
//! never change: copying the meta file and every segment up to that address
//! gives a consistent store, whatever writers do meanwhile (with the
//! compression dictionary, if the store has one).

use std::fs::{self, File};
use std::io::{Read, Write};
use std::path::Path;

use crate::error::{Error, Result};
use crate::log::Log;
use crate::manifest::{self, Retired};
use crate::storage::{SEGMENT_HEADER_BYTES, sync_dir, write_mark_to};

/// Copies the store in `src` up to log address `upto` (a record boundary
/// that is durable) into the new store directory `dest`.
pub(crate) fn copy_prefix(
    src: &Path,
    dest: &Path,
    log: &Log,
    retired: &Retired,
    upto: u64,
) -> Result<()> {
    if dest.exists() && fs::read_dir(dest)?.next().is_some() {
        return Err(Error::InvalidPath {
            path: dest.to_path_buf(),
            reason: "backup destination is not empty".into(),
        });
    }
    // The directories `create_dir_all` makes, deepest first.
    let created: Vec<&Path> = dest
        .ancestors()
        .take_while(|d| !d.as_os_str().is_empty() && !d.exists())
        .collect();
    fs::create_dir_all(dest)?;
    // Compared once both exist, through symlinks and `..`: a copy inside
    // the store would be taken for part of it by every later backup, and
    // go when the store's directory is cleared.
    if dest.canonicalize()?.starts_with(src.canonicalize()?) {
        for dir in created {
            fs::remove_dir(dir)?;
        }
        return Err(Error::InvalidPath {
            path: dest.to_path_buf(),
            reason: "backup destination is inside the store's directory".into(),
        });
    }
    let storage = log.storage();
    let last = storage.segment_of(upto);
    for seg in storage
        .list()?
        .into_iter()
        .filter(|&s| s <= last && !retired.contains(s))
    {
        // A sealed segment's records, not its file: until its successor's
        // file exists, that still holds what was allocated (or written as
        // zeros) ahead of the records, which the successor's creation may
        // cut off while it is copied.
        let len = if seg == last {
            upto - storage.segment_start(seg)
        } else {
            storage.written_len(seg)?
        };
        let name = storage.file_name(seg);
        let mut from = File::open(src.join(&name))?.take(len);
        let mut to = File::create(dest.join(&name))?;
        let copied = std::io::copy(&mut from, &mut to)?;
        if copied != len {
            return Err(Error::corruption(
                storage.segment_start(seg) + copied,
                "segment shorter than its durable length during backup",
            ));
        }
        if seg == last && len >= SEGMENT_HEADER_BYTES {
            // The header was copied with the mark of a later moment, which
            // may lie past the bytes copied: the copy's bytes are all
            // durable once synced below, and no more.
            for slot in 0..2 {
                write_mark_to(&to, seg, len, slot)?;
            }
        }
        to.flush()?;
        to.sync_all()?;
    }
    manifest::store(dest, retired)?;
    let meta = crate::meta::META_FILE;
    fs::copy(src.join(meta), dest.join(meta))?;
    File::open(dest.join(meta))?.sync_all()?;
    // Copied after the segments: a record compressed with the dictionary
    // is only written once the dictionary file is durable, so any copied
    // record that needs it finds it.
    let dictionary = crate::dictionary::FILE;
    if src.join(dictionary).exists() {
        fs::copy(src.join(dictionary), dest.join(dictionary))?;
        File::open(dest.join(dictionary))?.sync_all()?;
    }
    sync_dir(dest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Db, Options};

    /// The source's durable mark may have moved past the prefix by the
    /// time its header is copied: the copy must be marked no further than
    /// its bytes, or its recovery takes the end of the file for damage to
    /// durable bytes and refuses the backup.
    #[test]
    fn a_backup_s_last_segment_is_marked_no_further_than_its_copy() {
        let dir = tempfile::tempdir().unwrap();
        let (src, dest) = (dir.path().join("src"), dir.path().join("dest"));
        let db = Db::open(&src, Options::default().compaction_garbage(None)).unwrap();
        db.insert(b"copied", b"1").unwrap();
        db.sync().unwrap();
        let core = db.core();
        let upto = core.log.durable();
        db.insert(b"later", b"2").unwrap();
        db.sync().unwrap();
        core.log.mark_idle(true).unwrap();
        let retired = core.retired.lock().clone();
        copy_prefix(&src, &dest, &core.log, &retired, upto).unwrap();
        let backup = Db::open(&dest, Options::default()).unwrap();
        assert_eq!(backup.get(b"copied").unwrap().as_deref(), Some(&b"1"[..]));
        assert_eq!(backup.get(b"later").unwrap(), None);
    }
}
