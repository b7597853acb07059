//! Simulated nodes (`KPCCL_NODE_ID` per rank, set through the config here):
//! `nodes=K` splits the ranks into K nodes, in blocks (`placement=block`,
//! local rank given) or round-robin (`placement=rr`, local rank numbered by
//! the library). Every call is checked on both sides of a node boundary.
//! `bad_local=true` gives every rank its global rank as local rank (the
//! reference example's call): every rank must get the same clear error.

use kpccl_core::CollectiveError;
use kpccl_posix::launch::RunOob;
use kpccl_posix::{Comm, Config, Error};

use crate::args::Args;
use crate::checks::{verify, word};

type Res = Result<(), String>;

fn s(e: impl std::fmt::Display) -> String {
    e.to_string()
}

fn expect(cond: bool, what: impl FnOnce() -> String) -> Res {
    if cond { Ok(()) } else { Err(what()) }
}

/// `Err(OtherNode)` with the message that says so, for a rank of another node.
fn other_node<T: std::fmt::Debug>(r: Result<T, Error>, rank: u32, node: u32, this: u32, call: &str) -> Res {
    match r {
        Err(e @ Error::OtherNode { .. }) => {
            let text = e.to_string();
            let want = format!("rank {rank} is on node {node}, not on this node {this}");
            expect(text.contains(&want) && text.contains("shared memory does not cross nodes"), || {
                format!("{call}({rank}): {text:?} does not say {want:?}")
            })?;
            expect(e == Error::OtherNode { rank, node, this_node: this }, || format!("{call}({rank}): {e:?}"))
        }
        other => Err(format!("{call}({rank}) across nodes gave {other:?}, not an OtherNode error")),
    }
}

pub(crate) fn nodes(oob: RunOob, args: &Args) -> Res {
    let (rank, n) = (oob.rank(), oob.nranks());
    let k: u32 = args.get("nodes", 2)?;
    let rr = args.str("placement") == Some("rr");
    let per = n.div_ceil(k);
    let node_of = |r: u32| if rr { r % k } else { r / per };
    let mut config = Config::from_env().map_err(s)?;
    config.node_id = Some(format!("sim-node-{}", node_of(rank)));
    if args.get("bad_local", false)? {
        let got = Comm::builder(oob, rank, n).local_rank(Some(rank)).config(config).build();
        return match got {
            Err(e @ Error::Collective(CollectiveError::LocalRank { .. })) => {
                let text = e.to_string();
                expect(text.contains("says local_rank") && text.contains("local ranks must be 0 to"), || text.clone())?;
                if rank == 0 {
                    println!("nodes: bad local ranks fail every rank: {text}");
                }
                Ok(())
            }
            other => Err(format!("local_rank = rank over {k} nodes gave {other:?}")),
        };
    }
    let local = if rr { None } else { Some(rank % per) };
    let comm = Comm::builder(oob, rank, n).local_rank(local).config(config).build().map_err(s)?;

    // The communicator's answers.
    let mine: Vec<u32> = (0..n).filter(|&r| node_of(r) == node_of(rank)).collect();
    let me_local = mine.iter().position(|&r| r == rank).expect("in my node") as u32;
    let got = (comm.nnodes(), comm.node(), comm.local_rank(), comm.local_size());
    let want = (k.min(n), node_of(rank), me_local, mine.len() as u32);
    expect(got == want, || format!("(nnodes, node, local rank, local size) = {got:?}, expected {want:?}"))?;
    expect(comm.node_ranks() == mine, || format!("node ranks {:?}, expected {mine:?}", comm.node_ranks()))?;
    expect((0..n).all(|r| comm.node_of(r) == Some(node_of(r))) && comm.node_of(n).is_none(), || {
        "node_of disagrees".to_owned()
    })?;

    // A window: each rank owns 64 words + its rank.
    let len = |r: u32| 64 + r as usize;
    let win = comm.window(len(rank) * 8).alloc().map_err(s)?;
    expect((win.rank(), win.nranks()) == (rank, n), || format!("window rank {} of {}", win.rank(), win.nranks()))?;
    expect(win.node_ranks() == mine, || "window node ranks".to_owned())?;
    for r in 0..n {
        if node_of(r) == node_of(rank) {
            let seg = win.segment(r).map_err(s)?;
            expect(seg.len == len(r) * 8, || format!("rank {r}'s segment has {} bytes", seg.len))?;
        } else {
            other_node(win.segment(r), r, node_of(r), node_of(rank), "segment")?;
            other_node(win.peer_fence(r), r, node_of(r), node_of(rank), "peer_fence")?;
            other_node(win.write(r, 0, &[1u64]), r, node_of(r), node_of(rank), "write")?;
        }
    }
    expect(matches!(win.segment(n), Err(Error::Fence(_))), || "a rank beyond the communicator".to_owned())?;

    // Window fences order the node's ranks: write, fence, read every node peer.
    for round in 0..20u64 {
        let words: Vec<u64> = (0..len(rank)).map(|i| word(round, rank, i)).collect();
        win.write(rank, 0, &words).map_err(s)?;
        win.fence().map_err(s)?;
        for &p in &mine {
            let mut got = vec![0u64; len(p)];
            win.read(p, 0, &mut got).map_err(s)?;
            verify(&got, round, p)?;
        }
        win.fence().map_err(s)?;
    }
    // Peer fences (global ranks) with the node's neighbours in a ring.
    let pos = me_local as usize;
    let m = mine.len();
    if m > 1 {
        let (next, prev) = (mine[(pos + 1) % m], mine[(pos + m - 1) % m]);
        for round in 100..120u64 {
            let words: Vec<u64> = (0..len(rank)).map(|i| word(round, rank, i)).collect();
            win.write(rank, 0, &words).map_err(s)?;
            // Ordered by position, so the ring cannot deadlock.
            for p in if pos.is_multiple_of(2) { [next, prev] } else { [prev, next] } {
                win.peer_fence(p).map_err(s)?;
            }
            let mut got = vec![0u64; len(prev)];
            win.read(prev, 0, &mut got).map_err(s)?;
            verify(&got, round, prev)?;
            for p in if pos.is_multiple_of(2) { [next, prev] } else { [prev, next] } {
                win.peer_fence(p).map_err(s)?;
            }
        }
    }
    win.free().map_err(s)?;
    if rank == 0 {
        println!("nodes: {n} ranks on {k} simulated nodes ({}), every call checked", if rr { "rr" } else { "block" });
    }
    Ok(())
}
