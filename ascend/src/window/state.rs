//! The device side of one rank's window: its own segment and key, the
//! peers' imported segments, and their release in the documented order.

use core::ffi::c_void;

use super::error::{Call, Error};
use crate::backend::Runtime;
use crate::runtime::{AclContext, AclStream, IpcKey};

/// One rank's segment as this process sees it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Segment {
    /// Its device address here (own allocation or import); null when empty.
    pub(crate) ptr: *mut c_void,
    /// The bytes the rank asked for.
    pub(crate) len: usize,
    /// The device it lives on.
    pub(crate) device: i32,
    /// The key this process imported it by (peers only).
    pub(crate) imported: Option<IpcKey>,
}

impl Default for Segment {
    fn default() -> Self {
        Self { ptr: core::ptr::null_mut(), len: 0, device: 0, imported: None }
    }
}

/// Device memory and keys held by this rank. Dropping it releases what is
/// left, importer side first (no collective: peers may still map this rank's
/// memory; on hardware their pages are freed with it).
pub(crate) struct DeviceState {
    pub(crate) rt: Runtime,
    pub(crate) device: i32,
    pub(crate) rank: u32,
    /// Every rank's segment, this rank's own included.
    pub(crate) segs: Vec<Segment>,
    /// This rank's allocation, if any.
    pub(crate) alloc: Option<*mut c_void>,
    /// This rank's export key, if exported.
    pub(crate) key: Option<IpcKey>,
    /// The window's stream: every copy of the window is queued on it.
    pub(crate) stream: Option<AclStream>,
    /// The default context of `device`, once creation has set the device:
    /// what every call makes current, on whichever thread it runs.
    pub(crate) context: Option<AclContext>,
    /// Creation's `aclrtSetDevice` succeeded: the window holds one count of
    /// `device`, given back last in [`Self::release_own`].
    pub(crate) holds_device: bool,
}

/// Sets a thread's context back when dropped: the one that was current
/// before a window call or creation made the window's current. Holds
/// nothing when there is nothing to set back (the window's context was
/// current already, or none was).
#[must_use]
pub(crate) struct Restore(Option<(Runtime, AclContext)>);

impl Restore {
    /// Remembers the calling thread's current context, if it has one.
    pub(crate) fn current(rt: &Runtime) -> Self {
        Self(rt.get_current_context().ok().map(|c| (rt.clone(), c)))
    }
}

impl Drop for Restore {
    fn drop(&mut self) {
        if let Some((rt, context)) = &self.0 {
            // A failure leaves the window's device current; there is no
            // caller left to tell, and the window stays usable.
            let _ = rt.set_current_context(*context);
        }
    }
}

impl core::fmt::Debug for DeviceState {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("DeviceState").field("device", &self.device).field("rank", &self.rank).finish_non_exhaustive()
    }
}

impl DeviceState {
    pub(crate) fn new(rt: Runtime, device: i32, rank: u32, nranks: u32) -> Self {
        let segs = vec![Segment::default(); nranks as usize];
        Self { rt, device, rank, segs, alloc: None, key: None, stream: None, context: None, holds_device: false }
    }

    /// Makes this rank's device current on the calling thread until the
    /// guard drops: the thread may be any, and may have made another device
    /// current since (the user's own ACL calls, another window). Switching
    /// contexts, not `aclrtSetDevice`, so that no device count grows.
    pub(crate) fn on_device(&self) -> Result<Restore, Error> {
        let Some(context) = self.context else { return Ok(Restore(None)) };
        let before = self.rt.get_current_context().ok();
        if before == Some(context) {
            return Ok(Restore(None));
        }
        self.rt.set_current_context(context).map_err(|e| Error::acl(Call::SetContext, e))?;
        Ok(Restore(before.map(|c| (self.rt.clone(), c))))
    }

    /// [`Self::on_device`] for the release paths, which go on after a
    /// failure: the guard, and how making the device current went.
    fn on_device_to_release(&self) -> (Option<Restore>, Result<(), Error>) {
        match self.on_device() {
            Ok(guard) => (Some(guard), Ok(())),
            Err(e) => (None, Err(e)),
        }
    }

    /// Waits until the work queued on the window's stream, then on `user`'s
    /// stream if given, is done: the device half of a stream-ordered fence.
    pub(crate) fn synchronize(&self, user: Option<AclStream>) -> Result<(), Error> {
        let _on = self.on_device()?;
        for s in self.stream.iter().chain(user.as_ref()) {
            self.rt.synchronize_stream(*s).map_err(|e| Error::acl(Call::SynchronizeStream, e))?;
        }
        Ok(())
    }

    /// The importer's part: waits for the device, then closes every import.
    /// Every import is closed even when one fails; the first error is returned.
    pub(crate) fn close_imports(&mut self) -> Result<(), Error> {
        let (_on, mut first) = self.on_device_to_release();
        if self.segs.iter().any(|s| s.imported.is_some()) {
            // Copies into peers' memory must be done before it is unmapped.
            first = first.and(self.synchronize(None));
            first = first.and(self.rt.synchronize_device().map_err(|e| Error::acl(Call::Synchronize, e)));
        }
        for seg in &mut self.segs {
            if let Some(key) = seg.imported.take() {
                seg.ptr = core::ptr::null_mut();
                let closed = self.rt.ipc_mem_close(&key).map_err(|e| Error::acl(Call::Close, e));
                first = first.and(closed);
            }
        }
        first
    }

    /// The exporter's part, after every importer closed: the window's stream
    /// goes, then the key, then the memory; last, the window's count of its
    /// device (ACL pairs every `aclrtSetDevice` with an `aclrtResetDevice`, and
    /// releases the device's resources when the count falls to 0: a program
    /// that resets its own device then finds it released, as without windows).
    pub(crate) fn release_own(&mut self) -> Result<(), Error> {
        let (_on, mut first) = self.on_device_to_release();
        if let Some(s) = self.stream.take() {
            // Destroying waits for the stream's work, which may write this memory.
            first = first.and(self.rt.destroy_stream(s).map_err(|e| Error::acl(Call::DestroyStream, e)));
        }
        if let Some(key) = self.key.take() {
            first = first.and(self.rt.ipc_mem_close(&key).map_err(|e| Error::acl(Call::Close, e)));
        }
        if let Some(ptr) = self.alloc.take() {
            self.segs[self.rank as usize].ptr = core::ptr::null_mut();
            first = first.and(self.rt.free(ptr).map_err(|e| Error::acl(Call::Free, e)));
        }
        if core::mem::take(&mut self.holds_device) {
            // The context goes with the device's last count: nothing may make it current again.
            self.context = None;
            first = first.and(self.rt.reset_device(self.device).map_err(|e| Error::acl(Call::ResetDevice, e)));
        }
        first
    }
}

impl Drop for DeviceState {
    fn drop(&mut self) {
        let _ = self.close_imports();
        let _ = self.release_own();
    }
}
