//! A rank whose attach failed, and whose own record of that failure the
//! out-of-band layer lost (one byte of it changed in every rank's table),
//! fails with its own attach error: it panicked ("a rank without a window
//! reported a failure").
#![cfg(not(loom))] // the window API is compiled out under loom

use core::time::Duration;
use std::vec;

use kpccl_core::error::AttachError;
use kpccl_core::threads::{ThreadPlatform, run};
use kpccl_core::{Collective, CollectiveError, Failure, NodeRanks, Record, WaitPolicy, WindowRequest, create_window};
use kpccl_testkit::Tampering;

/// A hang shows as a panic of `run` after this long.
const LIMIT: Duration = Duration::from_secs(20);
/// Where a record keeps its segment name, and the kind of its failure (its
/// fixed `repr(C)` layout; were it to move, no attach would fail and the
/// test would fail, not pass).
const NAME: usize = 96;
const FAILURE_KIND: usize = 20;
/// The kind of an attach failure.
const ATTACH: u8 = 4;

#[test]
fn a_rank_whose_failure_the_table_lost_fails_without_panicking() {
    let platform = ThreadPlatform::new(4096);
    let p = platform.clone();
    let results = run(2, LIMIT, move |rank, oob| {
        // Window creation's allgathers (1: requests, 2: the creator's name, 3:
        // attach results): the second loses the creator's name, the third rank
        // 1's failure.
        let oob = Tampering::new(oob, |call, len, recv: &mut [u8]| match call {
            2 => recv[NAME] = 0,
            3 => recv[len + FAILURE_KIND] ^= ATTACH,
            _ => {}
        });
        let mut table = vec![Record::default(); 2];
        // Rank 0 waits in creation's fence for rank 1, which never comes.
        let policy = WaitPolicy { timeout_ns: 500_000_000, ..WaitPolicy::DEFAULT };
        let request = WindowRequest { size: 64, policy, ..WindowRequest::default() };
        create_window(Collective::new(&p, &oob, rank, 2, &mut table), NodeRanks::All, &request).map(drop)
    });
    assert_eq!(results[1], Err(CollectiveError::Local(Failure::Attach(AttachError::Name { rank: 0 }))));
    assert!(results[0].is_err(), "rank 0 made a window rank 1 is not in: {results:?}");
    assert!(platform.leaked().is_empty(), "names left behind: {:?}", platform.leaked());
}
