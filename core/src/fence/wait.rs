//! Waiting for a slot: spin, then yield, then sleep on the rank's doorbell
//! with a deadline, checking the window's poison and the awaited peer's
//! liveness while sleeping. The signaller wakes only a rank that announced it
//! sleeps, so the fast path makes no system call.

use super::leave::has_left;
use super::{Poison, PoisonKind, SyncArea, WaitEnv, placement, poison, poison_state, reached};
use crate::error::FenceError;
use crate::sync::Ordering::{Acquire, Relaxed, Release, SeqCst};
use crate::sync::{asymmetric_light_fence, fence, spin_loop};

/// How long and how a rank waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitPolicy {
    /// Polls with a spin hint before yielding, in the two-way fences
    /// (pairwise and window-wide).
    pub spins: u32,
    /// The same in a one-way wait ([`super::peer_wait`]): its signaller
    /// never waits for the waiter, so it is usually running (a producer
    /// ahead of its consumer), and a short spin catches its next signal
    /// without a trip through the scheduler even when ranks outnumber CPUs.
    pub signal_spins: u32,
    /// Polls with a yield before sleeping, at least.
    pub yields: u32,
    /// And go on yielding until this long has passed (from the end of
    /// spinning) before sleeping (0: just the `yields`): a partner that
    /// waits for this CPU gets it at once, and a hand-off costs a
    /// `sched_yield`, not a futex sleep and a wake system call; but beside
    /// CPU-bound processes a yielder waits out their time slice.
    pub yield_ns: u64,
    /// Give up after this long (from the end of spinning); 0 waits forever
    /// (still ending on a dead peer).
    pub timeout_ns: u64,
    /// How often a sleeping waiter checks its peer's liveness.
    pub liveness_ns: u64,
}

impl WaitPolicy {
    /// The default: 64 polls with a spin hint (2–4 µs: a `pause` costs 26–55
    /// ns on current x86, an `isb` similar on aarch64; a partner that is
    /// running arrives within a few hundred ns), a few yields, then sleeping;
    /// no timeout, liveness checked every 50 ms. Longer spinning only burns
    /// the core a descheduled partner needs: with one CPU-bound process
    /// beside a 2-rank pipeline (peer_fence form, PRK Synch_p2p 2000x2000)
    /// 1 000 polls took 0.48–0.54 s, 64 polls 0.27–0.35 s; on a quiet
    /// machine both 0.045–0.05 s.
    ///
    /// No time-bounded yielding (`yield_ns`) by default: beside CPU-bound
    /// processes a rank that yields waits for their time slice, while a
    /// sleeper that is woken preempts them (4-rank demo under a build:
    /// window fence 3–16 µs sleeping after 16 yields, 12–36 µs yielding
    /// for 200 µs first; the pipeline within the noise either way).
    pub const DEFAULT: Self =
        Self { spins: 64, signal_spins: 64, yields: 16, yield_ns: 0, timeout_ns: 0, liveness_ns: 50_000_000 };

    /// The default tuned for `nranks` ranks on `cpus` CPUs. When ranks
    /// outnumber CPUs, the partner of a two-way fence is usually waiting for
    /// this very CPU, so spinning only delays its turn: fences go to the
    /// scheduler at once (4 ranks on 2 CPUs, PRK Synch_p2p 2000x2000, peer
    /// fence form: 16 polls cost 10 %, 100 polls 2x, 400 polls 5x; 64 polls
    /// 5.0x the time without synchronisation, 0 polls 3.75x). One-way waits
    /// keep spinning: the same pipeline in the signal/wait form took 1.18x
    /// the time without synchronisation with 64 polls, 1.36–1.41x with 0,
    /// 1.28x with 256 (interleaved runs of one session).
    #[must_use]
    pub fn for_load(nranks: u32, cpus: u32) -> Self {
        if super::oversubscribed(nranks, cpus) { Self { spins: 0, ..Self::DEFAULT } } else { Self::DEFAULT }
    }
}

impl Default for WaitPolicy {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Wakes `target` if it announced that it may sleep. Call after the Release
/// store that `target` waits for.
#[inline]
pub(super) fn notify<A: SyncArea + ?Sized, E: WaitEnv + ?Sized>(area: &A, env: &E, target: u32) {
    // Dekker pairing with the waiter's fences in `sleep_until`: either we see
    // its `sleeping` flag here (or a later value: 0 if another signaller took
    // it down first, which then wakes it; preempted in between, that one
    // delays the wake-up until it runs again, or the waiter's next liveness
    // look), or it sees our slot store before sleeping.
    if env.light_wakes() {
        // Every sleeper runs a heavy fence (`membarrier`) between its flag
        // store and its last look, which acts as a full fence here whenever
        // the two overlap: a compiler fence keeps the order in our program.
        asymmetric_light_fence();
    } else {
        // SeqCst fence: the plain, symmetric pairing.
        fence(SeqCst);
    }
    wake_if_sleeping(area, env, target);
    // `target` may be runnable now: ranks beside it should yield to it.
    placement::unblock(area, target);
}

/// Wakes every rank but `me` that announced it may sleep, and takes down
/// their blocked marks (each may have something to do now). Call after the
/// Release (or RMW) that they wait for.
pub(super) fn notify_all<A: SyncArea + ?Sized, E: WaitEnv + ?Sized>(area: &A, env: &E, me: u32) {
    wake_all_sleepers(area, env, me);
    for r in (0..area.nranks()).filter(|&r| r != me) {
        placement::unblock(area, r);
    }
}

/// [`notify_all`] without touching the blocked marks: for the flat barrier,
/// whose waiters' marks name the fence they wait for and lapse with it.
pub(super) fn wake_all_sleepers<A: SyncArea + ?Sized, E: WaitEnv + ?Sized>(area: &A, env: &E, me: u32) {
    // SeqCst fence: as in `notify`; one orders the store before every load below.
    fence(SeqCst);
    for r in (0..area.nranks()).filter(|&r| r != me) {
        wake_if_sleeping(area, env, r);
    }
}

/// `notify` after its fence.
#[inline]
fn wake_if_sleeping<A: SyncArea + ?Sized, E: WaitEnv + ?Sized>(area: &A, env: &E, target: u32) {
    let sleeping = area.sleeping(target);
    // Acquire: pairs with the waiter's Release store of `sleeping`, so its doorbell
    // read happened before our bump below, which therefore cannot be missed
    // (argued, not model-checked: loom's SeqCst fences synchronise with each
    // other, which C11's do not, so loom passes with this and that Relaxed).
    // The swap takes the flag down, so of the signals that reach a sleeper
    // before it runs again (a producer running ahead of a descheduled
    // consumer) only the first pays for a wake-up system call; the sleeper
    // raises the flag again before it next sleeps. Relaxed load first: the
    // common case (nobody sleeps) stays a plain load, no read-modify-write.
    if sleeping.load(Relaxed) != 0 && sleeping.swap(0, Acquire) != 0 {
        // Release: pairs with the sleeper's Acquire load of the doorbell, so our
        // swap precedes the flag it raises once woken, and a later look (ours or
        // another signaller's) that reads our 0 is ordered before that raise's
        // fence (loom: Relaxed loses a wake-up). Not for a poison's bump: an RMW
        // continues its release sequence whatever its ordering.
        area.doorbell(target).fetch_add(1, Release);
        env.wake(area.doorbell(target));
    }
}

/// Whom a wait waits for: the rank its errors name and whose liveness it checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Awaited {
    /// A pairwise partner (peer fence, signal): its `free` ends the wait.
    Partner(u32),
    /// The rank a window fence's round waits for.
    Round(u32),
    /// Every rank's arrival at the flat barrier's fence number `fence`:
    /// resolved, when it matters, to a rank that has not arrived.
    Flat {
        /// The fence (1 for the window's first flat fence).
        fence: u64,
    },
}

impl Awaited {
    /// The rank to name: for the flat barrier, the first rank but `me` that
    /// has not arrived at the fence (its successor if all have, meanwhile).
    fn rank<A: SyncArea + ?Sized>(self, area: &A, me: u32) -> u32 {
        match self {
            Self::Partner(rank) | Self::Round(rank) => rank,
            Self::Flat { fence } => {
                let n = area.nranks();
                // Relaxed: picks whom to name and to look at; a stale count only
                // names a rank that arrived a moment ago (if it has also left,
                // every rank had arrived: `gone`'s re-test then succeeds).
                let late = |r: u32| !reached(area.flat_arrived(r).load(Relaxed), fence);
                (1..n).map(|d| (me + d) % n).find(|&r| late(r)).unwrap_or((me + 1) % n)
            }
        }
    }
}

/// When the slow part of a fence's waits began: a fence of several waits
/// (the window fence's rounds) gives up a timeout after its first slow
/// wait began, not after each. Read from the clock only once a wait
/// outlasts its spin phase, so the fast path never reads it.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct WaitStart(Option<u64>);

impl WaitStart {
    /// The start, `now` if this is the fence's first slow wait.
    fn since(&mut self, now: u64) -> u64 {
        *self.0.get_or_insert(now)
    }
}

/// One rank's wait: the waiting rank `me` of the window in `area`, through
/// `env`, and whom it waits for. What a wait's slow path consults besides
/// the slot.
pub(super) struct Waiter<'a, A: ?Sized, E: ?Sized> {
    pub(super) area: &'a A,
    pub(super) env: &'a E,
    pub(super) me: u32,
    pub(super) awaited: Awaited,
}

/// Waits until `ready()`; `start` is shared by the waits of one fence.
#[inline]
pub(super) fn wait_for<A, E>(
    w: &Waiter<'_, A, E>,
    policy: &WaitPolicy,
    start: &mut WaitStart,
    mut ready: impl FnMut() -> bool,
) -> Result<(), FenceError>
where
    A: SyncArea + ?Sized,
    E: WaitEnv + ?Sized,
{
    if spin(policy.spins.min(SPINS_PER_CHECK), &mut ready) {
        return Ok(());
    }
    if policy.spins > SPINS_PER_CHECK && long_spin(w, policy, start, &mut ready)? {
        return Ok(());
    }
    slow_wait(w, policy, start, &mut ready)
}

/// Polls `ready()` up to `n` times, with a spin hint after each miss.
#[inline]
fn spin(n: u32, mut ready: impl FnMut() -> bool) -> bool {
    for _ in 0..n {
        if ready() {
            return true;
        }
        spin_loop();
    }
    false
}

/// Spins at most this many times between two looks at what ends a wait.
/// A spin count near `u32::MAX` (a user's "always poll") spins for minutes:
/// the timeout, the poison and the partner's death must end it all the same.
const SPINS_PER_CHECK: u32 = 1 << 16;

/// The spins past the first [`SPINS_PER_CHECK`], with a [`Watch::check`]
/// after every [`SPINS_PER_CHECK`] more; `Ok(true)` once `ready()`.
#[cold]
fn long_spin<A, E>(
    w: &Waiter<'_, A, E>,
    policy: &WaitPolicy,
    start: &mut WaitStart,
    ready: &mut dyn FnMut() -> bool,
) -> Result<bool, FenceError>
where
    A: SyncArea + ?Sized,
    E: WaitEnv + ?Sized,
{
    let now = w.env.now_ns();
    let mut watch = Watch::new(now, deadline_after(start.since(now), policy), policy);
    let mut left = policy.spins - SPINS_PER_CHECK;
    while left > 0 {
        if watch.check(w, ready)? {
            return Ok(true);
        }
        if spin(left.min(SPINS_PER_CHECK), &mut *ready) {
            return Ok(true);
        }
        left = left.saturating_sub(SPINS_PER_CHECK);
    }
    Ok(false)
}

#[cold]
fn slow_wait<A, E>(
    w: &Waiter<'_, A, E>,
    policy: &WaitPolicy,
    start: &mut WaitStart,
    ready: &mut dyn FnMut() -> bool,
) -> Result<(), FenceError>
where
    A: SyncArea + ?Sized,
    E: WaitEnv + ?Sized,
{
    let &Waiter { area, env, me, awaited } = w;
    let now = env.now_ns();
    let mut watch = Watch::new(now, deadline_after(start.since(now), policy), policy);
    let yield_until = now.saturating_add(policy.yield_ns);
    let poll_until = now.saturating_add(placement::POLL_NS).min(watch.deadline);
    let mut here = placement::publish_cpu(area, env, me);
    let mut yielded: u32 = 0;
    let result = loop {
        placement::block(area, me, awaited);
        if ready() {
            break Ok(());
        }
        // Polling beats yielding while no other rank could use this CPU.
        if placement::alone_on_cpu(area, me, here) && env.now_ns() < poll_until {
            spin_loop();
            continue;
        }
        if yielded >= policy.yields && (policy.yield_ns == 0 || env.now_ns() >= yield_until.min(watch.deadline)) {
            break sleep_until(w, &mut watch, ready);
        }
        env.yield_now();
        yielded = yielded.saturating_add(1);
        here = placement::publish_cpu(area, env, me);
        // A long yield phase (`yield_ns`) looks at the poison, an interrupt,
        // the peer's leaving and its liveness, as a sleep does.
        if yielded.is_multiple_of(YIELDS_PER_CHECK) {
            match watch.check(w, ready) {
                Ok(false) => {}
                Ok(true) => break Ok(()),
                Err(e) => break Err(e),
            }
        }
    };
    // Relaxed, both: a stale 1 only costs a signaller one spurious wake-up.
    // Stored only when set (a wait that slept and was not woken by a swap):
    // every signaller reads this line, and a store that changes nothing
    // would still take it from them.
    let sleeping = area.sleeping(me);
    if sleeping.load(Relaxed) != 0 {
        sleeping.store(0, Relaxed);
    }
    placement::unblock(area, me);
    result
}

/// Yields between two looks at what ends a wait besides its slot (the
/// default policy sleeps after 16: only a long `yield_ns` gets there).
const YIELDS_PER_CHECK: u32 = 64;

fn sleep_until<A, E>(w: &Waiter<'_, A, E>, watch: &mut Watch, ready: &mut dyn FnMut() -> bool) -> Result<(), FenceError>
where
    A: SyncArea + ?Sized,
    E: WaitEnv + ?Sized,
{
    let &Waiter { area, env, me, awaited } = w;
    let doorbell = area.doorbell(me);
    loop {
        // Acquire: pairs with the Release bumps: one seen here brings the poison
        // with it, or the swap that took our flag down (see `wake_if_sleeping`).
        let seq = doorbell.load(Acquire);
        // Release: pairs with `notify`'s Acquire load (see there).
        area.sleeping(me).store(1, Release);
        // SeqCst fence: the waiter's half of the Dekker pairing with `notify`;
        // with light wakes, the heavy fence too (see `notify`).
        fence(SeqCst);
        let paired = !env.light_wakes() || env.heavy_fence();
        if ready() || watch.check(w, ready)? {
            return Ok(());
        }
        // Marked again: a signal for something else may have cleared it.
        placement::block(area, me, awaited);
        if paired {
            env.wait(doorbell, seq, watch.deadline.min(watch.next_check));
        } else {
            // A signal may have missed the flag: look again rather than sleep.
            env.yield_now();
        }
    }
}

/// When a wait that starts at `now` gives up (`u64::MAX`: never).
fn deadline_after(now: u64, policy: &WaitPolicy) -> u64 {
    match policy.timeout_ns {
        0 => u64::MAX,
        t => now.saturating_add(t),
    }
}

/// The ways a wait ends without its partner: a poisoned window, the
/// caller's interruption, a deadline, a dead rank (checked every
/// `liveness_ns`). Shared by the sleeping wait and the polled fences.
#[derive(Clone, Copy, Debug)]
pub(super) struct Watch {
    /// When the wait gives up (`u64::MAX`: never).
    pub(super) deadline: u64,
    /// When liveness is next checked.
    pub(super) next_check: u64,
    liveness_ns: u64,
    checks: u32,
}

impl Watch {
    /// A watch starting at `now` that gives up at `deadline`.
    pub(super) fn new(now: u64, deadline: u64, policy: &WaitPolicy) -> Self {
        Self {
            deadline,
            next_check: now.saturating_add(policy.liveness_ns),
            liveness_ns: policy.liveness_ns,
            checks: 0,
        }
    }

    /// A watch starting at `now` with the policy's timeout.
    pub(super) fn from_policy(now: u64, policy: &WaitPolicy) -> Self {
        Self::new(now, deadline_after(now, policy), policy)
    }

    /// Called when `ready()` was false: fails, poisoning the window where
    /// the others must learn of it, if the wait should end without its
    /// partner; `Ok(false)` to go on waiting, `Ok(true)` if `ready()` holds
    /// after all (the partner arrived, then left or died).
    pub(super) fn check<A, E>(
        &mut self,
        w: &Waiter<'_, A, E>,
        ready: &mut dyn FnMut() -> bool,
    ) -> Result<bool, FenceError>
    where
        A: SyncArea + ?Sized,
        E: WaitEnv + ?Sized,
    {
        let &Waiter { area, env, me, awaited } = w;
        if let Some(p) = poison_state(area) {
            return Err(p.error());
        }
        if env.interrupted() {
            // The others learn that this rank left: their waits fail naming it.
            return Err(poison(area, env, Poison { kind: PoisonKind::Aborted, rank: me }).error());
        }
        let peer = awaited.rank(area, me);
        // One load, at every check: `leave` wakes the sleepers to look.
        if has_left(area, peer, matches!(awaited, Awaited::Partner(_))) {
            let left = Poison { kind: PoisonKind::Left { waiter: me }, rank: peer };
            return gone(area, env, left, ready).map(|()| true);
        }
        let now = env.now_ns();
        if now >= self.deadline {
            // The others learn whom this rank waited for: the rank to look at.
            poison(area, env, Poison { kind: PoisonKind::TimedOut { waited_for: peer }, rank: me });
            return Err(FenceError::Timeout { peer });
        }
        if now >= self.next_check {
            self.checks = self.checks.wrapping_add(1);
            if let Some(dead) = find_dead(area, env, me, peer, self.checks) {
                return gone(area, env, Poison { kind: PoisonKind::Dead, rank: dead }, ready).map(|()| true);
            }
            self.next_check = now.saturating_add(self.liveness_ns);
        }
        Ok(false)
    }
}

/// A wait found that `why.rank` will never arrive again: `Ok` if it did
/// arrive before it went (`has_left`'s Acquire, or the process's end, makes
/// its last stores visible to this second look at `ready`), else the window
/// is poisoned so that every rank fails alike.
pub(super) fn gone<A, E>(area: &A, env: &E, why: Poison, ready: &mut dyn FnMut() -> bool) -> Result<(), FenceError>
where
    A: SyncArea + ?Sized,
    E: WaitEnv + ?Sized,
{
    if ready() { Ok(()) } else { Err(poison(area, env, why).error()) }
}

/// Checks that look at every rank, at most, between two looks at the same
/// one (besides the awaited peer, looked at every time).
const CHECKS_PER_SCAN: u32 = 8;
/// Ranks one check looks at, at most, besides the awaited peer.
const RANKS_PER_CHECK: u32 = 8;

/// The awaited peer (unless it left) at every check, then a slice of the
/// other ranks that have not left (the awaited peer may itself be stuck
/// behind a dead rank nobody else waits on). A rank that left had made its
/// last arrival, and a wait for one it never made ends on the mark itself:
/// nobody is stuck behind it, so its process may end without its window's
/// other ranks failing.
///
/// The slice moves on at each check: up to 64 ranks, every rank is seen
/// every [`CHECKS_PER_SCAN`] checks; past that each check reads
/// [`RANKS_PER_CHECK`] of them, so that n waiters' checks cost O(n), not
/// O(n²) (1024 ranks scanning all every eighth check read `/proc` a
/// million times per scan, more than two cores do in the interval). Each
/// waiter starts its slices at its own place, so that together the waiters
/// still look at every rank within a check or two.
pub(super) fn find_dead<A, E>(area: &A, env: &E, me: u32, peer: u32, checks: u32) -> Option<u32>
where
    A: SyncArea + ?Sized,
    E: WaitEnv + ?Sized,
{
    if peer != me && !has_left(area, peer, false) && !env.is_alive(peer) {
        return Some(peer);
    }
    let n = area.nranks();
    let len = n.div_ceil(CHECKS_PER_SCAN).min(RANKS_PER_CHECK);
    // The slice's place in units of `len`: (me + checks) mod n, kept small
    // (n ≤ 1024, len ≤ 8) so that nothing overflows.
    let start = (me % n + checks % n) % n * len;
    (start..start + len).map(|r| r % n).find(|&r| r != me && r != peer && !has_left(area, r, false) && !env.is_alive(r))
}
