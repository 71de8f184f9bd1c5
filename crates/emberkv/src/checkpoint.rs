//! Index checkpoints: a copy of the hash index on disk, so that open
//! replays only the log written after it instead of the whole log.
//!
//! A checkpoint is fuzzy: `covered` is a durable log address read before
//! the shards are copied, one at a time under each shard's writer lock. Any
//! record below `covered` was indexed before its shard was copied (its
//! writer held that lock from before the append until after the index
//! update), and replaying every record from `covered` on, in log order,
//! leaves each key at its newest record whatever the copy already held.
//! Entries pointing into segments retired since are dropped on load: the
//! records compaction moved out of them were appended after `covered`, so
//! replay brings them back.
//!
//! `CHECKPOINT` (little-endian), written through a temporary file, fsync,
//! rename and directory fsync:
//!
//! | size | field |
//! |-----:|-------|
//! | 8 | magic `EMBERCKP` |
//! | 4 | checkpoint layout version ([`VERSION`]) |
//! | 8 | store id (from `emberkv.meta`; a copy from another store is ignored) |
//! | 8 | `covered`: replay starts here |
//! | 4 | number of shards |
//! | per shard: 8 | number of entries `n` |
//! | 8 | used slots |
//! | 4 | number of segments `m` with live records |
//! | 40 * m | per segment: number, keys, record bytes, logical bytes, keys with an expiry |
//! | 8 * n | the entries |
//! | 4 | CRC32C of everything before it |
//!
//! Anything that fails a check (checksum, bounds, store id, another layout
//! version) makes open ignore the checkpoint and replay everything. A sound
//! checkpoint whose `covered` lies beyond the recovered log is not ignored:
//! it is written only once the log below `covered` is durable, so the log
//! lost records (a segment file deleted or cut short), and open refuses
//! the store (`recovery::Span::claimed`).

use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::Path;

use crate::checksum::Crc32c;
use crate::error::{Error, Result};
use crate::index::{Index, SHARDS, SegmentLive, ShardImage};
use crate::storage::sync_dir;

const FILE: &str = "CHECKPOINT";
const TMP: &str = "CHECKPOINT.tmp";
const MAGIC: &[u8; 8] = b"EMBERCKP";
/// The layout of `CHECKPOINT`: 2 added the count of keys with an expiry
/// per segment. A checkpoint of another layout is ignored (open replays
/// the log instead), so a store written by an older build opens as usual.
const VERSION: u32 = 2;

/// A writer that checksums what passes through it.
struct Crc<W> {
    inner: W,
    crc: Crc32c,
}

impl<W: Write> Crc<W> {
    fn put(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.crc.update(bytes);
        self.inner.write_all(bytes)
    }
}

/// Writes a checkpoint of `index` covering the log below `covered` (a
/// durable record boundary read before this call). The copy may hold
/// entries of records appended after `covered`; `make_durable` is called
/// after the copy and before the checkpoint replaces the previous one, and
/// must make every record appended so far durable, so that no entry of a
/// published checkpoint points past what a crash leaves of the log.
///
/// # Errors
/// [`Error::Io`]; the previous checkpoint is left in place then, and the
/// partial temporary file removed.
pub(crate) fn write(
    dir: &Path,
    store_id: u64,
    index: &Index,
    covered: u64,
    make_durable: impl FnOnce() -> Result<()>,
) -> Result<()> {
    let tmp = dir.join(TMP);
    write_to(&tmp, store_id, index, covered)
        .and_then(|()| make_durable())
        .inspect_err(|_| {
            // Best effort: the next checkpoint truncates it anyway.
            let _ = fs::remove_file(&tmp);
        })?;
    fs::rename(&tmp, dir.join(FILE))?;
    sync_dir(dir)
}

fn write_to(tmp: &Path, store_id: u64, index: &Index, covered: u64) -> Result<()> {
    let mut out = Crc {
        inner: BufWriter::with_capacity(1 << 20, File::create(tmp)?),
        crc: Crc32c::new(),
    };
    out.put(MAGIC)?;
    out.put(&VERSION.to_le_bytes())?;
    out.put(&store_id.to_le_bytes())?;
    out.put(&covered.to_le_bytes())?;
    out.put(&(SHARDS as u32).to_le_bytes())?;
    for shard in 0..SHARDS {
        let image = index.image(shard);
        out.put(&(image.entries.len() as u64).to_le_bytes())?;
        out.put(&image.used.to_le_bytes())?;
        out.put(&(image.live.len() as u32).to_le_bytes())?;
        for (seg, l) in &image.live {
            for v in [*seg, l.keys, l.record_bytes, l.logical_bytes, l.expiring] {
                out.put(&v.to_le_bytes())?;
            }
        }
        for e in &image.entries {
            out.put(&e.to_le_bytes())?;
        }
    }
    let crc = out.crc.value();
    let mut file = out.inner.into_inner().map_err(|e| e.into_error())?;
    file.write_all(&crc.to_le_bytes())?;
    file.sync_all()?;
    Ok(())
}

/// Bytes of a checkpoint of an index of `shards` shards that count
/// `segments` live segments between them (each shard its own) and have
/// `slots` table slots between them: the layout above, 8 bytes a slot
/// whether it holds an entry or not (so 9 to 18 bytes a key for an index
/// grown to its keys, more for one presized past them).
pub(crate) fn encoded_len(shards: usize, segments: u64, slots: u64) -> u64 {
    32 + 20 * shards as u64 + 40 * segments + 8 * slots + 4
}

/// Bytes the checkpoint's files in `dir` take at their peak, when the
/// next checkpoint, of `next` bytes ([`encoded_len`] of the index now),
/// is written beside the last: `CHECKPOINT`, and the larger of `next` and
/// a `CHECKPOINT.tmp` being written (a missing file counts 0). A new
/// checkpoint is written every 64 MiB appended, several times a second
/// under a burst of overwrites; the space bound counts this with the
/// segment files (`maintenance::footprint`), so that one written between
/// two of its checks, larger than the last or not, does not take the
/// files past it.
///
/// # Errors
/// [`Error::Io`], other than for a missing file.
pub(crate) fn peak_bytes(dir: &Path, next: u64) -> Result<u64> {
    let len = |name| match fs::metadata(dir.join(name)) {
        Ok(meta) => Ok(meta.len()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(Error::from(e)),
    };
    // The temporary file first: renamed between the two reads, the new
    // checkpoint is then counted as `CHECKPOINT`, not missed.
    let tmp = len(TMP)?;
    Ok(len(FILE)? + tmp.max(next))
}

/// Deletes a `CHECKPOINT.tmp` that a crash (or a failed rename) left, for
/// a writable open: the tools that only read a store leave it be. It is
/// never read, but it counts in the store's files.
pub(crate) fn remove_leftover(dir: &Path) {
    let _ = fs::remove_file(dir.join(TMP));
}

/// A checkpoint read back: the address replay starts from, and the shards.
pub(crate) struct Loaded {
    pub covered: u64,
    pub images: Vec<ShardImage>,
}

/// The `covered` of the store's checkpoint when it is sound (it loads as
/// [`load`] does), else 0: how far the log must reach
/// (`recovery::Span::claimed`), for `check` and `salvage`.
pub(crate) fn claimed(dir: &Path, store_id: u64) -> u64 {
    match load(dir, store_id) {
        Ok(Some(c)) => c.covered,
        _ => 0,
    }
}

/// Reads the checkpoint, if there is one.
///
/// # Errors
/// [`Error::Corruption`] when it fails a check (the caller then ignores
/// it); [`Error::Io`].
pub(crate) fn load(dir: &Path, store_id: u64) -> Result<Option<Loaded>> {
    let bytes = match fs::read(dir.join(FILE)) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    decode(&bytes, store_id).map(Some)
}

fn decode(bytes: &[u8], store_id: u64) -> Result<Loaded> {
    let bad = |at: usize, reason: &str| Error::corruption(at as u64, format!("{FILE}: {reason}"));
    if bytes.len() < 36 {
        return Err(bad(0, "too short"));
    }
    let (body, crc) = bytes.split_at(bytes.len() - 4);
    if crate::checksum::crc32c(body).to_le_bytes() != crc {
        return Err(bad(body.len(), "checksum mismatch"));
    }
    let mut r = Reader { bytes: body, at: 0 };
    if r.take(8)? != MAGIC {
        return Err(bad(0, "bad magic"));
    }
    if r.u32()? != VERSION {
        return Err(bad(8, "another layout version"));
    }
    if r.u64()? != store_id {
        return Err(bad(12, "written by another store"));
    }
    let covered = r.u64()?;
    if r.u32()? as usize != SHARDS {
        return Err(bad(28, "another shard count"));
    }
    let mut images = Vec::with_capacity(SHARDS);
    for _ in 0..SHARDS {
        let n = r.u64()?;
        let used = r.u64()?;
        let m = r.u32()? as u64;
        if n == 0 || n > 1 << 32 || used > n {
            return Err(bad(r.at, "impossible table size"));
        }
        // Bounds before allocating: the counts must fit in what is left.
        if m * 40 + n * 8 > (r.bytes.len() - r.at) as u64 {
            return Err(bad(r.at, "counts exceed the file"));
        }
        let mut live = Vec::with_capacity(m as usize);
        for _ in 0..m {
            let seg = r.u64()?;
            let l = SegmentLive {
                keys: r.u64()?,
                record_bytes: r.u64()?,
                logical_bytes: r.u64()?,
                expiring: r.u64()?,
            };
            live.push((seg, l));
        }
        let entries = (0..n).map(|_| r.u64()).collect::<Result<Vec<u64>>>()?;
        images.push(ShardImage {
            entries,
            used,
            live,
        });
    }
    if r.at != r.bytes.len() {
        return Err(bad(r.at, "trailing bytes"));
    }
    Ok(Loaded { covered, images })
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let end =
            end.ok_or_else(|| Error::corruption(self.at as u64, format!("{FILE}: truncated")))?;
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }

    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_every_damage_is_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let index = Index::with_capacity(100);
        write(dir.path(), 7, &index, 4096, || Ok(())).unwrap();
        let bytes = fs::read(dir.path().join(FILE)).unwrap();
        let loaded = decode(&bytes, 7).unwrap();
        assert_eq!(loaded.covered, 4096);
        assert_eq!(loaded.images.len(), SHARDS);
        assert_eq!(loaded.images[3], index.image(3));
        assert!(decode(&bytes, 8).is_err(), "another store's checkpoint");
        for at in (0..bytes.len())
            .step_by(97)
            .chain([0, 8, 20, bytes.len() - 1])
        {
            let mut bad = bytes.clone();
            bad[at] ^= 0x20;
            assert!(decode(&bad, 7).is_err(), "flip at {at} accepted");
        }
        for len in [0, 10, 35, bytes.len() / 2, bytes.len() - 1] {
            assert!(
                decode(&bytes[..len], 7).is_err(),
                "truncation to {len} accepted"
            );
        }
    }

    /// [`encoded_len`], as the index's walk computes it, is the length of
    /// the file a checkpoint writes: for a store of 30,000 keys over
    /// three segments (whose index grew past its presized tables), and
    /// for an empty one. `peak_bytes` counts the file and the larger of
    /// the next checkpoint and a temporary file beside it.
    #[test]
    fn encoded_len_is_the_checkpoints_length_and_the_peak_counts_the_next() {
        let dir = tempfile::tempdir().unwrap();
        let options = crate::Options::default()
            .key_capacity(1_000)
            .compaction_garbage(None);
        let db = crate::Db::open(dir.path(), options).unwrap();
        let core = db.core();
        let file = dir.path().join(FILE);
        core.checkpoint().unwrap();
        let empty = core.index.live_bytes().checkpoint;
        assert_eq!(fs::metadata(&file).unwrap().len(), empty);
        for k in 0..30_000u32 {
            db.insert(&k.to_le_bytes(), &[1; 100]).unwrap();
            if k % 10_000 == 9_999 {
                core.log.seal_segment().unwrap();
            }
        }
        let next = core.index.live_bytes().checkpoint;
        assert!(next > empty + 30_000 * 8, "{next} / {empty}");
        assert_eq!(peak_bytes(dir.path(), next).unwrap(), empty + next);
        fs::write(dir.path().join(TMP), vec![0; next as usize + 1]).unwrap();
        assert_eq!(peak_bytes(dir.path(), next).unwrap(), empty + next + 1);
        core.checkpoint().unwrap();
        assert!(!dir.path().join(TMP).exists());
        assert_eq!(fs::metadata(&file).unwrap().len(), next);
    }
}
