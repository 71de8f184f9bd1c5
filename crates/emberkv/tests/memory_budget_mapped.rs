//! The memory budget holds with the default, mapped cold reads: the
//! memory the process allocates (`RssAnon`) grows by at most `hot_bytes`,
//! the index and a small constant, however much is written and read back.
//! The cold pages the gets touch are mapped file pages (`RssFile`), page
//! cache the kernel reclaims at will; they are counted and printed, not
//! bounded.
//!
//! One test in its own binary, since resident memory is per process.

mod budget;

use budget::{KEYS, VALUE, load, read_back, status_bytes};
use emberkv::{Db, Options};

#[test]
fn allocated_memory_stays_within_the_hot_tier_budget_with_mapped_reads() {
    const HOT: usize = 16 << 20;
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(
        dir.path(),
        Options::default()
            .hot_bytes(HOT)
            .key_capacity(KEYS as usize)
            .segment_bytes(64 << 20)
            .compaction_garbage(None),
    )
    .unwrap();
    let (anon, file) = (status_bytes("RssAnon:"), status_bytes("RssFile:"));
    load(&db);
    // Every 3rd key (85 MiB of cold records), then the first 1,500 keys
    // three times over.
    read_back(
        &db,
        (0..KEYS).step_by(3).chain((0..3).flat_map(|_| 0..1_500)),
    );
    let stats = db.stats().unwrap();
    let grown = status_bytes("RssAnon:").saturating_sub(anon);
    let mapped = status_bytes("RssFile:").saturating_sub(file);
    let allowed = HOT as u64 + stats.index_bytes as u64 + (16 << 20);
    println!(
        "allocated memory grew by {} MiB, mapped file pages by {} MiB",
        grown >> 20,
        mapped >> 20
    );
    assert!(
        grown <= allowed,
        "allocated memory grew by {} MiB for {} MiB of data; allowed {} MiB \
         (hot tier {} MiB + index {} MiB + 16 MiB)",
        grown >> 20,
        (KEYS as u64 * VALUE as u64) >> 20,
        allowed >> 20,
        HOT >> 20,
        stats.index_bytes >> 20
    );
    // The gets read through the maps: nothing went to the read cache, and
    // the pages they read are mapped.
    assert_eq!((stats.read_cache_bytes, stats.read_cache_hits), (0, 0));
    assert!(
        mapped >= 64 << 20,
        "mapped file pages grew by {mapped} bytes"
    );
    assert!(stats.hot_bytes <= HOT + (1 << 20), "{stats:?}");
}
