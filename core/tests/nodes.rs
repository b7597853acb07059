//! A communicator over several nodes, with threads as ranks: ranks grouped
//! by the node they name, a window per node (each node's rank 0 creates its
//! own segment), fences inside a node, and one node's failure failing every
//! node. Runs under Miri too.
#![cfg(not(loom))] // the window API is compiled out under loom

mod support;

use core::time::Duration;
use std::vec;
use std::vec::Vec;

use kpccl_core::error::{ArgError, Failure};
use kpccl_core::threads::{ThreadPlatform, run};
use kpccl_core::{
    Collective, CollectiveError, LayoutError, LayoutMode, NodeInfo, NodeRanks, Placement, Platform, Record, WaitPolicy,
    WindowRequest, create_comm, create_window,
};
use kpccl_testkit::Tampering;
use support::{check, fill};

const LIMIT: Duration = Duration::from_secs(if cfg!(miri) { 1 << 40 } else { 120 });

fn request(size: u64) -> WindowRequest {
    let policy =
        WaitPolicy { spins: 16, signal_spins: 16, yields: 16, yield_ns: 0, timeout_ns: 0, liveness_ns: 10_000_000 };
    WindowRequest { size, mode: LayoutMode::Contiguous, align: 64, policy, ..WindowRequest::default() }
}

/// Ranks placed round-robin over `nodes` nodes (rank r on node r % nodes).
fn round_robin(rank: u32, nodes: u32) -> Placement {
    Placement { node: 100 + u64::from(rank % nodes), local_rank: rank / nodes }
}

#[test]
fn every_node_gets_its_own_window() {
    let cases: &[(u32, u32)] = if cfg!(miri) { &[(4, 2)] } else { &[(6, 2), (6, 3), (4, 4), (5, 2)] };
    for &(n, nodes) in cases {
        let platform = ThreadPlatform::new(4096);
        let p = platform.clone();
        let results = run(n, LIMIT, move |rank, oob| {
            let mut table = vec![Record::default(); n as usize];
            let info = create_comm(Collective::new(&p, &oob, rank, n, &mut table), round_robin(rank, nodes)).unwrap();
            let node = rank % nodes;
            let size = n.div_ceil(nodes) - u32::from(node >= n % nodes && n % nodes != 0);
            // Threads tell no affinity: the node has what each may use.
            let cpus = p.cpu_count();
            assert_eq!(info, NodeInfo { nnodes: nodes, node, local_rank: rank / nodes, local_size: size, cpus });
            let ranks: Vec<u32> = (0..size).map(|l| l * nodes + node).collect();
            let group = NodeRanks::Some { ranks: &ranks, local_rank: info.local_rank };
            let w =
                create_window(Collective::new(&p, &oob, rank, n, &mut table), group, &request(64 + u64::from(rank)))
                    .unwrap();
            assert_eq!((w.rank(), w.nranks()), (info.local_rank, size));
            for l in 0..size {
                assert_eq!(w.segment(l).unwrap().len as u64, 64 + u64::from(ranks[l as usize]));
            }
            let me = w.segment(w.rank()).unwrap();
            for round in 0..if cfg!(miri) { 1 } else { 3 } {
                fill(&me, rank, round);
                w.fence().unwrap();
                for l in (0..size).filter(|&l| l != w.rank()) {
                    check(&w.segment(l).unwrap(), ranks[l as usize], round).unwrap();
                }
                w.fence().unwrap();
            }
            w.free().unwrap();
        });
        assert_eq!(results.len(), n as usize);
        assert_eq!(platform.created(), nodes as usize, "one segment per node");
        assert!(platform.leaked().is_empty(), "names left behind: {:?}", platform.leaked());
    }
}

#[test]
fn bad_local_ranks_fail_every_rank() {
    // Two nodes of two, each rank giving its global rank as local rank (the
    // reference example's call): node 1's ranks are 2 and 3, not 0 and 1.
    let platform = ThreadPlatform::new(4096);
    let results = run(4, LIMIT, move |rank, oob| {
        let mut table = vec![Record::default(); 4];
        let me = Placement { node: u64::from(rank / 2), local_rank: rank };
        create_comm(Collective::new(&platform, &oob, rank, 4, &mut table), me)
    });
    let want = CollectiveError::LocalRank { rank: 2, local_rank: 2, node: 1, local_size: 2, clash: None };
    assert!(results.iter().all(|r| *r == Err(want)), "{results:?}");
}

/// Four ranks on two nodes (rank r on node r % 2) make a communicator, then
/// a window whose request, and local verdict, `ask` gives each rank.
fn on_two_nodes(
    platform: &ThreadPlatform,
    ask: impl Fn(u32) -> (WindowRequest, Result<(), ArgError>) + Send + Sync + 'static,
) -> Vec<Result<(), CollectiveError>> {
    let p = platform.clone();
    run(4, LIMIT, move |rank, oob| {
        let mut table = vec![Record::default(); 4];
        let info = create_comm(Collective::new(&p, &oob, rank, 4, &mut table), round_robin(rank, 2))?;
        let ranks = [rank % 2, rank % 2 + 2];
        let group = NodeRanks::Some { ranks: &ranks, local_rank: info.local_rank };
        let (request, local) = ask(rank);
        create_window(Collective::new(&p, &oob, rank, 4, &mut table).local(local), group, &request).map(drop)
    })
}

#[test]
fn one_nodes_failure_fails_every_node() {
    let platform = ThreadPlatform::new(4096);
    let results = on_two_nodes(&platform, |rank| (request(64), if rank == 3 { Err(ArgError::Caller) } else { Ok(()) }));
    let failure = Failure::Argument(ArgError::Caller);
    for (r, res) in (0u32..).zip(results) {
        let want = if r == 3 { CollectiveError::Local(failure) } else { CollectiveError::Peer { rank: 3, failure } };
        assert_eq!(res, Err(want), "rank {r}");
    }
    assert_eq!(platform.created(), 0);
}

/// A window too large for one node's segment fails every node: that node's
/// ranks name the rank that asked, and the other nodes are told by it.
#[test]
fn one_nodes_oversized_window_fails_every_node() {
    let platform = ThreadPlatform::new(4096);
    let results =
        on_two_nodes(&platform, |rank| (request(if rank == 3 { i64::MAX.unsigned_abs() } else { 64 }), Ok(())));
    for (r, res) in (0u32..).zip(results) {
        match res {
            // Node 1 (ranks 1 and 3) laid the window out itself.
            Err(CollectiveError::Layout(LayoutError::TooLarge { rank: 3, .. })) if r % 2 == 1 => {}
            Err(CollectiveError::Peer {
                rank: 3,
                failure: Failure::Argument(ArgError::Layout(LayoutError::Unmappable { .. })),
            }) if r % 2 == 0 => {}
            other => panic!("rank {r}: {other:?}"),
        }
    }
    assert!(platform.leaked().is_empty(), "names left behind: {:?}", platform.leaked());
}

/// The creator of node 1 (rank 1) sends a segment name that is empty or
/// lacks its NUL: every rank of every node fails naming it, and no node
/// waits for the other in an allgather the other never makes.
#[test]
fn a_bad_segment_name_fails_every_node() {
    for name in [&[0u8; 64], &[b'x'; 64]] {
        let platform = ThreadPlatform::new(4096);
        let p = platform.clone();
        // A hang shows as a panic of `run` after this long.
        let limit = if cfg!(miri) { LIMIT } else { Duration::from_secs(20) };
        let results = run(4, limit, move |rank, oob| {
            // Calls: 1 communicator, 2 requests, 3 segment names, where rank
            // 1's name is replaced by `name` (a name field's length).
            let oob = Tampering::new(oob, |call, len, recv: &mut [u8]| {
                if call == 3 {
                    let record = &mut recv[len..][..len];
                    let at =
                        record.windows(6).position(|w| w == b"kpccl-").expect("the creator's record names its segment");
                    record[at..][..name.len()].copy_from_slice(name);
                }
            });
            let mut table = vec![Record::default(); 4];
            let info = create_comm(Collective::new(&p, &oob, rank, 4, &mut table), round_robin(rank, 2))?;
            let ranks = [rank % 2, rank % 2 + 2];
            let group = NodeRanks::Some { ranks: &ranks, local_rank: info.local_rank };
            create_window(Collective::new(&p, &oob, rank, 4, &mut table), group, &request(64)).map(drop)
        });
        let failure = Failure::Attach(kpccl_core::error::AttachError::Name { rank: 1 });
        for (r, res) in (0u32..).zip(results) {
            let want =
                if r == 3 { CollectiveError::Local(failure) } else { CollectiveError::Peer { rank: 3, failure } };
            assert_eq!(res, Err(want), "rank {r}, name {:?}", name[0]);
        }
        let text = CollectiveError::<Failure>::Peer { rank: 3, failure }.to_string();
        assert!(text.starts_with("rank 3 failed: rank 1 sent no usable way into"), "{text}");
        assert!(platform.leaked().is_empty(), "names left behind: {:?}", platform.leaked());
    }
}
