//! [`check`]: a read-only verification of a closed store.

use std::fmt;
use std::path::Path;

use crate::compression::{Codec, Compression};
use crate::dictionary::Dictionary;
use crate::error::Result;
use crate::index::{Index, KeyHasher, SHARDS};
use crate::log::read_cold;
use crate::record::Record;
use crate::recovery::{self, Mode};
use crate::storage::Segments;
use crate::{checkpoint, manifest, meta};

/// What [`check`] found.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct CheckReport {
    /// Segment files examined.
    pub segments: usize,
    /// Records whose checksum verified (pads not counted).
    pub records: u64,
    /// Of those, tombstones.
    pub tombstones: u64,
    /// Keys the replayed index holds.
    pub keys: usize,
    /// Bytes of the records verified.
    pub bytes_checked: u64,
    /// Every problem found, one line each; empty when the store is sound.
    pub problems: Vec<String>,
    /// What a process that died with the store open leaves, and the next
    /// writable open repairs, one line each; not problems:
    /// - a torn tail: the newest segment's bytes past its durable mark from
    ///   the first record that fails its checks on, with no record that
    ///   verifies after it (the records written last, cut, or the room
    ///   allocated ahead of them), which the open cuts off. The mark lags
    ///   the fdatasyncs (README, "Durability contract"), so damage to the
    ///   last records synced since it was written looks the same; damage
    ///   with records that verify after it, which no process crash leaves
    ///   (a power cut since the last fdatasync may), is a problem;
    /// - a newest segment whose creation was cut short (its file holds no
    ///   sound header), which the open creates again, when `NEWEST` (or
    ///   its being segment 0) tells that from a segment whose records
    ///   were lost (an older build's store or backup has no `NEWEST`, nor
    ///   a backup of a store whose only segment is headerless).
    pub repairs: Vec<String>,
}

impl CheckReport {
    /// Whether no problem was found (repairs an open makes do not count:
    /// see [`CheckReport::repairs`]).
    pub fn is_sound(&self) -> bool {
        self.problems.is_empty()
    }

    /// Whether no problem was found and nothing is left for an open to
    /// repair: what a clean close (or a backup) leaves.
    pub fn is_clean(&self) -> bool {
        self.is_sound() && self.repairs.is_empty()
    }
}

impl fmt::Display for CheckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} segments, {} records ({} tombstones, {} bytes) verified, {} keys",
            self.segments, self.records, self.tombstones, self.bytes_checked, self.keys
        )?;
        for r in &self.repairs {
            writeln!(f, "repaired by the next open: {r}")?;
        }
        for p in &self.problems {
            writeln!(f, "problem: {p}")?;
        }
        match self.problems.len() {
            0 if self.repairs.is_empty() => write!(f, "sound"),
            0 => write!(f, "sound; the next open repairs what is listed"),
            1 => write!(f, "1 problem"),
            n => write!(f, "{n} problems"),
        }
    }
}

/// Verifies the store in `path` without changing it: every record's
/// checksum, every segment header, that segments are consecutive, that
/// the index replayed from the log finds each key at its newest record,
/// and that each key's newest value decodes when it is stored compressed.
/// Problems are listed in the report rather than returned as errors. Past
/// a damaged record in a sealed segment the check goes on where
/// [`crate::salvage()`] would (the record's stated end, else the next page),
/// so that every damaged record is named, and so it does below the newest
/// segment's durable mark; past the mark the first one ends the log.
/// A store whose process died without closing it (and that was not opened
/// since) lists its newest segment's tail as torn: the records written
/// last, if they were cut, and with segments of 64 MiB or more the zeros
/// allocated ahead of the writes, which the next open cuts off; one that
/// died while it created a segment lists that segment's file as holding
/// no sound header, which the next open creates again. Those are
/// [`CheckReport::repairs`], not problems: such a store is sound (see
/// there for what cannot be told from them). Damage below the newest
/// segment's durable mark is a problem: open refuses it
/// ([`crate::salvage()`] gets the other keys out); so are damage past the
/// mark with records that verify after it (open cuts those off with it),
/// a damaged durable mark, and a segment file longer than a segment.
///
/// # Errors
/// [`Error::InvalidPath`](crate::Error::InvalidPath) when `path` holds no
/// store; [`Error::Locked`](crate::Error::Locked) when the store is open
/// elsewhere; errors reading the meta file or the compression dictionary
/// ([`Error::Corruption`](crate::Error::Corruption),
/// [`Error::IncompatibleFormat`](crate::Error::IncompatibleFormat));
/// [`Error::Io`](crate::Error::Io), among them an index checkpoint that is
/// there but cannot be read, and `EMFILE`/`ENFILE`, `ENOMEM`, `ENOSPC` or
/// `EDQUOT` when the process runs out of file descriptors, memory, disk
/// space or quota while it checks (an error
/// reading the store that is not about the process's resources, such as
/// `EIO`, is listed as a problem instead).
pub fn check(path: impl AsRef<Path>) -> Result<CheckReport> {
    let dir = path.as_ref();
    let _lock = meta::lock_shared(dir)?;
    let meta = meta::load(dir)?;
    let hasher = KeyHasher::new(meta.hash_seed);
    let storage = Segments::read_only(dir, meta.segment_bits, meta.store_id);
    let index = Index::with_capacity(0)?;
    index.track_homes(true);
    let mut report = CheckReport::default();
    let retired = manifest::load(dir)?;
    // Only decoding: the compression setting does not matter.
    let codec = Codec::new(
        Compression::None,
        Dictionary::load(dir, meta.store_id, 1)?,
        storage.segment_size(),
    );
    // The log must reach what a sound checkpoint records as durable.
    let claimed = checkpoint::claimed(dir, meta.store_id)?;
    recovery::replay(
        &storage,
        &retired,
        &index,
        &hasher,
        Mode::Check(&mut report),
        recovery::Span { from: 0, claimed },
        &mut recovery::Replayed::default(),
    )?;
    report.keys = index.len();
    let mut scratch = Vec::new();
    let mut value = Vec::new();
    for shard in 0..SHARDS {
        let table = index.table(shard);
        for slot in 0..table.len() {
            let Some(addr) = index.address_at(&table, slot) else {
                continue;
            };
            let verdict = read_cold(&storage, addr, &mut scratch).and_then(|h| {
                let r = Record::verify(h, &scratch, addr)?;
                if r.header.is_compressed() {
                    r.value_into(&codec, &mut value, addr)?;
                }
                let hash = hasher.hash(r.key);
                let found = index.find(hash, |a| Ok((a == addr).then_some(())))?;
                Ok((found.is_some(), r.header.is_tombstone()))
            });
            match verdict {
                Ok((true, false)) => {}
                Ok((false, _)) => report
                    .problems
                    .push(format!("index entry at {addr} is not found by its key")),
                Ok((_, true)) => report
                    .problems
                    .push(format!("index entry at {addr} points at a tombstone")),
                // Out of descriptors, memory, disk space or quota fails the
                // check: the process's trouble, not the store's.
                Err(e) => Mode::Check(&mut report).problem(e)?,
            }
        }
    }
    Ok(report)
}
