//! Communicator creation's node checks at the most ranks a communicator may
//! have (1024): the verdicts of every placement shape, from one rank's view
//! of a gathered table (an out-of-band layer that makes up the other ranks'
//! records from this rank's own). The checks were quadratic per rank (and
//! worse: a few passes over the table for each rank of it); they are
//! O(n log n) now. The time each shape takes is printed, not asserted
//! (`cargo test -p kpccl-core --release --test node_checks_scale -- --nocapture`).
#![cfg(not(any(loom, miri)))] // the protocol is compiled out under loom; 1024 ranks are minutes under Miri

use core::time::Duration;
use std::time::Instant;
use std::vec;

use kpccl_core::protocol::{AUTO_LOCAL_RANK, map_nodes};
use kpccl_core::threads::ThreadPlatform;
use kpccl_core::{
    Collective, CollectiveError, MAX_RANKS, NodeInfo, OobError, Placement, Platform, Record, create_comm,
};

/// Where a record keeps its rank, node digest and local rank (its fixed
/// `repr(C)` layout; were they to move, every test here would fail).
const RANK: usize = 12;
const NODE: usize = 160;
const LOCAL_RANK: usize = 168;
const CPUS: usize = 176;

/// Rank `me`'s out-of-band layer: every other rank sends `me`'s record with
/// its own rank and the placement `place` gives it.
struct MadeUp {
    place: fn(u32) -> Placement,
    /// Each rank pinned to the CPU of its number (else the affinity is `me`'s).
    pinned: bool,
}

impl kpccl_core::oob::Oob for MadeUp {
    fn allgather(&self, send: &[u8], recv: &mut [u8]) -> Result<(), OobError> {
        for (r, rec) in (0u32..).zip(recv.chunks_exact_mut(send.len())) {
            rec.copy_from_slice(send);
            let p = (self.place)(r);
            rec[RANK..RANK + 4].copy_from_slice(&r.to_le_bytes());
            rec[NODE..NODE + 8].copy_from_slice(&p.node.to_le_bytes());
            rec[LOCAL_RANK..LOCAL_RANK + 4].copy_from_slice(&p.local_rank.to_le_bytes());
            if self.pinned {
                rec[CPUS..CPUS + 8 * 16].fill(0);
                rec[CPUS + r as usize / 8] = 1 << (r % 8);
            }
        }
        Ok(())
    }
    fn barrier(&self) -> Result<(), OobError> {
        Ok(())
    }
}

/// Rank `me`'s communicator over `MAX_RANKS` ranks placed by `place`, the
/// table it gathered, and how long creation took (printed as `what`).
fn create(what: &str, me: u32, place: fn(u32) -> Placement) -> (Result<NodeInfo, CollectiveError>, vec::Vec<Record>) {
    create_with(what, me, place, false)
}

/// [`create`], with each rank pinned to a CPU of its own if `pinned`.
fn create_with(
    what: &str,
    me: u32,
    place: fn(u32) -> Placement,
    pinned: bool,
) -> (Result<NodeInfo, CollectiveError>, vec::Vec<Record>) {
    let platform = ThreadPlatform::new(4096);
    let mut table = vec![Record::default(); MAX_RANKS as usize];
    let oob = MadeUp { place, pinned };
    // The fastest of a few: the first pays for the table's pages.
    let (mut info, mut created) = (None, Duration::MAX);
    for _ in 0..5 {
        let start = Instant::now();
        info = Some(create_comm(Collective::new(&platform, &oob, me, MAX_RANKS, &mut table), place(me)));
        created = created.min(start.elapsed());
    }
    let info = info.expect("created");
    let (mut node_of, mut local_of) = (vec![0; table.len()], vec![0; table.len()]);
    let start = Instant::now();
    if info.is_ok() {
        map_nodes(&table, &mut node_of, &mut local_of);
    }
    std::println!("{what}, rank {me}: create_comm {created:?}, map_nodes {:?}", start.elapsed());
    (info, table)
}

fn cpus() -> u32 {
    ThreadPlatform::new(4096).cpu_count()
}

#[test]
fn one_node_numbered_by_its_callers() {
    for me in [0, 700, MAX_RANKS - 1] {
        let (info, _) = create("one node, local ranks given", me, |r| Placement { node: 5, local_rank: r ^ 1 });
        let info = info.unwrap();
        assert_eq!(info, NodeInfo { nnodes: 1, node: 0, local_rank: me ^ 1, local_size: MAX_RANKS, cpus: cpus() });
    }
}

#[test]
fn one_node_numbered_by_rank_order() {
    let (info, table) = create("one node, automatic", 600, |_| Placement { node: 5, local_rank: AUTO_LOCAL_RANK });
    assert_eq!(info.unwrap().local_rank, 600);
    let (mut node_of, mut local_of) = (vec![7; table.len()], vec![0; table.len()]);
    map_nodes(&table, &mut node_of, &mut local_of);
    assert!(node_of.iter().all(|&n| n == 0));
    assert!(local_of.iter().copied().eq(0..MAX_RANKS));
}

#[test]
fn a_node_per_rank() {
    // Node digests in falling order: nodes are still numbered by their lowest rank.
    let (info, table) = create("a node per rank", 900, |r| Placement { node: u64::from(!r), local_rank: 0 });
    assert_eq!(info.unwrap(), NodeInfo { nnodes: MAX_RANKS, node: 900, local_rank: 0, local_size: 1, cpus: cpus() });
    let (mut node_of, mut local_of) = (vec![0; table.len()], vec![7; table.len()]);
    map_nodes(&table, &mut node_of, &mut local_of);
    assert!(node_of.iter().copied().eq(0..MAX_RANKS));
    assert!(local_of.iter().all(|&l| l == 0));
}

#[test]
fn one_node_of_ranks_pinned_each_to_a_cpu() {
    let (info, _) = create_with("one node, pinned", 10, |r| Placement { node: 5, local_rank: r }, true);
    let info = info.unwrap();
    assert_eq!((info.local_size, info.cpus), (MAX_RANKS, MAX_RANKS));
}

#[test]
fn round_robin_over_32_nodes() {
    let place = |r: u32| Placement { node: u64::from(r % 32) * 0x9e37_79b9, local_rank: AUTO_LOCAL_RANK };
    let (info, table) = create("32 nodes, round robin", 1000, place);
    let want = NodeInfo { nnodes: 32, node: 1000 % 32, local_rank: 1000 / 32, local_size: 32, cpus: cpus() };
    assert_eq!(info.unwrap(), want);
    let (mut node_of, mut local_of) = (vec![0; table.len()], vec![0; table.len()]);
    map_nodes(&table, &mut node_of, &mut local_of);
    assert!((0..MAX_RANKS).all(|r| node_of[r as usize] == r % 32 && local_of[r as usize] == r / 32));
}

#[test]
fn the_last_rank_repeats_a_local_rank() {
    // Every rank but the last is fine: the checks go through the whole table.
    let place = |r: u32| Placement { node: 5, local_rank: if r == MAX_RANKS - 1 { 3 } else { r } };
    let (info, _) = create("one node, the last local rank repeated", 0, place);
    let e = CollectiveError::LocalRank {
        rank: MAX_RANKS - 1,
        local_rank: 3,
        node: 0,
        local_size: MAX_RANKS,
        clash: Some(3),
    };
    assert_eq!(info, Err(e));
}

#[test]
fn the_last_node_mixes_given_and_automatic_local_ranks() {
    // 31 good nodes, then one whose last rank asks to be numbered.
    let place = |r: u32| Placement {
        node: u64::from(r / 32),
        local_rank: if r == MAX_RANKS - 1 { AUTO_LOCAL_RANK } else { r % 32 },
    };
    let (info, _) = create("32 nodes, the last one mixed", 0, place);
    let e = CollectiveError::LocalRank {
        rank: MAX_RANKS - 1,
        local_rank: AUTO_LOCAL_RANK,
        node: 31,
        local_size: 32,
        clash: Some(MAX_RANKS - 32),
    };
    assert_eq!(info, Err(e));
}
