//! What ends a wait besides its slot, looked at from one thread with a
//! scripted clock: a fence's timeout counts from its first slow wait, a long
//! yield phase still sees the poison, and a test of a peer that left and
//! then ended is no error.
#![cfg(not(loom))]

use core::cell::Cell;

use kpccl_core::WaitOutcome;
use kpccl_core::error::FenceError;
use kpccl_core::fence::{
    Poison, PoisonKind, SyncArea, WaitEnv, WaitPolicy, leave, peer_fence, peer_test, peer_wait, poison, poison_state,
    window_fence,
};
use kpccl_core::sync::AtomicU32;
use kpccl_core::sync::Ordering::Release;
use kpccl_testkit::ManualEnv;
use kpccl_testkit::heap::HeapArea;

const MS: u64 = 1_000_000;

/// A clock that moves `step_ns` at every yield and sleep, which then runs
/// `at_step` (a peer acting meanwhile); rank `dead` is not alive. More than
/// `max_steps` steps fail the test: the wait would not have ended.
struct Scripted<'a> {
    now: Cell<u64>,
    steps: Cell<u32>,
    step_ns: u64,
    max_steps: u32,
    dead: Option<u32>,
    at_step: &'a dyn Fn(u64),
}

impl<'a> Scripted<'a> {
    fn new(step_ns: u64, at_step: &'a dyn Fn(u64)) -> Self {
        Self { now: Cell::new(0), steps: Cell::new(0), step_ns, max_steps: 100_000, dead: None, at_step }
    }

    /// A millisecond a step, nobody acting meanwhile, and rank `dead` not alive.
    fn with_dead(dead: u32) -> Scripted<'static> {
        Scripted { dead: Some(dead), ..Scripted::new(MS, &|_| {}) }
    }

    fn step(&self) {
        let steps = self.steps.get() + 1;
        assert!(steps <= self.max_steps, "the wait did not end after {} yields and sleeps", self.max_steps);
        self.steps.set(steps);
        self.now.set(self.now.get() + self.step_ns);
        (self.at_step)(self.now.get());
    }
}

impl WaitEnv for Scripted<'_> {
    fn now_ns(&self) -> u64 {
        self.now.get()
    }
    fn yield_now(&self) {
        self.step();
    }
    fn wait(&self, _word: &AtomicU32, _expected: u32, _deadline_ns: u64) -> WaitOutcome {
        self.step();
        WaitOutcome::Woken
    }
    fn wake(&self, _word: &AtomicU32) {}
    fn is_alive(&self, rank: u32) -> bool {
        self.dead != Some(rank)
    }
}

#[test]
fn a_window_fence_times_out_once_for_all_its_rounds() {
    // Four ranks, two rounds: rank 0 hears from rank 3 in round 0 (late, at
    // 800 ms) and never from rank 2 in round 1.
    let area = HeapArea::new(4);
    let late_arrival = |now: u64| {
        if now == 800 * MS {
            area.round_slot(0, 0).store(1, Release);
        }
    };
    let env = Scripted::new(MS, &late_arrival);
    let policy = WaitPolicy { spins: 0, timeout_ns: 1_000 * MS, ..WaitPolicy::DEFAULT };
    assert_eq!(window_fence(&area, &env, 0, &policy), Err(FenceError::Timeout { peer: 2 }));
    let ended = env.now_ns();
    assert!(ended <= 1_001 * MS, "gave up {} ms after it began, not one timeout (1000 ms)", ended / MS);
}

#[test]
fn a_long_yield_phase_sees_the_poison() {
    let area = HeapArea::new(2);
    let yields = Cell::new(0);
    let peer_gives_up = |_: u64| {
        yields.set(yields.get() + 1);
        if yields.get() == 20 {
            poison(&area, &ManualEnv::default(), Poison { kind: PoisonKind::Aborted, rank: 1 });
        }
    };
    let mut env = Scripted::new(0, &peer_gives_up); // the clock stands: yielding never ends by time
    env.max_steps = 1_000;
    let policy = WaitPolicy { spins: 0, signal_spins: 0, yield_ns: u64::MAX, ..WaitPolicy::DEFAULT };
    assert_eq!(peer_wait(&area, &env, 0, 1, &policy), Err(FenceError::Aborted { rank: 1 }));
}

#[test]
fn testing_a_peer_that_left_then_ended_is_no_error() {
    let area = HeapArea::new(3);
    let env = Scripted::with_dead(1);
    leave(&area, &env, 1);
    // Every test looks at the peer's liveness.
    assert_eq!(peer_test(&area, &env, 0, 1, || Some(8)), Ok(false));
    assert_eq!(peer_test(&area, &env, 0, 1, || Some(9)), Ok(false));
    assert_eq!(poison_state(&area), None, "nobody else's calls fail");
}

#[test]
fn testing_a_dead_peer_that_never_left_fails() {
    let area = HeapArea::new(3);
    let env = Scripted::with_dead(1);
    assert_eq!(peer_test(&area, &env, 0, 1, || Some(1)), Err(FenceError::PeerDead { rank: 1 }));
    assert_eq!(poison_state(&area).map(|p| p.kind), Some(PoisonKind::Dead));
}

/// `wait` on a thread, which must end within 20 s.
fn ends(wait: impl FnOnce() -> Result<(), FenceError> + Send + 'static) -> Result<(), FenceError> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(wait()));
    rx.recv_timeout(core::time::Duration::from_secs(20)).expect("the wait still spins after 20 s")
}

#[test]
#[cfg_attr(miri, ignore = "65 536 spins between checks take minutes interpreted")]
fn a_spin_count_near_the_maximum_still_ends_the_wait() {
    // "Always poll" (`KPCCL_SPIN`, `spin_count` up to u32::MAX) spun about
    // 4e9 times before it looked at the timeout, the poison or the partner's
    // death: minutes, during which a dead partner went unnoticed.
    let always = WaitPolicy { spins: u32::MAX, signal_spins: u32::MAX, ..WaitPolicy::DEFAULT };
    let timed_out = ends(move || {
        let area = HeapArea::new(2);
        let env = ManualEnv::ticking(MS);
        peer_fence(&area, &env, 0, 1, &WaitPolicy { timeout_ns: 100 * MS, ..always })
    });
    assert_eq!(timed_out, Err(FenceError::Timeout { peer: 1 }));
    let dead = ends(move || {
        let area = HeapArea::new(2);
        let env = ManualEnv::ticking(MS).with_dead(1);
        peer_wait(&area, &env, 0, 1, &always)
    });
    assert_eq!(dead, Err(FenceError::PeerDead { rank: 1 }));
    let poisoned = ends(move || {
        let area = HeapArea::new(2);
        poison(&area, &ManualEnv::default(), Poison { kind: PoisonKind::Aborted, rank: 1 });
        peer_fence(&area, &ManualEnv::ticking(MS), 0, 1, &always)
    });
    assert_eq!(poisoned, Err(FenceError::Aborted { rank: 1 }));
}
