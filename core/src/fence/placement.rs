//! Where the ranks run: hints that let a waiter choose between polling and
//! giving its CPU away when ranks outnumber CPUs.
//!
//! Each rank publishes the CPU it last ran on (as it starts a slow wait,
//! after each yield, and as it arrives at a flat barrier) and whether it is
//! blocked in a wait that nobody has answered since: a signalled wait's mark
//! is taken down by the signal, a flat-barrier wait's names its fence and
//! lapses when that completes (so the completing rank writes no other
//! rank's line: with 4 ranks on 2 CPUs, taking every mark down cost a
//! fence 7-13 % more, the lines crossing between the CPUs). A waiter polls only
//! while every other rank last seen on its CPU is blocked: a yield would
//! then hand the CPU to a rank that can do nothing but wait too (with 4
//! ranks on 2 CPUs the flat barrier took about two hand-offs per fence, one
//! per CPU with the hints). Every word here is a hint and orders nothing, so
//! every access is Relaxed: a stale value costs at most a needless yield, or
//! polling for [`POLL_NS`] before the wait yields and sleeps as usual; what
//! a wait acquires comes from its own slot alone.

use super::wait::Awaited;
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

/// The mark of a wait that a signal to the rank ends (and takes down).
const SIGNALLED: u32 = 1;
/// The top bit of the mark of a flat-barrier wait; the other bits hold the
/// fence's number (mod 2^31). Such a mark lapses when its fence completes,
/// so the rank completing it writes no other rank's line.
const FLAT: u32 = 1 << 31;

/// Marks `me` blocked in a wait for `awaited` (again, if a signal for
/// another wait of its took the mark down).
#[inline]
pub(super) fn block<A: SyncArea + ?Sized>(area: &A, me: u32, awaited: Awaited) {
    let mark = match awaited {
        // Truncation: the fence's number mod 2^31 (see `FLAT`).
        #[allow(clippy::cast_possible_truncation)]
        Awaited::Flat { fence } => FLAT | (fence as u32 & !FLAT),
        Awaited::Partner(_) | Awaited::Round(_) => SIGNALLED,
    };
    let blocked = area.blocked(me);
    // Relaxed, both: a hint; the load spares the line a store when it is set.
    if blocked.load(Relaxed) != mark {
        blocked.store(mark, Relaxed);
    }
}

/// Whether a rank whose mark is `mark` is blocked: in a signalled wait, or
/// in a flat-barrier wait whose fence has not completed.
fn is_blocked<A: SyncArea + ?Sized>(area: &A, mark: u32) -> bool {
    if mark & FLAT == 0 {
        return mark == SIGNALLED;
    }
    // Relaxed: a hint; the flat barrier's completed fences, from its counter.
    let done = area.arrivals().load(Relaxed) / u64::from(area.nranks());
    // Truncation: compared mod 2^31, as marked.
    #[allow(clippy::cast_possible_truncation)]
    let pending = done.wrapping_add(1) as u32 & !FLAT;
    mark & !FLAT == pending
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
        (cpu == 0 || cpu == here) && !is_blocked(area, area.blocked(r).load(Relaxed))
    };
    here != 0 && !(0..area.nranks()).filter(|&r| r != me).any(runnable_here)
}
