//! The memory budget holds when the data is many times larger: with gets
//! by positioned reads (`map_cold_reads(false)`), the process's resident
//! memory grows by at most `hot_bytes`, `read_cache_bytes`, the index and
//! a small constant, however much is written and read back
//! (`memory_budget_mapped.rs` checks the default, mapped reads).
//!
//! One test in its own binary, since resident memory is per process.

mod budget;

use budget::{KEYS, VALUE, load, read_back, status_bytes};
use emberkv::{Db, Options};

#[test]
fn resident_memory_stays_within_the_hot_tier_and_read_cache_budget() {
    const HOT: usize = 16 << 20;
    const CACHE: usize = 8 << 20;
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(
        dir.path(),
        Options::default()
            .hot_bytes(HOT)
            .read_cache_bytes(CACHE)
            .map_cold_reads(false)
            .key_capacity(KEYS as usize)
            .segment_bytes(64 << 20)
            .compaction_garbage(None),
    )
    .unwrap();
    let before = status_bytes("VmRSS:");
    load(&db);
    // Every 7th key (37 MiB of cold records, more than the read cache
    // holds), then the first 1,500 keys three times over (6 MiB of records
    // read again, which the read cache keeps).
    read_back(
        &db,
        (0..KEYS).step_by(7).chain((0..3).flat_map(|_| 0..1_500)),
    );
    let stats = db.stats().unwrap();
    let grown = status_bytes("VmRSS:").saturating_sub(before);
    let allowed = (HOT + CACHE) as u64 + stats.index_bytes as u64 + (16 << 20);
    assert!(
        grown <= allowed,
        "resident memory grew by {} MiB for {} MiB of data; allowed {} MiB \
         (hot tier {} MiB + read cache {} MiB + index {} MiB + 16 MiB)",
        grown >> 20,
        (KEYS as u64 * VALUE as u64) >> 20,
        allowed >> 20,
        HOT >> 20,
        CACHE >> 20,
        stats.index_bytes >> 20
    );
    assert!(stats.hot_bytes <= HOT + (1 << 20), "{stats:?}");
    assert!(stats.read_cache_bytes <= CACHE, "{stats:?}");
    assert!(stats.read_cache_bytes > CACHE / 2, "{stats:?}");
    assert!(stats.read_cache_hits >= 1_000, "{stats:?}");
}
