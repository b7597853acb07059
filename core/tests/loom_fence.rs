//! loom models of the fences, run on the algorithms exactly as compiled
//! (`kpccl_core::sync` is loom's atomics under `cfg(loom)`):
//!
//! ```text
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test -p kpccl-core --release --test loom_fence
//! ```
//!
//! Each rank's data is a loom `UnsafeCell`: loom fails a model if a read is
//! not ordered after the write it must see (or a write after a read it must
//! not disturb), in any interleaving and under the C11 memory model, so a
//! missing Release/Acquire edge in a fence shows up as a causality violation.
#![cfg(loom)]

use core::task::Poll;
use kpccl_core::FenceError;
use kpccl_core::WaitOutcome;
use kpccl_core::fence::{
    Barrier, PendingFence, Poison, PoisonKind, SyncArea, WaitEnv, WaitPolicy, flat_fence, leave, peer_fence,
    peer_signal, peer_test, peer_wait, poison, poison_state, start_freeing, window_fence,
};
use kpccl_core::sync::{AtomicU32, Ordering};
use loom::cell::UnsafeCell;
use loom::sync::{Arc, Condvar, Mutex};
use loom::thread;

// A window's sync words as a plain Rust value, every slot on a line of its
// own (built inside each model: its words are loom's atomics).
use kpccl_testkit::heap::HeapArea as Area;

/// Waiting as a yield: every wait returns at once and the fence polls again.
#[derive(Debug, Default)]
struct Yielding {
    /// Light wake-ups whose heavy fence fails on the sleeper's side (see
    /// [`NoHeavyFence`]): a sleeper must then never block, so `wait` panics.
    no_heavy_fence: bool,
}

impl WaitEnv for Yielding {
    fn now_ns(&self) -> u64 {
        0
    }
    fn yield_now(&self) {
        thread::yield_now();
    }
    fn wait(&self, _word: &AtomicU32, _expected: u32, _deadline_ns: u64) -> WaitOutcome {
        assert!(!self.no_heavy_fence, "a sleeper whose heavy fence failed blocked");
        thread::yield_now();
        WaitOutcome::Woken
    }
    fn wake(&self, _word: &AtomicU32) {}
    fn is_alive(&self, _rank: u32) -> bool {
        true
    }
    fn light_wakes(&self) -> bool {
        self.no_heavy_fence
    }
    // `heavy_fence` keeps its default: `false`, the fence did not run.
}

/// Waiting as a real futex: `wait` blocks while the word holds `expected`
/// until a `wake`. A lost wake-up (the signaller missing the waiter's
/// `sleeping` flag while the waiter misses its slot store) leaves every
/// rank blocked, which loom reports as a deadlock.
#[derive(Debug)]
struct Futex {
    lock: Mutex<()>,
    woken: Condvar,
    /// Light wake-ups: signallers use the asymmetric light fence and
    /// sleepers the heavy one (both a SeqCst fence under loom, which checks
    /// the code paths; the pair's guarantee is `membarrier`'s contract).
    light: bool,
}

impl Futex {
    fn new() -> Self {
        Self { lock: Mutex::new(()), woken: Condvar::new(), light: false }
    }
}

impl WaitEnv for Futex {
    fn now_ns(&self) -> u64 {
        0
    }
    fn yield_now(&self) {
        thread::yield_now();
    }
    fn wait(&self, word: &AtomicU32, expected: u32, _deadline_ns: u64) -> WaitOutcome {
        let mut guard = self.lock.lock().unwrap();
        // The kernel's compare, made under the lock that `wake` takes. One
        // condition variable serves every word, so a wake-up meant for
        // another rank's doorbell must not end this sleep: a real futex
        // wakes only the sleepers on the word woken, and a lost wake-up
        // hidden by a wake of a third rank would go unseen.
        while word.load(Ordering::SeqCst) == expected {
            guard = self.woken.wait(guard).unwrap();
        }
        WaitOutcome::Woken
    }
    fn wake(&self, _word: &AtomicU32) {
        let _guard = self.lock.lock().unwrap();
        self.woken.notify_all();
    }
    fn is_alive(&self, _rank: u32) -> bool {
        true
    }
    fn light_wakes(&self) -> bool {
        self.light
    }
    fn heavy_fence(&self) -> bool {
        loom::sync::atomic::fence(Ordering::SeqCst);
        true
    }
}

/// Little spinning and yielding (each is a loom yield), no timeout, no
/// liveness checks (the clock stands still at 0).
const POLICY: WaitPolicy =
    WaitPolicy { spins: 2, signal_spins: 2, yields: 1, yield_ns: 0, timeout_ns: 0, liveness_ns: u64::MAX };
/// One poll, then the doorbell: exercises `notify` against `sleep_until`.
/// The poll matters: loom orders `fence(SeqCst)`s more strongly than C11 does
/// (they synchronise with each other), so a rank that reads its slot only
/// after the sleep path's fence would mask a missing Release/Acquire pair.
const SLEEPY: WaitPolicy =
    WaitPolicy { spins: 1, signal_spins: 1, yields: 0, yield_ns: 0, timeout_ns: 0, liveness_ns: u64::MAX };

/// One `UnsafeCell` per rank: its owner writes it, the others read it.
#[derive(Debug)]
struct Data(Vec<UnsafeCell<u64>>);

// SAFETY: the cells are loom's; loom checks every access to them for races.
unsafe impl Sync for Data {}

impl Data {
    fn new(n: u32) -> Self {
        Self((0..n).map(|_| UnsafeCell::new(0)).collect())
    }
    fn write(&self, rank: u32, v: u64) {
        // SAFETY: a race with a read is what loom reports; then the model fails.
        self.0[rank as usize].with_mut(|p| unsafe { *p = v });
    }
    fn read(&self, rank: u32) -> u64 {
        // SAFETY: as above.
        self.0[rank as usize].with(|p| unsafe { *p })
    }
}

/// Explores every execution of `f` (within the preemption bound) and reports how many.
fn model(f: impl Fn() + Sync + Send + 'static) {
    let runs = std::sync::Arc::new(std::sync::Mutex::new(0u64));
    let counter = std::sync::Arc::clone(&runs);
    let f = move || {
        *counter.lock().unwrap() += 1;
        f();
    };
    let mut b = loom::model::Builder::new();
    // LOOM_MAX_PREEMPTIONS wins; otherwise bound it so each model takes seconds.
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(2);
    }
    // A waiting rank polls (each poll is a few branches) until its partner
    // arrives, which with three ranks can take a while.
    b.max_branches = 100_000;
    let bound = b.preemption_bound;
    b.check(f);
    std::eprintln!("{} executions (preemption bound {bound:?})", runs.lock().unwrap());
}

/// Runs `rank(r)` for every rank of `0..n`, rank 0 on the model's main thread.
fn ranks(n: u32, rank: impl Fn(u32) + Sync + Send + 'static) {
    let rank = Arc::new(rank);
    let others: Vec<_> = (1..n)
        .map(|r| {
            let rank = Arc::clone(&rank);
            thread::spawn(move || rank(r))
        })
        .collect();
    rank(0);
    for t in others {
        t.join().unwrap();
    }
}

/// What every rank of a model shares: the sync area, one data word per
/// writer, the wait environment.
struct World<E: Mode> {
    ranks: u32,
    area: Area,
    data: Data,
    env: E::Env,
}

impl<E: Mode> World<E> {
    /// The world of `ranks` ranks with `words` data words, fresh for one
    /// execution (its words are loom's atomics).
    fn new(ranks: u32, words: u32) -> Arc<Self> {
        Arc::new(Self { ranks, area: Area::new(ranks), data: Data::new(words), env: E::env() })
    }
}

/// Runs `rank(world, me)` on every rank of `world` (see [`ranks`]); the
/// world stays the caller's, to check what the ranks left in it.
fn on_every_rank<E: Mode>(world: &Arc<World<E>>, rank: impl Fn(&World<E>, u32) + Sync + Send + 'static) {
    let shared = Arc::clone(world);
    ranks(world.ranks, move |me| rank(&shared, me));
}

/// Rank `me` of a pair publishes 1, fences, reads its peer's 1, fences
/// again and only then overwrites with 2: the second fence orders the
/// peer's read before the overwrite, so loom sees no write racing a read.
fn publish_then_overwrite(data: &Data, me: u32, fence: impl Fn()) {
    let peer = 1 - me;
    data.write(me, 1);
    fence();
    assert_eq!(data.read(peer), 1);
    fence();
    data.write(me, 2);
}

/// Rank 0 fills two messages, sending after each; rank 1 takes twice and
/// reads each message only after its own take. A take that returned early,
/// or a Release/Acquire edge missing, is a race loom reports.
fn two_messages(msgs: &Data, me: u32, send: impl Fn(), take: impl Fn()) {
    for k in 0..2 {
        if me == 0 {
            msgs.write(k, 7 + u64::from(k));
            send();
        } else {
            take();
            assert_eq!(msgs.read(k), 7 + u64::from(k));
        }
    }
}

/// The ways a rank may wait, each model running under both where it can: a
/// wait environment and the policy it runs with.
trait Mode: 'static {
    type Env: WaitEnv + Send + Sync + 'static;
    const POLICY: WaitPolicy;
    fn env() -> Self::Env;
}

impl Mode for Yielding {
    type Env = Self;
    const POLICY: WaitPolicy = POLICY;
    fn env() -> Self {
        Yielding::default()
    }
}

impl Mode for Futex {
    type Env = Self;
    const POLICY: WaitPolicy = SLEEPY;
    fn env() -> Self {
        Futex::new()
    }
}

/// No spin before the doorbell: loom never returns again a stale value that
/// a thread read before it last yielded (its rule for spin loops), so the
/// spin of [`SLEEPY`] makes every value read at a wait's entry (the poison
/// word, the slot) fresh by the time the sleep path reads it again, which
/// hides a stale read there. The slow path still reads the slot once before
/// the sleep path's fence.
const STRAIGHT_TO_SLEEP: WaitPolicy = WaitPolicy { spins: 0, signal_spins: 0, ..SLEEPY };

/// The futex, reached without spinning first.
#[derive(Debug)]
struct FutexStraight;

impl Mode for FutexStraight {
    type Env = Futex;
    const POLICY: WaitPolicy = STRAIGHT_TO_SLEEP;
    fn env() -> Futex {
        Futex::new()
    }
}

/// [`FutexStraight`] with light wake-ups; `FutexLight<true>` polls once
/// first, as [`SLEEPY`] does.
struct FutexLight<const POLL_FIRST: bool = false>;

impl<const POLL_FIRST: bool> Mode for FutexLight<POLL_FIRST> {
    type Env = Futex;
    const POLICY: WaitPolicy = if POLL_FIRST { SLEEPY } else { STRAIGHT_TO_SLEEP };
    fn env() -> Futex {
        Futex { light: true, ..Futex::new() }
    }
}

/// Two ranks, two peer fences: publish, then overwrite after the peer's read.
fn peer_twice<E: Mode>() {
    model(|| {
        let world = World::<E>::new(2, 2);
        on_every_rank(&world, |w, me| {
            publish_then_overwrite(&w.data, me, || peer_fence(&w.area, &w.env, me, 1 - me, &E::POLICY).unwrap());
        });
        // Each slot went through epochs 1 and 2, and the last writes stand.
        assert_eq!(world.area.peer_slot(0, 1).load(Ordering::Relaxed), 2);
        assert_eq!(world.area.peer_slot(1, 0).load(Ordering::Relaxed), 2);
        assert_eq!((world.data.read(0), world.data.read(1)), (2, 2));
    });
}

/// `n` ranks: rank 0 fences with 1, then 2, and so on; every other rank
/// fences with 0 only, and each sees the write of the rank it fenced with.
/// With two ranks, one pair's single fence.
fn peer_star<E: Mode>(n: u32) {
    model(move || {
        on_every_rank(&World::<E>::new(n, n), move |w, me| {
            w.data.write(me, 100 + u64::from(me));
            let peers = if me == 0 { 1..n } else { 0..1 };
            for p in peers {
                peer_fence(&w.area, &w.env, me, p, &E::POLICY).unwrap();
                assert_eq!(w.data.read(p), 100 + u64::from(p));
            }
        });
    });
}

/// One-way signals count: two messages, each sent with a signal and taken
/// with a wait.
fn signals_count<E: Mode>() {
    model(|| {
        let world = World::<E>::new(2, 2);
        on_every_rank(&world, |w, me| {
            two_messages(
                &w.data,
                me,
                || peer_signal(&w.area, &w.env, 0, 1).unwrap(),
                || peer_wait(&w.area, &w.env, 1, 0, &E::POLICY).unwrap(),
            );
        });
        // Two sent, two taken, nothing the other way, no fence epoch moved.
        assert_eq!(world.area.signal_slot(0, 1).load(Ordering::Relaxed), 2);
        assert_eq!(world.area.taken_slot(1, 0).load(Ordering::Relaxed), 2);
        assert_eq!(world.area.signal_slot(1, 0).load(Ordering::Relaxed), 0);
        assert_eq!(world.area.peer_slot(0, 1).load(Ordering::Relaxed), 0);
    });
}

/// Rank 0 publishes with a signal and rank 1 reads after its wait; then
/// each rank runs `then`.
fn signal_then<E: Mode>(then: fn(&World<E>, u32)) {
    model(move || {
        on_every_rank(&World::<E>::new(2, 1), move |w, me| {
            if me == 0 {
                w.data.write(0, 1);
                peer_signal(&w.area, &w.env, 0, 1).unwrap();
            } else {
                peer_wait(&w.area, &w.env, 1, 0, &E::POLICY).unwrap();
                assert_eq!(w.data.read(0), 1);
            }
            then(w, me);
        });
    });
}

/// Signals and a peer fence on the same pair: after rank 0's signal both
/// peer-fence, after which rank 0 may overwrite (rank 1's read
/// happens-before it through the fence). The fence must match the fence,
/// not the signal.
fn signal_then_fence<E: Mode>() {
    signal_then::<E>(|w, me| {
        peer_fence(&w.area, &w.env, me, 1 - me, &E::POLICY).unwrap();
        if me == 0 {
            w.data.write(0, 2);
        }
    });
}

/// A window-wide fence algorithm, as the models call it.
type WindowFence<E> = fn(&Area, &<E as Mode>::Env, u32, &WaitPolicy) -> Result<(), FenceError>;

/// `n` ranks, `fences` window fences made with `fence`: in each, every rank
/// publishes a new value and then reads every other rank's; the next value is
/// written only after the next fence, when everyone is done reading the last.
fn window<E: Mode>(n: u32, fences: u64, fence: WindowFence<E>) {
    model(move || {
        on_every_rank(&World::<E>::new(n, n), move |w, me| {
            for f in 0..fences {
                if f > 0 {
                    fence(&w.area, &w.env, me, &E::POLICY).unwrap();
                }
                w.data.write(me, 1000 * f + u64::from(me));
                fence(&w.area, &w.env, me, &E::POLICY).unwrap();
                for r in (0..n).filter(|&r| r != me) {
                    assert_eq!(w.data.read(r), 1000 * f + u64::from(r));
                }
            }
        });
    });
}

/// Polls a started fence to completion, yielding between polls as an event
/// loop would run other work.
fn polled(area: &Area, env: &impl WaitEnv, started: Result<PendingFence, FenceError>) -> Result<(), FenceError> {
    let mut fence = started?;
    loop {
        match fence.poll(area, env) {
            Poll::Ready(result) => return result,
            Poll::Pending => thread::yield_now(),
        }
    }
}

/// Two ranks, two peer fences: rank 0 polls its fences, rank 1 blocks in its
/// own (with the futex: its sleep must be ended by rank 0's start). Each
/// sees the other's write, and the overwrite comes after the peer's read.
fn peer_polled<E: Mode>() {
    model(|| {
        on_every_rank(&World::<E>::new(2, 2), |w, me| {
            let (area, env, peer) = (&w.area, &w.env, 1 - me);
            let fence = || match me {
                0 => polled(area, env, PendingFence::peer_fence(area, env, me, peer, &E::POLICY)),
                _ => peer_fence(area, env, me, peer, &E::POLICY),
            };
            publish_then_overwrite(&w.data, me, || fence().unwrap());
        });
    });
}

/// Rank 0 signals rank 1 after each of two messages; rank 1 takes each with
/// `take`. Returns the world, to check what the takes left in it.
fn two_signalled_messages<E: Mode>(take: fn(&Area, &E::Env)) -> Arc<World<E>> {
    let world = World::<E>::new(2, 2);
    on_every_rank(&world, move |w, me| {
        let (area, env) = (&w.area, &w.env);
        two_messages(&w.data, me, || peer_signal(area, env, 0, 1).unwrap(), || take(area, env));
    });
    world
}

/// A polled wait consumes one signal per completion: rank 1 polls two waits
/// for rank 0's two messages.
fn wait_polled<E: Mode>() {
    model(|| {
        let world = two_signalled_messages::<E>(|area, env| {
            polled(area, env, PendingFence::wait(area, env, 1, 0, &E::POLICY)).unwrap();
        });
        assert_eq!(world.area.taken_slot(1, 0).load(Ordering::Relaxed), 2);
    });
}

/// Two signals consumed by tests (the wait that never waits) in a loop:
/// each test that succeeds publishes the signaller's write before it, and
/// none consumes a signal that was not sent.
fn wait_tested<E: Mode>() {
    model(|| {
        let world = two_signalled_messages::<E>(|area, env| {
            while !peer_test(area, env, 1, 0, || None).unwrap() {
                thread::yield_now();
            }
        });
        assert_eq!(peer_test(&world.area, &world.env, 1, 0, || None), Ok(false), "a third test finds no signal");
        assert_eq!(world.area.taken_slot(1, 0).load(Ordering::Relaxed), 2);
    });
}

/// The window fence with rank 0 polling and the other ranks blocking.
fn dissemination_rank0_polled<E: WaitEnv>(
    area: &Area,
    env: &E,
    me: u32,
    policy: &WaitPolicy,
) -> Result<(), FenceError> {
    match me {
        0 => polled(area, env, PendingFence::window_fence(area, env, me, Barrier::Dissemination, policy)),
        _ => window_fence(area, env, me, policy),
    }
}

/// The flat fence with rank 0 polling and the other ranks blocking.
fn flat_rank0_polled<E: WaitEnv>(area: &Area, env: &E, me: u32, policy: &WaitPolicy) -> Result<(), FenceError> {
    match me {
        0 => polled(area, env, PendingFence::window_fence(area, env, me, Barrier::Flat, policy)),
        _ => flat_fence(area, env, me, policy),
    }
}

/// A rank's wait environment that reports it running on CPU `cpu`: the
/// placement hints' source.
struct OnCpu<'a, E> {
    env: &'a E,
    cpu: u32,
}

impl<E: WaitEnv> WaitEnv for OnCpu<'_, E> {
    fn now_ns(&self) -> u64 {
        self.env.now_ns()
    }
    fn yield_now(&self) {
        self.env.yield_now();
    }
    fn wait(&self, word: &AtomicU32, expected: u32, deadline_ns: u64) -> WaitOutcome {
        self.env.wait(word, expected, deadline_ns)
    }
    fn wake(&self, word: &AtomicU32) {
        self.env.wake(word);
    }
    fn is_alive(&self, rank: u32) -> bool {
        self.env.is_alive(rank)
    }
    fn current_cpu(&self) -> Option<u32> {
        Some(self.cpu)
    }
}

/// The flat fence with rank `r` on CPU `r % 2`: a waiter polls while the
/// ranks beside it are blocked (the clock stands still, so it never stops
/// polling for time), and yields or sleeps while one of them could run.
fn flat_placed<E: WaitEnv>(area: &Area, env: &E, me: u32, policy: &WaitPolicy) -> Result<(), FenceError> {
    flat_fence(area, &OnCpu { env, cpu: me % 2 }, me, policy)
}

/// Ranks 0 and 1 peer-fence twice, each alone on its CPU, so that every
/// slow wait polls: polling must order the same accesses as yielding.
fn peer_twice_placed<E: Mode>() {
    model(|| {
        on_every_rank(&World::<E>::new(2, 2), |w, me| {
            let placed = OnCpu { env: &w.env, cpu: me };
            publish_then_overwrite(&w.data, me, || peer_fence(&w.area, &placed, me, 1 - me, &E::POLICY).unwrap());
        });
    });
}

/// One `#[test]` per row, `name: model;`: each runs a model under loom.
macro_rules! models {
    ($($name:ident: $model:expr;)*) => {
        $(
            #[test]
            fn $name() {
                $model;
            }
        )*
    };
}

models! {
    // Polling waits: `wait` yields and returns. With three ranks every poll is a
    // choice of which other rank runs, and the executions explode, so the
    // three-rank models use the futex below; with two there is no such choice.
    peer_fence_publishes: peer_star::<Yielding>(2);
    back_to_back_peer_fences: peer_twice::<Yielding>();
    window_fence_two_ranks: window::<Yielding>(2, 1, window_fence);
    window_fences_back_to_back_two_ranks: window::<Yielding>(2, 2, window_fence);

    // Sleeping waits: one poll, then the doorbell (see `SLEEPY`), on a futex that
    // really blocks, so a lost wake-up is a deadlock loom reports.
    peer_fence_publishes_sleeping: peer_star::<Futex>(2);
    back_to_back_peer_fences_sleeping: peer_twice::<Futex>();
    one_rank_fences_two_peers_sleeping: peer_star::<Futex>(3);
    window_fence_two_ranks_sleeping: window::<Futex>(2, 1, window_fence);
    window_fence_three_ranks_sleeping: window::<Futex>(3, 1, window_fence);

    // One-way signals, both ways of waiting.
    signals_count_and_publish: signals_count::<Yielding>();
    signals_count_and_publish_sleeping: signals_count::<Futex>();
    signal_and_peer_fence_on_one_pair: signal_then_fence::<Yielding>();
    signal_and_peer_fence_on_one_pair_sleeping: signal_then_fence::<Futex>();

    // The flat barrier (one shared arrival counter), both ways of waiting.
    flat_fences_back_to_back_two_ranks: window::<Yielding>(2, 2, flat_fence);
    flat_fences_back_to_back_two_ranks_sleeping: window::<Futex>(2, 2, flat_fence);
    flat_fence_three_ranks_sleeping: window::<Futex>(3, 1, flat_fence);

    // The ranks' CPUs known: polling while no other rank could use the CPU must
    // order the same accesses, and never keep a sleeper asleep.
    flat_fences_back_to_back_two_ranks_on_two_cpus: window::<Yielding>(2, 2, flat_placed);
    flat_fence_three_ranks_on_two_cpus_sleeping: window::<Futex>(3, 1, flat_placed);
    peer_fences_each_rank_alone_on_its_cpu: peer_twice_placed::<Yielding>();
    peer_fences_each_rank_alone_on_its_cpu_sleeping: peer_twice_placed::<Futex>();

    // Polled fences (started, then polled by an event loop) against blocking
    // partners: with the futex, the blocking side's sleep must be ended by the
    // polled side's start or poll, never lost.
    polled_peer_fences: peer_polled::<Yielding>();
    polled_peer_fences_against_a_sleeper: peer_polled::<Futex>();
    polled_waits_count_and_publish: wait_polled::<Yielding>();
    polled_waits_count_and_publish_against_a_sleeper: wait_polled::<Futex>();
    tested_waits_count_and_publish: wait_tested::<Yielding>();
    polled_window_fences_two_ranks: window::<Yielding>(2, 2, dissemination_rank0_polled);
    polled_window_fence_three_ranks_against_sleepers: window::<Futex>(3, 1, dissemination_rank0_polled);
    polled_flat_fences_two_ranks_against_a_sleeper: window::<Futex>(2, 2, flat_rank0_polled);
}

// ---------------------------------------------------------------------------
// Interleavings the models above leave out (review of the memory ordering).

/// A sleeper's `sleeping` flag taken down by a signal meant for a later
/// wait: rank 2 sleeps in a peer fence with rank 0 while rank 1 signals it.
/// Rank 1's `notify` clears the flag and rings once; rank 0's `notify` may
/// then find the flag down, so rank 2 must see rank 0's epoch when it
/// re-raises the flag (else it sleeps for ever: loom reports a deadlock).
fn wake_taken_down_by_another_signaller<E: Mode>() {
    model(|| {
        on_every_rank(&World::<E>::new(3, 3), |w, me| match me {
            0 => {
                w.data.write(0, 1);
                peer_fence(&w.area, &w.env, 0, 2, &E::POLICY).unwrap();
            }
            1 => {
                w.data.write(1, 1);
                peer_signal(&w.area, &w.env, 1, 2).unwrap();
            }
            _ => {
                peer_fence(&w.area, &w.env, 2, 0, &E::POLICY).unwrap();
                assert_eq!(w.data.read(0), 1);
                peer_wait(&w.area, &w.env, 2, 1, &E::POLICY).unwrap();
                assert_eq!(w.data.read(1), 1);
            }
        });
    });
}

/// Signals and peer fences interleaved both ways on one pair: rank 0
/// signals, fences, then waits; rank 1 waits, fences, then signals. Each
/// hand-off is carried by the call meant for it: a signal matched by a
/// fence (or the reverse) would let a read race a write.
fn signals_and_fences_interleaved<E: Mode>() {
    model(|| {
        let world = World::<E>::new(2, 2);
        on_every_rank(&world, |w, me| {
            let (area, env, data) = (&w.area, &w.env, &w.data);
            if me == 0 {
                data.write(0, 1);
                peer_signal(area, env, 0, 1).unwrap();
                peer_fence(area, env, 0, 1, &E::POLICY).unwrap();
                data.write(0, 2); // rank 1 read 1 before its fence
                peer_wait(area, env, 0, 1, &E::POLICY).unwrap();
                assert_eq!(data.read(1), 5);
            } else {
                peer_wait(area, env, 1, 0, &E::POLICY).unwrap();
                assert_eq!(data.read(0), 1);
                peer_fence(area, env, 1, 0, &E::POLICY).unwrap();
                data.write(1, 5);
                peer_signal(area, env, 1, 0).unwrap();
            }
        });
        for (w, r) in [(0, 1), (1, 0)] {
            assert_eq!(world.area.signal_slot(w, r).load(Ordering::Relaxed), 1);
            assert_eq!(world.area.taken_slot(r, w).load(Ordering::Relaxed), 1);
            assert_eq!(world.area.peer_slot(w, r).load(Ordering::Relaxed), 1);
        }
    });
}

/// Every counter of a pair starts just below its wrap: the peer-fence
/// epochs at `u64::MAX - 1` (two fences take them through `u64::MAX` to 0),
/// the signal and taken counts at `u64::MAX` (the first signal wraps), and
/// both doorbells at `u32::MAX` (a wake wraps them).
fn counters_wrap<E: Mode>() {
    model(|| {
        let world = World::<E>::new(2, 2);
        let msgs = Arc::new(Data::new(2));
        for (w, r) in [(0, 1), (1, 0)] {
            world.area.peer_slot(w, r).store(u64::MAX - 1, Ordering::Relaxed);
            world.area.signal_slot(w, r).store(u64::MAX, Ordering::Relaxed);
            world.area.taken_slot(r, w).store(u64::MAX, Ordering::Relaxed);
        }
        for r in 0..2 {
            world.area.doorbell(r).store(u32::MAX, Ordering::Relaxed);
        }
        on_every_rank(&world, move |w, me| {
            let (area, env) = (&w.area, &w.env);
            publish_then_overwrite(&w.data, me, || peer_fence(area, env, me, 1 - me, &E::POLICY).unwrap());
            two_messages(
                &msgs,
                me,
                || peer_signal(area, env, 0, 1).unwrap(),
                || peer_wait(area, env, 1, 0, &E::POLICY).unwrap(),
            );
        });
        let area = &world.area;
        assert_eq!(area.peer_slot(0, 1).load(Ordering::Relaxed), 0);
        assert_eq!(area.peer_slot(1, 0).load(Ordering::Relaxed), 0);
        assert_eq!(area.signal_slot(0, 1).load(Ordering::Relaxed), 1);
        assert_eq!(area.taken_slot(1, 0).load(Ordering::Relaxed), 1);
    });
}

/// A window fence whose round slots start at `u64::MAX`: the first fence's
/// epoch wraps to 0.
fn window_wraps<E: Mode>(n: u32) {
    model(move || {
        let world = World::<E>::new(n, n);
        for round in 0..kpccl_core::fence::rounds(n) {
            for r in 0..n {
                world.area.round_slot(round, r).store(u64::MAX, Ordering::Relaxed);
            }
        }
        on_every_rank(&world, move |w, me| {
            w.data.write(me, 7 + u64::from(me));
            window_fence(&w.area, &w.env, me, &E::POLICY).unwrap();
            for r in (0..n).filter(|&r| r != me) {
                assert_eq!(w.data.read(r), 7 + u64::from(r));
            }
        });
    });
}

/// Poisoning wakes sleepers that wait on the poisoner: ranks 1 and 2 wait
/// for a signal from rank 0, which poisons the window instead. Both waits
/// must end with rank 0's reason (a missed wake is a deadlock).
fn poison_wakes_sleepers<E: Mode>() {
    model(|| {
        on_every_rank(&World::<E>::new(3, 0), |w, me| {
            if me == 0 {
                poison(&w.area, &w.env, Poison { kind: PoisonKind::Aborted, rank: 0 });
            } else {
                let got = peer_wait(&w.area, &w.env, me, 0, &E::POLICY);
                assert_eq!(got, Err(FenceError::Aborted { rank: 0 }));
            }
        });
    });
}

/// A signal and a poison racing to one sleeper: rank 1 waits twice for
/// rank 0, which signals once and then poisons. The first wait succeeds
/// (the signal came first in rank 0's order, and may be taken even if the
/// poison is seen too); the second ends with the poison, never hangs.
fn signal_then_poison<E: Mode>() {
    model(|| {
        on_every_rank(&World::<E>::new(2, 1), |w, me| {
            if me == 0 {
                w.data.write(0, 1);
                peer_signal(&w.area, &w.env, 0, 1).unwrap();
                poison(&w.area, &w.env, Poison { kind: PoisonKind::Aborted, rank: 0 });
            } else {
                if peer_wait(&w.area, &w.env, 1, 0, &E::POLICY).is_ok() {
                    assert_eq!(w.data.read(0), 1);
                }
                let got = peer_wait(&w.area, &w.env, 1, 0, &E::POLICY);
                assert_eq!(got, Err(FenceError::Aborted { rank: 0 }));
            }
        });
    });
}

models! {
    a_wake_taken_down_by_another_signaller_is_not_lost_sleeping: wake_taken_down_by_another_signaller::<Futex>();
    signals_and_fences_interleaved_both_ways: signals_and_fences_interleaved::<Yielding>();
    signals_and_fences_interleaved_both_ways_sleeping: signals_and_fences_interleaved::<Futex>();
    counters_wrap_around: counters_wrap::<Yielding>();
    counters_wrap_around_sleeping: counters_wrap::<Futex>();
    window_fence_epochs_wrap_three_ranks_sleeping: window_wraps::<Futex>(3);
    poison_wakes_every_sleeper: poison_wakes_sleepers::<FutexStraight>();
    a_signal_then_poison_to_a_sleeper: signal_then_poison::<FutexStraight>();

    // Light wake-ups: the signaller's light fence, the sleeper's heavy one.
    back_to_back_peer_fences_light_wakes: peer_twice::<FutexLight>();
    signals_count_and_publish_light_wakes: signals_count::<FutexLight>();
    window_fence_three_ranks_light_wakes: window::<FutexLight>(3, 1, window_fence);

    // The sleeping models again, straight to the doorbell (see `STRAIGHT_TO_SLEEP`).
    back_to_back_peer_fences_straight_to_sleep: peer_twice::<FutexStraight>();
    signals_count_and_publish_straight_to_sleep: signals_count::<FutexStraight>();
    a_wake_taken_down_by_another_signaller_straight_to_sleep: wake_taken_down_by_another_signaller::<FutexStraight>();
    signals_and_fences_interleaved_straight_to_sleep: signals_and_fences_interleaved::<FutexStraight>();
    flat_fences_back_to_back_two_ranks_straight_to_sleep: window::<FutexStraight>(2, 2, flat_fence);
    window_fence_three_ranks_straight_to_sleep: window::<FutexStraight>(3, 1, window_fence);
}

// ---------------------------------------------------------------------------
// Leaving: a rank that frees or drops its window marks its wait line.

/// The pair's peer fence, as a window-wide fence of two ranks.
fn peer_of_two<E: WaitEnv>(area: &Area, env: &E, me: u32, policy: &WaitPolicy) -> Result<(), FenceError> {
    peer_fence(area, env, me, 1 - me, policy)
}

/// Leaving after the last fence fails nobody: every rank publishes, fences,
/// reads the others and leaves at once. A mark seen before the arrival it
/// follows would fail a fence that was answered (or, missed by a sleeper,
/// leave it asleep: a deadlock).
fn fence_then_leave<E: Mode>(n: u32, fence: WindowFence<E>) {
    model(move || {
        on_every_rank(&World::<E>::new(n, n), move |w, me| {
            w.data.write(me, 1);
            fence(&w.area, &w.env, me, &E::POLICY).unwrap();
            for r in (0..n).filter(|&r| r != me) {
                assert_eq!(w.data.read(r), 1);
            }
            leave(&w.area, &w.env, me);
        });
    });
}

/// A wait the awaited rank left without answering fails, naming it, and
/// never hangs: rank 1 publishes with one signal and leaves; rank 0's first
/// wait takes the signal (the mark must not hide it), its second fails, and
/// so does a fence after it. `tested`: rank 0 takes the signal by a loop of
/// tests instead, and a test after it answers "no signal", not an error.
fn wait_on_a_rank_that_left<E: Mode>(tested: bool) {
    model(move || {
        on_every_rank(&World::<E>::new(2, 1), move |w, me| {
            let (area, env) = (&w.area, &w.env);
            if me == 1 {
                w.data.write(0, 1);
                peer_signal(area, env, 1, 0).unwrap();
                leave(area, env, 1);
                return;
            }
            if tested {
                while !peer_test(area, env, 0, 1, || None).unwrap() {
                    thread::yield_now();
                }
            } else {
                peer_wait(area, env, 0, 1, &E::POLICY).unwrap();
            }
            assert_eq!(w.data.read(0), 1);
            if tested {
                assert_eq!(peer_test(area, env, 0, 1, || None), Ok(false));
            }
            let left = Err(FenceError::PeerLeft { rank: 1, waiter: 0 });
            assert_eq!(peer_wait(area, env, 0, 1, &E::POLICY), left);
            assert_eq!(peer_fence(area, env, 0, 1, &E::POLICY), left);
        });
    });
}

/// `free` as the window runs it: the mark, the teardown fence, the drop.
fn free<E: Mode>(w: &World<E>, me: u32) -> Result<(), FenceError> {
    start_freeing(&w.area, &w.env, me);
    let fenced = window_fence(&w.area, &w.env, me, &E::POLICY);
    leave(&w.area, &w.env, me);
    fenced
}

/// Rank 0 signals rank 1, then frees; rank 1 waits for the signal, then
/// frees: the freeing mark must not hide the signal sent before it, and both
/// frees succeed.
fn signal_then_free<E: Mode>() {
    signal_then::<E>(|w, me| free(w, me).unwrap());
}

/// Rank 1 frees while rank 0 waits for it pairwise (`signal`: for a signal,
/// else in a peer fence): both fail, naming rank 1 and rank 0's wait; no
/// hang (the free's fence ends with the poison).
fn free_during_a_pairwise_wait<E: Mode>(signal: bool) {
    model(move || {
        on_every_rank(&World::<E>::new(2, 1), move |w, me| {
            let left = Err(FenceError::PeerLeft { rank: 1, waiter: 0 });
            if me == 1 {
                assert_eq!(free(w, 1), left);
            } else if signal {
                assert_eq!(peer_wait(&w.area, &w.env, 0, 1, &E::POLICY), left);
            } else {
                assert_eq!(peer_fence(&w.area, &w.env, 0, 1, &E::POLICY), left);
            }
        });
    });
}

models! {
    a_signal_before_a_free_is_taken: signal_then_free::<Yielding>();
    a_signal_before_a_free_is_taken_sleeping: signal_then_free::<FutexStraight>();
    a_free_fails_a_peer_fence_it_did_not_answer: free_during_a_pairwise_wait::<Yielding>(false);
    a_free_fails_a_peer_fence_it_did_not_answer_sleeping: free_during_a_pairwise_wait::<FutexStraight>(false);
    a_free_fails_a_signal_wait_sleeping: free_during_a_pairwise_wait::<FutexStraight>(true);
    leaving_after_a_peer_fence: fence_then_leave::<Yielding>(2, peer_of_two);
    leaving_after_a_peer_fence_sleeping: fence_then_leave::<FutexStraight>(2, peer_of_two);
    leaving_after_a_window_fence_two_ranks: fence_then_leave::<Yielding>(2, window_fence);
    leaving_after_a_window_fence_three_ranks_sleeping: fence_then_leave::<Futex>(3, window_fence);
    leaving_after_a_flat_fence_three_ranks_sleeping: fence_then_leave::<Futex>(3, flat_fence);
    leaving_after_a_polled_window_fence: fence_then_leave::<Yielding>(2, dissemination_rank0_polled);
    a_wait_on_a_rank_that_left_fails: wait_on_a_rank_that_left::<Yielding>(false);
    a_wait_on_a_rank_that_left_fails_sleeping: wait_on_a_rank_that_left::<FutexStraight>(false);
    a_test_of_a_rank_that_left_answers_no_signal: wait_on_a_rank_that_left::<Yielding>(true);
}

// ---------------------------------------------------------------------------
// Paths the models above leave out: a rank that leaves or poisons instead of
// arriving at a window fence, light wake-ups against a flag another
// signaller took down, a sleeper whose heavy fence fails, polled waits on a
// rank that leaves, a timeout that must wake its partner, polled signal
// counts across their wrap, a poison racing a signal to one sleeper.

/// The window-wide fence `fence` on every rank but the last, which leaves
/// (`poisons`: poisons the window) instead of arriving: every other rank's
/// fence fails naming it, never passes and never hangs (a leave or poison
/// that a sleeper misses is a deadlock loom reports).
fn fence_without_the_last<E: Mode>(n: u32, fence: WindowFence<E>, poisons: bool) {
    model(move || {
        on_every_rank(&World::<E>::new(n, 0), move |w, me| {
            let last = n - 1;
            if me == last {
                if poisons {
                    poison(&w.area, &w.env, Poison { kind: PoisonKind::Aborted, rank: last });
                } else {
                    leave(&w.area, &w.env, last);
                }
                return;
            }
            match fence(&w.area, &w.env, me, &E::POLICY) {
                Err(FenceError::Aborted { rank }) if poisons => assert_eq!(rank, last),
                // The first waiter to find the mark poisons the window, naming itself.
                Err(FenceError::PeerLeft { rank, waiter }) if !poisons => {
                    assert_eq!(rank, last);
                    assert!(waiter < last, "waiter {waiter}");
                }
                other => panic!("rank {me}: {other:?}"),
            }
        });
    });
}

/// [`fence_without_the_last`] with rank 0 polling its fence (a polled flat
/// fence never sleeps: it must see the mark, or the poison, on a poll).
fn flat_rank0_polled_without_the_last<E: Mode>(poisons: bool) {
    fence_without_the_last::<E>(2, flat_rank0_polled, poisons);
}

/// The flat fence as a teardown: rank 0 frees the window (the freeing
/// mark, the flat fence, the drop) while ranks 1 and 2 fence once with it
/// and then leave. Nobody's fence fails: a freeing mark does not end a
/// window fence's wait, only a pairwise one's.
///
/// One rank frees, not two: with ranks 0 and 1 both freeing, loom reports a
/// lost wake-up of rank 2 that C11 forbids. Rank 1's `notify_all` takes
/// rank 2's flag down (swap reads 1, writes 0) and rings; rank 0's, late,
/// swaps a 0 over that 0; rank 2, woken, raises its flag again and fences;
/// rank 0, the last arrival, fences and reads the 0 its own swap wrote.
/// In C11 that swap sits right after rank 1's in the flag's modification
/// order (an RMW reads the store just before it), hence before the raise,
/// which the fences then make rank 0 see. loom's modification order is
/// partial and misses that, so it lets rank 0 read the 0 after the raise.
/// (With the take-down as a `compare_exchange(1, 0)`, which writes nothing
/// over a 0, loom passes the two-rank form.)
fn flat_free_three_ranks<E: Mode>() {
    model(|| {
        on_every_rank(&World::<E>::new(3, 3), |w, me| {
            w.data.write(me, 1);
            if me == 0 {
                start_freeing(&w.area, &w.env, me);
            }
            flat_fence(&w.area, &w.env, me, &E::POLICY).unwrap();
            for r in (0..3).filter(|&r| r != me) {
                assert_eq!(w.data.read(r), 1);
            }
            leave(&w.area, &w.env, me);
        });
    });
}

/// Light wake-ups whose heavy fence fails on the sleeper's side (the
/// `membarrier` call refused): the sleeper must not block, since a
/// signaller's light fence alone may miss its flag; it yields and looks
/// again. `wait` panics here, so a sleeper that blocks fails the model.
#[derive(Debug)]
struct NoHeavyFence;

impl Mode for NoHeavyFence {
    type Env = Yielding;
    const POLICY: WaitPolicy = STRAIGHT_TO_SLEEP;
    fn env() -> Yielding {
        Yielding { no_heavy_fence: true }
    }
}

/// A rank polls waits for signals from a rank that signals once and leaves:
/// the first polled wait takes the signal (the mark must not hide it), the
/// second fails naming the leaver, and keeps failing on every later poll
/// without consuming anything.
fn polled_wait_on_a_rank_that_left<E: Mode>() {
    model(|| {
        let world = World::<E>::new(2, 1);
        on_every_rank(&world, |w, me| {
            let (area, env) = (&w.area, &w.env);
            if me == 1 {
                w.data.write(0, 1);
                peer_signal(area, env, 1, 0).unwrap();
                leave(area, env, 1);
                return;
            }
            polled(area, env, PendingFence::wait(area, env, 0, 1, &E::POLICY)).unwrap();
            assert_eq!(w.data.read(0), 1);
            let left = Err(FenceError::PeerLeft { rank: 1, waiter: 0 });
            let mut second = PendingFence::wait(area, env, 0, 1, &E::POLICY).unwrap();
            loop {
                match second.poll(area, env) {
                    Poll::Ready(got) => {
                        assert_eq!(got, left);
                        break;
                    }
                    Poll::Pending => thread::yield_now(),
                }
            }
            assert_eq!(second.poll(area, env), Poll::Ready(left), "a failed wait stays failed");
        });
        assert_eq!(world.area.taken_slot(0, 1).load(Ordering::Relaxed), 1, "one signal taken");
    });
}

models! {
    a_flat_fence_a_rank_left_fails_straight_to_sleep: fence_without_the_last::<FutexStraight>(2, flat_fence, false);
    a_flat_fence_a_rank_left_fails_three_ranks_sleeping: fence_without_the_last::<Futex>(3, flat_fence, false);
    a_flat_fence_a_rank_poisoned_fails_three_ranks_sleeping: fence_without_the_last::<Futex>(3, flat_fence, true);
    a_polled_flat_fence_a_rank_left_fails: flat_rank0_polled_without_the_last::<Yielding>(false);
    a_polled_flat_fence_a_rank_poisoned_fails: flat_rank0_polled_without_the_last::<Yielding>(true);
    a_window_fence_a_rank_left_fails_three_ranks_sleeping: fence_without_the_last::<Futex>(3, window_fence, false);
    a_window_fence_a_rank_poisoned_fails_three_ranks_straight_to_sleep:
        fence_without_the_last::<FutexStraight>(3, window_fence, true);
    flat_teardown_three_ranks_one_freeing_sleeping: flat_free_three_ranks::<Futex>();
    // The sleeper raises its flag again and runs its heavy fence before each
    // sleep, so the second signaller's light fence must still find it.
    a_wake_taken_down_by_another_signaller_light_wakes: wake_taken_down_by_another_signaller::<FutexLight<true>>();
    a_free_fails_a_peer_fence_it_did_not_answer_light_wakes: free_during_a_pairwise_wait::<FutexLight>(false);
    flat_fences_back_to_back_two_ranks_light_wakes: window::<FutexLight>(2, 2, flat_fence);
    a_sleeper_whose_heavy_fence_fails_never_blocks: peer_twice::<NoHeavyFence>();
    signals_with_no_heavy_fence_count_and_publish: signals_count::<NoHeavyFence>();
    a_polled_wait_on_a_rank_that_left_fails: polled_wait_on_a_rank_that_left::<Yielding>();
    a_polled_wait_on_a_rank_that_left_fails_against_a_sleeper: polled_wait_on_a_rank_that_left::<FutexStraight>();
}

/// A futex whose timed sleeps time out at once, moving the clock to their
/// deadline (a sleep without a deadline blocks as [`Futex`]'s do): a wait
/// with a timeout gives up, and must wake the ranks that wait on it.
#[derive(Debug)]
struct TimedFutex {
    futex: Futex,
    /// The clock every rank reads (not loom's: it only moves at a timed
    /// sleep, the same way in every replay of a schedule).
    now: std::sync::Mutex<u64>,
}

impl WaitEnv for TimedFutex {
    fn now_ns(&self) -> u64 {
        *self.now.lock().unwrap()
    }
    fn yield_now(&self) {
        thread::yield_now();
    }
    fn wait(&self, word: &AtomicU32, expected: u32, deadline_ns: u64) -> WaitOutcome {
        if deadline_ns == u64::MAX {
            return self.futex.wait(word, expected, deadline_ns);
        }
        if word.load(Ordering::SeqCst) != expected {
            return WaitOutcome::Woken;
        }
        let mut now = self.now.lock().unwrap();
        *now = (*now).max(deadline_ns);
        drop(now);
        thread::yield_now();
        WaitOutcome::TimedOut
    }
    fn wake(&self, word: &AtomicU32) {
        self.futex.wake(word);
    }
    fn is_alive(&self, _rank: u32) -> bool {
        true
    }
}

impl Mode for TimedFutex {
    type Env = Self;
    const POLICY: WaitPolicy = STRAIGHT_TO_SLEEP;
    fn env() -> Self {
        TimedFutex { futex: Futex::new(), now: std::sync::Mutex::new(0) }
    }
}

/// A timeout poisons the window and wakes a sleeper that waits on the rank
/// that gave up: rank 0 waits, with a timeout, for a signal rank 1 never
/// sends; rank 1 sleeps, without one, in a wait for rank 0 (`fence`: a
/// peer fence; else a signal). Rank 0 fails with its timeout, rank 1 with
/// rank 0's reason, and neither hangs (a poison whose wake-up rank 1
/// missed would leave it asleep: loom reports a deadlock).
fn timeout_wakes_the_partner(fence: bool) {
    model(move || {
        on_every_rank(&World::<TimedFutex>::new(2, 0), move |w, me| {
            let (area, env) = (&w.area, &w.env);
            if me == 0 {
                let policy = WaitPolicy { timeout_ns: 10, ..STRAIGHT_TO_SLEEP };
                assert_eq!(peer_wait(area, env, 0, 1, &policy), Err(FenceError::Timeout { peer: 1 }));
            } else {
                let got = if fence {
                    peer_fence(area, env, 1, 0, &STRAIGHT_TO_SLEEP)
                } else {
                    peer_wait(area, env, 1, 0, &STRAIGHT_TO_SLEEP)
                };
                assert_eq!(got, Err(FenceError::GaveUp { rank: 0, waited_for: 1 }));
            }
        });
    });
}

/// Polled waits and tests across the wrap of the signal counts: both
/// counts start at `u64::MAX`, so the first signal wraps them to 0.
fn polled_signals_wrap<E: Mode>() {
    model(|| {
        let world = World::<E>::new(2, 2);
        world.area.signal_slot(0, 1).store(u64::MAX, Ordering::Relaxed);
        world.area.taken_slot(1, 0).store(u64::MAX, Ordering::Relaxed);
        on_every_rank(&world, |w, me| {
            let (area, env) = (&w.area, &w.env);
            let k = core::cell::Cell::new(0);
            two_messages(
                &w.data,
                me,
                || peer_signal(area, env, 0, 1).unwrap(),
                || {
                    if k.get() == 0 {
                        polled(area, env, PendingFence::wait(area, env, 1, 0, &E::POLICY)).unwrap();
                    } else {
                        while !peer_test(area, env, 1, 0, || None).unwrap() {
                            thread::yield_now();
                        }
                    }
                    k.set(1);
                },
            );
        });
        assert_eq!(peer_test(&world.area, &world.env, 1, 0, || None), Ok(false), "no third signal");
        assert_eq!(world.area.signal_slot(0, 1).load(Ordering::Relaxed), 1);
        assert_eq!(world.area.taken_slot(1, 0).load(Ordering::Relaxed), 1);
    });
}

models! {
    a_timeout_wakes_a_partner_sleeping_in_a_wait: timeout_wakes_the_partner(false);
    a_timeout_wakes_a_partner_sleeping_in_a_peer_fence: timeout_wakes_the_partner(true);
    polled_and_tested_signal_counts_wrap: polled_signals_wrap::<Yielding>();
}

/// A poison racing another rank's signal to a sleeper: rank 2 sleeps in a
/// wait for rank 0, which poisons the window instead of signalling, while
/// rank 1 signals rank 2 (or finds the poison first). Rank 2's doorbell
/// then holds two bumps in either order: a sleeper that reads rank 1's bump
/// after rank 0's must still see the poison (rank 1's bump continues the
/// poison's release sequence), and one that reads it before must be woken
/// by rank 0's. Rank 2's wait fails with rank 0's reason; it never hangs.
fn poison_races_a_signal_to_a_sleeper<E: Mode>() {
    model(|| {
        on_every_rank(&World::<E>::new(3, 0), |w, me| match me {
            0 => {
                poison(&w.area, &w.env, Poison { kind: PoisonKind::Aborted, rank: 0 });
            }
            1 => match peer_signal(&w.area, &w.env, 1, 2) {
                Ok(()) | Err(FenceError::Aborted { rank: 0 }) => {}
                other => panic!("rank 1: {other:?}"),
            },
            _ => {
                assert_eq!(peer_wait(&w.area, &w.env, 2, 0, &E::POLICY), Err(FenceError::Aborted { rank: 0 }));
            }
        });
    });
}

models! {
    a_poison_racing_a_signal_to_a_sleeper: poison_races_a_signal_to_a_sleeper::<FutexStraight>();
}

// ---------------------------------------------------------------------------
// Started window fences dropped unfinished, as `Window`'s `Pending` drops
// them: poisoned only if `abandoning_breaks_window` says so. The tests in
// `abandoned_fences.rs` check the steps one thread at a time; these check
// that no partner hangs and no fence that passes misses a rank's accesses.

/// What became of a started fence polled once and then dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dropped {
    /// The one poll completed it: nothing was abandoned.
    Completed,
    /// Abandoned; `poisoned` if abandoning it broke the window.
    Abandoned { poisoned: bool },
}

/// Rank `me` starts a window fence with `barrier`, polls it once and drops
/// it, poisoning the window (as `Aborted`, naming itself) if abandoning it
/// breaks the window, as `Window`'s `Pending` does.
fn poll_once_then_drop(area: &Area, env: &impl WaitEnv, me: u32, barrier: Barrier, policy: &WaitPolicy) -> Dropped {
    let mut started = PendingFence::window_fence(area, env, me, barrier, policy).unwrap();
    if let Poll::Ready(got) = started.poll(area, env) {
        got.unwrap();
        return Dropped::Completed;
    }
    let poisoned = started.abandoning_breaks_window(area);
    if poisoned {
        poison(area, env, Poison { kind: PoisonKind::Aborted, rank: me });
    }
    Dropped::Abandoned { poisoned }
}

/// Two ranks, two window fences with `barrier`; rank 0 drops its first one
/// after one poll, publishes again (word 2) and blocks in its second. Rank
/// 1 blocks in both. A fence either passes on both ranks, ordering every
/// write before it, or fails with rank 0's abandonment; it never hangs.
/// With the flat barrier, a drop judged harmless while rank 1 had not
/// arrived would let rank 0's second arrival complete the first fence
/// alone, and rank 0 read rank 1's word unordered (loom reports the race).
fn dropped_then_fenced_two_ranks<E: Mode>(barrier: Barrier) {
    let fence: WindowFence<E> = match barrier {
        Barrier::Dissemination => window_fence,
        Barrier::Flat => flat_fence,
    };
    model(move || {
        on_every_rank(&World::<E>::new(2, 3), move |w, me| {
            let (area, env, data) = (&w.area, &w.env, &w.data);
            let aborted = Err(FenceError::Aborted { rank: 0 });
            if me == 0 {
                data.write(0, 1);
                let dropped = poll_once_then_drop(area, env, 0, barrier, &E::POLICY);
                if dropped == Dropped::Completed {
                    assert_eq!(data.read(1), 1);
                }
                // Dissemination's one round is its last: dropping it never breaks the window.
                if barrier == Barrier::Dissemination {
                    assert_ne!(dropped, Dropped::Abandoned { poisoned: true });
                }
                data.write(2, 2);
                let got = fence(area, env, 0, &E::POLICY);
                if dropped == (Dropped::Abandoned { poisoned: true }) {
                    assert_eq!(got, aborted);
                } else {
                    got.unwrap();
                    assert_eq!(data.read(1), 1);
                }
            } else {
                data.write(1, 1);
                match fence(area, env, 1, &E::POLICY) {
                    Ok(()) => assert_eq!(data.read(0), 1),
                    other => {
                        assert_eq!(other, aborted);
                        return;
                    }
                }
                match fence(area, env, 1, &E::POLICY) {
                    Ok(()) => assert_eq!((data.read(0), data.read(2)), (1, 2)),
                    other => assert_eq!(other, aborted),
                }
            }
        });
    });
}

/// Three ranks, one dissemination fence: rank 0 drops its fence after one
/// poll; ranks 1 and 2 block in theirs. Dropped before sending its last
/// round, rank 0 poisons the window, and rank 2 (whose last round comes
/// from rank 0) must fail, woken by the poison; dropped in its last round,
/// it breaks nothing, and both must pass. A fence that passes has seen
/// every rank's write.
fn dropped_dissemination_three_ranks<E: Mode>() {
    model(|| {
        on_every_rank(&World::<E>::new(3, 3), |w, me| {
            let (area, env, data) = (&w.area, &w.env, &w.data);
            data.write(me, 1);
            let passed = if me == 0 {
                poll_once_then_drop(area, env, 0, Barrier::Dissemination, &E::POLICY) == Dropped::Completed
            } else {
                match window_fence(area, env, me, &E::POLICY) {
                    Ok(()) => true,
                    Err(e) => {
                        assert_eq!(e, FenceError::Aborted { rank: 0 }, "rank {me}");
                        // Only a drop before the last round poisons, and then
                        // rank 2's last round never comes.
                        assert!(poison_state(area).is_some(), "rank {me} failed without a poison");
                        false
                    }
                }
            };
            if passed {
                for r in (0..3).filter(|&r| r != me) {
                    assert_eq!(data.read(r), 1, "rank {me} passed without rank {r}'s write");
                }
            }
            if me == 2 && poison_state(area).is_some() {
                assert!(!passed, "rank 2 passed a fence whose last round rank 0 never sent");
            }
        });
    });
}

models! {
    a_dropped_dissemination_fence_then_another_two_ranks: dropped_then_fenced_two_ranks::<Yielding>(Barrier::Dissemination);
    a_dropped_dissemination_fence_then_another_two_ranks_sleeping:
        dropped_then_fenced_two_ranks::<FutexStraight>(Barrier::Dissemination);
    a_dropped_flat_fence_then_another_two_ranks: dropped_then_fenced_two_ranks::<Yielding>(Barrier::Flat);
    a_dropped_flat_fence_then_another_two_ranks_sleeping: dropped_then_fenced_two_ranks::<FutexStraight>(Barrier::Flat);
    a_dropped_dissemination_fence_three_ranks_against_sleepers: dropped_dissemination_three_ranks::<FutexStraight>();
}

/// A timeout racing the signal that would end it: rank 0 waits, with a
/// timeout, for rank 1's signal, which rank 1 does send; rank 1 then waits,
/// without one, for rank 0's answer. Either rank 0 takes the signal (seeing
/// rank 1's write) and answers, and both pass; or it times out, consuming
/// nothing, and rank 1's wait fails with rank 0's reason. Neither hangs
/// (a poison whose wake-up rank 1 missed is a deadlock loom reports).
fn timeout_racing_a_signal() {
    model(|| {
        let world = World::<TimedFutex>::new(2, 1);
        on_every_rank(&world, |w, me| {
            let (area, env) = (&w.area, &w.env);
            if me == 0 {
                let policy = WaitPolicy { timeout_ns: 10, ..STRAIGHT_TO_SLEEP };
                match peer_wait(area, env, 0, 1, &policy) {
                    Ok(()) => {
                        assert_eq!(w.data.read(0), 1);
                        peer_signal(area, env, 0, 1).unwrap();
                    }
                    Err(e) => {
                        assert_eq!(e, FenceError::Timeout { peer: 1 });
                        assert_eq!(area.taken_slot(0, 1).load(Ordering::Relaxed), 0, "a failed wait took a signal");
                    }
                }
            } else {
                w.data.write(0, 1);
                peer_signal(area, env, 1, 0).unwrap();
                match peer_wait(area, env, 1, 0, &STRAIGHT_TO_SLEEP) {
                    Ok(()) => assert_eq!(area.taken_slot(0, 1).load(Ordering::Relaxed), 1),
                    Err(e) => assert_eq!(e, FenceError::GaveUp { rank: 0, waited_for: 1 }),
                }
            }
        });
    });
}

models! {
    a_timeout_racing_a_signal_ends_both_waits_alike: timeout_racing_a_signal();
}
