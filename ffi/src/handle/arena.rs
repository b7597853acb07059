//! Where handles come from: a region of address space reserved once and cut
//! into 64-byte blocks (a cache line each: fences through two handles do not
//! share one), handed out in order. A block's address is never handed out
//! again until the whole region has been (2^28 handles with the full 16 GiB
//! region; fewer with a smaller one, down to 1 024), so a freed handle stays
//! recognisable as freed while new objects are made: a heap allocator would
//! give its address to the next object at once.
//!
//! The region is reserved read-only (`PROT_READ`, `MAP_NORESERVE`): it costs
//! neither memory nor commit charge, and any value C passes that falls in it
//! can be read (never-used blocks read as zeros, i.e. free). Pages are made
//! writable one at a time as the cursor reaches them, so only the pages
//! handed out so far are writable (and charged, under
//! `vm.overcommit_memory=2`); when the system refuses one, no handle can be
//! made (an error, not a crash). Under an address-space limit
//! (`RLIMIT_AS`, `ulimit -v`) the region is at most 1/64 of the limit, and
//! smaller still if the system refuses that (halved until granted).
//!
//! A page is given back (`MADV_DONTNEED`, after which it reads as zeros,
//! i.e. as freed blocks) when none of its blocks is live and the cursor has
//! moved past it, so the memory cost is that of the pages of live handles,
//! whatever the number of handles made. A page once writable stays so, and
//! the region is never unmapped: a stale handle can always be read, and a
//! stale call of a handle's former owner may still write its own `inside`
//! word there (`kpccl_core::bias`).

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
/// the system grants it.
const REGION: usize = 1 << 34;
/// The smallest region tried: 64 KiB, 1 024 handles.
const SMALLEST: usize = 1 << 16;
/// Under an address-space limit, the region takes at most this fraction of
/// it (1/64: 16 MiB of a 1 GiB `ulimit -v`, 262 144 handles).
const LIMIT_SHARE: u64 = 64;

/// The region and its cursor.
#[derive(Debug)]
pub(super) struct Arena {
    blocks: NonNull<Block>,
    len: usize,
    page_blocks: usize,
    cursor: Mutex<Cursor>,
}

/// Why no block could be claimed.
pub(super) const ALL_LIVE: &str = "every handle of the region is live (free some)";
/// Why no block could be claimed: the next page could not be made writable.
pub(super) const NO_MEMORY: &str = "the system refuses memory for more handles (a memory limit, or the commit \
                                    limit of vm.overcommit_memory=2)";

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
    /// Blocks `0..writable` are on writable pages (a whole number of pages).
    writable: usize,
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
                let mut bytes = first_region(address_space_limit());
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

    /// Reserves a region of `bytes` (a multiple of the page size), read-only
    /// until handed out.
    pub(super) fn reserve(bytes: usize) -> Option<Arena> {
        let page = kpccl_posix::page_size().max(BLOCK);
        // Not writable: no commit charge, even under strict overcommit, which
        // ignores MAP_NORESERVE for writable private mappings.
        let prot = libc::PROT_READ;
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE;
        // SAFETY: a new anonymous mapping; no existing memory is affected.
        let p = unsafe { libc::mmap(core::ptr::null_mut(), bytes, prot, flags, -1, 0) };
        if p == libc::MAP_FAILED {
            return None;
        }
        let cursor = Cursor { next: 0, made: 0, wrapped: false, page: 0, writable: 0, live: BTreeMap::new() };
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
        // SAFETY: the region stays mapped (readable everywhere, zeros where
        // never written) for the rest of the process, and blocks are only
        // changed through atomics or cells (and written only once handed
        // out, on pages made writable by `claim`).
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
    /// its first life (the region has not wrapped); why not, if every block
    /// is live or the system refuses to make the next page writable. The
    /// caller fills it and publishes it in `state`.
    pub(super) fn claim(&self, cursor: &mut Cursor) -> Result<(&'static Block, u64, bool), &'static str> {
        for _ in 0..self.len {
            if cursor.next == self.len {
                cursor.next = 0;
                cursor.wrapped = true;
            }
            let index = cursor.next;
            if index >= cursor.writable {
                // The cursor's first block on a page never handed out.
                self.open_page(cursor)?;
            }
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
            return Ok((block, cursor.made, !cursor.wrapped));
        }
        Err(ALL_LIVE)
    }

    /// Makes the page at block `cursor.writable` writable: the cursor has
    /// reached it. The pages before it are (the cursor moves in order and
    /// wraps only after the last page).
    fn open_page(&self, cursor: &mut Cursor) -> Result<(), &'static str> {
        debug_assert!(cursor.writable < self.len && cursor.writable.is_multiple_of(self.page_blocks));
        // SAFETY: `writable < len`: a block of the region.
        let start = unsafe { self.blocks.as_ptr().add(cursor.writable) };
        // SAFETY: one page of our own private anonymous mapping, which holds
        // no handle yet (readers see zeros, before and after).
        let rc = unsafe {
            libc::mprotect(start.cast::<c_void>(), self.page_blocks * BLOCK, libc::PROT_READ | libc::PROT_WRITE)
        };
        if rc != 0 {
            return Err(NO_MEMORY);
        }
        cursor.writable += self.page_blocks;
        Ok(())
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

    /// Applies `f` to the state of every block that is not free (a forked
    /// child's handler: single-threaded, with `cursor` held across the fork).
    pub(super) fn restate_live(&self, cursor: &Cursor, f: impl Fn(u64) -> u64) {
        for &page in cursor.live.keys() {
            for index in page * self.page_blocks..(page + 1) * self.page_blocks {
                let block = self.at(index);
                // Relaxed: the child has one thread, and the lock.
                let state = block.state.load(Relaxed);
                if state != 0 {
                    // Relaxed: as above. A live block's page is writable.
                    block.state.store(f(state), Relaxed);
                }
            }
        }
    }

    /// The address of the region's last block (for tests: never handed out
    /// until the cursor gets there).
    #[cfg(test)]
    pub(super) fn last_block_addr(&self) -> usize {
        core::ptr::from_ref(self.at(self.len - 1)).addr()
    }

    /// Pages currently holding live blocks (for tests).
    #[cfg(test)]
    pub(super) fn live_pages(&self) -> usize {
        self.lock().live.len()
    }
}

/// The process's address-space limit (`RLIMIT_AS`, `ulimit -v`), if any.
fn address_space_limit() -> Option<u64> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: writes one `rlimit`, which `limit` is.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut limit) };
    (rc == 0 && limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur)
}

/// The first region to try: [`REGION`], or under an address-space limit the
/// largest power of two up to 1/[`LIMIT_SHARE`] of it (at least [`SMALLEST`]),
/// so that handles leave the program the rest.
fn first_region(limit: Option<u64>) -> usize {
    let Some(limit) = limit else { return REGION };
    let share = usize::try_from(limit / LIMIT_SHARE).unwrap_or(usize::MAX);
    if share <= SMALLEST { SMALLEST } else { (1usize << share.ilog2()).min(REGION) }
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

    /// The bytes of `[start, end)` mapped writable, from `/proc/self/maps`.
    fn writable_bytes(start: usize, end: usize) -> usize {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let mut bytes = 0;
        for line in maps.lines() {
            let mut words = line.split_whitespace();
            let (range, perms) = (words.next().unwrap(), words.next().unwrap());
            let (lo, hi) = range.split_once('-').unwrap();
            let (lo, hi) = (usize::from_str_radix(lo, 16).unwrap(), usize::from_str_radix(hi, 16).unwrap());
            if perms.as_bytes()[1] == b'w' {
                bytes += hi.min(end).saturating_sub(lo.max(start));
            }
        }
        bytes
    }

    /// The mappings that `[start, end)` spans.
    fn mappings(start: usize, end: usize) -> usize {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let range = |l: &str| {
            let (lo, hi) = l.split_whitespace().next().unwrap().split_once('-').unwrap();
            (usize::from_str_radix(lo, 16).unwrap(), usize::from_str_radix(hi, 16).unwrap())
        };
        maps.lines().map(range).filter(|&(lo, hi)| lo < end && start < hi).count()
    }

    #[test]
    fn only_the_pages_handed_out_are_writable() {
        let page = page_bytes();
        let arena = Arena::reserve(16 * page).unwrap();
        let (start, end) = (arena.blocks.as_ptr().addr(), arena.blocks.as_ptr().addr() + 16 * page);
        assert_eq!(writable_bytes(start, end), 0, "reserved read-only");
        // Never-used blocks read as free.
        assert_eq!(arena.block(arena.last_block_addr()).unwrap().state.load(Relaxed), 0);
        let mut cursor = arena.lock();
        let (first, ..) = arena.claim(&mut cursor).unwrap();
        first.state.store(1, Relaxed);
        assert_eq!(writable_bytes(start, end), page, "the first block's page");
        for _ in 0..arena.page_blocks {
            let (b, ..) = arena.claim(&mut cursor).unwrap();
            b.state.store(1, Relaxed);
        }
        assert_eq!(writable_bytes(start, end), 2 * page, "a page more once the cursor reached it");
        assert_eq!(mappings(start, end), 2, "the writable pages merge into one mapping");
        assert_eq!(arena.block(arena.last_block_addr()).unwrap().state.load(Relaxed), 0);
    }

    #[test]
    fn a_page_the_system_refuses_refuses_the_handle_and_a_later_claim_retries() {
        let page = page_bytes();
        let arena = Arena::reserve(2 * page).unwrap();
        let second = arena.blocks.as_ptr().addr() + page;
        // SAFETY: the second page of this test's own region, which nothing
        // reads: `mprotect` of an unmapped page fails as a refused one does.
        assert_eq!(unsafe { libc::munmap(second as *mut c_void, page) }, 0);
        let mut cursor = arena.lock();
        for _ in 0..arena.page_blocks {
            let (b, ..) = arena.claim(&mut cursor).unwrap();
            b.state.store(1, Relaxed);
        }
        assert_eq!(arena.claim(&mut cursor).unwrap_err(), NO_MEMORY);
        assert_eq!((cursor.next, cursor.made), (arena.page_blocks, arena.page_blocks as u64), "nothing claimed");
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_FIXED;
        // SAFETY: maps the page unmapped above back, as `reserve` made it.
        let p = unsafe { libc::mmap(second as *mut c_void, page, libc::PROT_READ, flags, -1, 0) };
        assert_eq!(p.addr(), second);
        let (b, ..) = arena.claim(&mut cursor).unwrap();
        assert_eq!(core::ptr::from_ref(b).addr(), second, "the refused block, once the system grants its page");
        // Every block live: refused, whatever the pages.
        b.state.store(1, Relaxed);
        for _ in arena.page_blocks + 1..arena.len {
            let (b, ..) = arena.claim(&mut cursor).unwrap();
            b.state.store(1, Relaxed);
        }
        assert_eq!(arena.claim(&mut cursor).unwrap_err(), ALL_LIVE);
    }

    #[test]
    fn an_address_space_limit_caps_the_region() {
        assert_eq!(first_region(None), REGION);
        assert_eq!(first_region(Some(1 << 30)), 16 << 20, "1/64 of 1 GiB");
        assert_eq!(first_region(Some((1 << 30) + (1 << 29))), 16 << 20, "a power of two below 1/64");
        assert_eq!(first_region(Some(1 << 20)), SMALLEST);
        assert_eq!(first_region(Some(u64::MAX - 1)), REGION);
    }
}
