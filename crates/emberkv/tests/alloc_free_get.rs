//! `get_into` allocates nothing on a hit when the buffer is large enough:
//! a counting global allocator watches the calling thread.
//!
//! One test in its own binary, since the allocator is process-wide.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use emberkv::{Db, Options};

/// Counts the allocations of each thread.
struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards every call to the system allocator unchanged; the
// thread-local counter does not allocate (a const-initialised `Cell`).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|a| a.set(a.get() + 1));
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|a| a.set(a.get() + 1));
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

#[test]
fn get_into_a_large_enough_buffer_allocates_nothing_on_a_hit() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    for i in 0..1_000u32 {
        db.insert(&i.to_le_bytes(), &vec![i as u8; 1024]).unwrap();
    }
    let mut buf = Vec::with_capacity(4096);
    // Warm up this thread's one-time state (arc-swap's per-thread slots).
    assert!(db.get_into(&0u32.to_le_bytes(), &mut buf).unwrap());
    let before = allocations();
    for i in 0..1_000u32 {
        assert!(db.get_into(&i.to_le_bytes(), &mut buf).unwrap());
        assert_eq!(buf.len(), 1024);
    }
    assert!(!db.get_into(b"absent", &mut buf).unwrap());
    let during = allocations() - before;
    assert_eq!(during, 0, "{during} allocations in 1,001 gets");
    // The counter does see allocations: get (not get_into) makes one.
    let before = allocations();
    assert!(db.get(&5u32.to_le_bytes()).unwrap().is_some());
    assert!(allocations() > before);
}
