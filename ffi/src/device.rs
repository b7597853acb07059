//! Windows of either memory kind behind one handle: host shared memory, or
//! Ascend device memory (`KPCCL_SHM_MEMORY_ASCEND`, through `kpccl-ascend`).
//! Queries of a device window return device addresses; fences use its host
//! fence slots.

use core::ffi::c_void;

use kpccl_ascend::{DeviceWindow, PutGet};
use kpccl_posix::{Comm, Oob, Window};

use crate::attr::Options;
use crate::error::Error;

/// Errors of both kinds: a host window's error is the `Host` case.
pub(crate) type WinError = kpccl_ascend::window::Error;

/// The window behind a handle.
#[derive(Debug)]
pub(crate) enum AnyWindow {
    /// Host shared memory.
    Host(Window),
    /// Ascend device memory.
    Device(DeviceWindow),
}

// The fence calls stay inlined from the C entry point to the epoch slot: a
// host window pays one predictable branch.
impl AnyWindow {
    pub(crate) fn rank(&self) -> u32 {
        match self {
            Self::Host(w) => w.rank(),
            Self::Device(w) => w.rank(),
        }
    }

    #[inline]
    pub(crate) fn nranks(&self) -> u32 {
        match self {
            Self::Host(w) => w.nranks(),
            Self::Device(w) => w.nranks(),
        }
    }

    #[inline]
    pub(crate) fn peer_fence(&self, peer: u32) -> Result<(), WinError> {
        match self {
            Self::Host(w) => Ok(w.peer_fence(peer)?),
            Self::Device(w) => w.peer_fence(peer),
        }
    }

    #[inline]
    pub(crate) fn signal(&self, peer: u32) -> Result<(), WinError> {
        match self {
            Self::Host(w) => Ok(w.signal(peer)?),
            Self::Device(w) => w.signal(peer),
        }
    }

    #[inline]
    pub(crate) fn wait(&self, peer: u32) -> Result<(), WinError> {
        match self {
            Self::Host(w) => Ok(w.wait(peer)?),
            Self::Device(w) => w.wait(peer),
        }
    }

    #[inline]
    pub(crate) fn fence(&self) -> Result<(), WinError> {
        match self {
            Self::Host(w) => Ok(w.fence()?),
            Self::Device(w) => w.fence(),
        }
    }

    /// Copies `src` to byte `offset` of `rank`'s segment (see [`PutGet`]).
    pub(crate) fn put(&self, rank: u32, offset: usize, src: &[u8]) -> Result<(), WinError> {
        match self {
            Self::Host(w) => w.put(rank, offset, src),
            Self::Device(w) => w.put(rank, offset, src),
        }
    }

    /// Copies from byte `offset` of `rank`'s segment into `dst` (see [`PutGet`]).
    pub(crate) fn get(&self, rank: u32, offset: usize, dst: &mut [u8]) -> Result<(), WinError> {
        match self {
            Self::Host(w) => w.get(rank, offset, dst),
            Self::Device(w) => w.get(rank, offset, dst),
        }
    }

    /// The device window, for the calls that take a device stream.
    pub(crate) fn device(&self) -> Option<&DeviceWindow> {
        match self {
            Self::Host(_) => None,
            Self::Device(w) => Some(w),
        }
    }

    /// Rank `rank`'s segment: its address in this process (a device address
    /// for device windows; `NULL` when empty) and its length.
    pub(crate) fn segment(&self, rank: u32) -> Result<(*mut c_void, usize), WinError> {
        let (ptr, len) = match self {
            Self::Host(w) => w.segment(rank).map(|s| (s.ptr.as_ptr().cast::<c_void>(), s.len))?,
            Self::Device(w) => w.segment(rank).map(|s| (s.ptr, s.len))?,
        };
        Ok((if len == 0 { core::ptr::null_mut() } else { ptr }, len))
    }

    /// Frees the window (collective).
    pub(crate) fn free(self) -> Result<(), WinError> {
        match self {
            Self::Host(w) => Ok(w.free()?),
            Self::Device(w) => w.free(),
        }
    }
}

/// The variable that turns the PID whitelist off (`0`) when the attribute
/// leaves it to the environment; every rank must end up with the same choice.
const VALIDATION_ENV: &str = "KPCCL_ASCEND_PID_VALIDATION";

/// Allocates a device window on `device`, with the runtime `KPCCL_ASCEND` names
/// (and without a PID whitelist if the attribute, or else
/// `KPCCL_ASCEND_PID_VALIDATION=0`, says so).
pub(crate) fn alloc<O: Oob>(comm: &Comm<O>, size: usize, device: i32, options: &Options) -> Result<AnyWindow, Error> {
    let validation = options.pid_validation.unwrap_or_else(|| std::env::var(VALIDATION_ENV).map_or(true, |v| v != "0"));
    let mut builder = DeviceWindow::builder(comm, size)
        .device(device)
        .backend(kpccl_ascend::backend::from_env())
        .disable_pid_validation(!validation);
    if let Some(timeout) = options.timeout {
        builder = builder.timeout(timeout);
    }
    Ok(AnyWindow::Device(builder.alloc()?))
}
