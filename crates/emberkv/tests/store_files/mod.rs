//! What a store directory's files hold: its segment files, and, for the
//! backup tests (`operations.rs`, `crash_backup.rs`) that check one
//! store's writes never change another's files, every file's contents.
//! Each test binary uses some of these.
#![allow(dead_code)]

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io;
use std::path::{Path, PathBuf};

/// The segment files (`<number>.seg`) of the store in `dir`, oldest
/// first.
///
/// # Errors
/// When the directory cannot be listed (a test out of file descriptors
/// may meet `EMFILE`).
pub fn segment_files(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|x| x == "seg") {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// The numbers of the segment files of the store in `dir`, ascending.
///
/// # Panics
/// When the directory cannot be listed.
pub fn segment_numbers(dir: &Path) -> Vec<u64> {
    segment_files(dir)
        .unwrap()
        .iter()
        .filter_map(|p| p.file_stem()?.to_str()?.parse().ok())
        .collect()
}

/// The newest segment file of the store in `dir`.
///
/// # Panics
/// When the directory cannot be listed or holds no segment file.
pub fn newest_segment(dir: &Path) -> PathBuf {
    segment_files(dir).unwrap().pop().expect("a segment file")
}

/// Every file of `dir`: name to length and a hash of the contents
/// (compared, and printed when they differ, without megabytes).
///
/// # Panics
/// When the directory or a file cannot be read.
pub fn files_of(dir: &Path) -> HashMap<String, (usize, u64)> {
    let mut files = HashMap::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            let bytes = std::fs::read(entry.path()).unwrap();
            let mut hasher = DefaultHasher::new();
            bytes.hash(&mut hasher);
            files.insert(
                entry.file_name().to_string_lossy().into_owned(),
                (bytes.len(), hasher.finish()),
            );
        }
    }
    files
}
