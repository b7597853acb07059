//! The window-wide fence as a flat counter barrier: one hand-off per rank per
//! fence instead of dissemination's ⌈log2 n⌉, for windows whose ranks
//! outnumber the CPUs, where every hand-off is a trip through the scheduler.

use super::wait::{notify_all, wait_for};
use super::window::check_member;
use super::{SyncArea, WaitEnv, WaitPolicy, reached};
use crate::error::FenceError;
use crate::sync::Ordering::{AcqRel, Acquire};

/// Fences rank `me` with every rank of the window, like
/// [`super::window_fence`], through one arrival counter.
///
/// The counter is never reset: the k-th fence is complete once it reaches
/// k·n, and the rank whose arrival completes it wakes the sleepers. Ranks
/// only ever arrive at fence k+1 after leaving fence k, so an arrival's old
/// value names its fence.
pub fn flat_fence<A, E>(area: &A, env: &E, me: u32, policy: &WaitPolicy) -> Result<(), FenceError>
where
    A: SyncArea + ?Sized,
    E: WaitEnv + ?Sized,
{
    check_member(area, me)?;
    let Some(target) = arrive_flat(area, env, me) else {
        return Ok(());
    };
    // No spinning: with more ranks than CPUs the last arrival may well be
    // waiting for this very CPU.
    let policy = WaitPolicy { spins: 0, ..*policy };
    wait_for(area, env, me, flat_watched(area, me), &policy, || all_arrived(area, target))
}

/// Counts `me` in; `None` if it was the last arrival (and woke the others),
/// else the count that completes the fence.
#[inline]
pub(super) fn arrive_flat<A, E>(area: &A, env: &E, me: u32) -> Option<u64>
where
    A: SyncArea + ?Sized,
    E: WaitEnv + ?Sized,
{
    let n = u64::from(area.nranks());
    // AcqRel: the Release half publishes this rank's accesses to whoever
    // acquires a later value of the counter (RMWs extend the release sequence);
    // the Acquire half brings the last arrival every earlier one's (loom: the
    // models fail without the Release; `notify`'s SeqCst fence backs the Acquire).
    let before = area.arrivals().fetch_add(1, AcqRel);
    let target = (before / n + 1) * n;
    if before + 1 == target {
        notify_all(area, env, me);
        return None;
    }
    Some(target)
}

/// The rank whose liveness a flat-fence waiter watches.
#[inline]
pub(super) fn flat_watched<A: SyncArea + ?Sized>(area: &A, me: u32) -> u32 {
    (me + 1) % area.nranks()
}

/// Whether every rank has arrived at the fence that completes at `target`.
#[inline]
pub(super) fn all_arrived<A: SyncArea + ?Sized>(area: &A, target: u64) -> bool {
    // Acquire: pairs with every arrival's Release (through the release
    // sequence of RMWs), so all ranks' accesses before the fence happen-before ours after.
    reached(area.arrivals().load(Acquire), target)
}
