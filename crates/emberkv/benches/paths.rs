//! Micro-benchmarks of emberkv's point paths (criterion): the index probe
//! alone (a get of an absent key), a get from the hot tier and from the
//! cold tail, `contains_key`, and inserts of new and existing keys.
//!
//! Run with `cargo bench -p emberkv --bench paths`; a name after `--`
//! filters (`cargo bench -p emberkv --bench paths -- get/`). One thread, so
//! these measure the path's own cost, not contention; the board
//! (`emberkv-bench`) measures 8 threads against the peers. On a shared
//! machine, compare two builds by alternating runs, or count instructions
//! with `valgrind --tool=callgrind` (see docs/PERFORMANCE.md).

use std::hint::black_box;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use emberkv::{Db, Options};

/// Keys in each store: 16-byte keys, as on the board.
const KEYS: u64 = 20_000;
/// Value size, in bytes, as on the board.
const VALUE_BYTES: usize = 1024;

fn key(i: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(b"benchkey");
    k[8..].copy_from_slice(&i.to_be_bytes());
    k
}

/// A store of [`KEYS`] keys with 1 KiB values, and the directory holding it.
fn store(options: Options) -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let db = Db::open(dir.path(), options.key_capacity(KEYS as usize * 2)).expect("open");
    let value = vec![0x5Au8; VALUE_BYTES];
    for i in 0..KEYS {
        db.insert(&key(i), &value).expect("insert");
    }
    (dir, db)
}

/// A fixed pseudo-random walk over `0..n` (a 64-bit LCG, Knuth MMIX).
struct Walk(u64);

impl Walk {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

fn gets(c: &mut Criterion) {
    let (_hot_dir, hot) = store(Options::default());
    // A hot tier of 4 MiB (the minimum) holds the last ~4,000 records: the
    // first half of the keys are read from segment files (page cache), or,
    // once read twice, from the read cache (default 32 MiB, room for all).
    let (_cold_dir, cold) = store(Options::default().hot_bytes(4 << 20));
    cold.sync().expect("sync");
    let (_uncached_dir, uncached) =
        store(Options::default().hot_bytes(4 << 20).read_cache_bytes(0));
    uncached.sync().expect("sync");
    // A read cache of 1 MiB holds a tenth of the cold records: most gets
    // miss it and pay its bookkeeping on top of the read.
    let (_small_dir, small) = store(
        Options::default()
            .hot_bytes(4 << 20)
            .read_cache_bytes(1 << 20),
    );
    small.sync().expect("sync");
    let mut group = c.benchmark_group("get");
    group.throughput(Throughput::Elements(1));
    let mut out = Vec::with_capacity(2 * VALUE_BYTES);
    let mut walk = Walk(1);
    group.bench_function("hot_hit", |b| {
        b.iter(|| hot.get_into(black_box(&key(walk.next(KEYS))), &mut out))
    });
    group.bench_function("cold_hit", |b| {
        b.iter(|| cold.get_into(black_box(&key(walk.next(KEYS / 2))), &mut out))
    });
    group.bench_function("cold_hit_uncached", |b| {
        b.iter(|| uncached.get_into(black_box(&key(walk.next(KEYS / 2))), &mut out))
    });
    group.bench_function("cold_hit_small_cache", |b| {
        b.iter(|| small.get_into(black_box(&key(walk.next(KEYS / 2))), &mut out))
    });
    group.bench_function("miss", |b| {
        b.iter(|| hot.get_into(black_box(&key(KEYS + walk.next(KEYS))), &mut out))
    });
    group.bench_function("contains_key", |b| {
        b.iter(|| hot.contains_key(black_box(&key(walk.next(KEYS)))))
    });
    group.finish();
}

fn inserts(c: &mut Criterion) {
    let mut group = c.benchmark_group("insert");
    group.throughput(Throughput::Elements(1));
    let value = vec![0xA5u8; VALUE_BYTES];
    let (_dir, db) = store(Options::default());
    let mut walk = Walk(2);
    group.bench_function("overwrite_1k", |b| {
        b.iter(|| db.insert(black_box(&key(walk.next(KEYS))), black_box(&value)))
    });
    let mut next = KEYS;
    group.bench_function("new_key_1k", |b| {
        b.iter_batched(
            || {
                next += 1;
                key(next)
            },
            |k| db.insert(&k, &value),
            BatchSize::SmallInput,
        )
    });
    group.bench_function("remove_absent", |b| {
        b.iter(|| db.remove(black_box(&key(u64::MAX - walk.next(KEYS)))))
    });
    group.finish();
}

criterion_group!(paths, gets, inserts);
criterion_main!(paths);
