//! The window-wide fence: a dissemination barrier (⌈log2 n⌉ rounds) built on
//! the same single-writer epoch slots as the peer fence.

use super::wait::{notify, wait_for};
use super::{SyncArea, WaitEnv, WaitPolicy, poison_state, reached};
use crate::error::FenceError;
use crate::layout::rounds;
use crate::sync::Ordering::{Acquire, Relaxed, Release};

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
    let n = area.nranks();
    if me >= n {
        return Err(FenceError::InvalidRank { rank: me, nranks: n });
    }
    if let Some(p) = poison_state(area) {
        return Err(p.error());
    }
    for round in 0..rounds(n) {
        let dist = 1u32 << round; // < n, since round < ⌈log2 n⌉
        let to = (me + dist) % n;
        let from = (me + n - dist) % n;
        let out = area.round_slot(round, to);
        // Relaxed: only this rank writes this slot; program order gives its last value.
        let epoch = out.load(Relaxed).wrapping_add(1);
        // Release: publishes this rank's accesses, and all it acquired in
        // earlier rounds, to `to`.
        out.store(epoch, Release);
        notify(area, env, to);
        let inbound = area.round_slot(round, me);
        // Acquire: pairs with `from`'s Release store of this epoch, bringing
        // everything `from` had acquired in earlier rounds.
        wait_for(area, env, me, from, policy, || reached(inbound.load(Acquire), epoch))?;
    }
    Ok(())
}
