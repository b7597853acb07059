//! The window-wide fence as a flat counter barrier: one hand-off per rank per
//! fence instead of dissemination's ⌈log2 n⌉, for windows whose ranks
//! outnumber the CPUs, where every hand-off is a trip through the scheduler.

use super::placement::publish_cpu;
use super::wait::{Awaited, WaitStart, Waiter, wait_for, wake_all_sleepers};
use super::window::check_member;
use super::{SyncArea, WaitEnv, WaitPolicy, reached};
use crate::error::FenceError;
use crate::sync::Ordering::{AcqRel, Acquire, Relaxed};

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
    // No spinning: with more ranks than CPUs a late rank may well be
    // waiting for this very CPU (the wait polls only while the placement
    // hints say that no rank that could use this CPU is on it).
    let policy = WaitPolicy { spins: 0, ..*policy };
    wait_for(&Waiter { area, env, me, awaited: flat_awaited(area, target) }, &policy, &mut WaitStart::default(), || {
        all_arrived(area, target)
    })
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
    publish_cpu(area, env, me);
    // AcqRel: the Release half publishes this rank's accesses to whoever
    // acquires a later value of the counter (RMWs extend the release sequence);
    // the Acquire half brings the last arrival every earlier one's (loom: the
    // models fail without the Release; `notify`'s SeqCst fence backs the Acquire).
    let before = area.arrivals().fetch_add(1, AcqRel);
    let count = area.flat_arrived(me);
    // Relaxed, both: only this rank writes its count; waiters' checks read it
    // to pick a rank that has not come, whom to look at and name. Counted
    // after the arrival: a rank that dies before arriving never looks arrived.
    count.store(count.load(Relaxed).wrapping_add(1), Relaxed);
    let target = (before / n + 1) * n;
    if before + 1 == target {
        wake_all_sleepers(area, env, me);
        return None;
    }
    Some(target)
}

/// Whom a flat-fence waiter waits for: the ranks not yet at the fence that
/// completes at `target`.
#[inline]
pub(super) fn flat_awaited<A: SyncArea + ?Sized>(area: &A, target: u64) -> Awaited {
    Awaited::Flat { fence: target / u64::from(area.nranks()) }
}

/// Whether every rank has arrived at the fence that completes at `target`.
#[inline]
pub(super) fn all_arrived<A: SyncArea + ?Sized>(area: &A, target: u64) -> bool {
    // Acquire: pairs with every arrival's Release (through the release
    // sequence of RMWs), so all ranks' accesses before the fence happen-before ours after.
    reached(area.arrivals().load(Acquire), target)
}
