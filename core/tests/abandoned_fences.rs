//! A started window fence dropped unfinished, then the rank's next fence:
//! the next fence must still wait for every rank (found in review).
#![cfg(not(loom))]

use kpccl_core::WaitOutcome;
use kpccl_core::fence::{Barrier, PendingFence, WaitEnv, WaitPolicy};
use kpccl_core::sync::AtomicU32;
use kpccl_testkit::heap::HeapArea;

struct Env;

impl WaitEnv for Env {
    fn now_ns(&self) -> u64 {
        0
    }
    fn yield_now(&self) {}
    fn wait(&self, _word: &AtomicU32, _expected: u32, _deadline_ns: u64) -> WaitOutcome {
        WaitOutcome::Woken
    }
    fn wake(&self, _word: &AtomicU32) {}
    fn is_alive(&self, _rank: u32) -> bool {
        true
    }
}

/// Rank 0 starts a flat fence and drops it unfinished (`strands_peers` says
/// that is harmless, so a `Window` does not poison), then starts its next
/// fence: its second arrival is counted in the first fence, so rank 1's
/// arrival completes that fence although rank 2 never arrived.
#[test]
#[ignore = "fails: an abandoned flat fence lets the rank arrive twice at one fence (review finding)"]
fn an_abandoned_flat_fence_does_not_count_its_rank_twice() {
    let (area, env, policy) = (HeapArea::new(3), Env, WaitPolicy::DEFAULT);
    let first = PendingFence::window_fence(&area, &env, 0, Barrier::Flat, &policy).unwrap();
    assert!(!first.is_done());
    // Abandoned: a `Window`'s `Pending` dropped here poisons only if this
    // is true, and it is not.
    assert!(!first.strands_peers(&area), "abandoning it does not poison the window");
    let _again = PendingFence::window_fence(&area, &env, 0, Barrier::Flat, &policy).unwrap();
    let mut one = PendingFence::window_fence(&area, &env, 1, Barrier::Flat, &policy).unwrap();
    assert!(one.poll(&area, &env).is_pending(), "rank 1 passed the window fence before rank 2 arrived");
}

/// The same with the dissemination barrier, abandoned in its last round
/// (the one case `strands_peers` lets go): the next fence still waits.
#[test]
fn an_abandoned_dissemination_fence_is_harmless() {
    let (area, env, policy) = (HeapArea::new(2), Env, WaitPolicy::DEFAULT);
    let first = PendingFence::window_fence(&area, &env, 0, Barrier::Dissemination, &policy).unwrap();
    assert!(!first.is_done());
    assert!(!first.strands_peers(&area), "abandoned without poisoning");
    let mut again = PendingFence::window_fence(&area, &env, 0, Barrier::Dissemination, &policy).unwrap();
    let mut one = PendingFence::window_fence(&area, &env, 1, Barrier::Dissemination, &policy).unwrap();
    assert!(one.poll(&area, &env).is_ready(), "rank 1 completes the first fence");
    assert!(again.poll(&area, &env).is_pending(), "rank 0's second fence waits for rank 1's second");
}
