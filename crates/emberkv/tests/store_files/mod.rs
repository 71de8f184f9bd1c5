//! What a store directory's files hold, for the backup tests
//! (`operations.rs`, `crash_backup.rs`) that check one store's writes
//! never change another's files.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::Path;

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
