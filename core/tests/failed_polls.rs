//! A polled fence or wait that failed stays failed: polling it again gives
//! the same error, and never consumes a signal that a peer stored before it
//! saw the window poisoned.
#![cfg(not(loom))]

use core::task::Poll;

use kpccl_core::error::FenceError;
use kpccl_core::fence::{PendingFence, WaitPolicy};
use kpccl_testkit::ManualEnv;
use kpccl_testkit::heap::HeapArea;

#[test]
fn a_timed_out_wait_stays_failed() {
    let (area, clock) = (HeapArea::new(2), ManualEnv::default());
    let policy = WaitPolicy { timeout_ns: 1_000, ..WaitPolicy::DEFAULT };
    let mut wait = PendingFence::wait(&area, &clock, 0, 1, &policy).unwrap();
    assert!(wait.poll(&area, &clock).is_pending());
    clock.set_now(2_000);
    let timed_out = Poll::Ready(Err(FenceError::Timeout { peer: 1 }));
    assert_eq!(wait.poll(&area, &clock), timed_out);
    // Not the poison its timeout left (nor, had a signal come, a success).
    assert_eq!(wait.poll(&area, &clock), timed_out, "a failed wait fails again, alike");
    assert!(!wait.is_done());
}
