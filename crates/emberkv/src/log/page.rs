//! A page of the hot tier: a fixed buffer that records are appended to
//! while other threads read the records already published in it.
//!
//! This is the crate's `unsafe` memory module (the log calls its unsafe
//! `fill` and `read`; `storage` has three foreign calls of its own: the
//! segment maps, `fallocate` and `sync_file_range`). The invariant that makes it
//! sound: a byte range of a page is written once, by the appender (which
//! holds the log's append lock, so writers never overlap), and only *after*
//! that write is its address published (a `Release` store of the log tail or
//! of an index entry). Readers and the flusher only read ranges they learnt
//! of through an `Acquire` load of such a publication, and a published range
//! is written again only by [`Page::overwrite`] (an update in place, see
//! below). Plain reads and writes therefore never touch the same byte
//! concurrently, which is what the `UnsafeCell` bytes allow.
//!
//! An update in place rewrites a published record that no write-out has
//! copied yet (`Log::update_in_place`) while lock-free readers may be
//! copying it. The page's version makes that a seqlock (Boehm, "Can
//! seqlocks get along with programming language memory models?", MSPC
//! 2012): the writer makes the version odd, stores the bytes, and makes it
//! even again; a reader ([`Page::read_versioned`]) loads the version,
//! copies the bytes, and keeps the copy only if the version was even and
//! has not changed. Both sides touch those bytes with atomic loads and
//! stores only, so a reader racing with the writer gets a copy it throws
//! away, never a data race. Records that an update in place may rewrite
//! (at or above the log's flushed address) are read only that way; once a
//! write-out has passed a record (it holds the log's flush lock, as the
//! updates do), the record is never rewritten again and plain reads are
//! sound.
//!
//! The buffer of an evicted page goes back to a [`PagePool`] when the last
//! reference to the page is dropped, and a new page of the same size takes
//! it as it is: its old bytes are never read, since every read (a get, or
//! the flusher's write to the file) is of a published range, every byte of
//! which the appender wrote since (a record in full, a pad with its payload
//! zeroed). Reusing buffers spares
//! the appender a page fault and the kernel's zeroing per 4 KiB of fresh
//! memory, taken under the append lock; ahead of the appender, the flusher
//! stocks the pool with buffers whose memory it faulted in itself
//! ([`PagePool::stock`]).
//!
//! A log's pool hands out buffers of the page size from an [`Arena`]: one
//! anonymous memory map, aligned to 2 MiB and advised for transparent huge
//! pages, cut into frames enough for the whole hot tier. A get reads a
//! record at a random place in the hot tier, so with 4 KiB pages nearly
//! every get missed the TLB (and walked the page tables, twice over in a
//! virtual machine); with 2 MiB pages 256 MiB of hot tier needs 128
//! entries. Gets per second about 10 % higher in a probe
//! (docs/PERFORMANCE.md). Where the kernel gives no huge pages the arena
//! works all the same with 4 KiB ones; where no map can be made the pool
//! falls back to buffers of its own (under Miri, which cannot map memory,
//! the arena is one aligned allocation instead).

use std::cell::UnsafeCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64 as RawAtomicU64};

use crate::sync::Mutex;
use crate::sync::atomic::{AtomicU64, Ordering, fence};

/// Alignment of an [`Arena`]'s first frame: the size of an x86-64 huge
/// page, so that each aligned 2 MiB of frames can be one.
const HUGE_PAGE_BYTES: usize = 2 << 20;

/// Most buffers of their own a [`PagePool`] without an arena keeps, and
/// the frames a log's arena has beyond its hot tier's budget: at most
/// 4 MiB of 1 MiB pages (a full hot tier evicts a page as each is started,
/// and the next page takes its memory back).
pub(crate) const POOL_BUFFERS: usize = 4;

/// Free buffers the flusher keeps faulted in for the appender's next pages
/// ([`PagePool::stock`]), and the most free frames an arena keeps faulted
/// in (8 MiB; beyond them a frame given back returns its memory to the
/// kernel). A fill seals a page about every millisecond: with two (as
/// until 2026-12-01) the appender still faulted in most of its pages
/// itself under its lock, at the cost of a fill's p99
/// (docs/PERFORMANCE.md).
pub(crate) const STOCKED_PAGES: usize = 8;

type Buffer = Box<[UnsafeCell<u8>]>;

/// Buffers of evicted pages of one size, kept for the next pages.
pub(crate) struct PagePool {
    /// The size of the buffers kept, in bytes.
    buffer_len: usize,
    /// Buffers of pages that had one of their own.
    free: Mutex<Vec<Buffer>>,
    /// Frames handed out before buffers of their own, if a map was made.
    arena: Option<Arena>,
}

impl PagePool {
    /// A pool of buffers of `buffer_len` bytes, each of its own; pages of
    /// other sizes are allocated and freed as usual.
    pub(crate) fn new(buffer_len: usize) -> PagePool {
        PagePool {
            buffer_len,
            free: Mutex::new(Vec::new()),
            arena: None,
        }
    }

    /// A pool that hands out `frames` buffers of `buffer_len` bytes from an
    /// [`Arena`] before any of their own (as [`PagePool::new`] when no map
    /// can be made). The map's memory is taken as frames are first used
    /// (where the kernel overcommits: with `vm.overcommit_memory = 2`
    /// the whole map counts against the commit limit at once).
    pub(crate) fn with_frames(buffer_len: usize, frames: usize) -> PagePool {
        PagePool {
            arena: Arena::new(buffer_len, frames),
            ..PagePool::new(buffer_len)
        }
    }

    /// Faults in the memory of the next buffers to be handed out until
    /// `count` are ready (as many as the arena has free; without one, at
    /// most [`POOL_BUFFERS`] buffers of their own): run off the write path
    /// (by the flusher), so that the appender, under its lock, seldom meets
    /// fresh memory.
    pub(crate) fn stock(&self, count: usize) {
        if let Some(arena) = &self.arena {
            arena.stock(count);
            return;
        }
        while self.free.lock().len() < count.min(POOL_BUFFERS) {
            // Best effort: where memory is short, the appender asks for
            // its pages itself.
            let Some(buffer) = faulted_in(self.buffer_len) else {
                return;
            };
            let mut free = self.free.lock();
            if free.len() < POOL_BUFFERS {
                free.push(buffer);
            }
        }
    }

    /// Memory for a page of `len` bytes, if the pool has some of that
    /// size.
    fn take(&self, len: usize) -> Option<Memory> {
        if len != self.buffer_len {
            return None;
        }
        if let Some(frame) = self.arena.as_ref().and_then(Arena::take) {
            return Some(frame);
        }
        self.free.lock().pop().map(Memory::Own)
    }

    /// The log that owns the pool is going: from now on its arena's frames
    /// keep their memory until the map itself goes (with the last page),
    /// instead of each frame given back past the stock returning its
    /// memory to the kernel first (a `madvise` each): a closing store drops
    /// its whole hot tier at once, 252 frames of 1 MiB for a full one of
    /// 256 MiB (docs/PERFORMANCE.md).
    pub(crate) fn close(&self) {
        if let Some(arena) = &self.arena {
            arena.frames.lock().closing = true;
        }
    }

    /// Takes back the memory of a dropped page. With an arena, a buffer of
    /// the page's own is freed (the arena's frames serve the next pages).
    fn give_back(&self, memory: Memory) {
        match (memory, &self.arena) {
            (Memory::Frame { index, .. }, Some(arena)) => arena.give_back(index),
            (Memory::Own(bytes), None) if bytes.len() == self.buffer_len => {
                let mut free = self.free.lock();
                if free.len() < POOL_BUFFERS {
                    free.push(bytes);
                }
            }
            _ => {}
        }
    }

    /// Buffers of their own held now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.free.lock().len()
    }

    /// Frames no page holds (fresh or ready); 0 without an arena.
    #[cfg(test)]
    pub(crate) fn idle_frames(&self) -> usize {
        self.arena.as_ref().map_or(0, |arena| {
            let frames = arena.frames.lock();
            frames.fresh.len() + frames.ready.len()
        })
    }
}

/// Frames of page buffers in one block of memory whose first frame is
/// aligned to [`HUGE_PAGE_BYTES`] (see the module docs). A frame belongs
/// to one page at a time, or to the lists here.
struct Arena {
    backing: Backing,
    /// The first byte of frame 0.
    base: *mut u8,
    frame_len: usize,
    frames: Mutex<Frames>,
}

/// The memory an [`Arena`]'s frames are cut from.
enum Backing {
    /// An anonymous map advised `MADV_HUGEPAGE`, frame 0 `skip` bytes into
    /// it.
    #[cfg(not(miri))]
    Map { map: memmap2::MmapMut, skip: usize },
    /// Under Miri, which cannot map memory: one allocation of the same
    /// alignment, so that Miri checks the frames' pointers all the same.
    #[cfg(miri)]
    Allocation(std::alloc::Layout),
}

/// An [`Arena`]'s free frames.
struct Frames {
    /// Never handed out nor stocked, or given back to the kernel since:
    /// their memory may not be faulted in. Handed out from the end.
    fresh: Vec<usize>,
    /// Stocked, or handed out before: their memory is faulted in. At most
    /// [`STOCKED_PAGES`].
    ready: Vec<usize>,
    /// Set by [`PagePool::close`]: frames given back keep their memory.
    closing: bool,
}

// SAFETY: `base` points into the memory that the arena owns; the arena
// hands each frame to one page at a time (under the `frames` mutex), and
// the bytes of a frame are accessed only through that page (whose own
// contract rules out data races) or, while no page has it, by `stock` or
// `give_back`, which took it out of the lists (or from its dropped page).
unsafe impl Send for Arena {}
// SAFETY: as for `Send`; shared access goes through the `frames` mutex.
unsafe impl Sync for Arena {}

impl Arena {
    /// An arena of `frames` frames of `frame_len` bytes, or `None` when
    /// its memory cannot be had.
    fn new(frame_len: usize, frames: usize) -> Option<Arena> {
        if frame_len == 0 || frames == 0 {
            return None;
        }
        let len = frame_len.checked_mul(frames)?;
        let (backing, base) = Backing::new(len)?;
        Some(Arena {
            backing,
            base,
            frame_len,
            frames: Mutex::new(Frames {
                fresh: (0..frames).rev().collect(),
                ready: Vec::new(),
                closing: false,
            }),
        })
    }

    /// Takes back frame `index` from a dropped page: ready for the next
    /// page, or, when [`STOCKED_PAGES`] are ready already (the hot tier
    /// holds pages of other sizes now), its memory given back to the
    /// kernel, so that idle frames do not add to the hot tier's memory
    /// (but once the pool is closing: see [`PagePool::close`]).
    fn give_back(&self, index: usize) {
        let mut frames = self.frames.lock();
        if frames.ready.len() < STOCKED_PAGES {
            frames.ready.push(index);
            return;
        }
        if frames.closing {
            frames.fresh.push(index);
            return;
        }
        drop(frames);
        self.backing.discard(index * self.frame_len, self.frame_len);
        self.frames.lock().fresh.push(index);
    }

    /// A free frame, ready ones first.
    fn take(&self) -> Option<Memory> {
        let mut frames = self.frames.lock();
        let index = frames.ready.pop().or_else(|| frames.fresh.pop())?;
        Some(Memory::Frame {
            index,
            // SAFETY: `index < frames`, so the frame lies inside the map.
            ptr: unsafe { self.base.add(index * self.frame_len) },
        })
    }

    /// Faults in fresh frames until `count` are ready or none is left.
    fn stock(&self, count: usize) {
        loop {
            let index = {
                let mut frames = self.frames.lock();
                if frames.ready.len() >= count {
                    return;
                }
                match frames.fresh.pop() {
                    Some(index) => index,
                    None => return,
                }
            };
            for at in (0..self.frame_len).step_by(4096) {
                // SAFETY: the frame, inside the map, was popped from the
                // free list under the lock, so no page holds it: nothing
                // else reads or writes it until it is pushed back below.
                unsafe { self.base.add(index * self.frame_len + at).write(1) };
            }
            self.frames.lock().ready.push(index);
        }
    }
}

impl Backing {
    /// Memory for `len` bytes of frames, and the first byte of frame 0.
    #[cfg(not(miri))]
    fn new(len: usize) -> Option<(Backing, *mut u8)> {
        let mut map = memmap2::MmapOptions::new()
            .len(len.checked_add(HUGE_PAGE_BYTES)?)
            .map_anon()
            .ok()?;
        let misalign = map.as_ptr() as usize % HUGE_PAGE_BYTES;
        let skip = (HUGE_PAGE_BYTES - misalign) % HUGE_PAGE_BYTES;
        // SAFETY: `skip < HUGE_PAGE_BYTES`, so `skip + len` bytes lie
        // inside the map of `len + HUGE_PAGE_BYTES` bytes.
        let base = unsafe { map.as_mut_ptr().add(skip) };
        // A hint: without it (or without huge pages in the kernel), the
        // frames are ordinary 4 KiB pages.
        #[cfg(target_os = "linux")]
        let _ = map.advise(memmap2::Advice::HugePage);
        Some((Backing::Map { map, skip }, base))
    }

    /// Memory for `len` bytes of frames, and the first byte of frame 0.
    #[cfg(miri)]
    fn new(len: usize) -> Option<(Backing, *mut u8)> {
        let layout = std::alloc::Layout::from_size_align(len, HUGE_PAGE_BYTES).ok()?;
        // SAFETY: `layout` has a non-zero size (`Arena::new` checked).
        let base = unsafe { std::alloc::alloc_zeroed(layout) };
        (!base.is_null()).then_some((Backing::Allocation(layout), base))
    }

    /// Gives the memory of the `len` bytes at `offset` from frame 0 back
    /// to the kernel (they read as zero after). Only for a frame no page
    /// holds.
    fn discard(&self, offset: usize, len: usize) {
        match self {
            #[cfg(not(miri))]
            Backing::Map { map, skip } => {
                // SAFETY: the range is one frame, inside the map; no page
                // holds it and it is in neither list, so nothing reads or
                // writes it, and its contents are not needed (a frame's old
                // bytes are never read).
                let _ = unsafe {
                    map.unchecked_advise_range(
                        memmap2::UncheckedAdvice::DontNeed,
                        skip + offset,
                        len,
                    )
                };
            }
            #[cfg(miri)]
            Backing::Allocation(_) => {
                // Under Miri the memory is an allocation, kept whole.
                let _ = (offset, len);
            }
        }
    }
}

#[cfg(miri)]
impl Drop for Arena {
    fn drop(&mut self) {
        let Backing::Allocation(layout) = self.backing;
        // SAFETY: allocated in `Backing::new` with this layout; no page
        // holds a frame (each holds the pool, which holds the arena).
        unsafe { std::alloc::dealloc(self.base, layout) };
    }
}

/// Where a page's bytes live.
enum Memory {
    /// A buffer of the page's own.
    Own(Buffer),
    /// Frame `index` of its pool's arena, whose first byte is `ptr`.
    Frame { index: usize, ptr: *mut u8 },
}

/// A page of the hot tier covering log addresses `start..start + len()`.
pub(crate) struct Page {
    start: u64,
    /// The first address whose bytes live in this page (bytes before it in
    /// the page are a segment header or were recovered from the file).
    mem_start: u64,
    /// Size of the page, in bytes.
    len: usize,
    memory: Memory,
    /// Where the memory goes when the page is dropped.
    pool: Option<Arc<PagePool>>,
    /// The seqlock of updates in place: odd while [`Page::overwrite`]
    /// stores bytes, bumped by two by each.
    version: AtomicU64,
}

// SAFETY: the bytes are only mutated through `fill`, whose contract (one
// writer at a time, on a range no reader has been told about) rules out data
// races; everything else in a `Page` is immutable (the pool it points at
// is behind a mutex), and the memory goes to the pool only in `drop`.
unsafe impl Sync for Page {}
// SAFETY: a page owns its memory (a buffer, or a frame its pool handed to
// it alone, in a map that the pool, which the page holds, keeps alive).
unsafe impl Send for Page {}

impl Page {
    /// A zeroed page of `len` bytes starting at log address `start`, whose
    /// first live byte is `mem_start` (the tests' pages).
    #[cfg(test)]
    pub(crate) fn new(start: u64, mem_start: u64, len: usize) -> Page {
        debug_assert!(mem_start >= start && mem_start <= start + len as u64);
        Page {
            start,
            mem_start,
            len,
            memory: Memory::Own(zeroed(len).expect("a test page's memory")),
            pool: None,
            version: AtomicU64::new(0),
        }
    }

    /// A page of no bytes at log address `at` (the page of a log whose
    /// address space is used up, where every append fails).
    pub(crate) fn empty(at: u64) -> Page {
        Page {
            start: at,
            mem_start: at,
            len: 0,
            memory: Memory::Own(Buffer::default()),
            pool: None,
            version: AtomicU64::new(0),
        }
    }

    /// A page of `len` bytes starting at log address `start`, whose first
    /// live byte is `mem_start`, in memory taken from `pool` when it has
    /// some of that size (its bytes are then those of an earlier page, or
    /// zero, to be written over before they are read: see the module
    /// docs), else in a zeroed buffer. The memory goes back to `pool` when
    /// the page is dropped.
    ///
    /// # Errors
    /// `ErrorKind::OutOfMemory` when the pool has none and a buffer of
    /// `len` bytes cannot be allocated (the process aborted there until
    /// 2026-12-07: an attack helper's finding under `ulimit -v`).
    pub(crate) fn try_recycled(
        pool: &Arc<PagePool>,
        start: u64,
        mem_start: u64,
        len: usize,
    ) -> std::io::Result<Page> {
        debug_assert!(mem_start >= start && mem_start <= start + len as u64);
        let memory = match pool.take(len) {
            Some(memory) => memory,
            None => Memory::Own(zeroed(len)?),
        };
        Ok(Page {
            start,
            mem_start,
            len,
            memory,
            pool: Some(Arc::clone(pool)),
            version: AtomicU64::new(0),
        })
    }

    /// [`Page::try_recycled`] for the tests, whose memory is there.
    #[cfg(test)]
    pub(crate) fn recycled(pool: &Arc<PagePool>, start: u64, mem_start: u64, len: usize) -> Page {
        Page::try_recycled(pool, start, mem_start, len).expect("a test page's memory")
    }

    /// The page's first byte.
    fn base(&self) -> *mut u8 {
        match &self.memory {
            // Mutable through the `UnsafeCell`s.
            Memory::Own(bytes) => bytes.as_ptr() as *mut u8,
            Memory::Frame { ptr, .. } => *ptr,
        }
    }

    /// The log address of the page's first byte.
    pub(crate) fn start(&self) -> u64 {
        self.start
    }

    /// The first log address whose bytes are held by this page.
    pub(crate) fn mem_start(&self) -> u64 {
        self.mem_start
    }

    /// The log address one past the page's last byte.
    pub(crate) fn end(&self) -> u64 {
        self.start + self.len as u64
    }

    /// Size of the page, in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Whether log address `addr` lies in memory in this page.
    pub(crate) fn holds(&self, addr: u64) -> bool {
        addr >= self.mem_start && addr < self.end()
    }

    /// Encodes into the page at `addr` by handing `f` a mutable view of
    /// `len` bytes there.
    ///
    /// # Safety
    /// The caller holds the log's append lock (no other `fill` runs), and
    /// no address inside `addr..addr + len` has been published to any reader
    /// yet.
    ///
    /// # Panics
    /// If the range is not inside the page.
    pub(crate) unsafe fn fill(&self, addr: u64, len: usize, f: impl FnOnce(&mut [u8])) {
        let off = self.offset(addr, len);
        // SAFETY: in bounds (checked by `offset`); the caller guarantees the
        // range is neither read nor written by anyone else while `f` runs, so
        // this `&mut` is unique.
        let dst = unsafe { std::slice::from_raw_parts_mut(self.base().add(off), len) };
        f(dst);
    }

    /// The `len` bytes at log address `addr`.
    ///
    /// # Safety
    /// The range was published to the caller (an `Acquire` load of the log
    /// tail or an index entry that covers it), so it is fully written and
    /// will not be written again.
    ///
    /// # Panics
    /// If the range is not inside the page.
    pub(crate) unsafe fn read(&self, addr: u64, len: usize) -> &[u8] {
        let off = self.offset(addr, len);
        // SAFETY: in bounds (checked by `offset`); by the caller's contract
        // no write to this range happens while the borrow lives.
        unsafe { std::slice::from_raw_parts(self.base().add(off), len) }
    }

    /// Rewrites the published bytes at `addr` with `bytes` (an update in
    /// place), with atomic stores under the page's seqlock (see the module
    /// docs).
    ///
    /// # Safety
    /// The caller holds the log's append lock (no other `fill` or
    /// `overwrite` runs) and its flush lock (no write-out reads the page),
    /// and every other reader of the range uses [`Page::read_versioned`].
    ///
    /// # Panics
    /// If the range is not inside the page.
    pub(crate) unsafe fn overwrite(&self, addr: u64, bytes: &[u8]) {
        let off = self.offset(addr, bytes.len());
        let version = self.version.load(Ordering::Relaxed);
        self.version.store(version + 1, Ordering::Relaxed);
        // The odd version is seen before any of the new bytes.
        fence(Ordering::Release);
        // SAFETY: in bounds (checked by `offset`); every access to these
        // bytes while they may change is atomic (the caller's contract).
        unsafe { store_atomic(self.base().add(off), bytes) };
        self.version.store(version + 2, Ordering::Release);
    }

    /// Copies the `len` published bytes at `addr` into `out` (replacing
    /// its contents) as of one moment between updates in place; returns
    /// `false`, with `out` holding a copy to be thrown away, when an
    /// [`Page::overwrite`] ran meanwhile (the caller tries again).
    ///
    /// # Safety
    /// The range was published to the caller (as for [`Page::read`]).
    ///
    /// # Panics
    /// If the range is not inside the page.
    pub(crate) unsafe fn read_versioned(&self, addr: u64, len: usize, out: &mut Vec<u8>) -> bool {
        let off = self.offset(addr, len);
        let before = self.version.load(Ordering::Acquire);
        out.clear();
        out.resize(len, 0);
        // SAFETY: in bounds (checked by `offset`); the bytes are published,
        // and read with atomic loads, which an overwrite may race with.
        unsafe { load_atomic(self.base().add(off), out) };
        // The loads above are done before the version is read again.
        fence(Ordering::Acquire);
        before & 1 == 0 && self.version.load(Ordering::Relaxed) == before
    }

    /// Asks the CPU to start loading the bytes `addr..addr + len` (clamped
    /// to the page) into its caches, one request per 64-byte line, so that
    /// a reader about to go through them in order (a checksum, a copy) does
    /// not meet their memory misses one after another: for a 1 KiB record
    /// in the hot tier, 10-20 % more gets per second in a probe
    /// (docs/PERFORMANCE.md). A hint, sound for any range, published or
    /// not: it reads and changes nothing. Does nothing on targets other
    /// than x86-64, or under Miri.
    pub(crate) fn prefetch(&self, addr: u64, len: usize) {
        if addr < self.start || addr >= self.end() {
            return;
        }
        let off = (addr - self.start) as usize;
        let end = off.saturating_add(len).min(self.len);
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        {
            use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
            let base = self.base() as *const i8;
            // Every 64 bytes from `off`, then the last byte, whose line the
            // steps miss when `off` is not on a line's start. A plain loop:
            // as a chain of iterators (`step_by`, then an `Option`), the
            // 17 prefetches of a 1 KiB record took about 190 instructions.
            let mut at = off;
            while at < end {
                // SAFETY: `off <= at < end <= self.len`, so the
                // pointer is inside the buffer; a prefetch neither reads nor
                // writes memory as far as the program can observe.
                unsafe { _mm_prefetch::<_MM_HINT_T0>(base.add(at)) };
                at += 64;
            }
            if end > off {
                // SAFETY: as above, `off <= end - 1 < self.len`.
                unsafe { _mm_prefetch::<_MM_HINT_T0>(base.add(end - 1)) };
            }
        }
        #[cfg(not(all(target_arch = "x86_64", not(miri))))]
        let _ = end;
    }

    /// Bytes from `addr` to the end of the page, clamped to `len`.
    pub(crate) fn available(&self, addr: u64, len: usize) -> usize {
        len.min((self.end() - addr) as usize)
    }

    fn offset(&self, addr: u64, len: usize) -> usize {
        assert!(
            addr >= self.start && addr + len as u64 <= self.end(),
            "range {addr}+{len} outside page {}..{}",
            self.start,
            self.end()
        );
        (addr - self.start) as usize
    }
}

impl Drop for Page {
    fn drop(&mut self) {
        if let Some(pool) = &self.pool {
            pool.give_back(std::mem::replace(
                &mut self.memory,
                Memory::Own(Buffer::default()),
            ));
        }
    }
}

/// Bytes at the start of every range that [`Page::overwrite`] and
/// [`Page::read_versioned`] move one at a time, up to the next 8-byte
/// boundary after them: a copy of just these (a record's header, 16
/// bytes) then never meets a store 8 bytes wide over the same bytes
/// (atomic accesses of different sizes to the same bytes are outside
/// Rust's memory model, and Miri rejects them), since both sides cut
/// ranges that start at the same address in the same places.
const BYTEWISE_PREFIX: usize = 16;

/// Where a range of `len` bytes at `at` is cut for atomic access, as
/// `(first, end)`: single bytes in `0..first` (up to the first 8-byte
/// boundary at or past [`BYTEWISE_PREFIX`]), aligned 8-byte words in
/// `first..end`, single bytes again in `end..len`. [`store_atomic`] and
/// [`load_atomic`] both cut here, so two ranges starting at the same
/// address meet in pieces of one size.
fn cuts(at: *const u8, len: usize) -> (usize, usize) {
    let first = (BYTEWISE_PREFIX + at.wrapping_add(BYTEWISE_PREFIX).align_offset(8)).min(len);
    (first, first + (len - first) / 8 * 8)
}

/// Stores `bytes` at `dst` with relaxed atomic stores, cut as [`cuts`]
/// says. Plain loops over the three parts: an iterator chain over the
/// pieces cost an update in place of a 1 KiB record about 1,200
/// instructions here against about 500 (docs/PERFORMANCE.md).
///
/// # Safety
/// `dst..dst + bytes.len()` is valid for writes, and every concurrent
/// access to it is atomic and cut in the same places.
unsafe fn store_atomic(dst: *mut u8, bytes: &[u8]) {
    let (first, end) = cuts(dst, bytes.len());
    let (head, rest) = bytes.split_at(first);
    let (words, tail) = rest.split_at(end - first);
    for (i, &byte) in head.iter().enumerate() {
        // SAFETY: in the range (the caller's contract); `AtomicU8` has the
        // layout of `u8`.
        unsafe { AtomicU8::from_ptr(dst.add(i)) }.store(byte, Ordering::Relaxed);
    }
    for (i, word) in words.chunks_exact(8).enumerate() {
        let value = u64::from_ne_bytes(word.try_into().expect("8 bytes"));
        // SAFETY: in the range, and 8-aligned (`cuts`).
        unsafe { RawAtomicU64::from_ptr(dst.add(first + 8 * i).cast()) }
            .store(value, Ordering::Relaxed);
    }
    for (i, &byte) in tail.iter().enumerate() {
        // SAFETY: in the range.
        unsafe { AtomicU8::from_ptr(dst.add(end + i)) }.store(byte, Ordering::Relaxed);
    }
}

/// Fills `out` from `src` with relaxed atomic loads, cut as [`cuts`] says.
///
/// # Safety
/// `src..src + out.len()` is valid for reads, and every concurrent access
/// to it is atomic and cut in the same places.
unsafe fn load_atomic(src: *const u8, out: &mut [u8]) {
    let src = src.cast_mut();
    let (first, end) = cuts(src, out.len());
    let (head, rest) = out.split_at_mut(first);
    let (words, tail) = rest.split_at_mut(end - first);
    for (i, byte) in head.iter_mut().enumerate() {
        // SAFETY: in the range.
        *byte = unsafe { AtomicU8::from_ptr(src.add(i)) }.load(Ordering::Relaxed);
    }
    for (i, word) in words.chunks_exact_mut(8).enumerate() {
        // SAFETY: in the range, and 8-aligned.
        let value = unsafe { RawAtomicU64::from_ptr(src.add(first + 8 * i).cast()) }
            .load(Ordering::Relaxed);
        word.copy_from_slice(&value.to_ne_bytes());
    }
    for (i, byte) in tail.iter_mut().enumerate() {
        // SAFETY: in the range.
        *byte = unsafe { AtomicU8::from_ptr(src.add(end + i)) }.load(Ordering::Relaxed);
    }
}

/// A zeroed buffer of `len` bytes, or `ErrorKind::OutOfMemory` when it
/// cannot be had. Allocated zeroed (`calloc`'s way: a large one comes
/// from the kernel's zero pages, not written here).
fn zeroed(len: usize) -> std::io::Result<Buffer> {
    if len == 0 {
        return Ok(Buffer::default());
    }
    let out_of_memory = || std::io::Error::from(std::io::ErrorKind::OutOfMemory);
    let layout = std::alloc::Layout::array::<u8>(len).map_err(|_| out_of_memory())?;
    // SAFETY: `layout` has a non-zero size (`len > 0`).
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
    if ptr.is_null() {
        return Err(out_of_memory());
    }
    // SAFETY: `ptr` is a fresh allocation of `len` bytes by the global
    // allocator with the layout of `[u8; len]`, zeroed (so initialised) and
    // owned by nothing else; a `Box<[u8]>` of `len` bytes frees it with
    // that same layout.
    let bytes = unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, len)) };
    Ok(into_cells(bytes))
}

/// A buffer of `len` bytes whose every 4 KiB memory page has been written
/// once, so that the kernel has mapped it (its contents are not zero);
/// `None` when the memory cannot be had (the flusher, which stocks these,
/// aborted the process under `ulimit -v` until 2026-12-07: an attack
/// helper's finding).
fn faulted_in(len: usize) -> Option<Buffer> {
    let mut buffer = zeroed(len).ok()?;
    for byte in buffer.iter_mut().step_by(4096) {
        *byte.get_mut() = 1;
    }
    Some(buffer)
}

fn into_cells(bytes: Box<[u8]>) -> Buffer {
    // SAFETY: `UnsafeCell<u8>` has the same layout as `u8`
    // (`#[repr(transparent)]`), so a boxed slice of one is a boxed slice of
    // the other with the same length and allocation.
    unsafe { Box::from_raw(Box::into_raw(bytes) as *mut [UnsafeCell<u8>]) }
}

#[cfg(test)]
mod tests {
    //! Run under Miri: `cargo +nightly miri test -p emberkv log::page`.
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[test]
    fn write_then_read() {
        let page = Page::new(4096, 4096 + 64, 256);
        assert_eq!((page.start(), page.end(), page.len()), (4096, 4352, 256));
        assert!(page.holds(4160) && !page.holds(4100) && !page.holds(4352));
        // SAFETY: single thread; nothing published yet.
        unsafe { page.fill(4160, 5, |b| b.copy_from_slice(b"hello")) };
        // SAFETY: written above, never written again.
        assert_eq!(unsafe { page.read(4160, 5) }, b"hello");
        // SAFETY: single thread, range never read before.
        unsafe { page.fill(4200, 3, |b| b.copy_from_slice(b"abc")) };
        // SAFETY: written above.
        assert_eq!(unsafe { page.read(4200, 3) }, b"abc");
        assert_eq!(page.available(4300, 100), 52);
    }

    #[test]
    fn an_overwrite_is_read_back_whole() {
        let page = Page::new(4096, 4096, 256);
        // SAFETY: single thread; nothing published yet.
        unsafe { page.fill(4099, 21, |b| b.fill(1)) };
        // SAFETY: single thread (no write-out, no other reader); an odd
        // start and length cover the byte-wise edges of the word copies.
        unsafe { page.overwrite(4099, &[2; 21]) };
        let mut out = Vec::new();
        // SAFETY: published above.
        assert!(unsafe { page.read_versioned(4099, 21, &mut out) });
        assert_eq!(out, [2; 21]);
        // SAFETY: as above.
        assert!(unsafe { page.read_versioned(4098, 1, &mut out) });
        assert_eq!(out, [0]);
    }

    /// Every byte of an overwrite lands where it belongs and is copied back
    /// in its place, whatever the range's start and length: the byte-wise
    /// head, the words and the byte-wise tail meet without a gap or an
    /// overlap (distinct bytes, so that a shifted word shows).
    #[test]
    fn overwrites_of_every_start_and_length_are_read_back_in_place() {
        let page = Page::new(0, 0, 256);
        // SAFETY: single thread; nothing published yet.
        unsafe { page.fill(0, 256, |b| b.fill(0)) };
        let lens: Vec<usize> = if cfg!(miri) {
            vec![0, 1, 15, 16, 17, 23, 24, 25, 40, 100]
        } else {
            (0..=120).collect()
        };
        let mut out = Vec::new();
        for start in 0..8u64 {
            for &len in &lens {
                let bytes: Vec<u8> = (0..len)
                    .map(|i| (i as u8).wrapping_mul(31) ^ 0x5A)
                    .collect();
                // SAFETY: single thread (no other reader or writer).
                unsafe { page.overwrite(start, &bytes) };
                // SAFETY: published above.
                assert!(unsafe { page.read_versioned(start, len, &mut out) });
                assert_eq!(out, bytes, "start {start}, {len} bytes");
                // SAFETY: as above; no overwrite runs meanwhile.
                assert_eq!(unsafe { page.read(start, len) }, &bytes[..]);
            }
        }
    }

    /// A reader racing with updates in place keeps only copies of one
    /// version: never a mix of two.
    #[test]
    fn versioned_reads_never_keep_a_torn_copy() {
        let page = Arc::new(Page::new(0, 0, 64));
        // SAFETY: single thread; nothing published yet.
        unsafe { page.fill(3, 40, |b| b.fill(0)) };
        let rounds = if cfg!(miri) { 20 } else { 20_000 };
        let writer = {
            let page = Arc::clone(&page);
            std::thread::spawn(move || {
                for v in 1..=rounds {
                    // SAFETY: the only writer; the reader copies with
                    // `read_versioned`.
                    unsafe { page.overwrite(3, &[v as u8; 40]) };
                }
            })
        };
        let mut out = Vec::new();
        for _ in 0..rounds {
            // SAFETY: published before the threads started.
            if unsafe { page.read_versioned(3, 40, &mut out) } {
                assert!(out.iter().all(|&b| b == out[0]), "torn copy {out:?}");
            }
        }
        writer.join().unwrap();
        // SAFETY: as above; the writer is done.
        assert!(unsafe { page.read_versioned(3, 40, &mut out) });
        assert_eq!(out, [rounds as u8; 40]);
    }

    #[test]
    fn prefetch_of_any_range_changes_nothing() {
        let page = Page::new(4096, 4096, 256);
        // SAFETY: single thread; nothing published yet.
        unsafe { page.fill(4096, 256, |b| b.fill(7)) };
        // Inside, running past the end, empty, at the last byte, and before
        // and after the page: a hint, never a panic or a change.
        for (addr, len) in [
            (4096, 256),
            (4100, 1000),
            (4150, 0),
            (4351, 1),
            (4351, usize::MAX),
            (0, 64),
            (4095, 64),
            (4352, 64),
            (u64::MAX, 1),
        ] {
            page.prefetch(addr, len);
        }
        // SAFETY: written above, never written again.
        assert!(unsafe { page.read(4096, 256) }.iter().all(|&b| b == 7));
    }

    #[test]
    #[should_panic(expected = "outside page")]
    fn out_of_bounds_read_panics_instead_of_reading_wild() {
        let page = Page::new(0, 0, 16);
        // SAFETY: the bounds check fires before any memory access.
        let _ = unsafe { page.read(10, 10) };
    }

    #[test]
    fn concurrent_readers_of_published_ranges() {
        let page = Arc::new(Page::new(0, 0, 1024));
        let published = Arc::new(AtomicU64::new(0));
        let reader = {
            let (page, published) = (Arc::clone(&page), Arc::clone(&published));
            std::thread::spawn(move || {
                let mut seen = 0;
                while seen < 64 {
                    let upto = published.load(Ordering::Acquire);
                    for addr in seen..upto {
                        // SAFETY: below the Acquire-loaded publication mark.
                        assert_eq!(unsafe { page.read(addr * 8, 8) }, [addr as u8; 8]);
                    }
                    seen = upto;
                }
            })
        };
        for i in 0..64u64 {
            // SAFETY: one writer; the range is above the publication mark.
            unsafe { page.fill(i * 8, 8, |b| b.fill(i as u8)) };
            published.store(i + 1, Ordering::Release);
        }
        reader.join().unwrap();
    }

    /// The address of a page's buffer, to tell whether two pages share one.
    fn buffer(page: &Page) -> *const u8 {
        page.base()
    }

    #[test]
    fn a_dropped_page_lends_its_buffer_to_the_next_page_of_its_size() {
        let pool = Arc::new(PagePool::new(64));
        let first = Page::recycled(&pool, 0, 0, 64);
        // SAFETY: single thread; nothing published yet.
        unsafe { first.fill(0, 8, |b| b.copy_from_slice(b"old page")) };
        let lent = buffer(&first);
        drop(first);
        assert_eq!(pool.len(), 1);
        let second = Page::recycled(&pool, 64, 72, 64);
        assert_eq!(buffer(&second), lent);
        assert_eq!(pool.len(), 0);
        assert_eq!(
            (second.start(), second.mem_start(), second.end()),
            (64, 72, 128)
        );
        // SAFETY: single thread; the range is written before it is read.
        unsafe { second.fill(72, 8, |b| b.copy_from_slice(b"new page")) };
        // SAFETY: written above, never written again.
        assert_eq!(unsafe { second.read(72, 8) }, b"new page");
        // A page of another size neither takes nor gives a buffer.
        let large = Page::recycled(&pool, 128, 128, 128);
        drop(large);
        assert_eq!(pool.len(), 0);
        // Nor does a page made without a pool.
        drop(Page::new(0, 0, 64));
        assert_eq!(pool.len(), 0);
    }

    #[test]
    fn the_pool_keeps_at_most_its_bound() {
        let pool = Arc::new(PagePool::new(16));
        let pages: Vec<Page> = (0..POOL_BUFFERS as u64 + 3)
            .map(|i| Page::recycled(&pool, i * 16, i * 16, 16))
            .collect();
        drop(pages);
        assert_eq!(pool.len(), POOL_BUFFERS);
    }

    #[test]
    fn stocked_buffers_serve_the_next_pages_up_to_the_bound() {
        let pool = Arc::new(PagePool::new(8192));
        pool.stock(2);
        assert_eq!(pool.len(), 2);
        pool.stock(POOL_BUFFERS + 5);
        assert_eq!(pool.len(), POOL_BUFFERS);
        let page = Page::recycled(&pool, 0, 0, 8192);
        assert_eq!(pool.len(), POOL_BUFFERS - 1);
        // SAFETY: single thread; the range is written before it is read.
        unsafe { page.fill(4000, 200, |b| b.fill(9)) };
        // SAFETY: written above.
        assert!(unsafe { page.read(4000, 200) }.iter().all(|&b| b == 9));
    }

    /// The arena's free frames: (fresh, ready).
    fn free_frames(pool: &PagePool) -> (usize, usize) {
        let frames = pool.arena.as_ref().expect("an arena").frames.lock();
        (frames.fresh.len(), frames.ready.len())
    }

    #[test]
    fn pages_take_frames_in_order_then_buffers_of_their_own() {
        let pool = Arc::new(PagePool::with_frames(4096, 3));
        let pages: Vec<Page> = (0..3u64)
            .map(|i| Page::recycled(&pool, i * 4096, i * 4096, 4096))
            .collect();
        let first = buffer(&pages[0]);
        assert_eq!(first as usize % HUGE_PAGE_BYTES, 0, "frame 0 is aligned");
        for (i, page) in pages.iter().enumerate() {
            assert_eq!(buffer(page), first.wrapping_add(i * 4096));
            // SAFETY: single thread; the range is written before it is read.
            unsafe { page.fill(page.start(), 4096, |b| b.fill(i as u8 + 1)) };
        }
        // Frames do not overlap: each page still holds what it was given.
        for (i, page) in pages.iter().enumerate() {
            // SAFETY: written above, never written again.
            let bytes = unsafe { page.read(page.start(), 4096) };
            assert!(bytes.iter().all(|&b| b == i as u8 + 1));
        }
        assert_eq!(free_frames(&pool), (0, 0));
        // No frame left: a buffer of its own, freed after (the frames serve
        // the next pages).
        let own = Page::recycled(&pool, 3 * 4096, 3 * 4096, 4096);
        let own_buffer = buffer(&own);
        assert!(own_buffer < first || own_buffer >= first.wrapping_add(3 * 4096));
        drop(own);
        assert_eq!(pool.len(), 0);
        // A dropped page's frame serves the next page; a page of another
        // size takes no frame.
        let second = buffer(&pages[1]);
        drop(pages);
        assert_eq!(free_frames(&pool), (0, 3));
        let next = Page::recycled(&pool, 4 * 4096, 4 * 4096, 4096);
        // (`pages` dropped its pages in order: frame 2 went back last.)
        assert_eq!(buffer(&next), first.wrapping_add(2 * 4096));
        let large = Page::recycled(&pool, 5 * 4096, 5 * 4096, 8192);
        assert_eq!((free_frames(&pool), pool.len()), ((0, 2), 0));
        drop(large);
        let after = Page::recycled(&pool, 7 * 4096, 7 * 4096, 4096);
        assert_eq!(buffer(&after), second);
        // SAFETY: single thread; the range is written before it is read.
        unsafe { after.fill(7 * 4096, 4, |b| b.copy_from_slice(b"next")) };
        // SAFETY: written above.
        assert_eq!(unsafe { after.read(7 * 4096, 4) }, b"next");
    }

    #[test]
    fn stocking_readies_fresh_frames_up_to_the_count() {
        let pool = Arc::new(PagePool::with_frames(8192, 6));
        assert_eq!(free_frames(&pool), (6, 0));
        pool.stock(4);
        assert_eq!(free_frames(&pool), (2, 4));
        // Ready frames go first, and come back ready.
        let page = Page::recycled(&pool, 0, 0, 8192);
        assert_eq!(free_frames(&pool), (2, 3));
        drop(page);
        pool.stock(4);
        assert_eq!(free_frames(&pool), (2, 4));
        // Stocking touches only free frames, never one a page holds.
        let held = Page::recycled(&pool, 0, 0, 8192);
        // SAFETY: single thread; the range is written before it is read.
        unsafe { held.fill(0, 8192, |b| b.fill(0xA5)) };
        // Never more than the arena has, and no buffers of their own.
        pool.stock(100);
        assert_eq!((free_frames(&pool), pool.len()), ((0, 5), 0));
        // SAFETY: written above, never written again.
        assert!(unsafe { held.read(0, 8192) }.iter().all(|&b| b == 0xA5));
    }

    /// A pool of [`STOCKED_PAGES`] + 3 frames of 4 KiB, and pages holding
    /// every one of them, each filled with 3s.
    fn pool_all_taken_and_filled() -> (Arc<PagePool>, Vec<Page>) {
        let frames = STOCKED_PAGES + 3;
        let pool = Arc::new(PagePool::with_frames(4096, frames));
        let pages = all_frames(&pool);
        for page in &pages {
            // SAFETY: single thread; nothing published yet.
            unsafe { page.fill(page.start(), 4096, |b| b.fill(3)) };
        }
        (pool, pages)
    }

    /// Pages of 4 KiB taking every frame of `pool` ([`STOCKED_PAGES`] + 3).
    fn all_frames(pool: &Arc<PagePool>) -> Vec<Page> {
        (0..(STOCKED_PAGES + 3) as u64)
            .map(|i| Page::recycled(pool, i * 4096, i * 4096, 4096))
            .collect()
    }

    #[test]
    fn frames_given_back_past_the_stock_return_their_memory() {
        let (pool, pages) = pool_all_taken_and_filled();
        // The hot tier now holds pages of another size, say: the frames of
        // the evicted pages past the stock go back to the kernel, fresh.
        drop(pages);
        assert_eq!(free_frames(&pool), (3, STOCKED_PAGES));
        // Ready frames are handed out first, then the fresh ones.
        let taken = all_frames(&pool);
        assert_eq!((free_frames(&pool), pool.len()), ((0, 0), 0));
        // The fresh ones read as zero again (under Miri the arena is an
        // allocation, kept whole).
        #[cfg(not(miri))]
        assert_eq!(frames_reading(&taken, 0), 3);
        drop(taken);
    }

    /// A page whose memory cannot be had is an error, not an abort (under
    /// `ulimit -v` the process aborted at an insert until 2026-12-07).
    #[test]
    #[cfg_attr(miri, ignore = "Miri aborts on an allocation this large")]
    fn a_page_whose_memory_cannot_be_had_is_an_error() {
        let pool = Arc::new(PagePool::new(4096));
        let huge = isize::MAX as usize / 2;
        let refused = Page::try_recycled(&pool, 0, 0, huge).map(drop).unwrap_err();
        assert_eq!(refused.kind(), std::io::ErrorKind::OutOfMemory);
        assert_eq!(
            zeroed(huge).map(drop).unwrap_err().kind(),
            std::io::ErrorKind::OutOfMemory
        );
        assert!(faulted_in(huge).is_none());
        // Memory that can be had is zeroed.
        let page = Page::try_recycled(&pool, 0, 0, 8192).unwrap();
        // SAFETY: single thread; a fresh buffer reads as zero.
        assert!(unsafe { page.read(0, 8192) }.iter().all(|&b| b == 0));
    }

    /// Once the pool is closing, frames given back past the stock keep
    /// their memory (and bytes) instead of returning it to the kernel.
    #[test]
    fn frames_given_back_to_a_closing_pool_keep_their_memory() {
        let (pool, pages) = pool_all_taken_and_filled();
        pool.close();
        drop(pages);
        assert_eq!(free_frames(&pool), (3, STOCKED_PAGES));
        let taken = all_frames(&pool);
        assert_eq!(frames_reading(&taken, 0), 0);
        assert_eq!(frames_reading(&taken, 3), STOCKED_PAGES + 3);
    }

    /// How many of `pages` hold `byte` in every byte of their frame.
    fn frames_reading(pages: &[Page], byte: u8) -> usize {
        pages
            .iter()
            // SAFETY: single thread; a frame's memory is always mapped and
            // initialised (zeros, or the bytes a page wrote before), and
            // no page writes it meanwhile.
            .filter(|page| {
                unsafe { page.read(page.start(), 4096) }
                    .iter()
                    .all(|&b| b == byte)
            })
            .count()
    }

    /// A 32-byte page at address 0 from `pool`, filled with 7s, that the
    /// log has let go of (an eviction) while a reader still holds it; the
    /// reader checks the bytes and lets go once `go` is sent.
    fn held_by_a_reader(
        pool: &Arc<PagePool>,
    ) -> (std::sync::mpsc::Sender<()>, std::thread::JoinHandle<()>) {
        let page = Arc::new(Page::recycled(pool, 0, 0, 32));
        // SAFETY: single thread so far; nothing published yet.
        unsafe { page.fill(0, 32, |b| b.fill(7)) };
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let reader = {
            let page = Arc::clone(&page);
            std::thread::spawn(move || {
                wait.recv().unwrap();
                // SAFETY: written before the thread was spawned, never again.
                let bytes = unsafe { page.read(0, 32) };
                assert!(bytes.iter().all(|&b| b == 7));
            })
        };
        drop(page);
        (go, reader)
    }

    #[test]
    fn a_frame_returns_only_when_the_last_reader_lets_go() {
        let pool = Arc::new(PagePool::with_frames(32, 1));
        // The frame stays the reader's until it lets go too, and the next
        // page gets a buffer of its own.
        let (go, reader) = held_by_a_reader(&pool);
        assert_eq!(free_frames(&pool), (0, 0));
        let next = Page::recycled(&pool, 32, 32, 32);
        // SAFETY: single thread for this page; written before it is read.
        unsafe { next.fill(32, 32, |b| b.fill(8)) };
        go.send(()).unwrap();
        reader.join().unwrap();
        assert_eq!(free_frames(&pool), (0, 1));
        // SAFETY: written above.
        assert!(unsafe { next.read(32, 32) }.iter().all(|&b| b == 8));
    }

    #[test]
    fn a_buffer_returns_only_when_the_last_reader_lets_go() {
        let pool = Arc::new(PagePool::new(32));
        // The buffer stays the reader's until it lets go too.
        let (go, reader) = held_by_a_reader(&pool);
        assert_eq!(pool.len(), 0);
        go.send(()).unwrap();
        reader.join().unwrap();
        assert_eq!(pool.len(), 1);
        let next = Page::recycled(&pool, 32, 32, 32);
        // SAFETY: single thread; the range is written before it is read.
        unsafe { next.fill(32, 4, |b| b.copy_from_slice(b"next")) };
        // SAFETY: written above.
        assert_eq!(unsafe { next.read(32, 4) }, b"next");
    }
}
