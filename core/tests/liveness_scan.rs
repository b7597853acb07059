//! How a wait looks for dead ranks besides the one it awaits: a slice of
//! the others at each liveness check, so that at any rank count a check
//! costs a few `/proc` reads, and every rank is still seen within a bounded
//! number of checks (driven through `peer_test`, whose caller numbers the
//! checks).
#![cfg(not(loom))]

use core::cell::Cell;

use kpccl_core::WaitOutcome;
use kpccl_core::error::FenceError;
use kpccl_core::fence::{WaitEnv, peer_test};
use kpccl_core::sync::AtomicU32;
use kpccl_testkit::heap::HeapArea;

/// Every rank alive but `dead`; counts the liveness looks.
struct Census {
    dead: u32,
    looks: Cell<u32>,
}

impl WaitEnv for Census {
    fn now_ns(&self) -> u64 {
        0
    }
    fn yield_now(&self) {}
    fn wait(&self, _word: &AtomicU32, _expected: u32, _deadline_ns: u64) -> WaitOutcome {
        WaitOutcome::Woken
    }
    fn wake(&self, _word: &AtomicU32) {}
    fn is_alive(&self, rank: u32) -> bool {
        self.looks.set(self.looks.get() + 1);
        rank != self.dead
    }
}

/// The check (numbered from 1) at which rank `me` of `n`, testing for a
/// signal of rank 1, finds `dead` dead, and the most liveness looks one
/// check made.
fn found_at(n: u32, me: u32, dead: u32) -> (u32, u32) {
    // A fresh window each time: the finder poisons it.
    let (area, env) = (HeapArea::new(n), Census { dead, looks: Cell::new(0) });
    let mut most = 0;
    for check in 1..=n.max(8) {
        env.looks.set(0);
        let outcome = peer_test(&area, &env, me, 1, || Some(check));
        most = most.max(env.looks.get());
        match outcome {
            Ok(false) => {}
            Err(FenceError::PeerDead { rank }) if rank == dead => return (check, most),
            other => panic!("check {check}: {other:?}"),
        }
    }
    panic!("{n} checks of rank {me} never found rank {dead} dead")
}

#[test]
fn up_to_64_ranks_every_rank_is_seen_within_eight_checks() {
    for n in [3, 8, 13, 64] {
        for me in [0, 2] {
            for dead in [2, n / 2, n - 1].into_iter().filter(|&d| d != me && d > 1) {
                let (check, most) = found_at(n, me, dead);
                assert!(check <= 8, "{n} ranks: rank {me} found rank {dead} dead at check {check}");
                assert!(most <= 9, "{n} ranks: one check looked at {most} ranks");
            }
        }
    }
}

#[test]
#[cfg_attr(miri, ignore = "a sync area of 300 ranks takes minutes to make interpreted")]
fn many_ranks_cost_a_few_looks_a_check_and_are_all_seen() {
    // Before, every eighth check looked at every rank: 299 `/proc` reads
    // per waiter, a million a scan at 1024 ranks.
    let n = 300;
    for dead in [2, 150, 299] {
        let (check, most) = found_at(n, 0, dead);
        assert!(most <= 9, "one check looked at {most} ranks");
        assert!(check <= n.div_ceil(8), "rank {dead} found dead only at check {check}");
    }
    // The waiters start their slices at their own places: at the first
    // check, some waiter near every rank looks at it.
    let first = (0..n).filter(|&me| me != 1 && me != 150).find(|&me| found_at(n, me, 150).0 == 1);
    assert!(first.is_some(), "no waiter looked at rank 150 at its first check");
}
