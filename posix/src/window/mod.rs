//! Windows: shared memory in which every rank owns a segment, and the fences
//! that order accesses to it.

mod access;
mod pending;
mod probe;

pub use pending::PendingFence;
pub use probe::PoisonProbe;

use std::sync::Arc;

use kpccl_core::fence::Poison;
use kpccl_core::{DataSegment, FenceError};

use crate::comm::Nodes;
use crate::platform::PosixPlatform;
use crate::stats::{self, Counters, WindowStats};
use crate::{Error, log};

/// A shared window, as seen by one rank. Dropping it unmaps it without a
/// collective; [`Window::free`] first fences with every rank (collective).
///
/// Accesses to peers' segments are ordered only by fences: data written
/// before `peer_fence(j)` (or `fence()`) is seen by rank `j` after its
/// matching call. The copy helpers are bounds-checked; [`Window::segment`]
/// gives raw pointers for everything else.
///
/// Ranks are the communicator's: over several nodes, the window's memory is
/// shared by this node's ranks ([`Window::node_ranks`]), and naming a rank
/// of another node is an [`Error::OtherNode`]. Fences order this node's ranks.
///
/// A child `fork`ed from this process does not inherit the mapping
/// (`MADV_DONTFORK`): touching the window there faults, so the child must
/// not use the parent's `Window` ([`Window::inherited`] tells); dropping it
/// there touches nothing (no leaving mark, no unmap, no close).
#[derive(Debug)]
pub struct Window {
    inner: kpccl_core::Window<PosixPlatform>,
    nodes: Arc<Nodes>,
    /// With `KPCCL_STATS=1`: this window's counters (its platform counts the sleeps).
    stats: Option<Arc<Counters>>,
}

impl Window {
    pub(crate) fn new(
        inner: kpccl_core::Window<PosixPlatform>,
        nodes: Arc<Nodes>,
        stats: Option<Arc<Counters>>,
    ) -> Self {
        Self { inner, nodes, stats }
    }

    /// This window's counters so far, if kept (`KPCCL_STATS=1`; see
    /// [`WindowStats`]).
    pub fn stats(&self) -> Option<WindowStats> {
        self.stats.as_deref().map(Counters::snapshot)
    }

    /// Counts one call in `counter`, if counters are kept.
    #[inline]
    fn count(&self, counter: fn(&Counters) -> &kpccl_core::sync::AtomicU64) {
        if let Some(s) = &self.stats {
            stats::add(counter(s), 1);
        }
    }

    /// One pairwise call with `peer`, a rank of this node, counted in `counter`:
    /// the rank renamed to the core's local one, and back in an error.
    #[inline(always)]
    fn pairwise(
        &self,
        peer: u32,
        counter: fn(&Counters) -> &kpccl_core::sync::AtomicU64,
        call: impl FnOnce(&kpccl_core::Window<PosixPlatform>, u32) -> Result<(), FenceError>,
    ) -> Result<(), Error> {
        let local = self.nodes.local(peer)?;
        self.count(counter);
        call(&self.inner, local).map_err(|e| self.global(e))
    }

    /// This rank (in the communicator).
    pub fn rank(&self) -> u32 {
        self.nodes.global(self.inner.rank())
    }

    /// Ranks in the communicator; only [`Window::node_ranks`] share this window's memory.
    pub fn nranks(&self) -> u32 {
        self.nodes.nranks()
    }

    /// Whether this window's signallers wake sleepers with a compiler fence,
    /// their sleepers paying a `membarrier` instead (`KPCCL_LIGHT_WAKES`): the
    /// same on every rank of the node.
    pub fn light_wakes(&self) -> bool {
        self.inner.light_wakes()
    }

    /// The ranks whose segments this rank can reach (its node's), by local rank.
    pub fn node_ranks(&self) -> &[u32] {
        &self.nodes.ranks
    }

    /// A fence error with the core's local ranks renamed to the communicator's.
    fn global(&self, e: FenceError) -> Error {
        Window::global_with(&self.nodes, e)
    }

    /// The pairwise fence with `peer`, a rank of this node: what this rank
    /// did before it is seen by `peer` after its matching
    /// `peer_fence(self.rank())`, and vice versa. Fences between a pair match
    /// one to one. A rank of another node is an error ([`Error::OtherNode`]).
    #[inline]
    pub fn peer_fence(&self, peer: u32) -> Result<(), Error> {
        self.pairwise(peer, |s| &s.peer_fences, |w, local| w.peer_fence(local))
    }

    /// Signals `peer`, a rank of this node, once and returns without waiting:
    /// what this rank did before it is seen by `peer` after the
    /// [`Window::wait`] that consumes this signal. Signals count (n signals
    /// satisfy n waits) and are separate from fences: a `peer_fence` neither
    /// sends nor consumes one. A signal to oneself does nothing.
    #[inline]
    pub fn signal(&self, peer: u32) -> Result<(), Error> {
        self.pairwise(peer, |s| &s.signals, |w, local| w.signal(local))
    }

    /// Waits until `peer`, a rank of this node, has signalled this rank more
    /// times than this rank has waited for it, and consumes one signal: what
    /// `peer` did before that signal is seen here after the call. Fails like
    /// a fence (dead peer, timeout, abandoned window), consuming nothing.
    /// Waiting for oneself returns at once.
    #[inline]
    pub fn wait(&self, peer: u32) -> Result<(), Error> {
        self.pairwise(peer, |s| &s.waits, |w, local| w.wait(local))
    }

    /// Consumes the next signal from `peer`, a rank of this node, if it has
    /// come, without waiting: `Ok(true)` then, ordered as [`Window::wait`];
    /// `Ok(false)` if it has not come yet (nothing is consumed). For
    /// overlapping work with a wait, as `MPI_Test` does for a receive. A
    /// test that finds no signal looks at `peer`'s process at most once per
    /// `KPCCL_LIVENESS_MS` (50 ms), so a loop of tests ends with an error on
    /// a dead peer (or an abandoned window), as a wait does;
    /// `KPCCL_TIMEOUT_MS` bounds waits, not tests. A peer that freed the
    /// window is no error (`Ok(false)`: no signal is left): a loop of tests
    /// on a peer inside [`Window::free`], which waits for this rank's free,
    /// ends only when a timeout ends that free; [`Window::start_wait`]
    /// fails on it at once. Testing oneself is
    /// `Ok(true)`.
    #[inline]
    pub fn try_wait(&self, peer: u32) -> Result<bool, Error> {
        let local = self.nodes.local(peer)?;
        let taken = self.inner.try_wait(local).map_err(|e| self.global(e))?;
        if taken {
            self.count(|s| &s.waits);
        }
        Ok(taken)
    }

    /// The fence with every rank of this node (each of them calls it).
    #[inline]
    pub fn fence(&self) -> Result<(), Error> {
        self.count(|s| &s.fences);
        self.inner.fence().map_err(|e| self.global(e))
    }

    /// Whether this process is a child forked after the window was made:
    /// the window's memory is not mapped here, and nothing but dropping it
    /// may be done with it.
    pub fn inherited(&self) -> bool {
        self.inner.inherited()
    }

    /// Says that this rank is freeing the window (see
    /// [`kpccl_core::Window::start_freeing`]): for a teardown that runs
    /// window fences of its own before [`Window::free`].
    pub fn start_freeing(&self) {
        self.inner.start_freeing();
    }

    /// Starts the pairwise fence with `peer` without blocking: poll (or
    /// `.await`) the [`PendingFence`] until it is ready. Same matching and
    /// errors as [`Window::peer_fence`].
    pub fn start_peer_fence(&mut self, peer: u32) -> Result<PendingFence<'_>, Error> {
        let local = self.nodes.local(peer)?;
        self.count(|s| &s.peer_fences);
        PendingFence::started(&self.nodes, self.inner.start_peer_fence(local))
    }

    /// Starts a wait for the next signal from `peer` without blocking; the
    /// poll that completes it consumes the signal (see [`Window::wait`]).
    pub fn start_wait(&mut self, peer: u32) -> Result<PendingFence<'_>, Error> {
        let local = self.nodes.local(peer)?;
        self.count(|s| &s.waits);
        PendingFence::started(&self.nodes, self.inner.start_wait(local))
    }

    /// Starts the fence with every rank of this node without blocking (see
    /// [`Window::fence`]).
    pub fn start_fence(&mut self) -> Result<PendingFence<'_>, Error> {
        self.count(|s| &s.fences);
        PendingFence::started(&self.nodes, self.inner.start_fence())
    }

    /// Rank `rank`'s segment: its address in this process and its length.
    /// Rank `rank` must be on this node ([`Error::OtherNode`] otherwise).
    pub fn segment(&self, rank: u32) -> Result<DataSegment, Error> {
        let local = self.nodes.local(rank)?;
        self.inner.segment(local).map_err(|e| self.global(e))
    }

    /// This rank's own segment.
    pub fn local_segment(&self) -> DataSegment {
        self.inner.own_segment()
    }

    /// Why the window was abandoned (a dead peer, a timeout), if it was; the
    /// rank named is the communicator's.
    pub fn poisoned(&self) -> Option<Poison> {
        self.poison_probe().get()
    }

    /// The window's poison, for other threads to read while this one uses
    /// the window (see [`PoisonProbe`]).
    pub fn poison_probe(&self) -> PoisonProbe<'_> {
        PoisonProbe { word: self.inner.poison_word(), nodes: &self.nodes }
    }

    /// Gives up on the window: every rank's waits on it fail at once, naming
    /// this rank, instead of waiting for it (a rank that cannot go on: it
    /// was interrupted, or its device work failed). Its fences fail from
    /// then on, and [`Window::free`] releases its memory without waiting.
    pub fn abandon(&self) {
        self.inner.abandon();
    }

    /// The core window, for layouts and raw access: it numbers this node's
    /// ranks by local rank.
    pub fn raw(&self) -> &kpccl_core::Window<PosixPlatform> {
        &self.inner
    }

    /// Frees the window (collective): fences with every rank so nobody still
    /// reads, then unmaps. The memory is released even when the fence fails
    /// (e.g. a peer died), and the error is returned.
    /// With `KPCCL_STATS=1`, prints the window's counters on stderr.
    pub fn free(self) -> Result<(), Error> {
        self.free_in_place()
    }

    /// [`Window::free`] for a window whose memory others still borrow (the
    /// views of a language binding): the same teardown fence and counters,
    /// after which this rank counts as gone at once, as if dropped (a
    /// peer's wait for it fails, naming it), while the mapping stays until
    /// the value is dropped. Only dropping it should follow: its peers count
    /// this rank as gone.
    pub fn free_in_place(&self) -> Result<(), Error> {
        self.count(|s| &s.fences);
        let result = self.inner.free_in_place().map_err(|e| self.global(e));
        if let Some(s) = &self.stats {
            let (rank, size) = (self.rank(), self.inner.layout().total());
            log::stderr_line(format_args!("stats: rank {rank}, window of {size} bytes: {}", s.snapshot()));
        }
        result
    }

    /// Leaves the window at once, without a fence, while the mapping stays
    /// until the value is dropped (see [`kpccl_core::Window::leave_in_place`]):
    /// for a binding whose views outlive its window object.
    pub fn leave_in_place(&self) {
        self.inner.leave_in_place();
    }

    fn global_with(nodes: &Nodes, e: FenceError) -> Error {
        Error::Fence(e.renamed(|l| nodes.global(l)))
    }
}
