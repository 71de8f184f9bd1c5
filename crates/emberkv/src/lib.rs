//! emberkv: an embedded key/value store built as a *hash-log*.
//!
//! A sharded hash index in memory maps each key to the log address of its
//! newest record; the log's tail lives in memory (the hot tier, where
//! writes land) and its older part in segment files on disk (the cold tail,
//! read by offset). A get is one hash, one index probe and one record read.
//! The design follows Bitcask (Sheehy and Smith, 2010) and FASTER
//! (Chandramouli et al., SIGMOD 2018); `docs/ARCHITECTURE.md` in the
//! repository records what is built.
//!
//! ```
//! use emberkv::{Db, Options};
//!
//! # fn main() -> emberkv::Result<()> {
//! let dir = tempfile::tempdir()?;
//! let db = Db::open(dir.path(), Options::default())?;
//! db.insert(b"user:42", b"Ada")?;
//! assert_eq!(db.get(b"user:42")?.as_deref(), Some(&b"Ada"[..]));
//! assert!(db.remove(b"user:42")?);
//! assert_eq!(db.get(b"user:42")?, None);
//! db.close()?;
//! # Ok(())
//! # }
//! ```
//!
//! # Durability
//!
//! | mode | a write returns when | survives a process crash | survives a power cut |
//! |------|----------------------|--------------------------|----------------------|
//! | default (`sync_writes = false`) | the record is in memory | every write older than the flush window | the same |
//! | `sync_writes = true` | an fdatasync covers the record (shared with concurrent writers) | every acknowledged write | every acknowledged write |
//!
//! The flush window is [`Options::flush_interval`] (100 ms by default, at
//! most 1 s) plus the time of one write and fdatasync of the unflushed hot
//! tier (at most 64 MiB, or [`Options::hot_bytes`] when smaller). In default mode
//! what survives a crash is a prefix of the log, so of each writer's
//! acknowledged operations. [`Db::sync`] makes everything so far
//! durable on demand; [`Db::close`] and drop do it too.
//!
//! # Expiry
//!
//! [`Db::insert_with_ttl`], [`Db::expire`] and friends store an expiry time
//! in the record: wall-clock Unix time in milliseconds (`SystemTime`,
//! resolution 1 ms), so a TTL keeps counting down across restarts. A key
//! whose expiry is at or before now is never returned, from memory or from
//! a file; its record is reclaimed by compaction. Setting the system clock
//! back makes keys live longer, forward makes them expire sooner (as in
//! Redis). [`Db::len`] counts an expired key until a write, compaction or
//! the background expiry sweep removes it.
//!
//! # Limits
//! Keys up to [`MAX_KEY_BYTES`] (64 KiB), values up to [`MAX_VALUE_BYTES`]
//! (64 MiB); empty keys and values are valid. No ordered scans: iteration
//! ([`Db::iter`], [`Db::keys`], [`Db::scan`]) visits keys in no particular
//! order.

#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

mod backup;
mod batch;
mod cache;
mod check;
mod checkpoint;
mod checksum;
mod clock;
mod compaction;
mod compression;
mod db;
mod descriptors;
mod dictionary;
mod error;
mod expiry;
mod flusher;
mod fork;
#[doc(hidden)]
pub mod fuzzing;
mod index;
mod iter;
mod log;
mod maintenance;
mod manifest;
mod memory;
mod meta;
mod options;
mod prefetch;
mod record;
mod recovery;
mod salvage;
mod stats;
mod storage;
mod sync;

pub use batch::WriteBatch;
pub use check::{CheckReport, check};
pub use compaction::CompactionReport;
pub use compression::Compression;
pub use db::{Db, WriteMark};
pub use error::{Error, Result};
pub use iter::Iter;
pub use options::Options;
pub use salvage::{Damage, SalvageReport, salvage};
pub use stats::Stats;

/// Largest key, in bytes (64 KiB).
pub const MAX_KEY_BYTES: usize = 64 << 10;
/// Largest value, in bytes (64 MiB), with the default 256 MiB segments.
pub const MAX_VALUE_BYTES: usize = 64 << 20;
/// On-disk format version written to the meta file and segment headers.
/// Version 2 added compressed values (record flags 16 and 32) and the
/// `DICTIONARY` file; version 3 the durable mark in segment headers (see
/// the README's "Durability contract"); version 4 the span of a record
/// updated in place (record bytes 5..8, before then reserved); version 5
/// values compressed as LZ4 blocks (record flag 64). This build reads
/// stores of versions 1 to 4 too, and [`Db::open`] marks them version 5
/// before writing anything, so that an older build refuses them
/// ([`Error::IncompatibleFormat`]) instead of taking a compressed record
/// for a torn tail, a marked header for a damaged one, or a span for
/// damage.
pub const FORMAT_VERSION: u32 = 5;
/// Oldest on-disk format version this build reads.
pub(crate) const OLDEST_READABLE_VERSION: u32 = 1;

/// Compiles and runs the Rust examples of the repository's README.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
