//! The window-wide fence as a flat counter barrier: one hand-off per rank per
//! fence instead of dissemination's ⌈log2 n⌉, for windows whose ranks
//! outnumber the CPUs, where every hand-off is a trip through the scheduler.

use super::wait::{Awaited, notify_all, wait_placed};
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
    // No blind spinning: with more ranks than CPUs a late rank may well be
    // waiting for this very CPU. Polling pays only while every late rank
    // runs elsewhere: a yield would then hand this CPU to a rank that has
    // arrived and can do nothing but wait (4 ranks on 2 CPUs: about one
    // hand-off per fence instead of two).
    let policy = WaitPolicy { spins: 0, ..*policy };
    let fence = target / u64::from(area.nranks());
    // Relaxed: this rank's own word, just written by `arrive_flat`.
    let mut here = area.last_cpu(me).load(Relaxed);
    let elsewhere = |moved: bool| {
        if moved {
            here = publish_cpu(area, env, me);
        }
        late_ranks_elsewhere(area, me, fence, here)
    };
    wait_placed(area, env, me, flat_awaited(area, target), &policy, || all_arrived(area, target), elsewhere)
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
    let count = area.flat_arrived(me);
    // Relaxed, both: only this rank writes its count, and it is read only to
    // name a late rank after a timeout.
    count.store(count.load(Relaxed).wrapping_add(1), Relaxed);
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

/// Records the CPU `me` runs on, plus one (0: not known), for the waits of
/// the others; returns it.
#[inline]
fn publish_cpu<A, E>(area: &A, env: &E, me: u32) -> u32
where
    A: SyncArea + ?Sized,
    E: WaitEnv + ?Sized,
{
    let cpu = env.current_cpu().map_or(0, |c| c.saturating_add(1));
    // Relaxed: a scheduling hint that orders nothing (see `late_ranks_elsewhere`).
    area.last_cpu(me).store(cpu, Relaxed);
    cpu
}

/// Whether every rank but `me` that has not arrived at flat fence number
/// `fence` last ran on a known CPU other than `here` (`me`'s, plus one).
fn late_ranks_elsewhere<A: SyncArea + ?Sized>(area: &A, me: u32, fence: u64, here: u32) -> bool {
    // Relaxed, both loads: hints. A stale one costs at most a needless yield,
    // or polling for `SPIN_ELSEWHERE_NS` before the wait yields as usual;
    // what the fence acquires comes from `all_arrived` alone.
    let late_here = |r: u32| {
        let cpu = area.last_cpu(r).load(Relaxed);
        !reached(area.flat_arrived(r).load(Relaxed), fence) && (cpu == 0 || cpu == here)
    };
    here != 0 && !(0..area.nranks()).filter(|&r| r != me).any(late_here)
}
