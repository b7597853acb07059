//! The data plane: a rank's first word of the window, accessed with
//! volatile loads and stores (the only unsafe code of the example).
#![allow(unsafe_code)]

use core::ptr::NonNull;

use kpccl_core::{FenceError, Window};

use crate::platform::StaticPlatform;

/// Rank `rank`'s first 8 bytes in a window.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Word(NonNull<u64>);

/// The first word of `rank`'s segment (at least 8 bytes, 64-aligned, as the example asks).
pub(crate) fn word(window: &Window<StaticPlatform>, rank: u32) -> Result<Word, FenceError> {
    let segment = window.segment(rank)?;
    assert!(segment.len >= 8 && segment.ptr.cast::<u64>().is_aligned(), "64-byte segments");
    Ok(Word(segment.ptr.cast()))
}

impl Word {
    pub(crate) fn store(self, value: u64) {
        // SAFETY: in bounds and aligned (checked in `word`); the window
        // stays mapped while the rank runs; only the owner writes, and the
        // fences order its stores before its neighbours' loads.
        unsafe { self.0.as_ptr().write_volatile(value) }
    }

    pub(crate) fn load(self) -> u64 {
        // SAFETY: as in `store`; the owner writes again only after the
        // fence that follows this load.
        unsafe { self.0.as_ptr().read_volatile() }
    }
}
