//! Bounds-checked copies between host buffers and device segments, queued with
//! `aclrtMemcpyAsync` on the window's stream and waited for with
//! `aclrtSynchronizeStream` before returning. Never a synchronous copy of
//! imported memory (the hardware refuses one within a device), and never a
//! host-side copy of memory imported from another device: that is reached
//! through a staging buffer on this rank's device, by device-to-device copies.
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
        // The copies that use it are synchronised (or failed) before it goes.
        let _ = self.w.dev.synchronize(None);
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

    /// Queues one copy on the window's stream.
    ///
    /// # Safety
    /// `dst` and `src` are valid for `n` bytes in the spaces `kind` names until
    /// the stream is synchronised.
    unsafe fn queue(&self, dst: *mut c_void, src: *const c_void, n: usize, kind: u32) -> Result<(), Error> {
        // SAFETY: forwarded from the caller.
        unsafe { self.dev.rt.memcpy_async(dst, n, src, n, kind, self.stream()) }
            .map_err(|e| Error::acl(Call::MemcpyAsync, e))
    }

    /// Copies `src` to `offset` in `rank`'s device segment; done when it returns.
    pub fn write(&self, rank: u32, offset: usize, src: &[u8]) -> Result<(), Error> {
        let (seg, dst) = self.span(rank, offset, src.len())?;
        let n = src.len();
        if n == 0 {
            return Ok(());
        }
        self.dev.on_this_thread()?;
        let host = src.as_ptr().cast::<c_void>();
        if seg.device == self.dev.device {
            // Own memory, or imported on its owner's device: no limits.
            // SAFETY: `dst` holds `n` bytes of the segment (checked by `span`); `host`
            // is `src`, borrowed until the synchronisation below.
            unsafe { self.queue(dst, host, n, ACL_MEMCPY_HOST_TO_DEVICE) }?;
            return self.dev.synchronize(None);
        }
        let stage = Staging::new(self, n)?;
        // SAFETY: the staging buffer holds `n` bytes; `host` is `src`, borrowed until
        // the synchronisation below.
        unsafe { self.queue(stage.ptr, host, n, ACL_MEMCPY_HOST_TO_DEVICE) }?;
        // SAFETY: `dst` holds `n` bytes of the peer's segment; the staging buffer `n`.
        unsafe { self.queue(dst, stage.ptr, n, ACL_MEMCPY_DEVICE_TO_DEVICE) }?;
        self.dev.synchronize(None)
    }

    /// Copies from `offset` in `rank`'s device segment into `dst`; done when it returns.
    pub fn read(&self, rank: u32, offset: usize, dst: &mut [u8]) -> Result<(), Error> {
        let (seg, src) = self.span(rank, offset, dst.len())?;
        let n = dst.len();
        if n == 0 {
            return Ok(());
        }
        self.dev.on_this_thread()?;
        let host = dst.as_mut_ptr().cast::<c_void>();
        if seg.device == self.dev.device {
            // SAFETY: `src` holds `n` bytes of the segment (checked by `span`); `host`
            // is `dst`, `n` bytes, borrowed until the synchronisation below.
            unsafe { self.queue(host, src, n, ACL_MEMCPY_DEVICE_TO_HOST) }?;
            return self.dev.synchronize(None);
        }
        let stage = Staging::new(self, n)?;
        // SAFETY: the staging buffer holds `n` bytes; `src` `n` bytes of the peer's segment.
        unsafe { self.queue(stage.ptr, src, n, ACL_MEMCPY_DEVICE_TO_DEVICE) }?;
        // SAFETY: `host` is `dst`, `n` bytes, borrowed until the synchronisation
        // below; the staging buffer holds `n`.
        unsafe { self.queue(host, stage.ptr, n, ACL_MEMCPY_DEVICE_TO_HOST) }?;
        self.dev.synchronize(None)
    }
}
