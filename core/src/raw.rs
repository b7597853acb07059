//! The crate's unsafe views over mapped shared memory. Everything here
//! checks bounds and alignment before it casts (the sync blocks once, when
//! a window is built; see [`SyncWords`]).
#![allow(unsafe_code)]

use core::mem::{align_of, size_of};
use core::ptr::NonNull;

use bytemuck::Pod;

use crate::layout::Layout;
use crate::layout::shared::{Header, LINE};
use crate::sync::{AtomicU32, AtomicU64};

/// A mapped segment seen as bytes. Other processes write it concurrently, so
/// it hands out atomics, or copies of `Pod` structures read at moments the
/// protocol guarantees no one writes them.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Mapped {
    base: NonNull<u8>,
    len: usize,
}

impl Mapped {
    /// # Safety
    /// `base..base + len` must stay mapped, readable and writable while the
    /// returned value (or anything borrowed from it) is in use.
    pub(crate) unsafe fn new(base: NonNull<u8>, len: usize) -> Self {
        Self { base, len }
    }

    /// Pointer to `offset`, if `offset..offset + size` lies inside and `offset` is `align`-aligned.
    #[inline]
    fn at(&self, offset: u64, size: usize, align: usize) -> Option<NonNull<u8>> {
        let offset = usize::try_from(offset).ok()?;
        if offset.checked_add(size)? > self.len || !(self.base.as_ptr() as usize + offset).is_multiple_of(align) {
            return None;
        }
        // SAFETY: `offset + size <= len`, so the result is inside the mapping.
        Some(unsafe { self.base.add(offset) })
    }

    /// Reads the `T` at `offset`, or `None` if it lies outside.
    pub(crate) fn read<T: Pod>(&self, offset: u64) -> Option<T> {
        let p = self.at(offset, size_of::<T>(), align_of::<T>())?;
        // SAFETY: in bounds and aligned; any bytes are a valid `T` (`Pod`); a
        // volatile read because another process may have written the bytes.
        Some(unsafe { p.cast::<T>().as_ptr().read_volatile() })
    }

    /// Copies the bytes at `offset..offset + buf.len()` into `buf`. Panics if
    /// they lie outside (a layout bug).
    pub(crate) fn read_bytes(&self, offset: u64, buf: &mut [u8]) {
        let p = self.at(offset, buf.len(), 1).expect("read outside the window");
        // SAFETY: the source is in bounds (checked) and cannot overlap `buf`,
        // which is this process's own memory; the caller reads only bytes no
        // one writes concurrently.
        unsafe { core::ptr::copy_nonoverlapping(p.as_ptr(), buf.as_mut_ptr(), buf.len()) };
    }

    /// Writes `v` at `offset`. Panics if it lies outside (a layout bug).
    pub(crate) fn write<T: Pod>(&self, offset: u64, v: T) {
        let p = self.at(offset, size_of::<T>(), align_of::<T>()).expect("write outside the window");
        // SAFETY: in bounds and aligned; called only on regions no other rank
        // touches at that moment (the creator's header, a rank's own pages).
        unsafe { p.cast::<T>().as_ptr().write_volatile(v) }
    }

    /// A pointer to `offset..offset + len` if it lies inside (for data segments).
    pub(crate) fn range(&self, offset: u64, len: u64) -> Option<NonNull<u8>> {
        self.at(offset, usize::try_from(len).ok()?, 1)
    }
}

/// [`LINE`] as a byte count of this platform.
const LINE_BYTES: usize = 128;
const _: () = assert!(LINE_BYTES as u64 == LINE);

/// A window's sync blocks, bounds-checked once when the window is built, so
/// that the fence path computes a slot's address from two range checks on
/// ranks instead of re-checking a byte offset at every access (measured: a
/// 2-rank `peer_fence` ping-pong 75 ns with per-access checks, 58 ns
/// without, the bare flag exchange with `pause` 58 ns).
#[derive(Clone, Copy, Debug)]
pub(crate) struct SyncWords {
    /// The window's header.
    header: NonNull<u8>,
    /// Rank 0's sync block.
    base: NonNull<u8>,
    /// Ranks, hence sync blocks.
    nranks: u32,
    /// Lines in one sync block.
    lines: u32,
    /// Bytes from one sync block to the next.
    stride: usize,
}

impl SyncWords {
    /// The sync blocks of `layout` inside `mem`. Panics if they do not lie
    /// inside it, 8-byte aligned: the layout was verified, so that is a bug.
    pub(crate) fn new(mem: &Mapped, layout: &Layout) -> Self {
        let region = layout.sync_region(0);
        let stride = usize::try_from(region.len).expect("a sync block fits the mapping");
        let total = stride.checked_mul(layout.nranks() as usize).expect("sync blocks fit the mapping");
        let base = mem.at(region.offset, total, 8).expect("sync blocks lie inside the window");
        let lines = u32::try_from(region.len / LINE).expect("a sync block has few lines");
        assert!(stride.is_multiple_of(8) && u64::from(lines) * LINE <= region.len);
        let header = mem.at(0, size_of::<Header>(), 8).expect("the header lies inside the window");
        Self { header, base, nranks: layout.nranks(), lines, stride }
    }

    /// The header's 32-bit atomic word at `byte` (e.g. `offset_of!(Header, poison)`).
    #[inline]
    pub(crate) fn header_u32(&self, byte: usize) -> &AtomicU32 {
        // SAFETY: `header_word` checks that it lies inside the header, 4-aligned; accessed only atomically.
        unsafe { AtomicU32::from_ptr(self.header_word(byte, 4).as_ptr().cast()) }
    }

    /// The header's 64-bit atomic word at `byte` (e.g. `offset_of!(Header, arrivals)`).
    #[inline]
    pub(crate) fn header_u64(&self, byte: usize) -> &AtomicU64 {
        // SAFETY: as in `header_u32`, 8-aligned.
        unsafe { AtomicU64::from_ptr(self.header_word(byte, 8).as_ptr().cast()) }
    }

    /// A pointer to `size` bytes at `byte` of the header, `size`-aligned (the mapping is page-aligned).
    #[inline]
    fn header_word(&self, byte: usize, size: usize) -> NonNull<u8> {
        assert!(byte + size <= size_of::<Header>() && byte.is_multiple_of(size));
        // SAFETY: `new` checked that the header lies inside the mapping.
        unsafe { self.header.add(byte) }
    }

    /// The 64-bit word `byte` bytes into line `line` of the sync block read
    /// by `reader`. Panics on a rank or line out of range.
    #[inline]
    pub(crate) fn u64_at(&self, reader: u32, line: u32, byte: usize) -> &AtomicU64 {
        // SAFETY: `word` checks the block and line and that `byte + 8` fits the line; 8-aligned (as `word` states).
        unsafe { AtomicU64::from_ptr(self.word(reader, line, byte, 8).as_ptr().cast()) }
    }

    /// The 32-bit word `byte` bytes into line `line` of the sync block read by `reader`.
    #[inline]
    pub(crate) fn u32_at(&self, reader: u32, line: u32, byte: usize) -> &AtomicU32 {
        // SAFETY: as in `u64_at`, 4-aligned.
        unsafe { AtomicU32::from_ptr(self.word(reader, line, byte, 4).as_ptr().cast()) }
    }

    /// A pointer to `size` bytes at `byte` in line `line` of `reader`'s block,
    /// aligned to `size` when `byte` is (blocks and lines are 8-aligned).
    #[inline]
    fn word(&self, reader: u32, line: u32, byte: usize, size: usize) -> NonNull<u8> {
        assert!(reader < self.nranks && line < self.lines && byte + size <= LINE_BYTES && byte.is_multiple_of(size));
        let offset = reader as usize * self.stride + line as usize * LINE_BYTES + byte;
        // SAFETY: `new` checked that all `nranks` blocks of `stride` bytes lie
        // inside the mapping, and `lines` lines of `LINE` bytes fit a block;
        // the assert keeps the offset inside them.
        unsafe { self.base.add(offset) }
    }
}
