//! A started window fence dropped unfinished, then the rank's next fence:
//! either that next fence still waits for every rank, or abandoning the
//! first one says that the window must be poisoned.
#![cfg(not(loom))]

use kpccl_core::fence::{Barrier, PendingFence, WaitPolicy};
use kpccl_testkit::ManualEnv;
use kpccl_testkit::heap::HeapArea;

/// Rank 0 starts a flat fence and abandons it after arriving. Its next
/// arrival would be counted in the same fence (the counter names a fence by
/// arrivals alone), so that rank 1's arrival would complete it although
/// rank 2 never came: abandoning it breaks the window, which a `Window`
/// then poisons.
#[test]
fn an_abandoned_flat_fence_breaks_the_window() {
    let (area, env, policy) = (HeapArea::new(3), ManualEnv::default(), WaitPolicy::DEFAULT);
    let first = PendingFence::window_fence(&area, &env, 0, Barrier::Flat, &policy).unwrap();
    assert!(!first.is_done());
    assert!(first.abandoning_breaks_window(&area), "abandoning an arrival must poison the window");
    // What the poison prevents: the rank arriving again at the same fence.
    let _again = PendingFence::window_fence(&area, &env, 0, Barrier::Flat, &policy).unwrap();
    let mut one = PendingFence::window_fence(&area, &env, 1, Barrier::Flat, &policy).unwrap();
    assert!(one.poll(&area, &env).is_ready(), "the double arrival completes the fence without rank 2");
}

/// The last arrival at a flat fence completes it at once: nothing to abandon.
#[test]
fn a_completed_flat_fence_is_not_abandoned() {
    let (area, env, policy) = (HeapArea::new(2), ManualEnv::default(), WaitPolicy::DEFAULT);
    let _first = PendingFence::window_fence(&area, &env, 0, Barrier::Flat, &policy).unwrap();
    let last = PendingFence::window_fence(&area, &env, 1, Barrier::Flat, &policy).unwrap();
    assert!(last.is_done() && !last.abandoning_breaks_window(&area));
}

/// The same with the dissemination barrier, abandoned in its last round
/// (the one case `abandoning_breaks_window` lets go): the next fence still waits.
#[test]
fn an_abandoned_dissemination_fence_is_harmless() {
    let (area, env, policy) = (HeapArea::new(2), ManualEnv::default(), WaitPolicy::DEFAULT);
    let first = PendingFence::window_fence(&area, &env, 0, Barrier::Dissemination, &policy).unwrap();
    assert!(!first.is_done());
    assert!(!first.abandoning_breaks_window(&area), "abandoned without poisoning");
    let mut again = PendingFence::window_fence(&area, &env, 0, Barrier::Dissemination, &policy).unwrap();
    let mut one = PendingFence::window_fence(&area, &env, 1, Barrier::Dissemination, &policy).unwrap();
    assert!(one.poll(&area, &env).is_ready(), "rank 1 completes the first fence");
    assert!(again.poll(&area, &env).is_pending(), "rank 0's second fence waits for rank 1's second");
}

/// Rank 0 starts a flat fence; rank 1's arrival completes it before rank 0
/// polls again. Dropping rank 0's started fence then breaks nothing: its
/// next arrival counts in the next fence (the counter reached this one's
/// end, and never goes back), so the window must not be poisoned for it
/// (an executor's timeout that drops a fence a moment after it completed).
#[test]
fn a_flat_fence_completed_by_the_others_is_abandoned_harmlessly() {
    let (area, env, policy) = (HeapArea::new(2), ManualEnv::default(), WaitPolicy::DEFAULT);
    let first = PendingFence::window_fence(&area, &env, 0, Barrier::Flat, &policy).unwrap();
    assert!(first.abandoning_breaks_window(&area), "rank 1 has not arrived yet");
    let last = PendingFence::window_fence(&area, &env, 1, Barrier::Flat, &policy).unwrap();
    assert!(last.is_done());
    assert!(!first.abandoning_breaks_window(&area), "every rank arrived: the fence is complete");
    // The next fence waits for both ranks again.
    let mut again = PendingFence::window_fence(&area, &env, 0, Barrier::Flat, &policy).unwrap();
    assert!(again.poll(&area, &env).is_pending(), "rank 0's second fence waits for rank 1's second");
    let one = PendingFence::window_fence(&area, &env, 1, Barrier::Flat, &policy).unwrap();
    assert!(one.is_done() && again.poll(&area, &env).is_ready());
}
