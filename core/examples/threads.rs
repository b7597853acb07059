//! Embedding `kpccl-core` in a runtime of its own, the quick way: ranks are
//! threads of one process on the reference platform
//! (`kpccl_core::threads`, feature `threads`). For a platform of your own,
//! see `docs/EMBEDDING.md` and `examples/embedded`.
//!
//! ```text
//! cargo run -p kpccl-core --example threads -- [nranks] [rounds]
//! ```
//!
//! Every rank owns a segment; in each round it writes its round number
//! there, fences with its right-hand neighbour and its left-hand one (in an
//! order in which every fence meets its partner's) and checks that the left
//! neighbour's word is this round's.

use core::time::Duration;

use kpccl_core::fence::ring_order;
use kpccl_core::threads::{ThreadPlatform, run};
use kpccl_core::{
    Collective, NodeRanks, Placement, Platform, Record, WaitPolicy, WindowRequest, create_comm, create_window,
};

fn main() {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<u32>().expect("usage: threads [nranks] [rounds]"));
    let nranks = args.next().unwrap_or(4).max(1);
    let rounds = args.next().unwrap_or(1000).max(1);
    let platform = ThreadPlatform::new(4096);
    let started = std::time::Instant::now();

    let p = platform.clone();
    let fences = run(nranks, Duration::from_secs(600), move |rank, oob| {
        let mut table = vec![Record::default(); nranks as usize];
        create_comm(Collective::new(&p, &oob, rank, nranks, &mut table), Placement::alone(rank)).expect("communicator");
        let request = WindowRequest {
            size: 64,
            policy: WaitPolicy::for_load(nranks, p.cpu_count()),
            barrier: kpccl_core::fence::Barrier::for_load(nranks, p.cpu_count()),
            ..WindowRequest::default()
        };
        let window = create_window(Collective::new(&p, &oob, rank, nranks, &mut table), NodeRanks::All, &request)
            .expect("window");
        // Each segment's first word (segments are 64-byte aligned, at least 64 bytes).
        let word = |r: u32| window.segment(r).expect("rank in range").ptr.cast::<u64>().as_ptr();
        let prev = (rank + nranks - 1) % nranks;
        let order = ring_order(rank, nranks);
        for round in 1..=u64::from(rounds) {
            // SAFETY: this rank's own segment (64 bytes, aligned); nobody reads
            // it until the fences below.
            unsafe { word(rank).write_volatile(round) };
            for peer in order {
                window.peer_fence(peer).expect("peer fence");
            }
            // SAFETY: the left neighbour wrote before its fence with us, and
            // writes again only after its next one.
            let seen = unsafe { word(prev).read_volatile() };
            assert_eq!(seen, round, "rank {rank} saw rank {prev}'s word of another round");
            // The left neighbour may overwrite only after we have read.
            for peer in order {
                window.peer_fence(peer).expect("peer fence");
            }
        }
        window.fence().expect("window fence");
        window.free().expect("free");
        4 * u64::from(rounds)
    });
    let per_rank = fences[0].max(1) as f64;
    let elapsed = started.elapsed();
    println!(
        "{nranks} thread ranks, {rounds} rounds: {per_rank} peer fences per rank in {elapsed:?} ({:.0} ns each)",
        elapsed.as_nanos() as f64 / per_rank
    );
    assert!(platform.leaked().is_empty(), "every segment name was removed");
}
