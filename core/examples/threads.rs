//! Embedding `kpccl-core` in a runtime of its own: the ranks are threads of
//! one process, segments live on the heap, and the out-of-band collectives
//! are a barrier (the platform is in `tests/support`, shared with the tests).
//!
//! ```text
//! cargo run -p kpccl-core --example threads -- [nranks] [rounds]
//! ```
//!
//! Every rank owns a segment of its own size; in each round it fills it,
//! fences with its ring neighbours, checks its predecessor's data, and
//! finally the whole window fences and every rank checks everyone's.

#[cfg(not(loom))]
#[path = "../tests/support/mod.rs"]
mod support;

#[cfg(not(loom))]
use {
    core::time::Duration,
    kpccl_core::{LayoutMode, Record, WaitPolicy, WindowRequest, create_comm, create_window},
    std::vec,
    support::{ThreadPlatform, check, fill, ring_order, run},
};

/// The window API is compiled out under loom.
#[cfg(loom)]
fn main() {}

#[cfg(not(loom))]
fn main() {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<u32>().expect("usage: threads [nranks] [rounds]"));
    let nranks = args.next().unwrap_or(4);
    let rounds = args.next().unwrap_or(1000).max(1);
    let platform = ThreadPlatform::new(4096);
    let started = std::time::Instant::now();

    let p = platform.clone();
    let fences = run(nranks, Duration::from_secs(600), move |rank, oob| {
        let mut table = vec![Record::default(); nranks as usize];
        create_comm(&p, &oob, rank, nranks, Ok(()), &mut table).expect("communicator");
        let request = WindowRequest {
            // Uneven sizes, one of them empty.
            size: u64::from(rank % 3) * 1000 + 8 * u64::from(rank),
            mode: LayoutMode::Aligned,
            align: 64,
            policy: WaitPolicy::for_load(nranks, kpccl_core::Platform::cpu_count(&p)),
            barrier: kpccl_core::fence::Barrier::for_load(nranks, kpccl_core::Platform::cpu_count(&p)),
            ..WindowRequest::default()
        };
        let w = create_window(&p, &oob, rank, nranks, &request, Ok(()), &mut table).expect("window");
        let segs: std::vec::Vec<_> = (0..nranks).map(|r| w.segment(r).unwrap()).collect();
        let prev = (rank + nranks - 1) % nranks;
        let mut fences = 0u64;
        for t in 0..rounds {
            fill(&segs[rank as usize], rank, t);
            if nranks > 1 {
                let order = ring_order(rank, nranks);
                for peer in order {
                    w.peer_fence(peer).unwrap();
                    if peer == prev {
                        check(&segs[prev as usize], prev, t).unwrap();
                    }
                }
                // Our successor is done with our data before we overwrite it.
                for peer in order {
                    w.peer_fence(peer).unwrap();
                }
                fences += 4;
            }
        }
        w.fence().unwrap();
        for r in 0..nranks {
            check(&segs[r as usize], r, rounds.saturating_sub(1)).unwrap();
        }
        w.free().unwrap();
        fences
    });
    let total: u64 = fences.iter().sum();
    let elapsed = started.elapsed();
    println!(
        "{nranks} thread ranks, {rounds} rounds: {total} peer fences in {elapsed:?} ({:.0} ns per fence per rank)",
        elapsed.as_nanos() as f64 / (total.max(1) as f64 / f64::from(nranks))
    );
    assert!(platform.leaked().is_empty());
}
