//! The window-wide fence: a dissemination barrier (⌈log2 n⌉ rounds) built on
//! the same single-writer epoch slots as the peer fence.

use super::wait::{Awaited, WaitStart, Waiter, wait_for};
use super::{SyncArea, WaitEnv, WaitPolicy, bump, poison_state, reached, rounds};
use crate::error::FenceError;
use crate::sync::Ordering::Acquire;

/// Fences rank `me` with every rank of the window: every access any rank made
/// before its call happens-before every access any rank makes after its call.
///
/// In round `k`, `me` signals `me + 2^k` and waits for `me - 2^k` (mod n);
/// after ⌈log2 n⌉ rounds a chain of Release/Acquire pairs leads from every
/// rank to every other.
pub fn window_fence<A, E>(area: &A, env: &E, me: u32, policy: &WaitPolicy) -> Result<(), FenceError>
where
    A: SyncArea + ?Sized,
    E: WaitEnv + ?Sized,
{
    check_member(area, me)?;
    // One timeout for the whole fence, not one per round.
    let mut start = WaitStart::default();
    for round in 0..rounds(area.nranks()) {
        let epoch = send_round(area, env, me, round);
        let from = round_source(area, me, round);
        let waiter = Waiter { area, env, me, awaited: Awaited::Round(from) };
        wait_for(&waiter, policy, &mut start, || round_arrived(area, me, round, epoch))?;
    }
    Ok(())
}

/// Checks that `me` is a rank of the window and the window is not poisoned.
pub(super) fn check_member<A: SyncArea + ?Sized>(area: &A, me: u32) -> Result<(), FenceError> {
    let nranks = area.nranks();
    if me >= nranks {
        return Err(FenceError::InvalidRank { rank: me, nranks });
    }
    match poison_state(area) {
        Some(p) => Err(p.error()),
        None => Ok(()),
    }
}

/// The rank `me` waits for in `round`: `me - 2^round` (mod n).
#[inline]
pub(super) fn round_source<A: SyncArea + ?Sized>(area: &A, me: u32, round: u32) -> u32 {
    let n = area.nranks();
    (me + n - (1 << round)) % n // 2^round < n, since round < ⌈log2 n⌉
}

/// `me`'s signal of `round` to `me + 2^round`; returns the epoch to wait for.
#[inline]
pub(super) fn send_round<A, E>(area: &A, env: &E, me: u32, round: u32) -> u64
where
    A: SyncArea + ?Sized,
    E: WaitEnv + ?Sized,
{
    let to = (me + (1 << round)) % area.nranks();
    // Publishes this rank's accesses, and all it acquired in earlier rounds, to `to`.
    bump(area, env, area.round_slot(round, to), to)
}

/// Whether `me`'s source of `round` has sent it `epoch`.
#[inline]
pub(super) fn round_arrived<A: SyncArea + ?Sized>(area: &A, me: u32, round: u32, epoch: u64) -> bool {
    // Acquire: pairs with the source's Release store of this epoch, bringing
    // everything it had acquired in earlier rounds.
    reached(area.round_slot(round, me).load(Acquire), epoch)
}
