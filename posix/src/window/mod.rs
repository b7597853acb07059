//! Windows: shared memory in which every rank owns a segment, and the fences
//! that order accesses to it.

mod access;

pub use access::Plain;

use kpccl_core::DataSegment;
use kpccl_core::fence::Poison;

use crate::Error;
use crate::platform::PosixPlatform;

/// A shared window, as seen by one rank. Dropping it unmaps it without a
/// collective; [`Window::free`] first fences with every rank (collective).
///
/// Accesses to peers' segments are ordered only by fences: data written
/// before `peer_fence(j)` (or `fence()`) is seen by rank `j` after its
/// matching call. The copy helpers are bounds-checked; [`Window::segment`]
/// gives raw pointers for everything else.
///
/// A child `fork`ed from this process does not inherit the mapping
/// (`MADV_DONTFORK`): touching the window there faults, and the child must
/// neither use nor drop the parent's `Window` (`std::mem::forget` it).
#[derive(Debug)]
pub struct Window {
    inner: kpccl_core::Window<PosixPlatform>,
}

impl Window {
    pub(crate) fn new(inner: kpccl_core::Window<PosixPlatform>) -> Self {
        Self { inner }
    }

    /// This rank.
    pub fn rank(&self) -> u32 {
        self.inner.rank()
    }

    /// Ranks in the window.
    pub fn nranks(&self) -> u32 {
        self.inner.nranks()
    }

    /// The pairwise fence with `peer`: what this rank did before it is seen by
    /// `peer` after its matching `peer_fence(self.rank())`, and vice versa.
    /// Fences between a pair match one to one.
    #[inline]
    pub fn peer_fence(&self, peer: u32) -> Result<(), Error> {
        Ok(self.inner.peer_fence(peer)?)
    }

    /// The fence with every rank of the window (every rank calls it).
    #[inline]
    pub fn fence(&self) -> Result<(), Error> {
        Ok(self.inner.fence()?)
    }

    /// Rank `rank`'s segment: its address in this process and its length.
    pub fn segment(&self, rank: u32) -> Result<DataSegment, Error> {
        Ok(self.inner.segment(rank)?)
    }

    /// This rank's own segment.
    pub fn local_segment(&self) -> DataSegment {
        self.inner.segment(self.rank()).expect("own rank is in range")
    }

    /// Why the window was abandoned (a dead peer, a timeout), if it was.
    pub fn poisoned(&self) -> Option<Poison> {
        self.inner.poisoned()
    }

    /// The core window, for layouts and raw access.
    pub fn raw(&self) -> &kpccl_core::Window<PosixPlatform> {
        &self.inner
    }

    /// Frees the window (collective): fences with every rank so nobody still
    /// reads, then unmaps. The memory is released even when the fence fails
    /// (e.g. a peer died), and the error is returned.
    pub fn free(self) -> Result<(), Error> {
        Ok(self.inner.free()?)
    }
}
