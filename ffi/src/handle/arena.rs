//! Where handles come from: a region of address space reserved once and cut
//! into 64-byte blocks (a cache line each: fences through two handles do not
//! share one), handed out in order. A block's address is never handed out
//! again until the whole region has been (2^28 handles with the usual 16 GiB
//! region), so a freed handle stays recognisable as freed while
//! new objects are made: a heap allocator would give its address to the next
//! object at once.
//!
//! The region is mapped readable and writable with `MAP_NORESERVE`: it costs
//! memory only for the pages that hold blocks. A page is given back
//! (`MADV_DONTNEED`, after which it reads as zeros, i.e. as freed blocks)
//! when none of its blocks is live and the cursor has moved past it, so the
//! memory cost is that of the pages of live handles, whatever the number of
//! handles made. The region is never unmapped: a stale handle can always be
//! read.

use core::cell::UnsafeCell;
use core::ffi::c_void;
use core::ptr::NonNull;
use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use kpccl_core::bias::Bias;
use kpccl_core::sync::AtomicU64;
use kpccl_core::sync::Ordering::Relaxed;

use crate::win::kpccl_shm_win_t;

/// What a handle points to: the fields C reads through a window handle,
/// then the library's. All zeros is a free block (pages given back read so).
#[repr(C, align(64))]
#[derive(Debug)]
pub(super) struct Block {
    /// `rank`, `nranks` and the handle's serial number (C reads a window's).
    pub(super) head: UnsafeCell<kpccl_shm_win_t>,
    /// `0`: free (never handed out, or freed); else the kind's tag, plus
    /// [`super::BUSY`] while one thread has exclusive use.
    pub(super) state: AtomicU64,
    /// The object (a leaked `Box`), valid while `state` is not 0.
    pub(super) object: UnsafeCell<*mut ()>,
    /// The thread that made the handle uses it without the busy bit until
    /// another thread takes it (see `kpccl_core::bias`); only in the block's
    /// first life, before the region wraps.
    pub(super) bias: Bias,
}

pub(super) const BLOCK: usize = size_of::<Block>();
const _: () = assert!(BLOCK == 64);
// A handle points at the block and at the public part alike.
const _: () = assert!(core::mem::offset_of!(Block, head) == 0);

/// The usual region: 16 GiB of address space (2^28 handles); halved until
/// the system grants it (`ulimit -v`, strict overcommit).
const REGION: usize = 1 << 34;
const SMALLEST: usize = 1 << 16;

/// The region and its cursor.
#[derive(Debug)]
pub(super) struct Arena {
    blocks: NonNull<Block>,
    len: usize,
    page_blocks: usize,
    cursor: Mutex<Cursor>,
}

// SAFETY: the region is process-wide memory that is never unmapped; blocks
// are shared through atomics (`state`) and written only under `cursor`.
unsafe impl Send for Arena {}
// SAFETY: as above.
unsafe impl Sync for Arena {}

/// What only the lock holder may change.
#[derive(Debug)]
pub(super) struct Cursor {
    /// The next block to try.
    next: usize,
    /// Handles made so far (the last one's serial number).
    made: u64,
    /// Every block has been handed out at least once.
    wrapped: bool,
    /// The page of the last block handed out.
    page: usize,
    /// Live blocks per page (pages without any are absent).
    live: BTreeMap<usize, usize>,
}

impl Arena {
    /// The process's arena, reserved at the first use; `None` if not even
    /// the smallest region could be reserved.
    pub(super) fn global() -> Option<&'static Arena> {
        static ARENA: OnceLock<Option<Arena>> = OnceLock::new();
        ARENA
            .get_or_init(|| {
                let mut bytes = REGION;
                loop {
                    if let Some(a) = Arena::reserve(bytes) {
                        return Some(a);
                    }
                    if bytes <= SMALLEST {
                        return None;
                    }
                    bytes /= 2;
                }
            })
            .as_ref()
    }

    /// Reserves a region of `bytes` (a multiple of the page size).
    pub(super) fn reserve(bytes: usize) -> Option<Arena> {
        let page = kpccl_posix::page_size().max(BLOCK);
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE;
        // SAFETY: a new anonymous mapping; no existing memory is affected.
        let p = unsafe { libc::mmap(core::ptr::null_mut(), bytes, prot, flags, -1, 0) };
        if p == libc::MAP_FAILED {
            return None;
        }
        let cursor = Cursor { next: 0, made: 0, wrapped: false, page: 0, live: BTreeMap::new() };
        Some(Arena {
            blocks: NonNull::new(p.cast::<Block>())?,
            len: bytes / BLOCK,
            page_blocks: page / BLOCK,
            cursor: Mutex::new(cursor),
        })
    }

    /// The block at `addr`, if `addr` is the address of one: any value is
    /// safe to pass (it is only compared, never dereferenced).
    #[inline]
    pub(super) fn block(&self, addr: usize) -> Option<&'static Block> {
        let offset = addr.wrapping_sub(self.blocks.as_ptr().addr());
        let index = offset / BLOCK;
        if !offset.is_multiple_of(BLOCK) || index >= self.len {
            return None;
        }
        Some(self.at(index))
    }

    /// Block `index`, which is `< len`.
    #[inline]
    fn at(&self, index: usize) -> &'static Block {
        debug_assert!(index < self.len);
        // SAFETY: in the region (`index < len`).
        let p = unsafe { self.blocks.as_ptr().add(index) };
        // SAFETY: the region stays mapped (readable and writable, zeros where
        // never written) for the rest of the process, and blocks are only
        // changed through atomics or cells.
        unsafe { &*p }
    }

    /// Locks the cursor. A panic under the lock leaves it consistent: every
    /// change is made after the checks that could fail.
    pub(super) fn lock(&self) -> MutexGuard<'_, Cursor> {
        self.cursor.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn index(&self, block: &Block) -> usize {
        (core::ptr::from_ref(block).addr() - self.blocks.as_ptr().addr()) / BLOCK
    }

    /// Whether `block` was ever handed out (so a free one is a freed one).
    pub(super) fn was_made(&self, cursor: &Cursor, block: &Block) -> bool {
        cursor.wrapped || self.index(block) < cursor.next
    }

    /// A free block, now counted live, its serial number, and whether this is
    /// its first life (the region has not wrapped); `None` if every block is
    /// live. The caller fills it and publishes it in `state`.
    pub(super) fn claim(&self, cursor: &mut Cursor) -> Option<(&'static Block, u64, bool)> {
        for _ in 0..self.len {
            if cursor.next == self.len {
                cursor.next = 0;
                cursor.wrapped = true;
            }
            let index = cursor.next;
            cursor.next += 1;
            let block = self.at(index);
            // Relaxed: blocks are claimed and released only under the lock we hold.
            if block.state.load(Relaxed) != 0 {
                continue;
            }
            let page = index / self.page_blocks;
            if page != cursor.page {
                let left = core::mem::replace(&mut cursor.page, page);
                if !cursor.live.contains_key(&left) {
                    self.give_back(left);
                }
            }
            *cursor.live.entry(page).or_default() += 1;
            cursor.made += 1;
            return Some((block, cursor.made, !cursor.wrapped));
        }
        None
    }

    /// Counts `block` (already marked free) no longer live; gives its page
    /// back when no live block is left on it and the cursor is elsewhere.
    pub(super) fn release(&self, cursor: &mut Cursor, block: &Block) {
        let page = self.index(block) / self.page_blocks;
        let Some(n) = cursor.live.get_mut(&page) else { return };
        *n -= 1;
        if *n == 0 {
            cursor.live.remove(&page);
            if page != cursor.page {
                self.give_back(page);
            }
        }
    }

    /// Returns a page's memory to the system; it reads as zeros afterwards.
    fn give_back(&self, page: usize) {
        // SAFETY: `page` is a page of the region (every caller's page holds a
        // block of it), so the range is in the mapping.
        let start = unsafe { self.blocks.as_ptr().add(page * self.page_blocks) };
        // SAFETY: an advice on our own private anonymous mapping; concurrent
        // lock-free readers of a block there read either its last value
        // (free) or zero (free).
        let rc = unsafe { libc::madvise(start.cast::<c_void>(), self.page_blocks * BLOCK, libc::MADV_DONTNEED) };
        debug_assert_eq!(rc, 0, "madvise of a page of the handle region");
    }

    /// Pages currently holding live blocks (for tests).
    #[cfg(test)]
    pub(super) fn live_pages(&self) -> usize {
        self.lock().live.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page_bytes() -> usize {
        kpccl_posix::page_size()
    }

    #[test]
    fn blocks_are_handed_out_once_until_the_region_wraps() {
        let arena = Arena::reserve(2 * page_bytes()).unwrap();
        let mut cursor = arena.lock();
        let (first, serial, fresh) = arena.claim(&mut cursor).unwrap();
        assert!(fresh);
        assert_eq!(serial, 1);
        // Marked live, as `make` does.
        first.state.store(1, Relaxed);
        let mut seen = vec![core::ptr::from_ref(first).addr()];
        for _ in 1..arena.len {
            let (b, ..) = arena.claim(&mut cursor).unwrap();
            arena.release(&mut cursor, b);
            seen.push(core::ptr::from_ref(b).addr());
        }
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), arena.len, "no address twice before the wrap");
        // Wrapped: the live first block is skipped, the second comes again.
        let (again, _, fresh) = arena.claim(&mut cursor).unwrap();
        assert!(!fresh, "the region wrapped");
        assert_eq!(arena.index(again), 1);
        assert!(cursor.wrapped);
    }

    #[test]
    fn foreign_and_misaligned_addresses_are_no_blocks() {
        let arena = Arena::reserve(page_bytes()).unwrap();
        let base = arena.blocks.as_ptr().addr();
        assert!(arena.block(base).is_some());
        assert!(arena.block(base + BLOCK).is_some());
        assert!(arena.block(base + 8).is_none());
        assert!(arena.block(base + page_bytes()).is_none());
        assert!(arena.block(base - BLOCK).is_none());
        assert!(arena.block(0).is_none());
        assert!(arena.block(usize::MAX).is_none());
    }

    #[test]
    fn a_page_without_live_blocks_is_given_back_and_reads_as_free() {
        let arena = Arena::reserve(4 * page_bytes()).unwrap();
        let mut cursor = arena.lock();
        let mut blocks = Vec::new();
        for _ in 0..arena.page_blocks + 1 {
            let (b, ..) = arena.claim(&mut cursor).unwrap();
            b.state.store(7, Relaxed);
            blocks.push(b);
        }
        drop(cursor);
        assert_eq!(arena.live_pages(), 2);
        // SAFETY: a claimed block; nothing else reads it.
        unsafe { (*blocks[0].head.get()).rank = 5 };
        let mut cursor = arena.lock();
        for b in &blocks[..arena.page_blocks] {
            // Freed as `take` does: marked free, then released.
            b.state.store(0, Relaxed);
            arena.release(&mut cursor, b);
        }
        assert!(arena.was_made(&cursor, blocks[0]));
        drop(cursor);
        assert_eq!(arena.live_pages(), 1);
        // The given-back page reads as zeros: free, and its public part gone.
        // SAFETY: as above.
        assert_eq!(unsafe { (*blocks[0].head.get()).rank }, 0);
        assert_eq!(blocks[arena.page_blocks].state.load(Relaxed), 7);
    }
}
