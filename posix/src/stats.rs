//! Per-window counters, kept only with `KPCCL_STATS=1` ([`crate::Config::stats`]):
//! fences, signals and waits made, waits that slept in the kernel, and the
//! time they slept.
//! They are printed on stderr when the window is freed, and read with
//! [`crate::Window::stats`].
//!
//! Cost: without `KPCCL_STATS` a window has no counters and each call only
//! tests that; with it, a call adds a relaxed load and store to a counter of
//! its window — no read-modify-write, so no locked instruction on the fence
//! path. Threads calling on one window at once may then lose counts: these
//! are statistics, not accounting.

use std::time::Duration;

use kpccl_core::sync::AtomicU64;
use kpccl_core::sync::Ordering::Relaxed;

/// A window's counters, as [`crate::Window::stats`] returns them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WindowStats {
    /// Window fences (`fence`, `start_fence`, and the one `free` makes).
    pub fences: u64,
    /// Pairwise fences (`peer_fence`, `start_peer_fence`).
    pub peer_fences: u64,
    /// Signals sent (`signal`).
    pub signals: u64,
    /// Signals waited for (`wait`, `start_wait`).
    pub waits: u64,
    /// Times a blocking fence or wait slept in the kernel (a peer was late;
    /// a started fence's polls never sleep).
    pub sleeps: u64,
    /// The time those sleeps took.
    pub slept: Duration,
}

/// The live counters of one window, shared with its platform (which counts
/// the sleeps).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) fences: AtomicU64,
    pub(crate) peer_fences: AtomicU64,
    pub(crate) signals: AtomicU64,
    pub(crate) waits: AtomicU64,
    pub(crate) sleeps: AtomicU64,
    pub(crate) slept_ns: AtomicU64,
}

/// Adds `n` to `counter`. Relaxed load and store, not `fetch_add`: no
/// ordering is needed (the counts order nothing), and a plain store keeps
/// the locked read-modify-write off the fence path.
#[inline]
pub(crate) fn add(counter: &AtomicU64, n: u64) {
    counter.store(counter.load(Relaxed).wrapping_add(n), Relaxed);
}

impl Counters {
    /// Their values now. Relaxed: a snapshot of statistics, ordering nothing.
    pub(crate) fn snapshot(&self) -> WindowStats {
        WindowStats {
            fences: self.fences.load(Relaxed),
            peer_fences: self.peer_fences.load(Relaxed),
            signals: self.signals.load(Relaxed),
            waits: self.waits.load(Relaxed),
            sleeps: self.sleeps.load(Relaxed),
            slept: Duration::from_nanos(self.slept_ns.load(Relaxed)),
        }
    }
}

impl core::fmt::Display for WindowStats {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "{} fences, {} peer fences, {} signals, {} waits; slept {} times for {:.3} ms",
            self.fences,
            self.peer_fences,
            self.signals,
            self.waits,
            self.sleeps,
            self.slept.as_secs_f64() * 1e3
        )
    }
}
