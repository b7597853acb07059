//! Device windows: every rank's segment in Ascend device memory, shared by
//! the ACL IPC calls, with the fence slots in a host window.
//!
//! ```no_run
//! use kpccl_ascend::DeviceWindow;
//! use kpccl_posix::{Comm, launch::RunOob};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let oob = RunOob::from_env()?.expect("run me under kpccl-run");
//! let (rank, n) = (oob.rank(), oob.nranks());
//! let comm = Comm::new(oob, rank, n)?;
//! // KPCCL_ASCEND=sim selects the host simulator on a machine without NPUs.
//! let win = DeviceWindow::builder(&comm, 1 << 20).device(rank as i32).alloc()?;
//! win.write(rank, 0, b"hello")?;          // host -> this rank's device segment
//! win.fence()?;
//! let mut got = [0u8; 5];
//! win.read((rank + 1) % n, 0, &mut got)?; // a peer's segment, through its import
//! win.free()?;
//! # Ok(()) }
//! ```

mod copy;
mod error;
mod putget;
mod record;
mod setup;
mod state;

use core::ffi::c_void;
use std::time::Duration;

use kpccl_core::Oob;
use kpccl_core::fence::Poison;
use kpccl_posix::{Comm, Window};

pub use copy::STAGE_MAX;
pub use error::{Call, Collective, Error, Failure, RecordFlaw, Setting};
pub use putget::PutGet;
use state::DeviceState;

use crate::backend::{self, Runtime};
use crate::codes::{ACL_MEM_MALLOC_HUGE_FIRST, ACL_MEM_MALLOC_HUGE_FIRST_P2P};
use crate::{AclRuntime, AclStream};

/// A rank's device segment as this process sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceSegment {
    /// Its device address in this process: this rank's allocation, or the
    /// address a peer's segment was imported at; null when it is empty.
    pub ptr: *mut c_void,
    /// Its length in bytes.
    pub len: usize,
    /// The device it lives on.
    pub device: i32,
}

/// Fault injection for tests of the failure paths (feature `fault-injection`).
#[cfg(feature = "fault-injection")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Export with a whitelist but never set it: peers' imports fail (507899).
    SkipWhitelist,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Options {
    size: usize,
    device: i32,
    validation: bool,
    /// The `aclrtMalloc` policy of the segment.
    policy: u32,
    #[cfg(feature = "fault-injection")]
    fault: Option<Fault>,
}

impl Options {
    /// Whether the export must skip its PID whitelist although validation is on.
    fn skips_whitelist(&self) -> bool {
        #[cfg(feature = "fault-injection")]
        if self.fault == Some(Fault::SkipWhitelist) {
            return true;
        }
        false
    }
}

/// A window in device memory (see the [module docs](self)). Dropping it
/// releases this rank's imports, key and memory without a collective (peers
/// that still map it lose their pages, as on hardware); [`DeviceWindow::free`]
/// follows the documented order with every rank.
pub struct DeviceWindow {
    dev: DeviceState,
    host: Window,
}

impl core::fmt::Debug for DeviceWindow {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("DeviceWindow").field("rank", &self.rank()).field("device", &self.dev.device).finish()
    }
}

/// Options of a device window; finish with [`DeviceWindowBuilder::alloc`].
#[must_use = "call .alloc() to create the window"]
pub struct DeviceWindowBuilder<'c, O: Oob> {
    comm: &'c Comm<O>,
    opts: Options,
    runtime: Option<Result<Runtime, Error>>,
    timeout: Option<Option<Duration>>,
    /// Whether keys carry the PID whitelist; `None`: as `KPCCL_ASCEND_PID_VALIDATION` says.
    validation: Option<bool>,
}

/// The variable that turns the PID whitelist off (`0`) for windows whose
/// builder leaves it to the environment; every rank must end up with the same choice.
const VALIDATION_ENV: &str = "KPCCL_ASCEND_PID_VALIDATION";

impl<O: Oob> core::fmt::Debug for DeviceWindowBuilder<'_, O> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("DeviceWindowBuilder").field("opts", &self.opts).finish_non_exhaustive()
    }
}

impl DeviceWindow {
    /// Starts describing a device window in which this rank owns `size` bytes.
    pub fn builder<O: Oob>(comm: &Comm<O>, size: usize) -> DeviceWindowBuilder<'_, O> {
        DeviceWindowBuilder {
            comm,
            opts: Options {
                size,
                device: 0,
                validation: true,
                policy: ACL_MEM_MALLOC_HUGE_FIRST_P2P,
                #[cfg(feature = "fault-injection")]
                fault: None,
            },
            runtime: None,
            timeout: None,
            validation: None,
        }
    }

    /// This rank.
    pub fn rank(&self) -> u32 {
        self.host.rank()
    }

    /// Ranks in the window.
    pub fn nranks(&self) -> u32 {
        self.host.nranks()
    }

    /// This rank's device.
    pub fn device(&self) -> i32 {
        self.dev.device
    }

    /// The runtime the window uses.
    pub fn runtime(&self) -> &dyn AclRuntime {
        &*self.dev.rt
    }

    /// Rank `rank`'s segment: its device address in this process (imported
    /// for peers), its length and device.
    pub fn segment(&self, rank: u32) -> Result<DeviceSegment, Error> {
        let n = self.nranks();
        let s =
            self.dev.segs.get(rank as usize).ok_or(Error::Host(kpccl_posix::Error::Fence(
                kpccl_core::FenceError::InvalidRank { rank, nranks: n },
            )))?;
        Ok(DeviceSegment { ptr: s.ptr, len: s.len, device: s.device })
    }

    /// The pairwise fence with `peer` (host fence slots; see
    /// [`kpccl_posix::Window::peer_fence`]), stream-ordered: the work queued on
    /// the window's stream is done first, so the peer sees it after the fence.
    #[inline]
    pub fn peer_fence(&self, peer: u32) -> Result<(), Error> {
        self.peer_fence_on(peer, None)
    }

    /// [`DeviceWindow::peer_fence`] that also waits for the work queued on the
    /// caller's `stream` (a stream of this rank's device): device work queued
    /// there before the fence is visible to the peer after it.
    pub fn peer_fence_on(&self, peer: u32, stream: Option<AclStream>) -> Result<(), Error> {
        self.synchronize_or_abandon(stream)?;
        Ok(self.host.peer_fence(peer)?)
    }

    /// Signals `peer` once without waiting (host counters; see
    /// [`kpccl_posix::Window::signal`]), after the window's stream is done.
    #[inline]
    pub fn signal(&self, peer: u32) -> Result<(), Error> {
        self.synchronize_or_abandon(None)?;
        Ok(self.host.signal(peer)?)
    }

    /// Waits for and consumes the next signal from `peer` (see
    /// [`kpccl_posix::Window::wait`]).
    #[inline]
    pub fn wait(&self, peer: u32) -> Result<(), Error> {
        Ok(self.host.wait(peer)?)
    }

    /// Consumes the next signal from `peer` if it has come, without waiting
    /// (see [`kpccl_posix::Window::try_wait`]).
    #[inline]
    pub fn try_wait(&self, peer: u32) -> Result<bool, Error> {
        Ok(self.host.try_wait(peer)?)
    }

    /// The fence with every rank of the window, stream-ordered as
    /// [`DeviceWindow::peer_fence`].
    #[inline]
    pub fn fence(&self) -> Result<(), Error> {
        self.fence_on(None)
    }

    /// [`DeviceWindow::fence`] that also waits for the caller's `stream`, as
    /// [`DeviceWindow::peer_fence_on`].
    pub fn fence_on(&self, stream: Option<AclStream>) -> Result<(), Error> {
        self.synchronize_or_abandon(stream)?;
        Ok(self.host.fence()?)
    }

    /// The device half of a fence or signal. If it fails, this rank gives up on
    /// the window (as after a failed wait): its peers' waits for it fail at
    /// once, naming it, instead of waiting, or of matching a later fence of
    /// its (in `free`) as if it had taken part in this one.
    fn synchronize_or_abandon(&self, stream: Option<AclStream>) -> Result<(), Error> {
        self.dev.synchronize(stream).inspect_err(|_| self.host.abandon())
    }

    /// The window's stream (on this rank's device), on which its copies run.
    pub fn stream(&self) -> AclStream {
        self.dev.stream.unwrap_or(AclStream::DEFAULT)
    }

    /// Why the window was abandoned (a dead peer, a timeout), if it was.
    pub fn poisoned(&self) -> Option<Poison> {
        self.host.poisoned()
    }

    /// The host window holding the fence slots.
    pub fn host(&self) -> &Window {
        &self.host
    }

    /// Frees the window (collective), in the documented order: a fence (nobody
    /// still copies), every importer closes, a fence, every exporter closes its
    /// key and frees its memory. Everything is released even when a step fails
    /// (a dead peer ends the fences at once); the first error is returned.
    pub fn free(self) -> Result<(), Error> {
        let Self { mut dev, host } = self;
        // Only window fences from here on: a peer's pairwise wait for this rank fails.
        host.start_freeing();
        let mut first = host.fence().map_err(Error::from);
        first = first.and(dev.close_imports());
        first = first.and(host.fence().map_err(Error::from));
        first = first.and(dev.release_own());
        drop(dev);
        first.and(host.free().map_err(Error::from))
    }
}

impl<O: Oob> DeviceWindowBuilder<'_, O> {
    /// The device this rank's segment lives on (default 0).
    pub fn device(mut self, device: i32) -> Self {
        self.opts.device = device;
        self
    }

    /// The device runtime (default: [`backend::from_env`], `KPCCL_ASCEND`).
    pub fn runtime(mut self, rt: impl AclRuntime + Send + Sync + 'static) -> Self {
        self.runtime = Some(Ok(std::sync::Arc::new(rt)));
        self
    }

    /// A runtime chosen by the caller, or why there is none: a rank without
    /// one still takes part, so that every rank fails together.
    pub fn backend(mut self, rt: Result<Runtime, backend::BackendError>) -> Self {
        self.runtime = Some(rt.map_err(Error::Backend));
        self
    }

    /// Allocates the segment with a P2P policy (`ACL_MEM_MALLOC_HUGE_FIRST_P2P`,
    /// the default), or without (`ACL_MEM_MALLOC_HUGE_FIRST`). On Atlas inference
    /// products another device can import only P2P memory; A2 and A3 accept both.
    pub fn p2p_policy(mut self, p2p: bool) -> Self {
        self.opts.policy = if p2p { ACL_MEM_MALLOC_HUGE_FIRST_P2P } else { ACL_MEM_MALLOC_HUGE_FIRST };
        self
    }

    /// Exports keys without a PID whitelist (`DISABLE_PID_VALIDATION`): any
    /// process may import them. The same on every rank. Default: whitelist,
    /// unless `KPCCL_ASCEND_PID_VALIDATION=0`.
    pub fn disable_pid_validation(mut self, disable: bool) -> Self {
        self.validation = Some(!disable);
        self
    }

    /// Fence waits give up after `timeout` (default: `KPCCL_TIMEOUT_MS`, else never).
    pub fn timeout(mut self, timeout: Option<Duration>) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Injects `fault` (tests of the failure paths).
    #[cfg(feature = "fault-injection")]
    pub fn fault(mut self, fault: Fault) -> Self {
        self.opts.fault = Some(fault);
        self
    }

    /// Creates the window (collective). If any rank fails — a bad argument, no
    /// runtime, an ACL call — every rank gets an error, with the ACL code.
    pub fn alloc(self) -> Result<DeviceWindow, Error> {
        if self.comm.nnodes() > 1 {
            // Take part in the window's first collective, refused: ranks that
            // asked for host memory meanwhile fail too, instead of waiting.
            let _ = self.comm.window(0).memory_kind(crate::MEMORY_KIND).fail();
            return Err(Error::MultiNode { nnodes: self.comm.nnodes() });
        }
        let validation = match self.validation.map_or_else(|| kpccl_posix::env_flag(VALIDATION_ENV), |v| Ok(Some(v))) {
            Ok(v) => v.unwrap_or(true),
            Err(e) => {
                // Take part in the window's first collective, refused, so that no rank waits.
                let _ = self.comm.window(0).memory_kind(crate::MEMORY_KIND).fail();
                return Err(Error::Host(e));
            }
        };
        let opts = Options { validation, ..self.opts };
        let mut host = self.comm.window(0).memory_kind(crate::MEMORY_KIND);
        if let Some(t) = self.timeout {
            host = host.timeout(t);
        }
        let host = host.alloc()?;
        let rt = self.runtime.unwrap_or_else(|| backend::from_env().map_err(Error::Backend));
        let dev = setup::create(self.comm, &host, rt, &opts).map_err(Error::naming_lost_rank)?;
        Ok(DeviceWindow { dev, host })
    }
}
