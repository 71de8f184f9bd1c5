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
use crate::storage::sync_dir;

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
    fs::create_dir_all(dest)?;
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
