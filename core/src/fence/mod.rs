//! The fence algorithms, written against two small traits so that the same
//! code runs on a mapped window, on a heap window in tests, and under loom.
//!
//! Every slot is a 64-bit epoch counter written by one rank only and read by
//! one rank only. A fence stores `previous + 1` with Release and waits, with
//! Acquire, until the partner's slot reaches the same epoch (a wrap-safe
//! compare). No read-modify-write, no reset, no sense reversal.

mod flat;
mod leave;
mod peer;
mod pending;
mod placement;
mod poison;
mod signal;
mod wait;
mod window;

pub use flat::flat_fence;
pub use leave::{leave, start_freeing};
pub use peer::peer_fence;
pub use pending::PendingFence;
pub(crate) use poison::NAMEABLE_RANKS;
pub use poison::{Poison, PoisonKind, PoisonWord, poison, poison_state};
pub use signal::{peer_signal, peer_test, peer_wait};
pub use wait::WaitPolicy;
pub use window::window_fence;

use crate::error::FenceError;
use crate::platform::WaitOutcome;
use crate::sync::Ordering::{Relaxed, Release};
use crate::sync::{AtomicU32, AtomicU64};

/// Where a window's synchronisation words live.
pub trait SyncArea {
    /// Ranks in the window.
    fn nranks(&self) -> u32;
    /// The peer-fence slot written by `writer` and read by `reader`.
    fn peer_slot(&self, writer: u32, reader: u32) -> &AtomicU64;
    /// The count of one-way signals `writer` has sent to `reader`.
    fn signal_slot(&self, writer: u32, reader: u32) -> &AtomicU64;
    /// The count of `signaller`'s signals that `taker` has waited for
    /// (written and read by `taker` only).
    fn taken_slot(&self, taker: u32, signaller: u32) -> &AtomicU64;
    /// The window-fence slot of `round` read by `reader` (written by `(reader - 2^round) mod n`).
    fn round_slot(&self, round: u32, reader: u32) -> &AtomicU64;
    /// The futex word `rank` sleeps on.
    fn doorbell(&self, rank: u32) -> &AtomicU32;
    /// Non-zero while `rank` may sleep on its doorbell.
    fn sleeping(&self, rank: u32) -> &AtomicU32;
    /// The window's poison word (see [`poison`]).
    fn poison_word(&self) -> &AtomicU32;
    /// The arrival counter of the flat barrier (see [`flat_fence`]).
    fn arrivals(&self) -> &AtomicU64;
    /// How many flat-barrier fences `rank` has arrived at (written by `rank`
    /// only; read by a waiter's checks to find a rank that has not come).
    fn flat_arrived(&self, rank: u32) -> &AtomicU64;
    /// The CPU `rank` last ran on, plus one (0: not known); written by `rank`
    /// only, a scheduling hint for the others' waits.
    fn last_cpu(&self, rank: u32) -> &AtomicU32;
    /// Non-zero while `rank` is blocked in a wait that nobody has signalled
    /// since, or (top bit set) in a flat-barrier fence that has not
    /// completed (written by `rank` and by its signallers; a scheduling hint).
    fn blocked(&self, rank: u32) -> &AtomicU32;
    /// Non-zero once `rank` has left the window (see [`leave`]); written by
    /// `rank` only.
    fn left(&self, rank: u32) -> &AtomicU64;
}

/// How a window's window-wide fence runs; every rank of a window uses the same.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Barrier {
    /// [`window_fence`]: ⌈log2 n⌉ rounds of pairwise hand-offs on single-writer
    /// slots; the fastest while every rank has a CPU.
    #[default]
    Dissemination,
    /// [`flat_fence`]: one shared arrival counter; one hand-off per rank, for
    /// windows whose ranks outnumber the CPUs (its waiters yield only to
    /// ranks that have not arrived).
    Flat,
}

crate::codes!(Barrier: u32 { Dissemination = 1, Flat = 2 });

impl Barrier {
    /// The barrier for `nranks` ranks on `cpus` CPUs.
    #[must_use]
    pub const fn for_load(nranks: u32, cpus: u32) -> Self {
        if oversubscribed(nranks, cpus) { Self::Flat } else { Self::Dissemination }
    }
}

/// Whether `nranks` ranks outnumber `cpus` CPUs (0 CPUs, unknown, counts as 1):
/// then every hand-off goes through the scheduler, and waits should not spin.
#[must_use]
pub const fn oversubscribed(nranks: u32, cpus: u32) -> bool {
    nranks > if cpus == 0 { 1 } else { cpus }
}

/// The services a wait needs: a clock, sleeping and waking, and liveness.
pub trait WaitEnv {
    /// A monotonic clock in nanoseconds.
    fn now_ns(&self) -> u64;
    /// Gives the CPU away.
    fn yield_now(&self);
    /// Sleeps while `*word == expected`, at most until `deadline_ns`.
    fn wait(&self, word: &AtomicU32, expected: u32, deadline_ns: u64) -> WaitOutcome;
    /// Wakes the sleepers on `word`.
    fn wake(&self, word: &AtomicU32);
    /// Whether `rank`'s process still runs.
    fn is_alive(&self, rank: u32) -> bool;
    /// Whether the caller asked this thread's waits to end (see
    /// [`Platform::interrupted`](crate::Platform::interrupted)).
    fn interrupted(&self) -> bool {
        false
    }
    /// The CPU the caller runs on now, if the platform can tell cheaply.
    fn current_cpu(&self) -> Option<u32> {
        None
    }
    /// Whether every rank runs [`WaitEnv::heavy_fence`] before it sleeps, so
    /// that a signaller may order its slot store before its look at a
    /// sleeper's flag with a compiler fence (the light half of an asymmetric
    /// Dekker pair). `false` by default: a full fence on both sides.
    fn light_wakes(&self) -> bool {
        false
    }
    /// The heavy half: a full barrier on every CPU running a signaller;
    /// `false` if it did not run (the sleeper then must not block).
    fn heavy_fence(&self) -> bool {
        false
    }
}

/// Advances the single-writer counter `slot` (written by this rank only) by
/// one and wakes `to`, who waits for it; returns the new value.
#[inline]
fn bump<A, E>(area: &A, env: &E, slot: &AtomicU64, to: u32) -> u64
where
    A: SyncArea + ?Sized,
    E: WaitEnv + ?Sized,
{
    // Relaxed: only this rank writes `slot`, so program order gives its last value.
    let next = slot.load(Relaxed).wrapping_add(1);
    // Release: publishes everything this rank did before to the Acquire load
    // that sees this value (or a later one: a single writer's later stores
    // carry the earlier ones' history with them).
    slot.store(next, Release);
    wait::notify(area, env, to);
    next
}

/// Checks a pairwise call of `me` with `peer`: `peer` in range and the
/// window not poisoned. `Ok(false)` when `peer` is `me`: nothing to wait for.
#[inline]
fn partner<A: SyncArea + ?Sized>(area: &A, me: u32, peer: u32) -> Result<bool, FenceError> {
    let nranks = area.nranks();
    if peer >= nranks {
        return Err(FenceError::InvalidRank { rank: peer, nranks });
    }
    match poison_state(area) {
        Some(p) => Err(p.error()),
        None => Ok(peer != me),
    }
}

/// The order in which `rank` of a ring of `nranks` fences its neighbours
/// `[next, prev]` so that every pairwise fence meets its partner's and no
/// cycle of waits forms: even ranks go successor-first, odd ones
/// predecessor-first, and in an odd ring the last rank goes
/// predecessor-first too (pairs (0,1), (2,3).. then (1,2), (3,4).. then (n-1,0)).
///
/// # Panics
/// If `rank` is not below `nranks` (there is no such ring).
#[must_use]
pub const fn ring_order(rank: u32, nranks: u32) -> [u32; 2] {
    assert!(rank < nranks, "ring_order: rank outside the ring");
    let (next, prev) = ((rank + 1) % nranks, (rank + nranks - 1) % nranks);
    if rank.is_multiple_of(2) && !(nranks % 2 == 1 && rank == nranks - 1) { [next, prev] } else { [prev, next] }
}

/// ⌈log2 n⌉: the rounds of a dissemination barrier over `n` ranks.
#[must_use]
pub const fn rounds(nranks: u32) -> u32 {
    if nranks <= 1 { 0 } else { u32::BITS - (nranks - 1).leading_zeros() }
}

/// `current` has reached `target` on a wrapping 64-bit epoch counter.
#[inline]
#[must_use]
pub fn reached(current: u64, target: u64) -> bool {
    // Epochs never run more than 2^63 apart, so the sign of the difference decides.
    current.wrapping_sub(target) < (1 << 63)
}
