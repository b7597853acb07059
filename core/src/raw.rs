//! The crate's unsafe views over mapped shared memory and over plain-old-data
//! records. Everything here checks bounds and alignment before it casts.
#![allow(unsafe_code)]

use core::mem::{align_of, size_of};
use core::ptr::NonNull;

use crate::sync::{AtomicU32, AtomicU64};

/// Plain old data: `#[repr(C)]`, only integer fields (and arrays of them), no
/// implicit padding, so all its bytes are initialised and every byte pattern
/// is a valid value. Public (as `protocol::lockstep::Pod`) for the records of
/// other crates' protocols.
///
/// # Safety
/// Implementors must satisfy exactly that.
pub unsafe trait Pod: Copy + 'static {}

// SAFETY: all four are `#[repr(C)]` of u32/u64 fields and arrays, sized without
// implicit padding (asserted next to their definitions).
unsafe impl Pod for crate::layout::shared::Header {}
// SAFETY: as above.
unsafe impl Pod for crate::layout::shared::RankEntry {}
// SAFETY: as above.
unsafe impl Pod for crate::layout::shared::WaitRecord {}
// SAFETY: as above.
unsafe impl Pod for crate::protocol::Record {}

/// The bytes of `v`.
pub(crate) fn bytes_of<T: Pod>(v: &[T]) -> &[u8] {
    // SAFETY: `T: Pod` has no padding, so all `size_of_val(v)` bytes are initialised.
    unsafe { core::slice::from_raw_parts(v.as_ptr().cast::<u8>(), core::mem::size_of_val(v)) }
}

/// The bytes of `v`, writable.
pub(crate) fn bytes_of_mut<T: Pod>(v: &mut [T]) -> &mut [u8] {
    // SAFETY: as in `bytes_of`; any bytes written make a valid `T` (`Pod`).
    unsafe { core::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u8>(), core::mem::size_of_val(v)) }
}

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

    /// The `AtomicU64` at `offset`. Panics if it is outside or misaligned: the
    /// offsets come from a validated layout, so that is a bug, not bad input.
    #[inline]
    pub(crate) fn u64_at(&self, offset: u64) -> &AtomicU64 {
        let p = self.at(offset, 8, 8).expect("u64 slot outside the window");
        // SAFETY: in bounds and aligned (checked), mapped for `self`'s lifetime
        // (`new`'s contract), and only ever accessed atomically.
        unsafe { AtomicU64::from_ptr(p.as_ptr().cast()) }
    }

    /// The `AtomicU32` at `offset`; panics as [`Mapped::u64_at`].
    #[inline]
    pub(crate) fn u32_at(&self, offset: u64) -> &AtomicU32 {
        let p = self.at(offset, 4, 4).expect("u32 word outside the window");
        // SAFETY: as in `u64_at`.
        unsafe { AtomicU32::from_ptr(p.as_ptr().cast()) }
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
