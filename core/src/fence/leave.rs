//! Leaving a window: a rank that frees or drops its window says so in its
//! wait line, so that a partner that waits for it afterwards fails at once,
//! naming it, instead of waiting for its process to end (or for ever).
//!
//! The word goes 0 (in) → [`FREEING`] (in `free`'s teardown fence: it
//! takes part in window fences only) → [`LEFT`] (no more fences at all).

use super::wait::notify_all;
use super::{SyncArea, WaitEnv};
use crate::sync::Ordering::{Acquire, Release};

/// `free` has begun: the rank answers no more pairwise waits.
const FREEING: u64 = 1;
/// The window is dropped: the rank answers no more waits.
const LEFT: u64 = 2;

/// Marks rank `me` as freeing the window: from now on it takes part in
/// window fences only (the teardown's), so every pairwise wait for it (peer
/// fence, signal) that it has not answered yet fails. Call before them.
pub fn start_freeing<A, E>(area: &A, env: &E, me: u32)
where
    A: SyncArea + ?Sized,
    E: WaitEnv + ?Sized,
{
    mark(area, env, me, FREEING);
}

/// Marks rank `me` as gone from the window, so that each wait for `me` that
/// `me` never answered fails. Call after `me`'s last fence: a wait for an
/// arrival `me` made before leaving still succeeds.
pub fn leave<A, E>(area: &A, env: &E, me: u32)
where
    A: SyncArea + ?Sized,
    E: WaitEnv + ?Sized,
{
    mark(area, env, me, LEFT);
}

fn mark<A, E>(area: &A, env: &E, me: u32, state: u64)
where
    A: SyncArea + ?Sized,
    E: WaitEnv + ?Sized,
{
    // Release: pairs with `has_left`'s Acquire, so a rank that sees the mark
    // also sees every slot `me` wrote before it.
    area.left(me).store(state, Release);
    // Wakes every rank that may sleep, to look. Its SeqCst fence is the Dekker
    // pairing with a sleeper's, as after a slot store: either we see its
    // `sleeping` flag, or it sees the mark.
    notify_all(area, env, me);
}

/// Whether `rank` will never again answer a wait of the kind given: a
/// `pairwise` one (peer fence, signal) once it frees the window, a window
/// fence's once it has left. A `true` brings `rank`'s last slot stores with
/// it: test the wait's condition again before failing it.
pub(super) fn has_left<A: SyncArea + ?Sized>(area: &A, rank: u32, pairwise: bool) -> bool {
    // Acquire: pairs with `mark`'s Release store.
    let state = area.left(rank).load(Acquire);
    state == LEFT || (pairwise && state == FREEING)
}
