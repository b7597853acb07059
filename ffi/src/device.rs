//! Windows of either memory kind behind one handle: host shared memory, or
//! Ascend device memory (`KPCCL_SHM_MEMORY_ASCEND`, through `kpccl-ascend`,
//! with the cargo feature `ascend`). Queries of a device window return device
//! addresses; fences use its host fence slots. A library built without the
//! feature keeps every C function and refuses device windows when asked for
//! one, so that every rank fails alike and none waits.

use core::ffi::c_void;

#[cfg(feature = "ascend")]
use kpccl_ascend::{AclStream, DeviceWindow};
use kpccl_posix::{Comm, Oob, Window};

use crate::attr::Options;
use crate::error::Error;

/// The window behind a handle.
#[derive(Debug)]
pub(crate) enum AnyWindow {
    /// Host shared memory.
    Host(Window),
    /// Ascend device memory.
    #[cfg(feature = "ascend")]
    Device(DeviceWindow),
}

/// `body` for the window of either kind, bound to `w`: a method that reads the
/// same on both is written once, and each arm still calls its own type's method.
macro_rules! either {
    ($win:expr, |$w:ident| $body:expr) => {
        match $win {
            AnyWindow::Host($w) => $body,
            #[cfg(feature = "ascend")]
            AnyWindow::Device($w) => $body,
        }
    };
}

// The fence calls stay inlined from the C entry point to the epoch slot: a
// host window pays one predictable branch.
impl AnyWindow {
    pub(crate) fn rank(&self) -> u32 {
        either!(self, |w| w.rank())
    }

    #[inline]
    pub(crate) fn nranks(&self) -> u32 {
        either!(self, |w| w.nranks())
    }

    #[inline]
    pub(crate) fn peer_fence(&self, peer: u32) -> Result<(), Error> {
        either!(self, |w| Ok(w.peer_fence(peer)?))
    }

    #[inline]
    pub(crate) fn signal(&self, peer: u32) -> Result<(), Error> {
        either!(self, |w| Ok(w.signal(peer)?))
    }

    #[inline]
    pub(crate) fn wait(&self, peer: u32) -> Result<(), Error> {
        either!(self, |w| Ok(w.wait(peer)?))
    }

    #[inline]
    pub(crate) fn try_wait(&self, peer: u32) -> Result<bool, Error> {
        either!(self, |w| Ok(w.try_wait(peer)?))
    }

    #[inline]
    pub(crate) fn fence(&self) -> Result<(), Error> {
        either!(self, |w| Ok(w.fence()?))
    }

    /// The fence with every rank, after the work queued on `stream` (an
    /// `aclrtStream`, or `NULL` for none) and on the window's stream is done.
    pub(crate) fn fence_on(&self, stream: *mut c_void) -> Result<(), Error> {
        match self {
            Self::Host(w) => {
                host_stream(stream)?;
                Ok(w.fence()?)
            }
            #[cfg(feature = "ascend")]
            Self::Device(w) => Ok(w.fence_on(device_stream(stream))?),
        }
    }

    /// The fence with `peer`, after the work on `stream` as [`Self::fence_on`].
    pub(crate) fn peer_fence_on(&self, peer: u32, stream: *mut c_void) -> Result<(), Error> {
        match self {
            Self::Host(w) => {
                host_stream(stream)?;
                Ok(w.peer_fence(peer)?)
            }
            #[cfg(feature = "ascend")]
            Self::Device(w) => Ok(w.peer_fence_on(peer, device_stream(stream))?),
        }
    }

    /// Copies `src` to byte `offset` of `rank`'s segment, complete on return.
    pub(crate) fn put(&self, rank: u32, offset: usize, src: &[u8]) -> Result<(), Error> {
        either!(self, |w| Ok(w.write(rank, offset, src)?))
    }

    /// Copies from byte `offset` of `rank`'s segment into `dst`, complete on return.
    pub(crate) fn get(&self, rank: u32, offset: usize, dst: &mut [u8]) -> Result<(), Error> {
        either!(self, |w| Ok(w.read(rank, offset, dst)?))
    }

    /// Rank `rank`'s segment: its address in this process (a device address
    /// for device windows; `NULL` when empty) and its length.
    pub(crate) fn segment(&self, rank: u32) -> Result<(*mut c_void, usize), Error> {
        let (ptr, len) = match self {
            Self::Host(w) => w.segment(rank).map(|s| (s.ptr.as_ptr().cast::<c_void>(), s.len))?,
            #[cfg(feature = "ascend")]
            Self::Device(w) => w.segment(rank).map(|s| (s.ptr, s.len))?,
        };
        Ok((if len == 0 { core::ptr::null_mut() } else { ptr }, len))
    }

    /// Frees the window (collective).
    pub(crate) fn free(self) -> Result<(), Error> {
        either!(self, |w| Ok(w.free()?))
    }
}

/// A host window has no device stream to wait for: `stream` must be `NULL`.
fn host_stream(stream: *mut c_void) -> Result<(), Error> {
    if stream.is_null() {
        Ok(())
    } else {
        Err(Error::Invalid { arg: "stream", why: "a host window has no device stream: pass NULL" })
    }
}

/// The caller's stream a device fence also waits for, if any.
#[cfg(feature = "ascend")]
fn device_stream(stream: *mut c_void) -> Option<AclStream> {
    (!stream.is_null()).then(|| AclStream::from_ptr(stream))
}

/// Allocates a device window on `device`, with the runtime `KPCCL_ASCEND` names
/// (and without a PID whitelist if the attribute, or else
/// `KPCCL_ASCEND_PID_VALIDATION=0`, says so).
#[cfg(feature = "ascend")]
pub(crate) fn alloc<O: Oob>(comm: &Comm<O>, size: usize, device: i32, options: &Options) -> Result<AnyWindow, Error> {
    let mut builder = DeviceWindow::builder(comm, size).device(device).backend(kpccl_ascend::backend::from_env());
    // Unset: as KPCCL_ASCEND_PID_VALIDATION says (the builder reads it).
    if let Some(validation) = options.pid_validation {
        builder = builder.disable_pid_validation(!validation);
    }
    if let Some(timeout) = options.timeout {
        builder = builder.timeout(timeout);
    }
    Ok(AnyWindow::Device(builder.alloc()?))
}

/// Refuses a device window in a library built without the Ascend backend,
/// taking part in the window's collective refused so that no rank waits.
#[cfg(not(feature = "ascend"))]
pub(crate) fn alloc<O: Oob>(
    comm: &Comm<O>,
    _size: usize,
    _device: i32,
    _options: &Options,
) -> Result<AnyWindow, Error> {
    let _ = comm.window(0).fail();
    Err(Error::NoAscend)
}
