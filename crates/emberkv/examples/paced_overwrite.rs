//! Probe: CPU of the store's threads under a paced overwrite load.
//!
//! ```sh
//! cargo run --release -p emberkv --example paced_overwrite -- [RATE] [OPS]
//! ```
//!
//! Prefills 100,000 keys of 16 bytes with 1 KiB values, then overwrites
//! OPS (default 200,000) uniformly random keys from one thread at RATE
//! ops/s (default 50,000; 0 = unpaced), and prints each thread's CPU time
//! (Linux only), the records appended (writes and compaction's copies)
//! and the space amplification at the end and after 3 s at rest. The
//! environment variable `GARBAGE`, if set, is the store's
//! `Options::compaction_garbage` (default 0.5). docs/PERFORMANCE.md
//! ("compaction waits for half garbage while writers are busy") has its
//! figures.

use std::time::{Duration, Instant};

use emberkv::{Db, Options};

fn cpu_by_thread() -> Vec<(String, u64)> {
    let mut out = Vec::new();
    if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
        for t in tasks.flatten() {
            let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
            let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
            let after = stat.rsplit(')').next().unwrap_or("");
            let f: Vec<&str> = after.split_whitespace().collect();
            let ticks = f.get(11).and_then(|u| u.parse::<u64>().ok()).unwrap_or(0)
                + f.get(12).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
            out.push((
                format!("{}:{}", t.file_name().to_string_lossy(), comm.trim()),
                ticks,
            ));
        }
    }
    out.sort();
    out
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let rate: u64 = args.next().map_or(Ok(50_000), |a| a.parse())?;
    let ops: u64 = args.next().map_or(Ok(200_000), |a| a.parse())?;
    let keys = 100_000u64;
    let dir = tempfile::tempdir_in(".")?;
    let mut options = Options::default();
    if let Ok(g) = std::env::var("GARBAGE") {
        options = options.compaction_garbage(Some(g.parse()?));
    }
    let db = Db::open(dir.path(), options)?;
    let value = vec![b'x'; 1024];
    for k in 0..keys {
        db.insert(format!("key:{k:012}").as_bytes(), &value)?;
    }
    std::thread::sleep(Duration::from_secs(2));
    let before = db.stats()?;
    let cpu0 = cpu_by_thread();
    let start = Instant::now();
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for i in 0..ops {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        db.insert(format!("key:{:012}", x % keys).as_bytes(), &value)?;
        if rate > 0 {
            let due = Duration::from_secs_f64(i as f64 / rate as f64);
            if let Some(wait) = due.checked_sub(start.elapsed()) {
                std::thread::sleep(wait);
            }
        }
    }
    let took = start.elapsed();
    let cpu1 = cpu_by_thread();
    let after = db.stats()?;
    std::thread::sleep(Duration::from_secs(3));
    let rest = db.stats()?;
    let tick_us = 10_000.0;
    println!(
        "{ops} overwrites in {:.2} s ({:.0} ops/s)",
        took.as_secs_f64(),
        ops as f64 / took.as_secs_f64()
    );
    let mut total = 0.0;
    for (name, t1) in &cpu1 {
        let t0 = cpu0.iter().find(|(n, _)| n == name).map_or(0, |(_, t)| *t);
        let us = (t1 - t0) as f64 * tick_us / ops as f64;
        total += us;
        if t1 > &t0 {
            println!("{name:28} {us:6.2} us/op");
        }
    }
    println!("{:28} {total:6.2} us/op", "total");
    println!(
        "appended {} records per overwrite, {} compactions, amp {:.2} at end, {:.2} after 3 s",
        (after.records_appended - before.records_appended) as f64 / ops as f64,
        after.compactions - before.compactions,
        after.space_amplification,
        rest.space_amplification
    );
    db.close()?;
    Ok(())
}
