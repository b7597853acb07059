//! Ranks that can map different amounts (`Platform::max_window_len`: on
//! Linux the address space and `RLIMIT_AS`, which one rank may have lowered)
//! still fail window creation together, never some waiting for the others.
#![cfg(not(loom))]

use core::time::Duration;
use std::vec;

use kpccl_core::error::{ArgError, Failure};
use kpccl_core::threads::{ThreadPlatform, run};
use kpccl_core::{
    Collective, CollectiveError, LayoutError, NodeRanks, Placement, Record, WindowRequest, create_comm, create_window,
};

/// A hang shows as a panic of `run` after this long.
const LIMIT: Duration = Duration::from_secs(if cfg!(miri) { 1 << 40 } else { 20 });

/// Window creation on `nranks` ranks of 64 KiB each, on `nodes` simulated
/// nodes (round robin), where rank `small` can map only `max` bytes.
fn create(nranks: u32, nodes: u32, small: u32, max: u64) -> (ThreadPlatform, vec::Vec<Result<(), CollectiveError>>) {
    let platform = ThreadPlatform::new(4096);
    let p = platform.clone();
    let results = run(nranks, LIMIT, move |rank, oob| {
        let p = if rank == small { p.clone().with_max_window_len(max) } else { p.clone() };
        let mut table = vec![Record::default(); nranks as usize];
        let me = Placement { node: u64::from(rank % nodes), local_rank: rank / nodes };
        let info = create_comm(Collective::new(&p, &oob, rank, nranks, &mut table), me)?;
        let ranks: vec::Vec<u32> = (0..info.local_size).map(|l| l * nodes + rank % nodes).collect();
        let node = NodeRanks::Some { ranks: &ranks, local_rank: info.local_rank };
        let request = WindowRequest { size: 64 << 10, ..WindowRequest::default() };
        create_window(Collective::new(&p, &oob, rank, nranks, &mut table), node, &request).map(drop)
    });
    (platform, results)
}

fn check(nranks: u32, nodes: u32, small: u32) {
    // Room for less than the window: only rank `small` finds it too large.
    let (platform, results) = create(nranks, nodes, small, 64 << 10);
    for (r, res) in (0u32..).zip(results) {
        match res {
            Err(CollectiveError::Layout(LayoutError::TooLarge { max, .. })) if r == small => {
                assert_eq!(max, 64 << 10, "what rank {small} can map");
            }
            Err(CollectiveError::Peer { rank, failure }) if r != small && rank == small => {
                assert_eq!(failure, Failure::Argument(ArgError::Layout(LayoutError::Unmappable { max: 64 << 10 })));
            }
            other => panic!("rank {r} of {nranks} on {nodes} node(s): {other:?}"),
        }
    }
    assert!(platform.leaked().is_empty(), "names left behind: {:?}", platform.leaked());
}

#[test]
fn a_rank_that_cannot_map_the_window_fails_every_rank() {
    check(3, 1, 1);
    check(3, 1, 0);
}

#[test]
fn a_rank_that_cannot_map_its_nodes_window_fails_every_node() {
    // Rank 3 asks no more than the others, so it is not the rank to blame:
    // it must still tell every rank that it cannot map the window.
    check(4, 2, 3);
    check(4, 2, 2);
}
