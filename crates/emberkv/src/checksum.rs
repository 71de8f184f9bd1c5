//! CRC32C (Castagnoli; the iSCSI polynomial, RFC 3720), the checksum of
//! every record and every metadata file.
//!
//! Computed by one of two crates, chosen by the CPU's features (which the
//! standard library detects once per process), since neither is the faster
//! on both CPUs this project has run on (docs/PERFORMANCE.md, 2026-12-08):
//! - with AVX-512 and VPCLMULQDQ, `crc-fast` (carry-less multiplication
//!   in 512-bit registers beside the `crc32` instruction): 33 to 51 ns for
//!   a 1 KiB record where `crc32c` took 90 to 113 ns;
//! - on other x86-64 CPUs `crc32c` (the `crc32` instruction, three
//!   interleaved streams per 768-byte block, one stream below that): 76 ns
//!   for a 1,060-byte record where `crc-fast`'s SSE path took 113 ns;
//!   level at 600 bytes, 1.2x to 1.5x as fast at the other sizes measured
//!   from 300 bytes to 1 MiB, and 1.1x to 1.35x as slow up to 256 bytes
//!   (the gain is `crc-fast`'s fixed cost per buffer over 256 bytes);
//! - on other architectures `crc-fast`, as before (not measured there).
//!
//! Both give the same values: a test below checks them against each
//! other, and the corruption tests check the one this CPU uses against an
//! independent table-driven implementation.

/// Whether `crc-fast` computes the checksums on this CPU: on x86-64 only
/// with AVX-512VL and VPCLMULQDQ (the test `crc-fast` makes for its
/// fastest path), and on every other architecture, where `crc32c` was
/// not measured against it (on 64-bit Arm `crc-fast` uses the `crc32`
/// instructions beside carry-less multiplication; `crc32c` 0.6 has no
/// hardware path for 32-bit x86).
fn wide_folds() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512vl")
            && std::arch::is_x86_feature_detected!("vpclmulqdq")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        true
    }
}

/// The CRC32C of `bytes`.
pub(crate) fn crc32c(bytes: &[u8]) -> u32 {
    if wide_folds() {
        crc_fast::crc32_iscsi(bytes)
    } else {
        crc32c::crc32c(bytes)
    }
}

/// A CRC32C computed over several pieces in turn.
///
/// `crc-fast`'s digest is 296 bytes and the other variant 4: one lives on
/// the stack for one record's checksum, or in a checkpoint's writer, never
/// in bulk, and boxing it would cost an allocation per insert.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Crc32c {
    /// `crc-fast`'s running digest.
    Folds(crc_fast::Digest),
    /// The CRC32C of the pieces so far, which `crc32c` extends.
    Streams(u32),
}

impl Crc32c {
    pub(crate) fn new() -> Crc32c {
        if wide_folds() {
            Crc32c::Folds(crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc32Iscsi))
        } else {
            Crc32c::Streams(0)
        }
    }

    pub(crate) fn update(&mut self, bytes: &[u8]) {
        match self {
            Crc32c::Folds(digest) => digest.update(bytes),
            Crc32c::Streams(crc) => *crc = crc32c::crc32c_append(*crc, bytes),
        }
    }

    /// The CRC32C of everything passed to [`Crc32c::update`] so far.
    pub(crate) fn value(&self) -> u32 {
        match self {
            Crc32c::Folds(digest) => digest.finalize() as u32,
            Crc32c::Streams(crc) => *crc,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values_and_pieces_agree() {
        // The check value of CRC-32C (reveng's catalogue: CRC-32/ISCSI).
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        let mut c = Crc32c::new();
        c.update(b"1234");
        c.update(b"");
        c.update(b"56789");
        assert_eq!(c.value(), 0xE306_9283);
        let big: Vec<u8> = (0..5000u32).map(|i| (i * 7) as u8).collect();
        let mut c = Crc32c::new();
        c.update(&big[..1234]);
        c.update(&big[1234..]);
        assert_eq!(c.value(), crc32c(&big));
    }

    #[test]
    fn both_crates_give_the_same_values_whole_and_in_pieces() {
        let bytes: Vec<u8> = (0..50_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        // Every start alignment (both crates branch on the address), and
        // lengths through `crc32c`'s 768-byte and 24 KiB blocks.
        let lengths = [
            0, 1, 7, 8, 15, 16, 63, 64, 255, 256, 257, 300, 767, 768, 769, 1060, 4096, 8192,
            20_000, 24_575, 24_576, 24_577, 49_152,
        ];
        for (start, len) in (0..8).flat_map(|start| lengths.map(|len| (start, len))) {
            let b = &bytes[start..start + len];
            let whole = crc_fast::crc32_iscsi(b);
            assert_eq!(crc32c::crc32c(b), whole, "{len} bytes at {start}");
            assert_eq!(crc32c(b), whole, "{len} bytes at {start}");
            for cut in [0, len / 3, len / 2, len] {
                let mut folds =
                    Crc32c::Folds(crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc32Iscsi));
                let mut streams = Crc32c::Streams(0);
                for c in [&mut folds, &mut streams] {
                    c.update(&b[..cut]);
                    c.update(&b[cut..]);
                    assert_eq!(c.value(), whole, "{len} bytes at {start} cut at {cut}");
                }
            }
        }
    }
}
