//! Compressed values through the public API, from places a reader does
//! not expect to matter.

use std::cell::RefCell;
use std::sync::Arc;

use emberkv::{Compression, Db, Options};

const CHILD_ENV: &str = "EMBERKV_TLS_CHILD";

fn value(i: u32) -> Vec<u8> {
    format!("value {i} ").repeat(30).into_bytes()
}

/// A store whose keys `k0..k50` are stored compressed (compaction copied
/// them; `k50..k100` were overwritten).
fn compressed_store(dir: &std::path::Path) -> Arc<Db> {
    let opts = Options::default()
        .segment_bytes(1 << 20)
        .compaction_garbage(None)
        .compression(Compression::Zstd { level: 1 });
    let db = Db::open(dir, opts).unwrap();
    for i in 0..100 {
        db.insert(format!("k{i}").as_bytes(), &value(i)).unwrap();
    }
    for i in 50..100 {
        db.insert(format!("k{i}").as_bytes(), b"overwritten")
            .unwrap();
    }
    db.compact().unwrap();
    Arc::new(db)
}

/// Reads `k7` when the thread's locals are destroyed.
struct ReadOnDrop(Option<Arc<Db>>);

impl Drop for ReadOnDrop {
    fn drop(&mut self) {
        if let Some(db) = self.0.take() {
            let got = db.get(b"k7");
            assert_eq!(got.unwrap(), Some(value(7)));
            eprintln!("read from a thread-local destructor: ok");
        }
    }
}

thread_local! {
    static HOLDER: RefCell<ReadOnDrop> = const { RefCell::new(ReadOnDrop(None)) };
}

/// The child of [`a_get_from_a_thread_local_destructor_decodes`].
#[test]
fn tls_destructor_child() {
    if std::env::var(CHILD_ENV).is_err() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = compressed_store(dir.path());
    let reader = Arc::clone(&db);
    std::thread::spawn(move || {
        // The user's local first, then the engine's (the first
        // decompression on this thread): locals are destroyed in reverse,
        // so the engine's is gone when the user's destructor reads.
        HOLDER.with(|h| h.borrow_mut().0 = Some(Arc::clone(&reader)));
        assert_eq!(reader.get(b"k7").unwrap(), Some(value(7)));
    })
    .join()
    .unwrap();
}

/// Regression (found by an attack on the compression change): the zstd
/// contexts live in thread locals, and a get from a thread-local
/// destructor after they were destroyed panicked, which aborts the
/// process. Now it decodes with a context made for the call.
#[test]
fn a_get_from_a_thread_local_destructor_decodes() {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "tls_destructor_child", "--nocapture"])
        .env(CHILD_ENV, "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "child failed: {:?}\n{stderr}",
        out.status
    );
    assert!(
        stderr.contains("read from a thread-local destructor: ok"),
        "{stderr}"
    );
}

/// Values written, compressed by compaction, read from many threads while
/// more compaction runs: each reader decodes with its own context.
#[test]
fn compressed_values_read_from_many_threads() {
    let dir = tempfile::tempdir().unwrap();
    let db = compressed_store(dir.path());
    std::thread::scope(|s| {
        for t in 0..4u32 {
            let db = &db;
            s.spawn(move || {
                for round in 0..200 {
                    let i = (t * 13 + round) % 50;
                    assert_eq!(db.get(format!("k{i}").as_bytes()).unwrap(), Some(value(i)));
                }
            });
        }
        s.spawn(|| {
            for _ in 0..5 {
                db.compact().unwrap();
            }
        });
    });
}
