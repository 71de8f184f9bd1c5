//! The store's zstd dictionary: trained once from its own values, kept in
//! the `DICTIONARY` file, and named by every frame compressed with it.
//!
//! A dictionary pays for small values that share structure (200-byte JSON
//! documents compress to 0.27 of their size with one, 0.86 without) and
//! does nothing for values that compress well on their own (see
//! `docs/PERFORMANCE.md`), so one is adopted only when it measures better
//! on values held out of its training.
//!
//! `DICTIONARY` (little-endian), written to a temporary name, fsynced,
//! renamed and the directory fsynced, before any record uses it:
//!
//! | offset | size | field |
//! |-------:|-----:|-------|
//! | 0 | 8 | magic `EMBERDIC` |
//! | 8 | 4 | format version (1) |
//! | 12 | 4 | dictionary id (zstd's, non-zero) |
//! | 16 | 8 | store id |
//! | 24 | 4 | dictionary length n (bytes, at most 1 MiB) |
//! | 28 | n | the zstd dictionary |
//! | 28 + n | 4 | CRC32C of bytes 0..28 + n |

use std::fs;
use std::path::Path;

use zstd::zstd_safe::{self, CDict, DDict};

use crate::checksum::crc32c;
use crate::error::{Error, Result};
use crate::storage::replace_durably;

/// The dictionary file's name.
pub(crate) const FILE: &str = "DICTIONARY";
const TMP: &str = "DICTIONARY.tmp";
const MAGIC: &[u8; 8] = b"EMBERDIC";
const VERSION: u32 = 1;
const HEADER_BYTES: usize = 28;
/// Largest dictionary the file may hold: 1 MiB (trained ones are
/// [`TRAINED_BYTES`]).
const MAX_BYTES: usize = 1 << 20;
/// Size of a trained dictionary: 16 KiB.
const TRAINED_BYTES: usize = 16 << 10;

/// Values longer than this (16 KiB) are not sampled: a dictionary is for
/// small values.
pub(crate) const MAX_SAMPLE_VALUE: usize = 16 << 10;
/// Sample bytes worth training on: 64 KiB, in at least
/// [`MIN_SAMPLES`] values.
pub(crate) const MIN_SAMPLE_BYTES: usize = 64 << 10;
/// Fewest sampled values worth training on.
pub(crate) const MIN_SAMPLES: usize = 256;
/// Sample bytes gathered at most: 1 MiB.
pub(crate) const MAX_SAMPLE_BYTES: usize = 1 << 20;

/// Share of the held-out samples' compressed size that compressing with
/// the dictionary must save to adopt it: 15%.
const MIN_GAIN: f64 = 0.15;

/// A zstd dictionary, prepared for compression and decompression.
pub(crate) struct Dictionary {
    /// zstd's id of the dictionary, written in each frame compressed with it.
    pub(crate) id: u32,
    bytes: Vec<u8>,
    pub(crate) cdict: CDict<'static>,
    pub(crate) ddict: DDict<'static>,
}

impl std::fmt::Debug for Dictionary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dictionary")
            .field("id", &self.id)
            .field("bytes", &self.bytes.len())
            .finish()
    }
}

impl Dictionary {
    /// Prepares `bytes`, a zstd dictionary, for compression at `level`.
    /// `None` when zstd does not take it or it has no id.
    fn prepare(bytes: Vec<u8>, level: i32) -> Option<Dictionary> {
        let id = zstd_safe::get_dict_id_from_dict(&bytes)?.get();
        let cdict = CDict::try_create(&bytes, level)?;
        let ddict = DDict::try_create(&bytes)?;
        Some(Dictionary {
            id,
            bytes,
            cdict,
            ddict,
        })
    }

    /// Trains a dictionary on three quarters of `samples` (values of the
    /// store) and returns it if compressing the other quarter at `level`
    /// with it saves at least [`MIN_GAIN`] of their compressed size
    /// without it; `None` otherwise, or when the samples are too few
    /// ([`MIN_SAMPLES`], [`MIN_SAMPLE_BYTES`]) or training fails.
    pub(crate) fn train(samples: &[Vec<u8>], level: i32) -> Option<Dictionary> {
        let total: usize = samples.iter().map(Vec::len).sum();
        if samples.len() < MIN_SAMPLES || total < MIN_SAMPLE_BYTES {
            return None;
        }
        // Every fourth sample is held out to judge the dictionary.
        let (held, training): (Vec<_>, Vec<_>) =
            samples.iter().enumerate().partition(|(i, _)| i % 4 == 3);
        let training: Vec<&Vec<u8>> = training.into_iter().map(|(_, s)| s).collect();
        let bytes = zstd::dict::from_samples(&training, TRAINED_BYTES).ok()?;
        let dictionary = Dictionary::prepare(bytes, level)?;
        let mut cctx = zstd_safe::CCtx::try_create()?;
        let (mut plain, mut with) = (0usize, 0usize);
        let mut out = Vec::new();
        for (_, sample) in held {
            out.clear();
            out.reserve(zstd_safe::compress_bound(sample.len()));
            plain += cctx
                .compress(&mut out, sample, level)
                .ok()?
                .min(sample.len());
            out.clear();
            with += cctx
                .compress_using_cdict(&mut out, sample, &dictionary.cdict)
                .ok()?
                .min(sample.len());
        }
        (with as f64 <= plain as f64 * (1.0 - MIN_GAIN)).then_some(dictionary)
    }

    /// Deletes what a crash in [`Dictionary::store`] may have left (the
    /// file it writes before renaming it), for a writable open: the tools
    /// that only read a store leave it be.
    pub(crate) fn remove_leftover(dir: &Path) {
        let _ = fs::remove_file(dir.join(TMP));
    }

    /// Loads the store's dictionary from `dir`, if it has one, prepared
    /// for compression at `level`.
    ///
    /// # Errors
    /// [`Error::Corruption`] when the file is damaged, from another store,
    /// or not a dictionary zstd takes (the records compressed with it could
    /// not be read); I/O errors.
    pub(crate) fn load(dir: &Path, store_id: u64, level: i32) -> Result<Option<Dictionary>> {
        let bytes = match fs::read(dir.join(FILE)) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let bad = |why: &str| Error::corruption(0, format!("{FILE}: {why}"));
        if bytes.len() < HEADER_BYTES + 4 || &bytes[..8] != MAGIC {
            return Err(bad("not a dictionary file"));
        }
        let u32_at = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().expect("4 bytes"));
        let len = u32_at(24) as usize;
        if len > MAX_BYTES || bytes.len() != HEADER_BYTES + len + 4 {
            return Err(bad("length does not match the file"));
        }
        if u32_at(HEADER_BYTES + len) != crc32c(&bytes[..HEADER_BYTES + len]) {
            return Err(bad("checksum mismatch"));
        }
        if u32_at(8) != VERSION {
            return Err(Error::IncompatibleFormat {
                found: u32_at(8),
                expected: VERSION,
            });
        }
        if u64::from_le_bytes(bytes[16..24].try_into().expect("8 bytes")) != store_id {
            return Err(bad("belongs to another store"));
        }
        let dictionary =
            Dictionary::prepare(bytes[HEADER_BYTES..HEADER_BYTES + len].to_vec(), level)
                .filter(|d| d.id == u32_at(12))
                .ok_or_else(|| bad("not a zstd dictionary with the id it states"))?;
        Ok(Some(dictionary))
    }

    /// Writes the dictionary to `dir` durably (temporary file, fsync,
    /// rename, directory fsync).
    ///
    /// # Errors
    /// I/O errors.
    pub(crate) fn store(&self, dir: &Path, store_id: u64) -> Result<()> {
        let mut out = Vec::with_capacity(HEADER_BYTES + self.bytes.len() + 4);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&self.id.to_le_bytes());
        out.extend_from_slice(&store_id.to_le_bytes());
        out.extend_from_slice(&(self.bytes.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.bytes);
        out.extend_from_slice(&crc32c(&out).to_le_bytes());
        replace_durably(dir, TMP, FILE, &out)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::compression::tests::noise;

    /// JSON-like documents of about 200 bytes: the values a dictionary is
    /// for.
    pub(crate) fn documents(n: u64) -> Vec<Vec<u8>> {
        let mix = |x: u64| x.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29) % 100_000;
        (0..n)
            .map(|i| {
                format!(
                    "{{\"id\":{i},\"name\":\"user{}\",\"email\":\"user{}@example.com\",\
                     \"country\":\"{}\",\"plan\":\"{}\",\"active\":{},\"score\":{}}}",
                    mix(i),
                    mix(i + 1),
                    ["DE", "FR", "US", "JP"][(mix(i + 2) % 4) as usize],
                    ["free", "pro", "team"][(mix(i + 3) % 3) as usize],
                    mix(i + 4) % 2 == 0,
                    mix(i + 5) % 1000
                )
                .into_bytes()
            })
            .collect()
    }

    #[test]
    fn small_documents_get_a_dictionary_and_noise_does_not() {
        assert!(Dictionary::train(&documents(2000), 1).is_some());
        let noise: Vec<Vec<u8>> = (0..2000).map(|i| noise(i, 200)).collect();
        assert!(Dictionary::train(&noise, 1).is_none());
        assert!(Dictionary::train(&documents(100), 1).is_none(), "too few");
    }

    #[test]
    fn store_and_load_roundtrip_and_damage_is_corruption() {
        let dir = tempfile::tempdir().unwrap();
        assert!(Dictionary::load(dir.path(), 5, 1).unwrap().is_none());
        let d = Dictionary::train(&documents(2000), 1).unwrap();
        d.store(dir.path(), 5).unwrap();
        let loaded = Dictionary::load(dir.path(), 5, 1).unwrap().unwrap();
        assert_eq!((loaded.id, &loaded.bytes), (d.id, &d.bytes));
        assert!(matches!(
            Dictionary::load(dir.path(), 6, 1),
            Err(Error::Corruption { .. })
        ));
        let file = fs::read(dir.path().join(FILE)).unwrap();
        for cut in [0, 4, HEADER_BYTES, file.len() - 1] {
            fs::write(dir.path().join(FILE), &file[..cut]).unwrap();
            assert!(
                matches!(
                    Dictionary::load(dir.path(), 5, 1),
                    Err(Error::Corruption { .. })
                ),
                "cut at {cut}"
            );
        }
        for i in (0..file.len()).step_by(97) {
            let mut bad = file.clone();
            bad[i] ^= 0x10;
            fs::write(dir.path().join(FILE), &bad).unwrap();
            assert!(
                Dictionary::load(dir.path(), 5, 1).is_err(),
                "flip at byte {i}"
            );
        }
    }
}
