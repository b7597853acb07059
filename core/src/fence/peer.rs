//! The pairwise fence: one Release store, one Acquire wait.

use super::wait::{Awaited, WaitStart, Waiter, wait_for};
use super::{SyncArea, WaitEnv, WaitPolicy, bump, partner, reached};
use crate::error::FenceError;
use crate::sync::Ordering::Acquire;

/// Fences rank `me` with rank `peer`: every access `me` made before the call
/// happens-before every access `peer` makes after its matching call, and vice
/// versa. Fences between a pair match one to one, in order.
pub fn peer_fence<A, E>(area: &A, env: &E, me: u32, peer: u32, policy: &WaitPolicy) -> Result<(), FenceError>
where
    A: SyncArea + ?Sized,
    E: WaitEnv + ?Sized,
{
    if !partner(area, me, peer)? {
        return Ok(());
    }
    let epoch = arrive(area, env, me, peer);
    wait_for(&Waiter { area, env, me, awaited: Awaited::Partner(peer) }, policy, &mut WaitStart::default(), || {
        answered(area, me, peer, epoch)
    })
}

/// `me`'s half of its next fence with `peer`; returns the epoch to wait for.
#[inline]
pub(super) fn arrive<A, E>(area: &A, env: &E, me: u32, peer: u32) -> u64
where
    A: SyncArea + ?Sized,
    E: WaitEnv + ?Sized,
{
    bump(area, env, area.peer_slot(me, peer), peer)
}

/// Whether `peer` has reached fence `epoch` with `me`.
#[inline]
pub(super) fn answered<A: SyncArea + ?Sized>(area: &A, me: u32, peer: u32, epoch: u64) -> bool {
    // Acquire: pairs with the peer's Release store of the same epoch, so what it
    // did before its fence happens-before what we do after ours.
    reached(area.peer_slot(peer, me).load(Acquire), epoch)
}
