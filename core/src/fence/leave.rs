//! Leaving a window: a rank that frees or drops its window says so in its
//! wait line, so that a partner that waits for it afterwards fails at once,
//! naming it, instead of waiting for its process to end (or for ever).

use super::wait::notify_all;
use super::{SyncArea, WaitEnv};
use crate::sync::Ordering::{Acquire, Release};

/// Marks rank `me` as gone from the window and wakes every rank that may
/// sleep, so that each wait for `me` that `me` never answered fails. Call
/// after `me`'s last fence: a wait for an arrival `me` made before leaving
/// still succeeds.
pub fn leave<A, E>(area: &A, env: &E, me: u32)
where
    A: SyncArea + ?Sized,
    E: WaitEnv + ?Sized,
{
    // Release: pairs with `has_left`'s Acquire, so a rank that sees the mark
    // also sees every slot `me` wrote before it.
    area.left(me).store(1, Release);
    // Its SeqCst fence is the Dekker pairing with a sleeper's, as after a slot
    // store: either we see its `sleeping` flag, or it sees the mark.
    notify_all(area, env, me);
}

/// Whether `rank` has left the window. A `true` brings `rank`'s last slot
/// stores with it: test the wait's condition again before failing it.
pub(super) fn has_left<A: SyncArea + ?Sized>(area: &A, rank: u32) -> bool {
    // Acquire: pairs with `leave`'s Release store.
    area.left(rank).load(Acquire) != 0
}
