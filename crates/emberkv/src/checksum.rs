//! CRC32C (Castagnoli; the iSCSI polynomial, RFC 3720), the checksum of
//! every record and every metadata file.
//!
//! Computed by the `crc-fast` crate (SIMD carry-less multiplication). On
//! this project's 2-core test machine it took 33 to 51 ns for a 1 KiB
//! record where the `crc32c` crate took 90 to 113 ns, and every get
//! verifies one; both give the same values (the corruption tests check
//! them against an independent table-driven implementation).

/// The CRC32C of `bytes`.
pub(crate) fn crc32c(bytes: &[u8]) -> u32 {
    crc_fast::crc32_iscsi(bytes)
}

/// A CRC32C computed over several pieces in turn.
pub(crate) struct Crc32c(crc_fast::Digest);

impl Crc32c {
    pub(crate) fn new() -> Crc32c {
        Crc32c(crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc32Iscsi))
    }

    pub(crate) fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// The CRC32C of everything passed to [`Crc32c::update`] so far.
    pub(crate) fn value(&self) -> u32 {
        self.0.finalize() as u32
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
}
