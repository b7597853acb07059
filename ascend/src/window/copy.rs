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
use crate::runtime::Memcpy;

/// The most device memory a copy across devices stages at once: a larger one
/// goes through the staging buffer in pieces, which the window's one stream
/// runs in order (a piece is staged only once the one before has left).
pub const STAGE_MAX: usize = 64 << 20;

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
        unsafe { self.dev.rt.memcpy_async(Memcpy::exact(dst, src, n, kind), self.stream()) }
            .map_err(|e| Error::acl(Call::MemcpyAsync, e))
    }

    /// Copies `src` to `offset` in `rank`'s device segment; done when it returns.
    pub fn write(&self, rank: u32, offset: usize, src: &[u8]) -> Result<(), Error> {
        let (seg, dst) = self.span(rank, offset, src.len())?;
        // SAFETY: `dst` holds `src.len()` bytes of the segment (checked by `span`);
        // `src` is borrowed until the copy is done.
        unsafe { self.copy(seg, dst, src.as_ptr().cast_mut().cast(), src.len(), Way::ToDevice) }
    }

    /// Copies from `offset` in `rank`'s device segment into `dst`; done when it returns.
    pub fn read(&self, rank: u32, offset: usize, dst: &mut [u8]) -> Result<(), Error> {
        let (seg, src) = self.span(rank, offset, dst.len())?;
        // SAFETY: `src` holds `dst.len()` bytes of the segment (checked by `span`);
        // `dst` is borrowed mutably until the copy is done.
        unsafe { self.copy(seg, src, dst.as_mut_ptr().cast(), dst.len(), Way::ToHost) }
    }

    /// `len` bytes from `offset` in `rank`'s segment, in a new buffer: the
    /// span is checked before the buffer is allocated.
    pub fn read_vec(&self, rank: u32, offset: usize, len: usize) -> Result<Vec<u8>, Error> {
        self.span(rank, offset, len)?;
        let mut v = vec![0u8; len];
        self.read(rank, offset, &mut v)?;
        Ok(v)
    }

    /// Copies `n` bytes between `host` and `at` in `seg`, the way `way` says,
    /// and waits for it: directly when `seg` is on this rank's device (its own
    /// memory, or imported on its owner's device: no limits), else through a
    /// staging buffer on this rank's device and a device-to-device copy.
    ///
    /// # Safety
    /// `at` holds `n` bytes of `seg`; `host` is valid for `n` bytes (for writes
    /// when the copy goes [`Way::ToHost`]) until this returns.
    unsafe fn copy(
        &self,
        seg: DeviceSegment,
        at: *mut c_void,
        host: *mut c_void,
        n: usize,
        way: Way,
    ) -> Result<(), Error> {
        if n == 0 {
            return Ok(());
        }
        let _on = self.dev.on_device()?;
        let stage = if seg.device == self.dev.device { None } else { Some(Staging::new(self, n.min(STAGE_MAX))?) };
        let piece = if stage.is_some() { STAGE_MAX } else { n };
        for start in (0..n).step_by(piece) {
            let len = piece.min(n - start);
            let (at, host) = (at.wrapping_byte_add(start), host.wrapping_byte_add(start));
            // The device memory the host side is copied to or from: the segment, or the staging buffer.
            let near = stage.as_ref().map_or(at, |s| s.ptr);
            let staged = stage.is_some();
            let legs = match way {
                Way::ToDevice => [
                    Some((near, host, ACL_MEMCPY_HOST_TO_DEVICE)),
                    staged.then_some((at, near, ACL_MEMCPY_DEVICE_TO_DEVICE)),
                ],
                Way::ToHost => [
                    staged.then_some((near, at, ACL_MEMCPY_DEVICE_TO_DEVICE)),
                    Some((host, near, ACL_MEMCPY_DEVICE_TO_HOST)),
                ],
            };
            for (dst, src, kind) in legs.into_iter().flatten() {
                // SAFETY: `at` and `host` hold `n` bytes by the caller's contract, so
                // `len` from `start`; `near` is `at` or the staging buffer of at least
                // `len` bytes; all stay valid until the synchronisation below, and the
                // stream runs the pieces in order, so no piece overwrites the staging
                // buffer before the one before has left it.
                unsafe { self.queue(dst, src, len, kind) }?;
            }
        }
        self.dev.synchronize(None)
    }
}

/// Which way a copy between a host buffer and a device segment goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Way {
    ToDevice,
    ToHost,
}
