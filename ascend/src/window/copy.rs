//! Bounds-checked copies between host buffers and device segments, through
//! `aclrtMemcpy`. A peer's segment on another device is reached by a
//! device-to-device copy through a staging buffer on this rank's device: the
//! runtime refuses host copies to or from a cross-device import.
#![allow(unsafe_code)]

use core::ffi::c_void;

use super::error::{Call, Error};
use super::{DeviceSegment, DeviceWindow};
use crate::codes::{
    ACL_MEM_MALLOC_HUGE_FIRST, ACL_MEMCPY_DEVICE_TO_DEVICE, ACL_MEMCPY_DEVICE_TO_HOST, ACL_MEMCPY_HOST_TO_DEVICE,
};

/// A device buffer on this rank's device, freed on drop.
struct Staging<'w> {
    w: &'w DeviceWindow,
    ptr: *mut c_void,
}

impl<'w> Staging<'w> {
    fn new(w: &'w DeviceWindow, len: usize) -> Result<Self, Error> {
        let ptr = w.dev.rt.malloc(len, ACL_MEM_MALLOC_HUGE_FIRST).map_err(|e| Error::acl(Call::Malloc, e))?;
        Ok(Self { w, ptr })
    }
}

impl Drop for Staging<'_> {
    fn drop(&mut self) {
        let _ = self.w.dev.rt.free(self.ptr);
    }
}

impl DeviceWindow {
    /// The device address of `len` bytes at `offset` in `rank`'s segment, checked.
    fn span(&self, rank: u32, offset: usize, len: usize) -> Result<(DeviceSegment, *mut c_void), Error> {
        let seg = self.segment(rank)?;
        match offset.checked_add(len) {
            Some(end) if end <= seg.len => Ok((seg, seg.ptr.cast::<u8>().wrapping_add(offset).cast())),
            _ => Err(Error::OutOfBounds { rank, offset, len, size: seg.len }),
        }
    }

    /// Copies `src` to `offset` in `rank`'s device segment.
    pub fn write(&self, rank: u32, offset: usize, src: &[u8]) -> Result<(), Error> {
        let (seg, dst) = self.span(rank, offset, src.len())?;
        if src.is_empty() {
            return Ok(());
        }
        self.dev.on_this_thread()?;
        let rt = &self.dev.rt;
        let n = src.len();
        let host = src.as_ptr().cast::<c_void>();
        if seg.device == self.dev.device {
            // SAFETY: `dst` holds `n` bytes of the segment (checked by `span`); `host`
            // is `src`.
            return unsafe { rt.memcpy(dst, n, host, n, ACL_MEMCPY_HOST_TO_DEVICE) }
                .map_err(|e| Error::acl(Call::Memcpy, e));
        }
        let stage = Staging::new(self, n)?;
        // SAFETY: the staging buffer holds `n` bytes; `host` is `src`.
        unsafe { rt.memcpy(stage.ptr, n, host, n, ACL_MEMCPY_HOST_TO_DEVICE) }
            .map_err(|e| Error::acl(Call::Memcpy, e))?;
        // SAFETY: `dst` holds `n` bytes of the peer's segment; the staging buffer `n`.
        unsafe { rt.memcpy(dst, n, stage.ptr, n, ACL_MEMCPY_DEVICE_TO_DEVICE) }.map_err(|e| Error::acl(Call::Memcpy, e))
    }

    /// Copies from `offset` in `rank`'s device segment into `dst`.
    pub fn read(&self, rank: u32, offset: usize, dst: &mut [u8]) -> Result<(), Error> {
        let (seg, src) = self.span(rank, offset, dst.len())?;
        let n = dst.len();
        if n == 0 {
            return Ok(());
        }
        self.dev.on_this_thread()?;
        let rt = &self.dev.rt;
        let host = dst.as_mut_ptr().cast::<c_void>();
        if seg.device == self.dev.device {
            // SAFETY: `src` holds `n` bytes of the segment (checked by `span`); `host`
            // is `dst`, `n` bytes.
            return unsafe { rt.memcpy(host, n, src, n, ACL_MEMCPY_DEVICE_TO_HOST) }
                .map_err(|e| Error::acl(Call::Memcpy, e));
        }
        let stage = Staging::new(self, n)?;
        // SAFETY: the staging buffer holds `n` bytes; `src` `n` bytes of the peer's segment.
        unsafe { rt.memcpy(stage.ptr, n, src, n, ACL_MEMCPY_DEVICE_TO_DEVICE) }
            .map_err(|e| Error::acl(Call::Memcpy, e))?;
        // SAFETY: `host` is `dst`, `n` bytes; the staging buffer holds `n`.
        unsafe { rt.memcpy(host, n, stage.ptr, n, ACL_MEMCPY_DEVICE_TO_HOST) }.map_err(|e| Error::acl(Call::Memcpy, e))
    }
}
