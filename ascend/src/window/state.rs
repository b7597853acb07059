//! The device side of one rank's window: its own segment and key, the
//! peers' imported segments, and their release in the documented order.

use core::ffi::c_void;

use super::error::{Call, Error};
use crate::backend::Runtime;
use crate::runtime::{AclStream, IpcKey};

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
    /// The thread that set the device (the current device is per thread).
    thread: std::thread::ThreadId,
}

impl core::fmt::Debug for DeviceState {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("DeviceState").field("device", &self.device).field("rank", &self.rank).finish_non_exhaustive()
    }
}

impl DeviceState {
    pub(crate) fn new(rt: Runtime, device: i32, rank: u32, nranks: u32) -> Self {
        let segs = vec![Segment::default(); nranks as usize];
        Self { rt, device, rank, segs, alloc: None, key: None, stream: None, thread: std::thread::current().id() }
    }

    /// Makes this rank's device current on a thread other than the creator's.
    pub(crate) fn on_this_thread(&self) -> Result<(), Error> {
        if std::thread::current().id() == self.thread {
            return Ok(());
        }
        self.rt.set_device(self.device).map_err(|e| Error::acl(Call::SetDevice, e))
    }

    /// Waits until the work queued on the window's stream, then on `user`'s
    /// stream if given, is done: the device half of a stream-ordered fence.
    pub(crate) fn synchronize(&self, user: Option<AclStream>) -> Result<(), Error> {
        self.on_this_thread()?;
        for s in self.stream.iter().chain(user.as_ref()) {
            self.rt.synchronize_stream(*s).map_err(|e| Error::acl(Call::SynchronizeStream, e))?;
        }
        Ok(())
    }

    /// The importer's part: waits for the device, then closes every import.
    /// Every import is closed even when one fails; the first error is returned.
    pub(crate) fn close_imports(&mut self) -> Result<(), Error> {
        let mut first = self.on_this_thread();
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

    /// The exporter's part, after every importer closed: destroys the key, then
    /// frees the memory; then the window's stream goes.
    pub(crate) fn release_own(&mut self) -> Result<(), Error> {
        let mut first = Ok(());
        if let Some(s) = self.stream.take() {
            // Destroying waits for the stream's work, which may write this memory.
            first = self.on_this_thread();
            first = first.and(self.rt.destroy_stream(s).map_err(|e| Error::acl(Call::DestroyStream, e)));
        }
        if let Some(key) = self.key.take() {
            first = first.and(self.rt.ipc_mem_close(&key).map_err(|e| Error::acl(Call::Close, e)));
        }
        if let Some(ptr) = self.alloc.take() {
            self.segs[self.rank as usize].ptr = core::ptr::null_mut();
            first = first.and(self.rt.free(ptr).map_err(|e| Error::acl(Call::Free, e)));
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
