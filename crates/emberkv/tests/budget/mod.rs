//! The store shape, writes and reads that `memory_budget.rs` and
//! `memory_budget_mapped.rs` measure memory around.

use emberkv::Db;

/// Bytes of each value.
pub const VALUE: usize = 4096;
/// Keys written: 256 MiB of values, 16 times a 16 MiB hot tier.
pub const KEYS: u32 = 65_536;

/// A field of `/proc/self/status` (`VmRSS:`, `RssAnon:`, ...), in bytes.
pub fn status_bytes(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with(field)).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

/// Writes [`KEYS`] values of [`VALUE`] bytes, each carrying its key.
pub fn load(db: &Db) {
    let mut value = vec![0u8; VALUE];
    for k in 0..KEYS {
        value[..4].copy_from_slice(&k.to_le_bytes());
        value[VALUE - 1] = k as u8;
        db.insert(&k.to_le_bytes(), &value).unwrap();
    }
}

/// Gets each of `keys` and checks that its value is the one [`load`]
/// wrote.
pub fn read_back(db: &Db, keys: impl Iterator<Item = u32>) {
    let mut buf = Vec::with_capacity(VALUE);
    for k in keys {
        assert!(db.get_into(&k.to_le_bytes(), &mut buf).unwrap());
        assert_eq!((&buf[..4], buf[VALUE - 1]), (&k.to_le_bytes()[..], k as u8));
    }
}
