//! Probe: the CPU time of one compaction pass.
//!
//! ```sh
//! cargo run --release -p emberkv --example compaction_pass -- [KEYS]
//! ```
//!
//! Loads KEYS keys (default 200,000) of 16 bytes with 1 KiB values into a
//! store of 32 MiB segments with background compaction off, overwrites
//! KEYS uniformly random keys (about 63 % of them, so the older segments
//! are mostly garbage), then runs one `Db::compact()` on the calling
//! thread and prints that thread's CPU time for it (Linux: from
//! `/proc/thread-self/stat`), the wall time, the segments retired, the
//! bytes copied and the space amplification before and after.
//! docs/PERFORMANCE.md ("compaction reads its segments through their
//! maps") has its figures.

use std::time::{Duration, Instant};

use emberkv::{Db, Options};

/// This thread's user plus system CPU time, in clock ticks (10 ms), or 0
/// where `/proc/thread-self/stat` cannot be read.
fn thread_cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap_or_default();
    let after = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let field = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    field(11) + field(12)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let keys: u64 = std::env::args().nth(1).map_or(Ok(200_000), |a| a.parse())?;
    let dir = tempfile::tempdir_in(".")?;
    let options = Options::default()
        .compaction_garbage(None)
        .max_space_amplification(f64::INFINITY)
        .segment_bytes(32 << 20);
    let db = Db::open(dir.path(), options)?;
    let value = vec![b'x'; 1024];
    for k in 0..keys {
        db.insert(format!("key:{k:012}").as_bytes(), &value)?;
    }
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for _ in 0..keys {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        db.insert(format!("key:{:012}", x % keys).as_bytes(), &value)?;
    }
    db.sync()?;
    std::thread::sleep(Duration::from_millis(500));
    let before = db.stats()?;
    let (cpu, start) = (thread_cpu_ticks(), Instant::now());
    let report = db.compact()?;
    let (cpu, wall) = (thread_cpu_ticks() - cpu, start.elapsed());
    let after = db.stats()?;
    println!(
        "compaction: {} segments, {} MiB copied, CPU {} ms, wall {} ms, \
         space amplification {:.2} -> {:.2}",
        report.segments,
        report.bytes_copied >> 20,
        cpu * 10,
        wall.as_millis(),
        before.space_amplification,
        after.space_amplification
    );
    Ok(())
}
