//! Fences that never block: start one, then poll it until it is done, so
//! that an event loop or an async executor can wait for a partner without
//! giving a thread to the wait.
//!
//! A started fence has done everything the blocking form does before its
//! first wait (its Release stores, its wake-ups); each poll tests the slot
//! the blocking form would wait on, with the same Acquire load, and takes
//! the next step when it is ready. A poll that finds nothing ready checks
//! what a sleeping waiter checks (the window's poison, the deadline, the
//! awaited rank's liveness every `liveness_ns`), so a polled fence fails
//! with the same errors and never waits forever either. It never sleeps:
//! between polls the caller's runtime does other work or parks as it likes.

use core::task::Poll;

use super::flat::{all_arrived, arrive_flat, flat_awaited};
use super::peer::{answered, arrive};
use super::signal::{next_signal, signalled, take};
use super::wait::{Awaited, Waiter, Watch};
use super::window::{check_member, round_arrived, round_source, send_round};
use super::{Barrier, SyncArea, WaitEnv, WaitPolicy, partner, rounds};
use crate::error::FenceError;

/// What a started fence waits for next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// `peer` to reach peer-fence `epoch`.
    Answer { peer: u32, epoch: u64 },
    /// `peer` to have sent signal number `want` (then consume it).
    Signal { peer: u32, want: u64 },
    /// Round `round` of the dissemination barrier to bring `epoch`.
    Round { round: u32, epoch: u64 },
    /// The flat barrier's arrival count to reach `target`.
    Arrivals { target: u64 },
    /// Nothing: the fence is complete.
    Done,
    /// Nothing: the fence failed, and every later poll says so again.
    Failed(FenceError),
}

/// A fence started by rank `me` and not yet complete: poll it with the same
/// window (area and environment) until [`Poll::Ready`].
///
/// Until it completes, `me` must not start another fence, signal or wait on
/// the same window: the blocking forms' rule (one call at a time per rank)
/// holds from start to completion. Dropping a peer fence or a wait before it
/// completes abandons it harmlessly (the peer's side completes, and an
/// abandoned wait consumes nothing). A window fence abandoned between its
/// rounds would leave later ranks waiting, and one abandoned at the flat
/// barrier would have this rank's next arrival counted in it, so the owner
/// of the area must poison the window then (see
/// [`PendingFence::abandoning_breaks_window`]).
// Not `Clone`: two copies polled would each take the steps (a round sent
// twice, one signal consumed twice).
#[derive(Debug)]
#[must_use = "a started fence does nothing until it is polled to completion"]
pub struct PendingFence {
    me: u32,
    step: Step,
    watch: Watch,
}

impl PendingFence {
    /// Starts the pairwise fence of `me` with `peer` (see [`super::peer_fence`]).
    pub fn peer_fence<A, E>(area: &A, env: &E, me: u32, peer: u32, policy: &WaitPolicy) -> Result<Self, FenceError>
    where
        A: SyncArea + ?Sized,
        E: WaitEnv + ?Sized,
    {
        let step = if partner(area, me, peer)? {
            Step::Answer { peer, epoch: arrive(area, env, me, peer) }
        } else {
            Step::Done
        };
        Ok(Self::new(env, me, step, policy))
    }

    /// Starts a wait of `me` for the next signal from `peer` (see
    /// [`super::peer_wait`]); the signal is consumed by the poll that
    /// completes it.
    pub fn wait<A, E>(area: &A, env: &E, me: u32, peer: u32, policy: &WaitPolicy) -> Result<Self, FenceError>
    where
        A: SyncArea + ?Sized,
        E: WaitEnv + ?Sized,
    {
        let step = if partner(area, me, peer)? {
            Step::Signal { peer, want: next_signal(area, me, peer) }
        } else {
            Step::Done
        };
        Ok(Self::new(env, me, step, policy))
    }

    /// Starts the window-wide fence of `me`, with the window's `barrier`
    /// (see [`super::window_fence`] and [`super::flat_fence`]).
    pub fn window_fence<A, E>(
        area: &A,
        env: &E,
        me: u32,
        barrier: Barrier,
        policy: &WaitPolicy,
    ) -> Result<Self, FenceError>
    where
        A: SyncArea + ?Sized,
        E: WaitEnv + ?Sized,
    {
        check_member(area, me)?;
        let step = match barrier {
            Barrier::Dissemination if rounds(area.nranks()) == 0 => Step::Done,
            Barrier::Dissemination => Step::Round { round: 0, epoch: send_round(area, env, me, 0) },
            Barrier::Flat => arrive_flat(area, env, me).map_or(Step::Done, |target| Step::Arrivals { target }),
        };
        Ok(Self::new(env, me, step, policy))
    }

    fn new<E: WaitEnv + ?Sized>(env: &E, me: u32, step: Step, policy: &WaitPolicy) -> Self {
        let watch =
            if step == Step::Done { Watch::new(0, u64::MAX, policy) } else { Watch::from_policy(env.now_ns(), policy) };
        Self { me, step, watch }
    }

    /// Whether the fence is complete.
    #[must_use]
    pub fn is_done(&self) -> bool {
        self.step == Step::Done
    }

    /// Whether abandoning the fence now breaks the window, which must then
    /// be poisoned: a dissemination fence with rounds still to send would
    /// leave later ranks waiting for this one; a flat fence this rank has
    /// arrived at would count the rank's next arrival in this fence too, so
    /// that it completes without some rank (the counter names a fence by
    /// arrivals alone) unless the others' arrivals completed it meanwhile
    /// (the counter never goes back, so its next arrival counts in the next).
    #[must_use]
    pub fn abandoning_breaks_window<A: SyncArea + ?Sized>(&self, area: &A) -> bool {
        match self.step {
            Step::Round { round, .. } => round + 1 < rounds(area.nranks()),
            Step::Arrivals { target } => !all_arrived(area, target),
            // A failed fence poisoned the window, or found it poisoned.
            Step::Answer { .. } | Step::Signal { .. } | Step::Done | Step::Failed(_) => false,
        }
    }

    /// Takes every step that is ready: `Ready(Ok(()))` once the fence is
    /// complete, `Ready(Err(_))` when it failed (a dead rank, the deadline,
    /// a poisoned window), each again on every later poll; `Pending`
    /// otherwise.
    pub fn poll<A, E>(&mut self, area: &A, env: &E) -> Poll<Result<(), FenceError>>
    where
        A: SyncArea + ?Sized,
        E: WaitEnv + ?Sized,
    {
        let me = self.me;
        loop {
            let step = self.step;
            let awaited = match step {
                Step::Done => return Poll::Ready(Ok(())),
                Step::Failed(e) => return Poll::Ready(Err(e)),
                Step::Answer { peer, .. } | Step::Signal { peer, .. } => Awaited::Partner(peer),
                Step::Round { round, .. } => Awaited::Round(round_source(area, me, round)),
                Step::Arrivals { target } => flat_awaited(area, target),
            };
            let mut ready = || match step {
                Step::Answer { peer, epoch } => answered(area, me, peer, epoch),
                Step::Signal { peer, want } => signalled(area, me, peer, want),
                Step::Round { round, epoch } => round_arrived(area, me, round, epoch),
                Step::Arrivals { target } => all_arrived(area, target),
                Step::Done | Step::Failed(_) => true,
            };
            if !ready() {
                match self.watch.check(&Waiter { area, env, me, awaited }, &mut ready) {
                    Ok(false) => return Poll::Pending,
                    // Ready after all: the awaited rank arrived, then left.
                    Ok(true) => {}
                    Err(e) => {
                        // Sticky: a wait that failed must not consume a signal that comes later.
                        self.step = Step::Failed(e);
                        return Poll::Ready(Err(e));
                    }
                }
            }
            self.step = match self.step {
                Step::Signal { peer, want } => {
                    take(area, me, peer, want);
                    Step::Done
                }
                Step::Round { round, .. } if round + 1 < rounds(area.nranks()) => {
                    Step::Round { round: round + 1, epoch: send_round(area, env, me, round + 1) }
                }
                _ => Step::Done,
            };
        }
    }
}
