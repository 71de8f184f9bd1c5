use emberkv::{Db, Options};
fn cpu_us() -> u64 {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    (ru.ru_utime.tv_sec as u64 * 1_000_000 + ru.ru_utime.tv_usec as u64)
        + (ru.ru_stime.tv_sec as u64 * 1_000_000 + ru.ru_stime.tv_usec as u64)
}
fn main() {
    let dir = tempfile::tempdir_in("/tmp/setexp").unwrap();
    let db = Db::open(
        dir.path(),
        Options::default()
            .compaction_garbage(None)
            .max_space_amplification(f64::INFINITY)
            .segment_bytes(32 << 20),
    )
    .unwrap();
    let value = vec![b'x'; 1024];
    let keys = 200_000u64;
    for k in 0..keys {
        db.insert(format!("key:{k:012}").as_bytes(), &value)
            .unwrap();
    }
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for _ in 0..keys {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        db.insert(format!("key:{:012}", x % keys).as_bytes(), &value)
            .unwrap();
    }
    db.sync().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let before = db.stats().unwrap();
    let c0 = cpu_us();
    let t0 = std::time::Instant::now();
    let r = db.compact().unwrap();
    let (cpu, wall) = (cpu_us() - c0, t0.elapsed());
    let after = db.stats().unwrap();
    println!(
        "compact: {} segments, {} MiB copied, cpu {} ms, wall {} ms, amp {:.2} -> {:.2}",
        r.segments,
        r.bytes_copied >> 20,
        cpu / 1000,
        wall.as_millis(),
        before.space_amplification,
        after.space_amplification
    );
}
