//! A get that misses memory costs one positioned read of its record, with
//! no block read-amplification (issue 4). Counted as the process's read
//! system calls (`syscr` in `/proc/self/io`), so this file holds one test
//! and runs in a process of its own; cold reads go through `pread`
//! (`map_cold_reads(false)`: through the segments' maps, the default, a
//! cold get makes no system call at all, the page cache's page copied
//! where it is mapped), with the read cache off.

use emberkv::{Db, Options};

/// Read system calls this process has made so far (reading
/// `/proc/self/io` itself included).
fn read_syscalls() -> u64 {
    let io = std::fs::read_to_string("/proc/self/io").expect("/proc/self/io");
    let line = io
        .lines()
        .find(|l| l.starts_with("syscr:"))
        .expect("a syscr line");
    line["syscr:".len()..].trim().parse().expect("a count")
}

fn value(k: u32) -> Vec<u8> {
    let mut v = vec![(k % 251) as u8; 1_000];
    v[..4].copy_from_slice(&k.to_le_bytes());
    v
}

#[test]
fn a_cold_get_is_one_positioned_read_of_its_record() {
    let dir = tempfile::tempdir().unwrap();
    // A hot tier of 4 MiB under 20 MB of records, and nothing else that
    // reads the files while the gets run: no compaction, no expiring key.
    let options = Options::default()
        .hot_bytes(4 << 20)
        .map_cold_reads(false)
        .read_cache_bytes(0)
        .compaction_garbage(None);
    let db = Db::open(dir.path(), options.clone()).unwrap();
    for k in 0..20_000u32 {
        db.insert(&k.to_le_bytes(), &value(k)).unwrap();
    }
    db.close().unwrap();
    // Reopened, the hot tier holds nothing: every record is cold.
    let db = Db::open(dir.path(), options).unwrap();
    let keys: Vec<u32> = (0..2_000u32).map(|i| (i * 7_919) % 20_000).collect();
    let mut buf = Vec::with_capacity(1_024);
    let before = read_syscalls();
    for &k in &keys {
        assert!(db.get_into(&k.to_le_bytes(), &mut buf).unwrap(), "key {k}");
        assert_eq!(buf, value(k), "key {k}");
    }
    let reads = read_syscalls() - before;
    let gets = keys.len() as u64;
    // One `pread` a get (a second only for a record longer than the
    // length guessed from the last one read: none here, all are alike),
    // and the few reads of `/proc/self/io` itself.
    assert!(
        (gets..=gets + 8).contains(&reads),
        "{reads} read system calls for {gets} cold gets"
    );
}
