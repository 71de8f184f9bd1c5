//! `check` and `salvage` on a read-only file system (a failing disk the
//! kernel remounted so, say): an attack on the CLI found both failing with
//! `EROFS`, as they opened the lock file and the segment files for
//! writing. Needs `mount` (root, outside most containers); skipped with a
//! message elsewhere.

use std::path::Path;
use std::process::Command;

use emberkv::{Db, Options};

/// Runs `mount args...`; whether it succeeded.
fn mount(args: &[&str]) -> bool {
    Command::new("mount")
        .args(args)
        .output()
        .is_ok_and(|out| out.status.success())
}

/// A tmpfs at `at`, unmounted when dropped.
struct Tmpfs<'a>(&'a Path);

impl Drop for Tmpfs<'_> {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0).output();
    }
}

#[test]
fn check_and_salvage_read_a_store_on_a_read_only_file_system() {
    let dir = tempfile::tempdir().unwrap();
    let at = dir.path();
    let path = at.to_str().unwrap();
    if !mount(&["-t", "tmpfs", "-o", "size=64m", "tmpfs", path]) {
        eprintln!("skipped: cannot mount a tmpfs here");
        return;
    }
    let _unmount = Tmpfs(at);
    let store = at.join("store");
    {
        let db = Db::open(&store, Options::default().segment_bytes(1 << 20)).unwrap();
        for k in 0..3_000u32 {
            db.insert(&k.to_le_bytes(), &[k as u8; 1_000]).unwrap();
        }
        db.close().unwrap();
    }
    assert!(mount(&["-o", "remount,ro", path]), "remount read-only");
    let report = emberkv::check(&store).unwrap();
    assert!(report.is_sound(), "{report}");
    let mut keys = 0;
    let salvaged = emberkv::salvage(&store, |key, value, _| {
        let k = u32::from_le_bytes(key.try_into().unwrap());
        assert_eq!(value, [k as u8; 1_000]);
        keys += 1;
        Ok(())
    })
    .unwrap();
    assert!(salvaged.is_whole());
    assert_eq!(keys, 3_000);
}
