//! The embedded example on the host: ranks are threads running the same
//! `rank_main` a bare-metal runtime calls on each core, over `static`
//! memory and a `static` group.

use std::sync::OnceLock;
use std::time::Instant;

use kpccl_embedded_example::{Arena, Group, Page, RunError, StaticOob, StaticPlatform, rank_main};

static PAGES: [Page; 64] = [const { Page::new() }; 64];
static ARENA: Arena = Arena::new(&PAGES);

fn clock_ns() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    u64::try_from(START.get_or_init(Instant::now).elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// Runs `nranks` thread ranks on `group`; returns each rank's result.
fn ranks(group: &'static Group, nranks: u32, rounds: u64) -> Vec<Result<u64, RunError>> {
    let platform = StaticPlatform::new(&ARENA, clock_ns, 2).with_relax(std::thread::yield_now);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..nranks)
            .map(|rank| {
                s.spawn(move || rank_main(platform, &StaticOob::new(group, rank, nranks), rank, nranks, rounds))
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("rank panicked")).collect()
    })
}

#[test]
fn one_to_five_ranks_on_static_memory() {
    static GROUPS: [Group; 5] = [const { Group::new() }; 5];
    let rounds = 300;
    for (group, nranks) in GROUPS.iter().zip(1..) {
        let results = ranks(group, nranks, rounds);
        for (rank, result) in results.iter().enumerate() {
            assert_eq!(*result, Ok(rounds * (rounds + 1) / 2), "rank {rank} of {nranks}");
        }
        assert_eq!(ARENA.in_use(), 0, "every segment is gone after free ({nranks} ranks)");
    }
}

#[test]
fn too_many_ranks_is_an_error() {
    static GROUP: Group = Group::new();
    let platform = StaticPlatform::new(&ARENA, clock_ns, 1);
    assert_eq!(rank_main(platform, &StaticOob::new(&GROUP, 0, 17), 0, 17, 1), Err(RunError::TooManyRanks));
}

#[test]
fn a_rank_past_the_group_buffer_fails_every_rank_without_a_panic() {
    use kpccl_core::CollectiveError;
    static GROUP: Group = Group::new();
    // Rank 40 of 2: its record lands past the group's buffer (16 ranks).
    let platform = StaticPlatform::new(&ARENA, clock_ns, 2).with_relax(std::thread::yield_now);
    let (tx, rx) = std::sync::mpsc::channel();
    for rank in [0, 40] {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let run = || rank_main(platform, &StaticOob::new(&GROUP, rank, 2), rank, 2, 1);
            let result = std::panic::catch_unwind(core::panic::AssertUnwindSafe(run));
            let _ = tx.send((rank, result.map_err(|_| "panicked")));
        });
    }
    let mut results: Vec<_> =
        (0..2).map(|_| rx.recv_timeout(core::time::Duration::from_secs(20)).expect("a rank hung")).collect();
    results.sort_by_key(|&(rank, _)| rank);
    assert_eq!(results[0], (0, Ok(Err(RunError::Collective(CollectiveError::NoRecord { rank: 1 })))));
    // Rank 40 fails too (core's verdict names the empty record before its own refusal).
    assert!(matches!(results[1], (40, Ok(Err(RunError::Collective(_))))), "{results:?}");
}
