//! One-way pairwise synchronisation: the two halves of a peer fence.
//!
//! `peer_signal(me, peer)` publishes everything `me` did before it to
//! `peer` and returns at once; `peer_wait(me, peer)` returns once `peer`
//! has signalled `me` more times than `me` has waited for it. Signals count:
//! n signals satisfy n waits, none is lost or counted twice, and a signal
//! sent before anyone waits is kept.
//!
//! Two single-writer counters per ordered pair, both written by one rank
//! only and both on the line that rank writes for the pair:
//! - `signal_slot(i, j)`: how many signals `i` has sent to `j`;
//! - `taken_slot(j, i)`: how many of `i`'s signals `j` has waited for
//!   (kept in shared memory because the core has no allocator; only `j`
//!   reads it).
//!
//! They are separate from the peer-fence epochs, so signals and fences
//! between the same pair never match each other: a `peer_fence` neither
//! sends nor consumes a signal, and a window fence touches neither. Each
//! still orders what it orders (program order plus its own Release/Acquire
//! edge), so a pipeline may mix them freely.

use super::wait::{Awaited, WaitStart, Waiter, find_dead, gone, wait_for};
use super::{Poison, PoisonKind, SyncArea, WaitEnv, WaitPolicy, bump, partner, reached};
use crate::error::FenceError;
use crate::sync::Ordering::{Acquire, Relaxed};

/// Signals `peer` once: every access `me` made before the call
/// happens-before every access `peer` makes after the [`peer_wait`] that
/// consumes this signal. Never waits. A signal to oneself does nothing.
pub fn peer_signal<A, E>(area: &A, env: &E, me: u32, peer: u32) -> Result<(), FenceError>
where
    A: SyncArea + ?Sized,
    E: WaitEnv + ?Sized,
{
    if !partner(area, me, peer)? {
        return Ok(());
    }
    bump(area, env, area.signal_slot(me, peer), peer);
    Ok(())
}

/// Waits for the next signal from `peer`: returns once `peer` has sent `me`
/// more signals than `me` has waited for, and consumes one. Everything
/// `peer` did before that signal happens-before everything `me` does
/// after. Fails like a fence (dead peer, timeout, poisoned window), and then
/// consumes nothing. Waiting for oneself returns at once.
pub fn peer_wait<A, E>(area: &A, env: &E, me: u32, peer: u32, policy: &WaitPolicy) -> Result<(), FenceError>
where
    A: SyncArea + ?Sized,
    E: WaitEnv + ?Sized,
{
    if !partner(area, me, peer)? {
        return Ok(());
    }
    let want = next_signal(area, me, peer);
    let policy = WaitPolicy { spins: policy.signal_spins, ..*policy };
    wait_for(&Waiter { area, env, me, awaited: Awaited::Partner(peer) }, &policy, &mut WaitStart::default(), || {
        signalled(area, me, peer, want)
    })?;
    take(area, me, peer, want);
    Ok(())
}

/// Consumes the next signal from `peer` if it has come, without waiting:
/// `Ok(true)` then, with [`peer_wait`]'s ordering; `Ok(false)` if it has not
/// come yet, and then nothing is consumed. Testing oneself is `Ok(true)`.
/// Fails like a wait on a poisoned window. A loop of tests is the caller's
/// wait, so the caller decides how often a test that finds no signal looks
/// for dead ranks: `liveness_check()`, asked then, says whether this is
/// such a look and its number (the awaited peer every time, and a slice of
/// the others that moves on at each look, as a sleeping wait does). A test of a rank
/// that has left the window, or is freeing it, answers `Ok(false)` once its
/// signals are taken.
pub fn peer_test<A, E>(
    area: &A,
    env: &E,
    me: u32,
    peer: u32,
    liveness_check: impl FnOnce() -> Option<u32>,
) -> Result<bool, FenceError>
where
    A: SyncArea + ?Sized,
    E: WaitEnv + ?Sized,
{
    if !partner(area, me, peer)? {
        return Ok(true);
    }
    let want = next_signal(area, me, peer);
    if signalled(area, me, peer, want) {
        take(area, me, peer, want);
        return Ok(true);
    }
    // A rank that left (freed or dropped the window) is no error here: "no
    // signal" is a test's true answer, and a program may well test, at its
    // end, that none is left over. Only a dead one fails the test.
    let Some(dead) = liveness_check().and_then(|checks| find_dead(area, env, me, peer, checks)) else {
        return Ok(false);
    };
    gone(area, env, Poison { kind: PoisonKind::Dead, rank: dead }, &mut || signalled(area, me, peer, want))?;
    take(area, me, peer, want);
    Ok(true)
}

/// The count of `peer`'s signals that `me`'s next wait needs.
#[inline]
pub(super) fn next_signal<A: SyncArea + ?Sized>(area: &A, me: u32, peer: u32) -> u64 {
    // Relaxed: only this rank writes its taken count, so program order gives its last value.
    area.taken_slot(me, peer).load(Relaxed).wrapping_add(1)
}

/// Whether `peer` has sent `me` at least `want` signals.
#[inline]
pub(super) fn signalled<A: SyncArea + ?Sized>(area: &A, me: u32, peer: u32, want: u64) -> bool {
    // Acquire: pairs with the peer's Release store of its count, so what it
    // did before that signal happens-before what we do after the wait.
    reached(area.signal_slot(peer, me).load(Acquire), want)
}

/// Consumes `peer`'s signal number `want`.
#[inline]
pub(super) fn take<A: SyncArea + ?Sized>(area: &A, me: u32, peer: u32, want: u64) {
    // Relaxed: a private counter that happens to live in shared memory; only
    // this rank reads it, in program order.
    area.taken_slot(me, peer).store(want, Relaxed);
}
