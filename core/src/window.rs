//! A window this process has mapped: its sync area, its data segments, its
//! fences.

use core::cell::Cell;
use core::ptr::NonNull;
use core::task::Poll;

use crate::error::FenceError;
use crate::fence::{self, Barrier, Poison, PoisonKind, SyncArea as _, WaitEnv, WaitPolicy};
use crate::layout::shared::{Header, RankEntry};
use crate::layout::{Layout, Region};
use crate::platform::{Platform, ProcessIdentity, Segment, WaitOutcome};
use crate::raw::{Mapped, SyncBlocks};
use crate::sync::AtomicU32;
use crate::sync::Ordering::{Acquire, Relaxed};

/// A rank's data segment inside the window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataSegment {
    /// Its first byte (dangling-but-aligned and never dereferenceable when `len == 0`).
    pub ptr: NonNull<u8>,
    /// Its length in bytes.
    pub len: usize,
}

/// A fence of a [`Window`] started without blocking: [`Pending::poll`] it
/// until it is ready. Dropping it before then abandons it; if that breaks
/// the window (other ranks left waiting for this one, or a flat barrier
/// this rank has arrived at and the others have not completed), the window
/// is poisoned, so that every rank's next wait fails instead of hanging or
/// passing a fence too early. It may move to another thread meanwhile, as
/// the window it borrows may.
#[must_use = "a started fence does nothing until it is polled to completion"]
pub struct Pending<'w, P: Platform> {
    window: &'w Window<P>,
    fence: fence::PendingFence,
}

// SAFETY: a `Pending<'w, P>` is made only by `Window::start_*`, which borrow
// the window mutably for `'w`: for that long it is the only way to the
// window, so moving it to another thread moves every access there, as moving
// the `&mut Window` would (hence the bound). Without this a started fence
// could not be awaited in a task of a multi-threaded executor.
#[allow(unsafe_code)]
unsafe impl<P: Platform> Send for Pending<'_, P> where Window<P>: Send {}

impl<P: Platform> Pending<'_, P> {
    /// Takes every step that is ready (see [`fence::PendingFence::poll`]).
    pub fn poll(&mut self) -> Poll<Result<(), FenceError>> {
        self.fence.poll(&self.window.sync, self.window)
    }

    /// Whether the fence is complete.
    #[must_use]
    pub fn is_done(&self) -> bool {
        self.fence.is_done()
    }
}

impl<P: Platform> core::fmt::Debug for Pending<'_, P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Pending").field("rank", &self.window.rank).field("fence", &self.fence).finish()
    }
}

impl<P: Platform> Drop for Pending<'_, P> {
    fn drop(&mut self) {
        if self.fence.abandoning_breaks_window(&self.window.sync) {
            self.window.abandon();
        }
    }
}

/// A mapped window, as seen by one rank.
///
/// Not `Sync`: a rank's fences must not run on two threads at once (each
/// slot has a single writer). It may move between threads.
#[derive(Debug)]
pub struct Window<P: Platform> {
    platform: P,
    mem: Mapped,
    sync: SyncBlocks,
    layout: Layout,
    rank: u32,
    /// This rank's data segment as laid out from the requests: never read
    /// back from the shared rank table, which peers can write.
    own: Region,
    policy: WaitPolicy,
    barrier: Barrier,
    /// When a [`Window::try_wait`] that finds no signal next looks for dead
    /// ranks (platform clock, ns), and how many looks it has taken.
    liveness_due_at: Cell<u64>,
    liveness_checks: Cell<u32>,
    /// Every rank has verified the window, and this rank has not left it
    /// yet ([`Self::free_in_place`]): dropping it then marks this rank as
    /// gone (see [`fence::leave`]). Before, the segment may not even be a
    /// window of ours, and nothing is written to it.
    joined: Cell<bool>,
    /// Signallers order their look at a sleeper's flag with a compiler fence
    /// (every rank registered for the heavy fence; see `fence::notify`).
    light_wakes: bool,
    // Last: dropped (unmapped) after everything that points into it.
    segment: P::Segment,
}

impl<P: Platform> Drop for Window<P> {
    fn drop(&mut self) {
        self.leave_in_place();
    }
}

// SAFETY: `Mapped` only points into `segment`'s mapping, which moves with the
// window; the window is not `Sync`, so one thread at a time uses it.
#[allow(unsafe_code)]
unsafe impl<P: Platform + Send> Send for Window<P> where P::Segment: Send {}

impl<P: Platform> Window<P> {
    /// Wraps a mapped, verified window.
    pub(crate) fn new(
        platform: P,
        segment: P::Segment,
        layout: Layout,
        rank: u32,
        own: Region,
        policy: WaitPolicy,
        barrier: Barrier,
    ) -> Self {
        // SAFETY: `segment` owns the mapping and is dropped only with `self`,
        // after every borrow of `mem` (they borrow `self`).
        #[allow(unsafe_code)]
        let mem = unsafe { Mapped::new(segment.base(), segment.len()) };
        // The fences index the sync blocks with this rank unchecked (see `SyncBlocks`).
        assert!(rank < layout.nranks(), "rank {rank} of a window of {}", layout.nranks());
        let sync = SyncBlocks::new(&mem, &layout);
        let (liveness_due_at, liveness_checks) = (Cell::new(0), Cell::new(0));
        let (joined, light_wakes) = (Cell::new(false), false);
        Self {
            platform,
            mem,
            sync,
            layout,
            rank,
            own,
            policy,
            barrier,
            liveness_due_at,
            liveness_checks,
            joined,
            light_wakes,
            segment,
        }
    }

    /// Marks the window as verified by every rank (see `joined`), and
    /// registers this process for the heavy fence of light wake-ups: a rank
    /// that cannot flags the header, and then no rank uses them. So does one
    /// whose node has more ranks than CPUs (the platform's `cpu_count`): then
    /// waits end in sleeps often, and each would pay the heavy fence (and
    /// interrupt the CPUs running the others) to spare the signallers a few
    /// nanoseconds.
    pub(crate) fn join(&mut self) {
        self.joined.set(true);
        let fits = self.layout.nranks() <= self.platform.cpu_count();
        if !(fits && self.platform.register_global_heavy_fence()) {
            // Relaxed: creation's fence publishes it before anyone reads it.
            self.sync.header().full_fence_wakes.store(1, Relaxed);
        }
    }

    /// After creation's fence, which every rank entered after its `join`:
    /// light wake-ups unless a rank flagged the header.
    pub(crate) fn settle_wakes(&mut self) {
        // Relaxed: the fence just passed acquired every rank's `join`.
        self.light_wakes = self.sync.header().full_fence_wakes.load(Relaxed) == 0;
    }

    /// This rank.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// Ranks in the window.
    pub fn nranks(&self) -> u32 {
        self.layout.nranks()
    }

    /// The window's layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// How this rank waits.
    pub fn policy(&self) -> WaitPolicy {
        self.policy
    }

    /// Changes how this rank waits from now on.
    pub fn set_policy(&mut self, policy: WaitPolicy) {
        self.policy = policy;
    }

    /// How the window fence runs (the same on every rank).
    pub fn barrier(&self) -> Barrier {
        self.barrier
    }

    /// Whether signallers wake sleepers with the light fence (every rank
    /// registered for the heavy one, and the node has no more ranks than
    /// CPUs; see `join`), the same on every rank.
    pub fn light_wakes(&self) -> bool {
        self.light_wakes
    }

    /// The platform the window lives on.
    pub fn platform(&self) -> &P {
        &self.platform
    }

    /// The pairwise fence with `peer` (see [`fence::peer_fence`]).
    #[inline]
    pub fn peer_fence(&self, peer: u32) -> Result<(), FenceError> {
        fence::peer_fence(&self.sync, self, self.rank, peer, &self.policy)
    }

    /// Signals `peer` once, without waiting (see [`fence::peer_signal`]).
    #[inline]
    pub fn signal(&self, peer: u32) -> Result<(), FenceError> {
        fence::peer_signal(&self.sync, self, self.rank, peer)
    }

    /// Waits for and consumes the next signal from `peer` (see [`fence::peer_wait`]).
    #[inline]
    pub fn wait(&self, peer: u32) -> Result<(), FenceError> {
        fence::peer_wait(&self.sync, self, self.rank, peer, &self.policy)
    }

    /// Consumes the next signal from `peer` if it has come, without waiting
    /// (see [`fence::peer_test`]): `Ok(false)` if it has not. Tests that
    /// find none look for dead ranks at most once per the policy's
    /// `liveness_ns` (the tested peer each time, and a slice of the others
    /// that moves on at each look, whichever peers a loop of tests
    /// alternates between), so a loop of tests ends on a dead peer as a wait does, at
    /// the cost of a clock read per empty test.
    #[inline]
    pub fn try_wait(&self, peer: u32) -> Result<bool, FenceError> {
        fence::peer_test(&self.sync, self, self.rank, peer, || {
            let now = self.now_ns();
            if now < self.liveness_due_at.get() {
                return None;
            }
            self.liveness_due_at.set(now.saturating_add(self.policy.liveness_ns));
            let checks = self.liveness_checks.get().wrapping_add(1);
            self.liveness_checks.set(checks);
            Some(checks)
        })
    }

    /// The fence with every rank of the window (see [`fence::window_fence`]
    /// and [`fence::flat_fence`]).
    #[inline]
    pub fn fence(&self) -> Result<(), FenceError> {
        match self.barrier {
            Barrier::Dissemination => fence::window_fence(&self.sync, self, self.rank, &self.policy),
            Barrier::Flat => fence::flat_fence(&self.sync, self, self.rank, &self.policy),
        }
    }

    /// Starts the pairwise fence with `peer` without blocking: poll the
    /// result until it is ready (see [`fence::PendingFence`]). It borrows the
    /// window exclusively, so no other call of this rank interleaves.
    pub fn start_peer_fence(&mut self, peer: u32) -> Result<Pending<'_, P>, FenceError> {
        let fence = fence::PendingFence::peer_fence(&self.sync, self, self.rank, peer, &self.policy)?;
        Ok(Pending { window: self, fence })
    }

    /// Starts a wait for the next signal from `peer` without blocking.
    pub fn start_wait(&mut self, peer: u32) -> Result<Pending<'_, P>, FenceError> {
        let fence = fence::PendingFence::wait(&self.sync, self, self.rank, peer, &self.policy)?;
        Ok(Pending { window: self, fence })
    }

    /// Starts the fence with every rank of the window without blocking.
    pub fn start_fence(&mut self) -> Result<Pending<'_, P>, FenceError> {
        let fence = fence::PendingFence::window_fence(&self.sync, self, self.rank, self.barrier, &self.policy)?;
        Ok(Pending { window: self, fence })
    }

    /// Why the window was abandoned, if it was.
    pub fn poisoned(&self) -> Option<Poison> {
        fence::poison_state(&self.sync)
    }

    /// The window's poison word, which other threads may read while this
    /// one uses the window (the window itself is not `Sync`).
    pub fn poison_word(&self) -> fence::PoisonWord<'_> {
        fence::PoisonWord(self.sync.poison_word())
    }

    /// Marks the window abandoned, so that every rank's waits fail fast.
    pub fn poison(&self, p: Poison) -> Poison {
        fence::poison(&self.sync, self, p)
    }

    /// Gives up on the window as this rank: every rank's waits on it fail at
    /// once, naming this rank, as after an interrupted wait of its. Returns
    /// the poison that stands (an earlier one stays).
    pub fn abandon(&self) -> Poison {
        self.poison(Poison { kind: PoisonKind::Aborted, rank: self.rank })
    }

    /// Rank `rank`'s entry in the shared rank table.
    pub fn rank_entry(&self, rank: u32) -> Result<RankEntry, FenceError> {
        let nranks = self.nranks();
        if rank >= nranks {
            return Err(FenceError::InvalidRank { rank, nranks });
        }
        Ok(self.mem.read(self.layout.rank_entry(rank)).expect("rank table lies inside the window"))
    }

    /// Rank `rank`'s data segment.
    pub fn segment(&self, rank: u32) -> Result<DataSegment, FenceError> {
        let (offset, len) = if rank == self.rank { (self.own.offset, self.own.len) } else { self.peer_bounds(rank)? };
        let overwritten = FenceError::RankTableOverwritten { rank };
        let ptr = self.mem.range(offset, len).ok_or(overwritten)?;
        let len = usize::try_from(len).map_err(|_| overwritten)?;
        Ok(DataSegment { ptr, len })
    }

    /// This rank's data segment.
    pub fn own_segment(&self) -> DataSegment {
        self.segment(self.rank).expect("the layout and the mapping hold every segment")
    }

    /// Rank `rank`'s data segment as offset and length in the window, from
    /// the shared rank table. The table was verified at attach; an entry a
    /// peer wrote over since is refused rather than followed (into the sync
    /// blocks, or past the window).
    fn peer_bounds(&self, rank: u32) -> Result<(u64, u64), FenceError> {
        let e = self.rank_entry(rank)?;
        if !self.layout.holds_segment(e.offset, e.size) {
            return Err(FenceError::RankTableOverwritten { rank });
        }
        Ok((e.offset, e.size))
    }

    /// The header as it is now in shared memory.
    pub fn header(&self) -> Header {
        // The atomic words are loaded atomically and the rest (written once, by
        // the creator, before anyone attaches) copied: a plain read of the
        // whole header races with a rank poisoning the window meanwhile (found
        // by Miri: a rank whose attach allgather failed poisons while others
        // still verify the header).
        let poison = core::mem::offset_of!(Header, poison);
        let wakes = core::mem::offset_of!(Header, full_fence_wakes);
        let arrivals = core::mem::offset_of!(Header, arrivals);
        let mut h = Header::default();
        let bytes = bytemuck::bytes_of_mut(&mut h);
        for (from, to) in [(0, poison), (poison + 4, wakes), (wakes + 4, arrivals), (arrivals + 8, bytes.len())] {
            self.mem.read_bytes(from as u64, &mut bytes[from..to]);
        }
        // Acquire: pairs with the swap in `fence::poison`, as `fence::poison_state` does.
        h.poison = self.sync.header().poison.load(Acquire);
        // Relaxed, both: only compared with 0 at attach, before anyone has
        // fenced or joined.
        h.full_fence_wakes = self.sync.header().full_fence_wakes.load(Relaxed);
        h.arrivals = self.sync.header().arrivals.load(Relaxed);
        h
    }

    /// The window fence of teardown, skipped when the window is poisoned (no
    /// partner would come). A peer fence or signal wait of another rank's
    /// that this rank has not answered fails once this begins (and so this
    /// fence fails too, rather than both waiting for ever). The mapping goes
    /// when the window is dropped, which tells the others that this rank
    /// left: a wait of theirs that it did not answer fails, naming it.
    pub fn free(self) -> Result<(), FenceError> {
        if let Some(p) = self.poisoned() {
            return Err(p.error());
        }
        self.start_freeing();
        self.fence()
    }

    /// [`Self::free`] for a window whose memory others still borrow (the
    /// views of a language binding): the same teardown fence, after which
    /// this rank counts as gone at once, as a dropped window does, while the
    /// mapping stays until the value is dropped. Only dropping it should
    /// follow: its peers count this rank as gone.
    pub fn free_in_place(&self) -> Result<(), FenceError> {
        let result = match self.poisoned() {
            Some(p) => Err(p.error()),
            None => {
                self.start_freeing();
                self.fence()
            }
        };
        self.leave_in_place();
        result
    }

    /// Leaves the window at once, as dropping it does, without a fence:
    /// every wait of a peer's that this rank has not answered fails, naming
    /// it. The mapping stays until the value is dropped, for a language
    /// binding whose views outlive its window object. Only dropping it
    /// should follow. Leaves once: later calls, and the drop, do nothing.
    pub fn leave_in_place(&self) {
        // A forked child's copy has no mapping to write the mark into.
        if self.joined.replace(false) && !self.segment.inherited() {
            fence::leave(&self.sync, self, self.rank);
        }
    }

    /// Says that this rank is freeing the window: from now on it takes part
    /// in window fences only, so a peer fence or signal wait of another
    /// rank's that it has not answered fails (and so does the teardown fence
    /// that rank then misses), rather than both waiting for ever. [`Self::free`]
    /// calls it; a layer whose teardown runs window fences of its own before
    /// `free` (device windows) calls it before the first. Once this rank
    /// has left ([`Self::leave_in_place`]), or in a forked child, it does
    /// nothing: a rank that left stays left.
    pub fn start_freeing(&self) {
        if self.joined.get() && !self.segment.inherited() {
            fence::start_freeing(&self.sync, self, self.rank);
        }
    }

    /// Whether this process is a child forked after the window was made,
    /// which does not have its memory (see [`Segment::inherited`]): it must
    /// not use the window; dropping it touches nothing.
    pub fn inherited(&self) -> bool {
        self.segment.inherited()
    }

    pub(crate) fn segment_handle(&self) -> &P::Segment {
        &self.segment
    }

    /// A bounds-checked view of a segment that is not (yet) a window.
    pub(crate) fn view(segment: &P::Segment) -> Mapped {
        // SAFETY: the view is used only while `segment` (borrowed by the caller) is alive.
        #[allow(unsafe_code)]
        unsafe {
            Mapped::new(segment.base(), segment.len())
        }
    }
}

impl<P: Platform> WaitEnv for Window<P> {
    fn now_ns(&self) -> u64 {
        self.platform.now_ns()
    }
    fn yield_now(&self) {
        self.platform.yield_now();
    }
    fn current_cpu(&self) -> Option<u32> {
        self.platform.current_cpu()
    }
    fn wait(&self, word: &AtomicU32, expected: u32, deadline_ns: u64) -> WaitOutcome {
        self.platform.wait(word, expected, deadline_ns)
    }
    fn wake(&self, word: &AtomicU32) {
        self.platform.wake(word);
    }
    fn interrupted(&self) -> bool {
        self.platform.interrupted()
    }
    #[inline]
    fn light_wakes(&self) -> bool {
        self.light_wakes
    }
    fn heavy_fence(&self) -> bool {
        self.platform.global_heavy_fence()
    }
    fn is_alive(&self, rank: u32) -> bool {
        match self.rank_entry(rank) {
            Ok(e) => self.platform.is_alive(&ProcessIdentity { pid: e.pid, start_time: e.start_time, uid: e.uid }),
            Err(_) => false,
        }
    }
}
