//! Over several nodes, a node's fence failure crosses to the other nodes in
//! the last allgather (`Ready`): the ranks it names must be the
//! communicator's, not the node's local numbers (threads as ranks).
#![cfg(not(loom))]

use core::time::Duration;
use std::vec;
use std::vec::Vec;

use kpccl_core::error::Failure;
use kpccl_core::threads::{ThreadPlatform, run};
use kpccl_core::{
    Collective, CollectiveError, FenceError, NodeRanks, Placement, Record, WaitPolicy, WindowRequest, create_comm,
    create_window,
};
use kpccl_testkit::{FailingOob, INJECTED, Tampering, When};

const LIMIT: Duration = Duration::from_secs(if cfg!(miri) { 1 << 40 } else { 60 });

#[test]
fn a_nodes_fence_failure_names_the_communicators_ranks() {
    // Round robin: node 0 holds ranks 0 and 2, node 1 ranks 1 and 3 (local 0 and 1).
    // Rank 3's attach allgather (its 4th) fails after taking part: it poisons
    // node 1's window, so rank 1's creation fence fails, blaming rank 3.
    let p = ThreadPlatform::new(4096);
    let results = run(4, LIMIT, move |rank, oob| {
        let oob = if rank == 3 { FailingOob::new(oob, 4, When::After) } else { FailingOob::passing(oob) };
        let mut table = vec![Record::default(); 4];
        let me = Placement { node: u64::from(rank % 2), local_rank: rank / 2 };
        let info = create_comm(Collective::new(&p, &oob, rank, 4, &mut table), me)?;
        let ranks: Vec<u32> = (0..info.local_size).map(|l| l * 2 + rank % 2).collect();
        let node = NodeRanks::Some { ranks: &ranks, local_rank: info.local_rank };
        let request = WindowRequest { size: 64, ..WindowRequest::default() };
        create_window(Collective::new(&p, &oob, rank, 4, &mut table), node, &request).map(drop)
    });
    let blamed = Failure::Fence(FenceError::Aborted { rank: 3 });
    let want = [
        Err(CollectiveError::Peer { rank: 1, failure: blamed }),
        Err(CollectiveError::Local(blamed)),
        Err(CollectiveError::Peer { rank: 1, failure: blamed }),
        Err(CollectiveError::Local(Failure::Oob(kpccl_core::OobError { code: INJECTED }))),
    ];
    assert_eq!(results, want);
}

#[test]
fn a_nodes_fence_timeout_names_the_communicators_ranks() {
    let p = ThreadPlatform::new(4096);
    let results = run(4, LIMIT, move |rank, oob| {
        // Rank 3's attach allgather (its 4th) returns late, so the other rank
        // of its node times out waiting for it in the creation fence.
        let oob = Tampering::new(oob, |call, _, _: &mut [u8]| {
            if rank == 3 && call == 4 {
                std::thread::sleep(Duration::from_millis(500));
            }
        });
        let mut table = vec![Record::default(); 4];
        let me = Placement { node: u64::from(rank % 2), local_rank: rank / 2 };
        let info = create_comm(Collective::new(&p, &oob, rank, 4, &mut table), me)?;
        let ranks: Vec<u32> = (0..info.local_size).map(|l| l * 2 + rank % 2).collect();
        let node = NodeRanks::Some { ranks: &ranks, local_rank: info.local_rank };
        // Rank 1 gives up on rank 3 after 50 ms.
        let timeout_ns = if rank == 1 { 50_000_000 } else { 0 };
        let policy = WaitPolicy { timeout_ns, ..WaitPolicy::DEFAULT };
        let request = WindowRequest { size: 64, policy, ..WindowRequest::default() };
        create_window(Collective::new(&p, &oob, rank, 4, &mut table), node, &request).map(drop)
    });
    let timed_out = Failure::Fence(FenceError::Timeout { peer: 3 });
    for (r, res) in (0u32..).zip(results) {
        let want = if r == 1 {
            CollectiveError::Local(timed_out)
        } else {
            CollectiveError::Peer { rank: 1, failure: timed_out }
        };
        assert_eq!(res, Err(want), "rank {r}");
    }
}
