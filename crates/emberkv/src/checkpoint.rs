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
//! | per shard: 8 | number of table slots `n` (a multiple of 8) |
//! | 8 | used slots `u` (live and deleted entries) |
//! | 4 | number of segments `m` with live records |
//! | 40 * m | per segment: number, keys, record bytes, logical bytes, keys with an expiry |
//! | n / 8 | which slots are used: bit `i % 8` of byte `i / 8` for slot `i` |
//! | 8 * u | the used slots' entries, in slot order |
//! | 4 | CRC32C of everything before it |
//!
//! So a checkpoint costs 8 bytes a key plus one bit a slot (about 8.2 to
//! 8.3 bytes a key), not 8 bytes a slot, empty ones included (9 to 18
//! bytes a key for a grown index, as layout 2 did; an open still reads
//! that layout). The space bound keeps room for two checkpoints (see
//! [`peak_bytes`]): for small values that room is most of what the bound
//! leaves for garbage.
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
use crate::index::{EMPTY, Index, SHARDS, SegmentLive, ShardImage};
use crate::storage::sync_dir;

const FILE: &str = "CHECKPOINT";
const TMP: &str = "CHECKPOINT.tmp";
const MAGIC: &[u8; 8] = b"EMBERCKP";
/// The layout of `CHECKPOINT`: 2 added the count of keys with an expiry
/// per segment, 3 keeps only the used slots' entries (and a bitmap of
/// them). Open reads layouts 2 and 3; a checkpoint of another layout is
/// ignored (open replays the log instead), so a store written by an older
/// build opens as usual.
const VERSION: u32 = 3;
/// Layout 2: every slot's entry, empty ones included.
const DENSE_VERSION: u32 = 2;

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
        let mut used = vec![0u8; image.entries.len().div_ceil(8)];
        for (i, _) in (image.entries.iter().enumerate()).filter(|&(_, &e)| e != EMPTY) {
            used[i / 8] |= 1 << (i % 8);
        }
        out.put(&used)?;
        for e in image.entries.iter().filter(|&&e| e != EMPTY) {
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
/// `slots` table slots (each table a multiple of 8), `used` of them used,
/// between them: the layout above, 8 bytes a used slot and a bit a slot.
pub(crate) fn encoded_len(shards: usize, segments: u64, slots: u64, used: u64) -> u64 {
    32 + 20 * shards as u64 + 40 * segments + slots / 8 + 8 * used + 4
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

/// The store's checkpoint when it is sound (it loads as [`load`] does);
/// `None` when there is none or it fails its checks, which is then ignored.
///
/// # Errors
/// [`Error::Io`] when the file is there but cannot be read (out of file
/// descriptors, say): taking that for no checkpoint would lose what it
/// says the log must hold, and a store that lost records would pass.
pub(crate) fn load_sound(dir: &Path, store_id: u64) -> Result<Option<Loaded>> {
    match load(dir, store_id) {
        Err(e @ Error::Io(_)) => Err(e),
        loaded => Ok(loaded.ok().flatten()),
    }
}

/// The `covered` of the store's sound checkpoint ([`load_sound`]), else 0:
/// how far the log must reach (`recovery::Span::claimed`), for `check`
/// and `salvage`.
///
/// # Errors
/// [`load_sound`]'s.
pub(crate) fn claimed(dir: &Path, store_id: u64) -> Result<u64> {
    Ok(load_sound(dir, store_id)?.map_or(0, |c| c.covered))
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
    let dense = match r.u32()? {
        VERSION => false,
        DENSE_VERSION => true,
        _ => return Err(bad(8, "another layout version")),
    };
    if r.u64()? != store_id {
        return Err(bad(12, "written by another store"));
    }
    let covered = r.u64()?;
    if r.u32()? as usize != SHARDS {
        return Err(bad(28, "another shard count"));
    }
    let mut images = Vec::with_capacity(SHARDS);
    let (mut table_memory, memory) = (0u64, crate::memory::physical());
    for _ in 0..SHARDS {
        let n = r.u64()?;
        let used = r.u64()?;
        let m = r.u32()? as u64;
        if n == 0 || n > 1 << 32 || used > n || (!dense && n % 8 != 0) {
            return Err(bad(r.at, "impossible table size"));
        }
        // Layout 3 stores a table's empty slots as bits: a file can ask
        // for 64 times its size in tables. More than the machine's memory
        // is refused (the store then replays its log) rather than granted
        // by overcommit and filled until the process is killed.
        table_memory += n * 8;
        if memory.is_some_and(|memory| table_memory > memory) {
            return Err(bad(r.at, "tables larger than this machine's memory"));
        }
        // Bounds before allocating: the counts must fit in what is left.
        let table_bytes = if dense { n * 8 } else { n / 8 + used * 8 };
        if m * 40 + table_bytes > (r.bytes.len() - r.at) as u64 {
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
        let entries = if dense {
            (0..n).map(|_| r.u64()).collect::<Result<Vec<u64>>>()?
        } else {
            used_entries(&mut r, n as usize, used)?
        };
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

/// A table of `n` slots read from layout 3's bitmap and its `used`
/// entries (see the module docs).
///
/// # Errors
/// [`Error::Corruption`] when the bitmap marks other than `used` slots,
/// or an entry it marks is empty.
fn used_entries(r: &mut Reader<'_>, n: usize, used: u64) -> Result<Vec<u64>> {
    let bitmap = r.take(n / 8)?;
    let marked: u64 = bitmap.iter().map(|b| u64::from(b.count_ones())).sum();
    if marked != used {
        return Err(bad(
            r.at,
            &format!("{marked} slots marked used, {used} counted"),
        ));
    }
    let mut entries = crate::memory::try_filled(n, || EMPTY)
        .ok_or_else(|| bad(r.at, &format!("a table of {n} slots cannot be allocated")))?;
    for (byte, &bits) in bitmap.iter().enumerate() {
        let mut bits = bits;
        while bits != 0 {
            let slot = byte * 8 + bits.trailing_zeros() as usize;
            bits &= bits - 1;
            match r.u64()? {
                EMPTY => return Err(bad(r.at, "an empty entry in a used slot")),
                e => entries[slot] = e,
            }
        }
    }
    Ok(entries)
}

/// A check of `CHECKPOINT` failed at byte `at`, for `reason`.
fn bad(at: usize, reason: &str) -> Error {
    Error::corruption(at as u64, format!("{FILE}: {reason}"))
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let end = end.ok_or_else(|| bad(self.at, "truncated"))?;
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
        let index = Index::with_capacity(100).unwrap();
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

    /// A store of 30,000 keys, 3,000 of them removed since (so that the
    /// tables hold deleted slots too), and its checkpoint.
    fn store_with_checkpoint() -> (tempfile::TempDir, crate::Db) {
        let dir = tempfile::tempdir().unwrap();
        let options = crate::Options::default()
            .key_capacity(1_000)
            .compaction_garbage(None);
        let db = crate::Db::open(dir.path(), options).unwrap();
        for k in 0..30_000u32 {
            db.insert(&k.to_le_bytes(), &[1; 10]).unwrap();
        }
        for k in (0..30_000u32).step_by(10) {
            db.remove(&k.to_le_bytes()).unwrap();
        }
        db.core().checkpoint().unwrap();
        (dir, db)
    }

    /// The checkpoint's bytes with the trailing checksum made right again
    /// after a change.
    fn rechecksummed(mut bytes: Vec<u8>) -> Vec<u8> {
        let body = bytes.len() - 4;
        let crc = crate::checksum::crc32c(&bytes[..body]);
        bytes[body..].copy_from_slice(&crc.to_le_bytes());
        bytes
    }

    /// The offset of shard 0's bitmap in a checkpoint of layout 3.
    fn first_bitmap(bytes: &[u8]) -> usize {
        let m = u32::from_le_bytes(bytes[48..52].try_into().unwrap()) as usize;
        52 + 40 * m
    }

    #[test]
    fn a_checkpoint_holds_the_used_slots_alone_and_loads_every_entry_back() {
        let (dir, db) = store_with_checkpoint();
        let index = &db.core().index;
        let bytes = fs::read(dir.path().join(FILE)).unwrap();
        let loaded = decode(&bytes, db.core().store_id).unwrap();
        let images: Vec<ShardImage> = (0..SHARDS).map(|s| index.image(s)).collect();
        assert_eq!(loaded.images, images);
        let slots: usize = images.iter().map(|i| i.entries.len()).sum();
        let used: u64 = images.iter().map(|i| i.used).sum();
        assert!(images.iter().any(|i| i.entries.contains(&u64::MAX)));
        assert!(used >= 30_000 && (slots as u64) > used, "{used} of {slots}");
        // 8 bytes a used slot and a bit a slot: not 8 bytes a slot.
        assert_eq!(bytes.len() as u64, index.live_bytes().checkpoint);
        assert!((bytes.len() as u64) < 8 * used + slots as u64 / 8 + 20_000);
    }

    #[test]
    fn a_checkpoint_of_layout_2_still_loads() {
        let (dir, db) = store_with_checkpoint();
        let core = db.core();
        let sparse = fs::read(dir.path().join(FILE)).unwrap();
        let covered = u64::from_le_bytes(sparse[20..28].try_into().unwrap());
        let mut dense = Vec::new();
        dense.extend_from_slice(MAGIC);
        dense.extend_from_slice(&DENSE_VERSION.to_le_bytes());
        dense.extend_from_slice(&core.store_id.to_le_bytes());
        dense.extend_from_slice(&covered.to_le_bytes());
        dense.extend_from_slice(&(SHARDS as u32).to_le_bytes());
        let images: Vec<ShardImage> = (0..SHARDS).map(|s| core.index.image(s)).collect();
        for image in &images {
            dense.extend_from_slice(&(image.entries.len() as u64).to_le_bytes());
            dense.extend_from_slice(&image.used.to_le_bytes());
            dense.extend_from_slice(&(image.live.len() as u32).to_le_bytes());
            for (seg, l) in &image.live {
                for v in [*seg, l.keys, l.record_bytes, l.logical_bytes, l.expiring] {
                    dense.extend_from_slice(&v.to_le_bytes());
                }
            }
            for e in &image.entries {
                dense.extend_from_slice(&e.to_le_bytes());
            }
        }
        dense.extend_from_slice(&[0; 4]);
        let dense = rechecksummed(dense);
        let loaded = decode(&dense, core.store_id).unwrap();
        assert_eq!(loaded.covered, covered);
        assert_eq!(loaded.images, images);
        let storage = core.log.storage();
        Index::from_images(loaded.images, covered, |a| storage.segment_of(a), |_| false).unwrap();
        drop(db);
        // And a store whose checkpoint is of layout 2 opens from it.
        fs::write(dir.path().join(FILE), &dense).unwrap();
        let db = crate::Db::open(dir.path(), crate::Options::default()).unwrap();
        assert_eq!(db.len(), 27_000);
        assert_eq!(db.get(&11u32.to_le_bytes()).unwrap(), Some(vec![1; 10]));
        assert_eq!(db.get(&20u32.to_le_bytes()).unwrap(), None);
    }

    #[test]
    fn a_bitmap_that_disagrees_with_its_entries_is_rejected_even_checksummed() {
        let (dir, db) = store_with_checkpoint();
        let id = db.core().store_id;
        let bytes = fs::read(dir.path().join(FILE)).unwrap();
        let at = first_bitmap(&bytes);
        let n = u64::from_le_bytes(bytes[32..40].try_into().unwrap()) as usize;
        // One slot more or one fewer marked than `used` counts.
        let clear = (at..at + n / 8).find(|&i| bytes[i] != 0).unwrap();
        let set = (at..at + n / 8).find(|&i| bytes[i] != 0xFF).unwrap();
        for (i, flip) in [
            (clear, bytes[clear] & bytes[clear].wrapping_neg()),
            (set, !bytes[set] & bytes[set].wrapping_add(1)),
        ] {
            let mut bad = bytes.clone();
            bad[i] ^= flip;
            let err = decode(&rechecksummed(bad), id).map(|_| ()).unwrap_err();
            assert!(err.to_string().contains("marked used"), "{err}");
        }
        // An empty entry in a used slot.
        let mut bad = bytes.clone();
        bad[at + n / 8..at + n / 8 + 8].fill(0);
        let err = decode(&rechecksummed(bad), id).map(|_| ()).unwrap_err();
        assert!(err.to_string().contains("empty entry"), "{err}");
        // A table size that is not a multiple of 8.
        let mut bad = bytes.clone();
        bad[32..40].copy_from_slice(&(n as u64 + 1).to_le_bytes());
        let err = decode(&rechecksummed(bad), id).map(|_| ()).unwrap_err();
        assert!(err.to_string().contains("impossible table size"), "{err}");
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
