//! A store handle that a forked child inherits from its parent. A test
//! binary of its own: `fork` copies only the thread that calls it, and the
//! child here runs the library, which is sound only while no other test's
//! threads hold locks the child would wait for.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;

use emberkv::{Db, Error, Options};

/// Copies the store's files as a crash would leave them (every write
/// here fdatasynced): the parent's store is still open.
fn copy_store(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

/// Regression (an attack helper, 2026-12-07): a child that wrote through
/// its copy of the parent's handle appended at the tail its copy of the
/// hot tier remembered, over records the parent had fdatasynced since
/// (1,100 of 1,200 acknowledged `sync_writes` keys lost in a crash copy,
/// one after a clean close), and dropping the copy aborted the child. Now
/// every call in the child fails with `Error::Forked`, and its drop leaves
/// the parent's store alone.
#[test]
fn a_forked_child_s_copy_of_a_handle_refuses_every_call_and_harms_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let options = Options::default()
        .sync_writes(true)
        .segment_bytes(1 << 20)
        .hot_bytes(4 << 20);
    let db = Db::open(&store, options.clone()).unwrap();
    let value = [5u8; 300];
    for k in 0..100u32 {
        db.insert(&k.to_le_bytes(), &value).unwrap();
    }
    let mark = db.write_mark().unwrap();
    let (mut parent_end, mut child_end) = UnixStream::pair().unwrap();
    // SAFETY: this binary's only test runs on this thread; the store's
    // own threads may hold its locks at the fork, which the child never
    // takes (every call fails before one), and glibc's `fork` keeps the
    // allocator usable in the child.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let mut go = [0u8];
        let _ = child_end.read_exact(&mut go);
        let refused = |r: Result<(), Error>| matches!(r, Err(Error::Forked));
        let all = refused(db.insert(b"child", b"c"))
            && refused(db.remove(&1u32.to_le_bytes()).map(drop))
            && refused(db.get(&1u32.to_le_bytes()).map(drop))
            && refused(db.sync())
            && refused(db.compact().map(drop))
            && refused(db.stats().map(drop))
            && refused(db.write_mark().map(drop))
            && refused(db.is_durable(mark).map(drop))
            && db
                .iter()
                .map(|item| item.map(drop))
                .collect::<Vec<_>>()
                .len()
                == 1
            && matches!(db.keys().next(), Some(Err(Error::Forked)));
        drop(db);
        // SAFETY: ends the child without running the test harness's exit.
        unsafe { libc::_exit(if all { 0 } else { 1 }) };
    }
    for k in 100..1_100u32 {
        db.insert(&k.to_le_bytes(), &value).unwrap();
    }
    parent_end.write_all(b"g").unwrap();
    let mut status = 0;
    // SAFETY: waits for the child made above, writing its status here.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the child's calls were not all refused (status {status:#x})"
    );
    for k in 1_100..1_200u32 {
        db.insert(&k.to_le_bytes(), &value).unwrap();
    }
    let crashed = dir.path().join("crashed");
    copy_store(&store, &crashed);
    db.close().unwrap();
    for at in [&crashed, &store] {
        let db = Db::open(at, options.clone()).unwrap();
        assert_eq!(db.get(b"child").unwrap(), None, "{}", at.display());
        for k in 0..1_200u32 {
            assert_eq!(
                db.get(&k.to_le_bytes()).unwrap().as_deref(),
                Some(&value[..]),
                "key {k} in {}",
                at.display()
            );
        }
        db.close().unwrap();
        assert!(emberkv::check(at).unwrap().is_clean(), "{}", at.display());
    }
}
