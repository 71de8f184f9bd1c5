//! Measures how long reopening a store takes, with and without its index
//! checkpoint.
//!
//! ```sh
//! cargo run --release -p emberkv --example restart -- [KEYS] [VALUE_BYTES]
//! ```
//!
//! Defaults: 10,000,000 keys of 16 bytes with 64-byte values (about 1 GiB
//! of log). The store is written in a temporary directory under the current
//! one, closed (which writes the checkpoint), reopened three times, then
//! reopened three times with the checkpoint deleted (a full replay).

use std::time::Instant;

use emberkv::{Db, Options, WriteBatch};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let keys: u64 = args.next().map_or(Ok(10_000_000), |a| a.parse())?;
    let value_bytes: usize = args.next().map_or(Ok(64), |a| a.parse())?;
    let dir = tempfile::tempdir_in(".")?;
    let options = Options::default().key_capacity(keys as usize);

    let start = Instant::now();
    let db = Db::open(dir.path(), options.clone())?;
    let mut batch = WriteBatch::new();
    let mut key = [0u8; 16];
    let value = vec![0x5Au8; value_bytes];
    for k in 0..keys {
        key[..8].copy_from_slice(&k.to_le_bytes());
        key[8..].copy_from_slice(&k.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_le_bytes());
        batch.insert(&key, &value);
        if batch.len() == 10_000 {
            db.apply_batch(&batch)?;
            batch.clear();
        }
    }
    db.apply_batch(&batch)?;
    let stats = db.stats()?;
    db.close()?;
    println!(
        "wrote {keys} keys ({} MiB on disk, index {:.1} bytes/key) in {:.1} s",
        stats.disk_bytes >> 20,
        stats.index_bytes_per_key,
        start.elapsed().as_secs_f64()
    );

    for label in ["with checkpoint", "full replay"] {
        for rep in 1..=3 {
            if label == "full replay" {
                // Closing after a full replay writes a new checkpoint.
                std::fs::remove_file(dir.path().join("CHECKPOINT"))?;
            }
            let start = Instant::now();
            let db = Db::open(dir.path(), options.clone())?;
            let opened = start.elapsed();
            assert_eq!(db.len() as u64, keys);
            db.close()?;
            println!("reopen {label}, run {rep}: {:.3} s", opened.as_secs_f64());
        }
    }
    Ok(())
}
