//! Where the ranks run: hints that let a waiter choose between polling and
//! giving its CPU away when ranks outnumber CPUs.
//!
//! Each rank publishes the CPU it last ran on (as it starts a slow wait,
//! after each yield, and as it arrives at a flat barrier) and whether it is
//! blocked in a wait that nobody has answered since. A waiter polls only
//! while every other rank last seen on its CPU is blocked: a yield would
//! then hand the CPU to a rank that can do nothing but wait too (with 4
//! ranks on 2 CPUs the flat barrier took about two hand-offs per fence, one
//! per CPU with the hints). Every word here is a hint and orders nothing, so
//! every access is Relaxed: a stale value costs at most a needless yield, or
//! polling for [`POLL_NS`] before the wait yields and sleeps as usual; what
//! a wait acquires comes from its own slot alone.

use super::{SyncArea, WaitEnv};
use crate::sync::Ordering::Relaxed;

/// How long a wait may poll while its CPU has no other runnable rank: a few
/// hand-offs of a CPU (about 1 µs each in a virtual machine), so that a
/// misplaced hint (a rank that migrated, or an unrelated process on this
/// CPU) costs little.
pub(super) const POLL_NS: u64 = 20_000;

/// Records the CPU `me` runs on, plus one (0: not known); returns it.
#[inline]
pub(super) fn publish_cpu<A, E>(area: &A, env: &E, me: u32) -> u32
where
    A: SyncArea + ?Sized,
    E: WaitEnv + ?Sized,
{
    let cpu = env.current_cpu().map_or(0, |c| c.saturating_add(1));
    let last = area.last_cpu(me);
    // Relaxed, both: a hint (see the module's comment). Stored only when it
    // changes: the line is the one every signaller reads (see `notify`).
    if last.load(Relaxed) != cpu {
        last.store(cpu, Relaxed);
    }
    cpu
}

/// Marks `me` blocked in a wait (again, if a signal for another wait of its
/// took the mark down).
#[inline]
pub(super) fn block<A: SyncArea + ?Sized>(area: &A, me: u32) {
    let blocked = area.blocked(me);
    // Relaxed, both: a hint; the load spares the line a store when it is set.
    if blocked.load(Relaxed) == 0 {
        blocked.store(1, Relaxed);
    }
}

/// Clears `rank`'s blocked mark: it leaves its wait, or was just signalled
/// and may be runnable.
#[inline]
pub(super) fn unblock<A: SyncArea + ?Sized>(area: &A, rank: u32) {
    let blocked = area.blocked(rank);
    // Relaxed, both: a hint; the load keeps the common case (not blocked) a plain read.
    if blocked.load(Relaxed) != 0 {
        blocked.store(0, Relaxed);
    }
}

/// Whether every rank but `me` last seen on CPU `here` (plus one) is blocked:
/// then this CPU has nothing better to run than `me`'s polling. `false`
/// when `here` is not known, and a rank whose CPU is not known counts as
/// being here.
pub(super) fn alone_on_cpu<A: SyncArea + ?Sized>(area: &A, me: u32, here: u32) -> bool {
    // Relaxed, both loads: hints (see the module's comment).
    let runnable_here = |r: u32| {
        let cpu = area.last_cpu(r).load(Relaxed);
        (cpu == 0 || cpu == here) && area.blocked(r).load(Relaxed) == 0
    };
    here != 0 && !(0..area.nranks()).filter(|&r| r != me).any(runnable_here)
}
