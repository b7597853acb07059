//! What the core needs from the operating system, as one trait.
//!
//! The Linux implementation lives in `kpccl-posix`; a custom runtime (or a
//! test harness whose ranks are threads) brings its own (`docs/EMBEDDING.md`).
//!
//! The target needs 64-bit atomics (`target_has_atomic = "64"`): the fences
//! are 64-bit counters in the segments. Without them (Cortex-M, `riscv32imac`)
//! the crate does not build, and says why.

use core::ptr::NonNull;

use crate::error::PlatformError;
use crate::sync::AtomicU32;

/// The longest segment name (with its terminating NUL), in bytes.
pub const NAME_LEN: usize = 64;

/// Words of a [`CpuMask`]: CPUs 0 to 1023, as Linux's default `cpu_set_t`.
pub const CPU_WORDS: usize = 16;

/// A set of CPUs, bit `c % 64` of word `c / 64` for CPU `c`; empty when the
/// platform cannot tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuMask(pub [u64; CPU_WORDS]);

impl CpuMask {
    /// No CPU known.
    pub const UNKNOWN: Self = Self([0; CPU_WORDS]);

    /// How many CPUs the set holds.
    #[must_use]
    pub fn count(&self) -> u32 {
        self.0.iter().map(|w| w.count_ones()).sum()
    }

    /// The CPUs of either set.
    #[must_use]
    pub fn union(&self, other: &Self) -> Self {
        Self(core::array::from_fn(|i| self.0[i] | other.0[i]))
    }

    /// Whether every CPU of this set is in `other`.
    #[must_use]
    pub fn within(&self, other: &Self) -> bool {
        // Without an early exit or a copy of `other`: communicator creation
        // compares every pair of a node's ranks (1024 ranks: a million
        // calls per rank), and this form is about 3x faster there.
        self.0.iter().zip(&other.0).fold(0, |outside, (a, b)| outside | (a & !b)) == 0
    }
}

/// Who a rank's process is: enough to tell a live peer from a dead one whose
/// pid was reused, and to keep segments private to one user.
///
/// Every rank of a communicator gives the same `uid` (creation fails on a
/// mismatch). Ranks of one program may share `pid` and `start_time`: then
/// [`Platform::is_alive`] answers for all of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcessIdentity {
    /// The process id.
    pub pid: u64,
    /// When the process started (any unit, as long as one platform is consistent).
    pub start_time: u64,
    /// The owning user.
    pub uid: u32,
}

/// How a wait on a futex word ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitOutcome {
    /// Woken, the word changed, or the wait was interrupted: check the condition again.
    Woken,
    /// The deadline passed.
    TimedOut,
}

/// A point in window creation, for fault-injection tests ([`Platform::checkpoint`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Requests gathered; nothing created yet.
    Requested,
    /// Rank 0 made the segment and has not yet published it (a name it was
    /// made with is still there).
    Made,
    /// Rank 0 made and published the segment; the way in is not yet shared.
    Created,
    /// This rank attached and claimed its pages; the attach results are not yet gathered.
    Attached,
    /// The name is gone (rank 0 unlinked it); the window's first fence has not run.
    Unlinked,
    /// The window is ready.
    Ready,
}

impl Step {
    /// The step's name, as fault-injection settings spell it.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Requested => "requested",
            Self::Made => "made",
            Self::Created => "created",
            Self::Attached => "attached",
            Self::Unlinked => "unlinked",
            Self::Ready => "ready",
        }
    }
}

/// A mapped shared segment. Dropping it unmaps it (and releases any handle);
/// it never removes the segment's name.
///
/// The memory is ordinary, cache-coherent memory shared by every rank that
/// maps the segment, on which the CPU's atomic instructions work (aarch64:
/// Normal, Inner Shareable; not Device or uncached memory): the fences are
/// atomics in it. Ranks may map it at different addresses (a window refers
/// to its parts by offset). It stays mapped, at `base()`, until dropped.
pub trait Segment {
    /// The first byte of the mapping, aligned to the platform's page size
    /// (window creation refuses a misaligned one: [`crate::error::PlatformOp::Alignment`]).
    fn base(&self) -> NonNull<u8>;
    /// The mapping's length in bytes: at least the length asked for (a
    /// shorter one is refused: [`crate::error::PlatformOp::Size`]).
    fn len(&self) -> usize;
    /// Whether the mapping is empty (never, for a window).
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Backs `offset..offset + len` with memory now, so that running out of
    /// memory is an error here rather than a fault on first touch, and places
    /// it for the calling process (its NUMA node): each rank reserves what it owns.
    fn reserve(&self, offset: u64, len: u64) -> Result<(), PlatformError>;
    /// Whether this process holds a copy of the value but not the mapping
    /// (a child forked after it was made, on a platform whose mappings a
    /// child does not inherit): then nothing may touch it, and dropping the
    /// window writes nothing there.
    fn inherited(&self) -> bool {
        false
    }
}

/// The operating-system services of one process.
///
/// Every window keeps a clone ([`crate::create_window`] asks for `Clone`):
/// make it a cheap handle.
pub trait Platform {
    /// The platform's mapped segment.
    type Segment: Segment;

    /// Creates a segment for `name`, private to this user, `len` bytes long
    /// (a multiple of [`Platform::page_size`]), **zero-filled**, and maps it
    /// read-write: as `name`, exclusively (it must not exist), or, on a
    /// platform whose [`Platform::publish`] gives another way in, possibly
    /// without any name, so that no crash can leave one behind (Linux:
    /// `O_TMPFILE` where the file system has it). `name` is at most
    /// [`NAME_LEN`]` - 1` bytes.
    ///
    /// Zero-filled is part of the protocol: the creator writes only the
    /// header and the rank table, and the fences' counters, flags and poison
    /// word must start at 0. Memory reused without zeroing makes creation
    /// fail with a misleading error (a rank that "left the window"), or a
    /// fence pass before its partner arrived. The zeroing must be visible to
    /// the other ranks after the next out-of-band allgather (see [`crate::Oob`]).
    fn create(&self, name: &str, len: u64) -> Result<Self::Segment, PlatformError>;
    /// Opens and maps the existing segment `name`, refusing it unless it belongs
    /// to this user ([`crate::error::PlatformOp::Owner`], the code its owner)
    /// and is exactly `len` bytes long ([`crate::error::PlatformOp::Size`],
    /// the code its size).
    fn open(&self, name: &str, len: u64) -> Result<Self::Segment, PlatformError>;
    /// Removes the name of segment `name` (mappings stay valid).
    fn unlink(&self, name: &str) -> Result<(), PlatformError>;
    /// What the other ranks pass to [`Platform::open`] to reach `segment`,
    /// which this process just created as `name`; written to `out` (at most
    /// [`NAME_LEN`]` - 1` bytes).
    ///
    /// By default the name itself, which then lives until every rank has
    /// attached: a crash of the creator meanwhile leaves it behind. A
    /// platform that can reach an open segment another way (Linux: the
    /// creator's `/proc/<pid>/fd/<fd>`) removes the name here instead (if
    /// `create` gave it one at all), so that nothing outlives the creator.
    fn publish(
        &self,
        segment: &Self::Segment,
        name: &str,
        out: &mut dyn core::fmt::Write,
    ) -> Result<(), PlatformError> {
        let _ = segment;
        out.write_str(name)
            .map_err(|_| PlatformError { op: crate::error::PlatformOp::Create, code: 36 /* ENAMETOOLONG */ })
    }

    /// The page size, a power of two.
    fn page_size(&self) -> u64;
    /// The longest window a rank can map (every rank maps the whole window):
    /// a longer one is refused when it is laid out, on every rank, naming the
    /// rank that asked for the most, rather than failing to map on the
    /// creator alone. Unbounded by default.
    fn max_window_len(&self) -> u64 {
        u64::MAX
    }
    /// How many CPUs the ranks of this node may run on together, as far as
    /// the platform knows: until a communicator tells it the node's count
    /// (`kpccl-posix` does), this process's own (its affinity and any CPU
    /// quota). Waits spin less, and the window fence goes flat, when ranks
    /// outnumber them.
    fn cpu_count(&self) -> u32;
    /// The CPUs this process may run on (its affinity), to tell, with the
    /// other ranks' at communicator creation, whether the ranks of a node
    /// share CPUs ([`crate::NodeInfo::cpus`]): a rank pinned to one CPU of
    /// many does not make its node oversubscribed. Unknown by default.
    fn affinity(&self) -> CpuMask {
        CpuMask::UNKNOWN
    }
    /// How many CPUs' worth of time this process's group may use, whatever
    /// the affinities of its processes (a container's CPU limit), if it is
    /// limited; `None` by default. Ranks pinned each to a CPU of its own
    /// share a quota of fewer CPUs.
    fn cpu_quota(&self) -> Option<u32> {
        None
    }
    /// A monotonic clock, in nanoseconds, that advances while a rank waits:
    /// [`Platform::wait`]'s deadlines, the wait policy's `timeout_ns` and its
    /// liveness checks every `liveness_ns` are measured on it (a clock in
    /// other units scales them all; one that stands still ends a wait only
    /// by its partner). A rank compares only its own readings: the ranks'
    /// clocks need not agree.
    fn now_ns(&self) -> u64;
    /// Fills `buf` with unpredictable bytes (they name segments: where no
    /// one else can reach the namespace, unique is enough).
    fn random(&self, buf: &mut [u8]) -> Result<(), PlatformError>;
    /// This process's identity (see [`ProcessIdentity`]).
    fn identity(&self) -> ProcessIdentity;
    /// Whether the process `who` still runs (the same process, not a reused
    /// pid). Waiters ask it every `liveness_ns` for a few ranks each: keep it
    /// cheap. `true` when the platform cannot tell: a rank that dies without
    /// leaving its window then holds its partners until their timeout
    /// (forever with `timeout_ns` 0).
    fn is_alive(&self, who: &ProcessIdentity) -> bool;

    /// Gives the CPU to another runnable thread. Where ranks share a CPU
    /// without preemption (a cooperative scheduler), it must run the others:
    /// a waiting rank makes no progress until its partner does.
    fn yield_now(&self);
    /// The CPU the caller runs on now, if the platform can tell cheaply (a
    /// scheduling hint for the waits: they poll instead of yielding while no
    /// other rank could use this CPU; `None` keeps them yielding).
    fn current_cpu(&self) -> Option<u32> {
        None
    }
    /// Sleeps while `*word == expected`, until woken or until
    /// [`Platform::now_ns`] reaches `deadline_ns` (`u64::MAX`: no deadline;
    /// one already past: return at once). `word` may be in memory shared
    /// between processes. Spurious returns are allowed, and the outcome is
    /// only a hint.
    ///
    /// Memory ordering: the caller orders everything itself (its SeqCst
    /// fences pair its announcement that it sleeps with the signaller's
    /// store; on return it reloads the word, and what it waits for, with
    /// Acquire loads), so this read of `word` may be Relaxed.
    ///
    /// No lost wake-up: a [`Platform::wake`] that follows a change of
    /// `*word` must end a wait that compared before the change (a futex
    /// compares and queues under one lock; a scheduler that checks, then
    /// parks, needs the same). A lost one costs latency, not a hang: the
    /// caller never passes a deadline more than its policy's `liveness_ns`
    /// ahead. A platform without sleeping may poll `*word` until it changes
    /// or the deadline passes, yielding as [`Platform::yield_now`] does.
    fn wait(&self, word: &AtomicU32, expected: u32, deadline_ns: u64) -> WaitOutcome;
    /// Wakes every waiter on `word`, in any process that maps it; called
    /// after the store that changed `*word`, and must not block. It may do
    /// nothing where [`Platform::wait`] polls the word.
    fn wake(&self, word: &AtomicU32);
    /// Makes this process a target of [`Platform::global_heavy_fence`] (from
    /// any process that registered too); `true` if that fence works here.
    /// A window whose ranks all registered lets its signallers order their
    /// wake-up check with a compiler fence only (see `fence::notify`).
    /// `false` by default: the signallers keep a full fence.
    fn register_global_heavy_fence(&self) -> bool {
        false
    }
    /// A full memory barrier on every CPU that runs a thread of a registered
    /// process (Linux: `membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED)`); `false`
    /// if it did not run.
    fn global_heavy_fence(&self) -> bool {
        false
    }
    /// Whether the caller asked the waits in progress on this thread to end
    /// (a binding's Ctrl-C, noticed while [`Platform::wait`] slept): a fence
    /// wait then fails as abandoned by this rank, poisoning the window so that
    /// its peers' waits fail too. `false` by default.
    fn interrupted(&self) -> bool {
        false
    }

    /// Called by `rank` at each [`Step`] of window creation: a test hook, so a
    /// platform can simulate a crash anywhere in the protocol. Does nothing by default.
    fn checkpoint(&self, step: Step, rank: u32) {
        let _ = (step, rank);
    }
}
