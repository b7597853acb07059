//! A rank whose attach failed, and whose own record of that failure the
//! out-of-band layer lost (one byte of it changed in every rank's table),
//! fails with its own attach error: it panicked ("a rank without a window
//! reported a failure"), and over several nodes it fails the others too.
#![cfg(not(loom))] // the window API is compiled out under loom

use core::time::Duration;
use std::vec;

use kpccl_core::error::AttachError;
use kpccl_core::threads::{ThreadPlatform, run};
use kpccl_core::{
    Collective, CollectiveError, Failure, FenceError, NodeRanks, Placement, Record, WaitPolicy, WindowRequest,
    create_comm, create_window,
};
use kpccl_testkit::Tampering;

/// A hang shows as a panic of `run` after this long.
const LIMIT: Duration = Duration::from_secs(if cfg!(miri) { 1 << 40 } else { 20 });
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

/// Over two nodes: the rank whose failure the table lost returned it without
/// making creation's last allgather (`Stage::Ready`), and the other node
/// waited there for ever; it now makes that allgather with its failure, so
/// every rank fails (its node-mate at its fence timeout: it never comes to
/// the fence).
#[test]
fn a_rank_whose_failure_the_table_lost_fails_the_other_nodes() {
    let platform = ThreadPlatform::new(4096);
    let p = platform.clone();
    let results = run(4, LIMIT, move |rank, oob| {
        // Rank r on node r % 2: node 1 is ranks 1 (its creator) and 3.
        let mut table = vec![Record::default(); 4];
        let me = Placement { node: u64::from(rank % 2), local_rank: rank / 2 };
        let info = create_comm(Collective::new(&p, &oob, rank, 4, &mut table), me).unwrap();
        // Window creation's allgathers (1: requests, 2: the creators' names,
        // 3: attach results, 4: fence results): the second loses rank 1's
        // name, the third rank 3's failure to attach without it.
        let oob = Tampering::new(&oob, |call, len, recv: &mut [u8]| match call {
            2 => recv[len + NAME] = 0,
            3 => recv[3 * len + FAILURE_KIND] ^= ATTACH,
            _ => {}
        });
        let policy = WaitPolicy { timeout_ns: 500_000_000, ..WaitPolicy::DEFAULT };
        let request = WindowRequest { size: 64, policy, ..WindowRequest::default() };
        let ranks = [rank % 2, rank % 2 + 2];
        let node = NodeRanks::Some { ranks: &ranks, local_rank: info.local_rank };
        create_window(Collective::new(&p, &oob, rank, 4, &mut table), node, &request).map(drop)
    });
    assert_eq!(results[3], Err(CollectiveError::Local(Failure::Attach(AttachError::Name { rank: 1 }))));
    // Rank 1 gave up on rank 3 in its node's fence; the others name it.
    let timeout = Failure::Fence(FenceError::Timeout { peer: 3 });
    assert_eq!(results[1], Err(CollectiveError::Local(timeout)));
    for r in [0, 2] {
        assert_eq!(results[r], Err(CollectiveError::Peer { rank: 1, failure: timeout }), "rank {r}");
    }
    assert!(platform.leaked().is_empty(), "names left behind: {:?}", platform.leaked());
}
