//! The one error type of the crate.

use std::io;
use std::path::PathBuf;

/// The result type of every fallible emberkv call.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in emberkv.
///
/// Bad input (an oversize key or value) is reported before anything is
/// written; a damaged file is reported as [`Error::Corruption`] with the log
/// address (byte offset in the log) of the damage.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system I/O call failed. The message includes the
    /// system's, so [`std::error::Error::source`] is `None` (a report that
    /// prints the chain of sources, such as `anyhow`'s `{:#}`, printed it
    /// twice); match the variant for the [`io::Error`] itself.
    #[error("I/O error: {0}")]
    Io(io::Error),

    /// A file of the store holds bytes that fail a check (checksum, magic,
    /// length bound). `offset` is the log address of the damaged record, or
    /// the byte offset inside a metadata file.
    #[error("corruption at offset {offset}: {reason}")]
    Corruption {
        /// Log address or file offset of the damage, in bytes.
        offset: u64,
        /// What check failed.
        reason: String,
    },

    /// The key is longer than [`crate::MAX_KEY_BYTES`]; nothing was written.
    #[error("key of {len} bytes exceeds the limit of {max} bytes")]
    KeyTooLarge {
        /// Length of the rejected key, in bytes.
        len: usize,
        /// The limit, in bytes.
        max: usize,
    },

    /// The value is longer than [`crate::MAX_VALUE_BYTES`] (or than what one
    /// segment of this store can hold); nothing was written.
    #[error("value of {len} bytes exceeds the limit of {max} bytes")]
    ValueTooLarge {
        /// Length of the rejected value, in bytes.
        len: usize,
        /// The limit, in bytes.
        max: usize,
    },

    /// A write batch's records do not fit in one segment; nothing was
    /// written.
    #[error("write batch of {len} bytes exceeds the limit of {max} bytes")]
    BatchTooLarge {
        /// Encoded size of the batch's records, in bytes.
        len: usize,
        /// The limit (what one segment holds), in bytes.
        max: usize,
    },

    /// Another handle, in this process or another one, has the store open
    /// in a way that excludes this open: a writable handle excludes every
    /// other, read-only handles exclude a writable one (see
    /// [`crate::Options::read_only`]).
    #[error("store {path} is locked by another process or handle")]
    Locked {
        /// The store's directory.
        path: PathBuf,
    },

    /// The store was written by an incompatible format version.
    #[error("incompatible store format: found version {found}, expected {expected}")]
    IncompatibleFormat {
        /// Version found in the store's metadata file.
        found: u32,
        /// Version this build reads and writes.
        expected: u32,
    },

    /// The options given to [`crate::Db::open`] are invalid, or disagree with
    /// the geometry the store was created with.
    #[error("invalid options: {0}")]
    InvalidOptions(String),

    /// A path given to emberkv cannot be used: a store path that is not a
    /// directory, a read-only open or `check` of a directory that holds no
    /// store, or a `backup` destination that is not empty.
    #[error("{path}: {reason}")]
    InvalidPath {
        /// The path.
        path: PathBuf,
        /// Why it cannot be used.
        reason: String,
    },

    /// An earlier fdatasync (or a write, for another reason than a lack of
    /// space or file descriptors) failed, and the store refuses further
    /// writes rather than pretend they are durable (the fjall "poison"
    /// rule); reopening it recovers what the segment files hold.
    #[error("store refuses writes after a failed fdatasync or write; reopen it")]
    Closed,

    /// A write to a store opened with [`crate::Options::read_only`];
    /// nothing was written.
    #[error("the store was opened read-only")]
    ReadOnly,

    /// A call through a handle that a forked child process inherited from
    /// the process that opened the store; nothing was done. The child
    /// shares the parent's files but not its threads, and its copy of the
    /// store's memory is as it stood at the fork: a write from it would
    /// overwrite the parent's later records. Open the store in the child
    /// once the parent has closed it.
    #[error("store handle inherited across fork(); open the store in this process instead")]
    Forked,

    /// [`crate::Db::is_durable`] was given a [`crate::WriteMark`] that
    /// another handle made (another store, or an earlier open of this
    /// one): its place in this log means nothing.
    #[error("write mark from another store handle")]
    ForeignMark,
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Error {
        Error::Io(e)
    }
}

impl Error {
    /// Whether this is a file that does not exist (a segment retired by
    /// compaction after its address was read from the index).
    pub(crate) fn is_missing_file(&self) -> bool {
        matches!(self, Error::Io(e) if e.kind() == std::io::ErrorKind::NotFound)
    }

    /// Whether this is a lack of disk space, quota or file descriptors: a
    /// write that failed for it wrote nothing a retry would not write again,
    /// and can be retried once there is room.
    pub(crate) fn is_exhaustion(&self) -> bool {
        /// `ENFILE` and `EMFILE` (the same on Linux, the BSDs and macOS),
        /// which have no `io::ErrorKind` of their own.
        const OUT_OF_FILES: [i32; 2] = [23, 24];
        matches!(self, Error::Io(e) if matches!(
            e.kind(),
            std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
        ) || e.raw_os_error().is_some_and(|n| OUT_OF_FILES.contains(&n)))
    }

    /// Whether this is the process's want of a resource, not something
    /// of the store: [`Error::is_exhaustion`]'s, or memory (`ENOMEM`).
    /// A check that meets it fails with it instead of listing it as a
    /// problem of the store.
    pub(crate) fn is_out_of_resources(&self) -> bool {
        self.is_exhaustion()
            || matches!(self, Error::Io(e) if e.kind() == std::io::ErrorKind::OutOfMemory)
    }

    pub(crate) fn corruption(offset: u64, reason: impl Into<String>) -> Self {
        Error::Corruption {
            offset,
            reason: reason.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(errno: i32) -> Error {
        Error::Io(io::Error::from_raw_os_error(errno))
    }

    #[test]
    fn the_process_wanting_a_resource_is_told_from_damage() {
        // ENFILE, EMFILE, ENOSPC, EDQUOT, ENOMEM.
        for errno in [23, 24, 28, 122, 12] {
            assert!(os(errno).is_out_of_resources(), "errno {errno}");
        }
        assert!(
            !os(12).is_exhaustion(),
            "ENOMEM is not a write's exhaustion"
        );
        // EIO, ENOENT, EACCES, EISDIR: about the store's files.
        for errno in [5, 2, 13, 21] {
            assert!(!os(errno).is_out_of_resources(), "errno {errno}");
        }
        assert!(!Error::corruption(0, "damage").is_out_of_resources());
    }
}
