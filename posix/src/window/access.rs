//! Bounds-checked copies in and out of segments.
#![allow(unsafe_code)]

use bytemuck::Pod;

use super::Window;
use crate::Error;

impl Window {
    /// The address of `len` bytes at `offset` in `rank`'s segment, checked.
    fn span(&self, rank: u32, offset: usize, len: usize) -> Result<*mut u8, Error> {
        let seg = self.segment(rank)?;
        match offset.checked_add(len) {
            Some(end) if end <= seg.len => {
                // SAFETY: `offset <= seg.len`, so the result stays inside the segment.
                Ok(unsafe { seg.ptr.as_ptr().add(offset) })
            }
            _ => Err(Error::OutOfBounds { rank, offset, len, size: seg.len }),
        }
    }

    /// Copies `src` into `rank`'s segment at element `index` (of `T`s).
    pub fn write<T: Pod>(&self, rank: u32, index: usize, src: &[T]) -> Result<(), Error> {
        let size = size_of::<T>();
        let dst = self.span(rank, index.saturating_mul(size), size_of_val(src))?;
        // SAFETY: `dst` has room for `src` (checked by `span`); shared memory never
        // overlaps a Rust slice; unaligned-safe because we copy bytes.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr().cast::<u8>(), dst, size_of_val(src)) };
        Ok(())
    }

    /// Copies from `rank`'s segment at element `index` (of `T`s) into `dst`.
    pub fn read<T: Pod>(&self, rank: u32, index: usize, dst: &mut [T]) -> Result<(), Error> {
        let size = size_of::<T>();
        let src = self.span(rank, index.saturating_mul(size), size_of_val(dst))?;
        // SAFETY: `src` holds `size_of_val(dst)` bytes (checked); any bytes are a
        // valid `T` (`Pod`); shared memory never overlaps a Rust slice.
        unsafe { std::ptr::copy_nonoverlapping(src, dst.as_mut_ptr().cast::<u8>(), size_of_val(dst)) };
        Ok(())
    }
}
