//! The window-wide fence as a flat counter barrier: one hand-off per rank per
//! fence instead of dissemination's ⌈log2 n⌉, for windows whose ranks
//! outnumber the CPUs, where every hand-off is a trip through the scheduler.

use super::wait::{notify_all, wait_for};
use super::{SyncArea, WaitEnv, WaitPolicy, poison_state, reached};
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
    let n = u64::from(area.nranks());
    if u64::from(me) >= n {
        return Err(FenceError::InvalidRank { rank: me, nranks: area.nranks() });
    }
    if let Some(p) = poison_state(area) {
        return Err(p.error());
    }
    let arrivals = area.arrivals();
    // AcqRel: the Release half publishes this rank's accesses to whoever
    // acquires a later value of the counter (RMWs extend the release sequence);
    // the Acquire half brings the last arrival every earlier one's (loom: the
    // models fail without the Release; `notify`'s SeqCst fence backs the Acquire).
    let before = arrivals.fetch_add(1, AcqRel);
    let target = (before / n + 1) * n;
    if before + 1 == target {
        notify_all(area, env, me);
        return Ok(());
    }
    // No spinning: with more ranks than CPUs the last arrival may well be
    // waiting for this very CPU.
    let policy = WaitPolicy { spins: 0, ..*policy };
    let watched = (me + 1) % area.nranks();
    // Acquire: pairs with every arrival's Release (through the release
    // sequence of RMWs), so all ranks' accesses before the fence happen-before ours after.
    wait_for(area, env, me, watched, &policy, || reached(arrivals.load(Acquire), target))
}
