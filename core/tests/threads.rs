//! The core embedded with threads as ranks (see `support`): communicator and
//! window creation, data handed between ranks' segments in order by peer
//! fences, window fences and one-way signals over many rounds, every word
//! checked, and the collective failures (bad arguments, disagreements,
//! failing out-of-band calls) reaching every rank without a hang. Runs under
//! Miri too.
#![cfg(not(loom))] // the window API is compiled out under loom

mod support;

use core::task::Poll;
use core::time::Duration;
use std::sync::Arc;
use std::vec;
use std::vec::Vec;

use kpccl_core::error::{ArgError, Field, OobError};
use kpccl_core::fence::{Barrier, ring_order};
use kpccl_core::layout::{LayoutParams, MIN_SEGMENT_ALIGN};
use kpccl_core::threads::{ThreadOob, ThreadPlatform, run};
use kpccl_core::{
    Collective, CollectiveError, Failure, FenceError, LayoutError, LayoutMode, MemoryKind, NodeRanks, Pending,
    Placement, Platform, Record, WaitPolicy, Window, WindowRequest, create_comm, create_window,
};
use kpccl_testkit::{FailingOob, INJECTED, Solo, When};
use support::{check, fill};

/// How long a group of ranks may take. Miri's clock runs with the
/// interpreter's work, so it gets no limit: Miri reports a deadlock itself.
const LIMIT: Duration = Duration::from_secs(if cfg!(miri) { 1 << 40 } else { 120 });

fn policy() -> WaitPolicy {
    WaitPolicy {
        spins: if cfg!(miri) { 4 } else { 256 },
        signal_spins: if cfg!(miri) { 4 } else { 256 },
        yields: 16,
        yield_ns: 0,
        // A fence that waits this long is a failure (an error), not a hang.
        timeout_ns: if cfg!(miri) { 0 } else { 60_000_000_000 },
        liveness_ns: 10_000_000,
    }
}

/// Rounds of data hand-over per fence kind.
fn rounds(nranks: u32) -> u32 {
    match (cfg!(miri), nranks) {
        (true, n) if n > 4 => 1,
        (true, _) => 2,
        (false, _) => 200,
    }
}

/// Polls a started fence to completion, yielding between polls.
fn polled(started: Result<Pending<'_, ThreadPlatform>, FenceError>) -> Result<(), FenceError> {
    let mut fence = started?;
    loop {
        match fence.poll() {
            Poll::Ready(result) => return result,
            Poll::Pending => std::thread::yield_now(),
        }
    }
}

/// The window fence, started and polled or blocking.
fn window_fence(w: &mut Window<ThreadPlatform>, polls: bool) -> Result<(), FenceError> {
    if polls { polled(w.start_fence()) } else { w.fence() }
}

/// What a rank saw of the window.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    /// (offset, size) of every rank's segment, from the shared rank table.
    entries: Vec<(u64, u64)>,
    /// The address of every rank's segment.
    addrs: Vec<usize>,
}

/// Creates a window of `sizes.len()` thread ranks, hands data over with peer
/// fences and with window fences, checks every word, frees the window.
fn exchange(sizes: &[u64], mode: LayoutMode, align: u64, page: u64) {
    exchange_with(sizes, mode, align, page, Barrier::Dissemination);
}

/// As [`exchange`], the last rank asking for `barrier` as the window fence
/// (which every rank must then run).
fn exchange_with(sizes: &[u64], mode: LayoutMode, align: u64, page: u64, barrier: Barrier) {
    let n = u32::try_from(sizes.len()).unwrap();
    let platform = ThreadPlatform::new(page);
    let sizes = Arc::new(sizes.to_vec());
    let seen = {
        let (platform, sizes) = (platform.clone(), Arc::clone(&sizes));
        run(n, LIMIT, move |rank, oob| rank_main(&platform, &oob, rank, &sizes, mode, align, barrier))
    };
    for (r, s) in seen.iter().enumerate() {
        assert_eq!(s, &seen[0], "rank {r} sees another window than rank 0");
    }
    // Segments: the requested sizes, aligned, in rank order, not overlapping.
    let params = LayoutParams { nranks: n, mode, align, page };
    let seg_align = params.segment_align();
    let mut end = 0;
    for (r, (&(offset, size), &addr)) in seen[0].entries.iter().zip(&seen[0].addrs).enumerate() {
        assert_eq!(size, sizes[r]);
        assert!(offset.is_multiple_of(seg_align) && offset >= end, "segment {r} at {offset}");
        assert!((addr as u64).is_multiple_of(seg_align), "segment {r} at address {addr:#x}");
        assert_eq!(addr - seen[0].addrs[0], usize::try_from(offset - seen[0].entries[0].0).unwrap());
        end = offset + size;
    }
    assert_eq!(platform.created(), 1, "one segment per window");
    assert!(platform.leaked().is_empty(), "names left behind: {:?}", platform.leaked());
}

fn rank_main(
    platform: &ThreadPlatform,
    oob: &ThreadOob,
    rank: u32,
    sizes: &[u64],
    mode: LayoutMode,
    align: u64,
    barrier: Barrier,
) -> Seen {
    let n = u32::try_from(sizes.len()).unwrap();
    let mut table = vec![Record::default(); sizes.len()];
    create_comm(Collective::new(platform, oob, rank, n, &mut table), Placement::alone(rank)).unwrap();
    let asked = if rank == n - 1 { barrier } else { Barrier::Dissemination };
    let request = WindowRequest {
        size: sizes[rank as usize],
        mode,
        align,
        policy: policy(),
        barrier: asked,
        ..WindowRequest::default()
    };
    let mut w = create_window(Collective::new(platform, oob, rank, n, &mut table), NodeRanks::All, &request).unwrap();
    assert_eq!((w.rank(), w.nranks(), w.barrier()), (rank, n, barrier));
    assert_eq!(w.poisoned(), None);
    let segs: Vec<_> = (0..n).map(|r| w.segment(r).unwrap()).collect();
    for (r, s) in segs.iter().enumerate() {
        assert_eq!(s.len as u64, sizes[r]);
    }
    let me = &segs[rank as usize];
    let rounds = rounds(n);

    // Peer fences. Pairs are taken in one global order (lexicographic), so
    // each rank fences its partners in ascending order and no cycle forms.
    // Per pair: fence (the partner's data is published), read, fence (the
    // partner is done reading ours, so the next round may overwrite it).
    assert_eq!(w.peer_fence(rank), Ok(()), "a fence with oneself is a no-op");
    for t in 0..rounds {
        fill(me, rank, t);
        for p in (0..n).filter(|&p| p != rank) {
            w.peer_fence(p).unwrap();
            check(&segs[p as usize], p, t).unwrap();
            w.peer_fence(p).unwrap();
        }
    }
    // Window fences: write, fence, read everyone, fence.
    for t in rounds..2 * rounds {
        fill(me, rank, t);
        w.fence().unwrap();
        for p in (0..n).filter(|&p| p != rank) {
            check(&segs[p as usize], p, t).unwrap();
        }
        w.fence().unwrap();
    }
    // A ring hand-over with one peer fence per step and per direction: rank r
    // rewrites its segment only after its successor fenced with it again.
    if n > 1 {
        let prev = (rank + n - 1) % n;
        for t in 2 * rounds..3 * rounds {
            fill(me, rank, t);
            let order = ring_order(rank, n);
            for p in order {
                w.peer_fence(p).unwrap();
                if p == prev {
                    check(&segs[p as usize], p, t).unwrap();
                }
            }
            for p in order {
                w.peer_fence(p).unwrap();
            }
        }
    }

    // One-way signals: a pipeline 0 -> 1 -> ... -> n-1. Rank r reads r-1's
    // data after its wait and acknowledges it; it rewrites its own segment
    // only after r+1 acknowledged the last round. Then a burst of signals
    // sent ahead satisfies as many waits, whether taken by waits or by
    // tests (`try_wait`), and leaves nothing for a test after it.
    assert_eq!(w.signal(rank).and(w.wait(rank)), Ok(()), "signals to oneself are no-ops");
    assert_eq!(w.try_wait(rank), Ok(true), "a test of oneself is a wait's at once");
    let (prev, next) = (rank.checked_sub(1), Some(rank + 1).filter(|&r| r < n));
    for t in 3 * rounds..4 * rounds {
        if let (Some(next), true) = (next, t > 3 * rounds) {
            w.wait(next).unwrap();
        }
        if let Some(prev) = prev {
            w.wait(prev).unwrap();
            check(&segs[prev as usize], prev, t).unwrap();
            w.signal(prev).unwrap();
        }
        fill(me, rank, t);
        if let Some(next) = next {
            w.signal(next).unwrap();
        }
    }
    if let Some(next) = next {
        w.wait(next).unwrap();
        (0..3).for_each(|_| w.signal(next).unwrap());
    }
    if let Some(prev) = prev {
        w.wait(prev).unwrap();
        for _ in 0..2 {
            while !w.try_wait(prev).unwrap() {
                std::thread::yield_now();
            }
        }
        assert_eq!(w.try_wait(prev), Ok(false), "a test after the burst finds no signal");
    }
    assert_eq!(w.peer_fence(rank), Ok(()));

    // Fences started and polled (even ranks) against blocking ones (odd
    // ranks): the window-fence hand-over again, then a pairwise fence
    // between ranks 2k and 2k+1, polled by 2k.
    let polls = rank.is_multiple_of(2);
    for t in 4 * rounds..5 * rounds {
        fill(me, rank, t);
        window_fence(&mut w, polls).unwrap();
        for p in (0..n).filter(|&p| p != rank) {
            check(&segs[p as usize], p, t).unwrap();
        }
        window_fence(&mut w, polls).unwrap();
    }
    if let Some(p) = Some(rank ^ 1).filter(|&p| p < n) {
        let result = if polls { polled(w.start_peer_fence(p)) } else { w.peer_fence(p) };
        result.unwrap();
    }

    let seen = Seen {
        entries: (0..n).map(|r| w.rank_entry(r).map(|e| (e.offset, e.size)).unwrap()).collect(),
        addrs: segs.iter().map(|s| s.ptr.as_ptr().addr()).collect(),
    };
    w.free().unwrap();
    seen
}

#[test]
fn one_rank() {
    exchange(&[4096], LayoutMode::Contiguous, 64, 4096);
    exchange(&[0], LayoutMode::Aligned, 1, 4096);
}

#[test]
fn two_ranks() {
    exchange(&[256, 256], LayoutMode::Contiguous, 64, 4096);
    exchange(&[1000, 0], LayoutMode::Aligned, 8, 4096);
}

#[test]
fn three_ranks() {
    exchange(&[24, 0, 4099], LayoutMode::Contiguous, 1, 4096);
    exchange(&[0, 777, 64], LayoutMode::Aligned, 4096, 4096);
}

#[test]
fn four_ranks() {
    exchange(&[8, 1, 0, 300], LayoutMode::Contiguous, 128, 4096);
    exchange(&[5000, 0, 0, 8], LayoutMode::Aligned, 64, 4096);
}

#[test]
fn eight_ranks() {
    let sizes = [0, 64, 17, 4096, 8, 0, 1 << 10, 100];
    exchange(&sizes, LayoutMode::Contiguous, 64, 4096);
    exchange(&sizes, LayoutMode::Aligned, 64, if cfg!(miri) { 4096 } else { 65536 });
}

#[test]
fn flat_barrier() {
    exchange_with(&[8, 0, 4096], LayoutMode::Contiguous, 64, 4096, Barrier::Flat);
    exchange_with(&[0, 64, 17, 4096, 8, 0, 1 << 10, 100], LayoutMode::Aligned, 64, 4096, Barrier::Flat);
}

#[test]
fn all_segments_empty() {
    exchange(&[0, 0, 0], LayoutMode::Contiguous, MIN_SEGMENT_ALIGN, 4096);
}

/// Runs communicator and window creation on `nranks` threads, rank `r`
/// asking for `request(r)`, and returns every rank's result.
fn create_all(
    nranks: u32,
    platform: &ThreadPlatform,
    request: impl Fn(u32) -> WindowRequest + Send + Sync + 'static,
) -> Vec<Result<(), CollectiveError>> {
    let platform = platform.clone();
    run(nranks, LIMIT, move |rank, oob| {
        let mut table = vec![Record::default(); nranks as usize];
        create_comm(Collective::new(&platform, &oob, rank, nranks, &mut table), Placement::alone(rank))?;
        let w =
            create_window(Collective::new(&platform, &oob, rank, nranks, &mut table), NodeRanks::All, &request(rank))?;
        w.free().map_err(CollectiveError::from)
    })
}

fn request(size: u64, mode: LayoutMode, align: u64) -> WindowRequest {
    WindowRequest { size, mode, align, policy: policy(), ..WindowRequest::default() }
}

#[test]
fn a_bad_alignment_fails_every_rank() {
    for (n, bad) in [(1, 0), (2, 1), (3, 0), (4, 2)] {
        let platform = ThreadPlatform::new(4096);
        let results =
            create_all(n, &platform, move |r| request(64, LayoutMode::Contiguous, if r == bad { 3 } else { 64 }));
        let failure = Failure::Argument(ArgError::Layout(LayoutError::Alignment { align: 3 }));
        for (r, res) in (0u32..).zip(results) {
            let want =
                if r == bad { CollectiveError::Local(failure) } else { CollectiveError::Peer { rank: bad, failure } };
            assert_eq!(res, Err(want), "rank {r} of {n}");
        }
        assert_eq!(platform.created(), 0, "nothing is created after a failed request");
    }
}

#[test]
fn a_rank_refused_by_its_caller_fails_every_rank() {
    // The caller (say, the C API finding a NULL pointer) refuses one rank's
    // arguments; that rank still takes part, so no peer waits for it.
    for (n, bad) in [(1, 0), (3, 1)] {
        let platform = ThreadPlatform::new(4096);
        for stage in [0, 1] {
            let p = platform.clone();
            let results = run(n, LIMIT, move |rank, oob| {
                let verdict = |s| if rank == bad && stage == s { Err(ArgError::Caller) } else { Ok(()) };
                let mut table = vec![Record::default(); n as usize];
                create_comm(Collective::new(&p, &oob, rank, n, &mut table).local(verdict(0)), Placement::alone(rank))?;
                let req = request(64, LayoutMode::Contiguous, 64);
                create_window(Collective::new(&p, &oob, rank, n, &mut table).local(verdict(1)), NodeRanks::All, &req)?
                    .free()
                    .map_err(CollectiveError::from)
            });
            let failure = Failure::Argument(ArgError::Caller);
            for (r, res) in (0u32..).zip(results) {
                let want = if r == bad {
                    CollectiveError::Local(failure)
                } else {
                    CollectiveError::Peer { rank: bad, failure }
                };
                assert_eq!(res, Err(want), "rank {r} of {n}, refused at stage {stage}");
            }
        }
        assert_eq!(platform.created(), 0);
    }
}

#[test]
fn disagreeing_ranks_fail_every_rank() {
    // The layout mode (rank 1 differs) and the alignment (rank 2 differs).
    type Requests = fn(u32) -> WindowRequest;
    let cases: [(u32, Requests, Field); 4] = [
        (2, |r| request(8, if r == 1 { LayoutMode::Aligned } else { LayoutMode::Contiguous }, 64), Field::Mode),
        (3, |r| request(8, if r == 1 { LayoutMode::Aligned } else { LayoutMode::Contiguous }, 64), Field::Mode),
        (3, |r| request(8, LayoutMode::Contiguous, if r == 2 { 128 } else { 64 }), Field::Alignment),
        // Rank 2 asks for device memory, the others for host memory.
        (
            3,
            |r| WindowRequest { memory_kind: MemoryKind(u32::from(r == 2)), ..request(8, LayoutMode::Contiguous, 64) },
            Field::MemoryKind,
        ),
    ];
    for (n, req, field) in cases {
        let platform = ThreadPlatform::new(4096);
        let rank = if field == Field::Mode { 1 } else { 2 }; // the first rank that differs from rank 0
        for (r, res) in create_all(n, &platform, req).into_iter().enumerate() {
            assert_eq!(res, Err(CollectiveError::Mismatch { rank, field }), "rank {r} of {n}");
        }
        assert_eq!(platform.created(), 0);
    }
}

#[test]
fn oversized_windows_fail_every_rank() {
    // Each size fits a segment, their sum does not: every rank computes the
    // same refusal, naming the rank that asked the most, before any segment.
    let platform = ThreadPlatform::new(4096);
    for res in create_all(4, &platform, |r| {
        request(if r == 2 { (1 << 62) + 4096 } else { 1 << 62 }, LayoutMode::Contiguous, 64)
    }) {
        let Err(CollectiveError::Layout(LayoutError::TooLarge { rank: 2, size, total, .. })) = res else {
            panic!("{res:?}")
        };
        assert_eq!(size, (1 << 62) + 4096);
        assert!(total > 1 << 64, "{total}");
    }
    // The sum fits in 64 bits but not in a file (an `off_t`): the rank that
    // asked for it is named on every rank, not the creator whose `ftruncate`
    // would fail.
    for (r, res) in create_all(2, &platform, |r| {
        request(if r == 1 { i64::MAX.unsigned_abs() } else { 64 }, LayoutMode::Contiguous, 64)
    })
    .into_iter()
    .enumerate()
    {
        let Err(e @ CollectiveError::Layout(LayoutError::TooLarge { rank: 1, size, .. })) = res else {
            panic!("rank {r}: {res:?}")
        };
        assert_eq!(size, i64::MAX.unsigned_abs());
        let text = e.to_string();
        assert!(text.starts_with("rank 1 asked for 9223372036854775807 bytes: the window's total of "), "{text}");
        assert!(
            text.ends_with(" bytes is more than a window can span on this system (9223372036854775807 bytes)"),
            "{text}"
        );
    }
    // A size no address space holds fails on its rank, before anything else.
    let results = create_all(3, &platform, |r| request(if r == 1 { u64::MAX } else { 0 }, LayoutMode::Aligned, 64));
    let failure = Failure::Argument(ArgError::Size { size: u64::MAX });
    for (r, res) in (0u32..).zip(results) {
        let want = if r == 1 { CollectiveError::Local(failure) } else { CollectiveError::Peer { rank: 1, failure } };
        assert_eq!(res, Err(want));
    }
    assert_eq!(platform.created(), 0);
}

#[test]
fn a_name_that_exists_is_not_reused() {
    let platform = ThreadPlatform::new(4096);
    let a = platform.create("kpccl-test-exists", 4096).unwrap();
    assert!(platform.create("kpccl-test-exists", 4096).is_err());
    assert!(platform.open("kpccl-test-exists", 8192).is_err(), "open checks the length");
    let b = platform.open("kpccl-test-exists", 4096).unwrap();
    assert_eq!(kpccl_core::Segment::base(&a), kpccl_core::Segment::base(&b));
    platform.unlink("kpccl-test-exists").unwrap();
    assert!(platform.open("kpccl-test-exists", 4096).is_err());
    assert!(platform.unlink("kpccl-test-exists").is_err());
    assert!(platform.leaked().is_empty());
}

#[test]
fn a_failing_out_of_band_call_fails_every_rank() {
    let ns: &[u32] = if cfg!(miri) { &[2] } else { &[2, 3] };
    let mut cases = Vec::new();
    for &n in ns {
        for bad in [0, n - 1] {
            // Calls: 0 communicator, 1 requests, 2 segment name, 3 attach results.
            for call in 0..4 {
                for after in [false, true] {
                    // Aligned mode puts each doorbell on the first byte of a page
                    // its owner touches while attaching.
                    for mode in [LayoutMode::Contiguous, LayoutMode::Aligned] {
                        cases.push((n, bad, call, after, mode));
                    }
                }
            }
        }
    }
    for (n, bad, call, after, mode) in cases {
        let platform = ThreadPlatform::new(4096);
        let p = platform.clone();
        let results = run(n, LIMIT, move |rank, oob| {
            let when = if after { When::After } else { When::Before };
            // Allgathers count from 1 there.
            let oob = if rank == bad { FailingOob::new(oob, call + 1, when) } else { FailingOob::passing(oob) };
            let mut table = vec![Record::default(); n as usize];
            create_comm(Collective::new(&p, &oob, rank, n, &mut table), Placement::alone(rank))?;
            let w =
                create_window(Collective::new(&p, &oob, rank, n, &mut table), NodeRanks::All, &request(64, mode, 64))?;
            w.free().map_err(CollectiveError::from)
        });
        let case = std::format!("{n} ranks, {mode:?}, rank {bad} fails call {call} (after taking part: {after})");
        for (r, res) in (0u32..).zip(results) {
            match res {
                Err(CollectiveError::Local(Failure::Oob(OobError { code: INJECTED }))) if r == bad => {}
                Err(CollectiveError::Peer { rank, failure: Failure::Oob(_) }) if r != bad && rank == bad => {}
                other => panic!("{case}: rank {r} returned {other:?}"),
            }
        }
        assert!(platform.leaked().is_empty(), "{case}: names left behind");
    }
}

/// A process that gives another process's rank number, or ranks that the
/// out-of-band collective orders otherwise than they number themselves,
/// fail every rank with what the processes said, not with table positions.
#[test]
fn a_wrong_rank_claim_fails_every_rank_saying_what_was_claimed() {
    type Claims = fn(u32) -> u32;
    let cases: [(Claims, CollectiveError); 2] = [
        // The processes at places 1 and 2 both say rank 1.
        (|r| r.min(1), CollectiveError::RankClaim { place: 2, says: 1, shared: true }),
        // Places 1 and 2 hold ranks 2 and 1.
        (|r| [0, 2, 1][r as usize], CollectiveError::RankClaim { place: 1, says: 2, shared: false }),
    ];
    for (claim, want) in cases {
        let platform = ThreadPlatform::new(4096);
        let p = platform.clone();
        let results = run(3, LIMIT, move |place, oob| {
            let rank = claim(place);
            let mut table = vec![Record::default(); 3];
            create_comm(Collective::new(&p, &oob, rank, 3, &mut table), Placement::alone(rank))
        });
        for (r, res) in results.into_iter().enumerate() {
            assert_eq!(res, Err(want), "place {r}");
        }
        assert_eq!(platform.created(), 0);
    }
}

/// An allgather that fills only this rank's part, as the callbacks of a
/// group smaller than the rank count given do.
struct GroupOfOne;

impl kpccl_core::Oob for GroupOfOne {
    fn allgather(&self, send: &[u8], recv: &mut [u8]) -> Result<(), kpccl_core::OobError> {
        recv.fill(0);
        recv[..send.len()].copy_from_slice(send);
        Ok(())
    }
    fn barrier(&self) -> Result<(), kpccl_core::OobError> {
        Ok(())
    }
}

#[test]
fn a_rank_that_sent_nothing_is_named_as_such() {
    let platform = ThreadPlatform::new(4096);
    let mut table = vec![Record::default(); 3];
    let made = create_comm(Collective::new(&platform, &GroupOfOne, 0, 3, &mut table), Placement::alone(0));
    assert_eq!(made, Err(CollectiveError::NoRecord { rank: 1 }));
    let text = made.unwrap_err().to_string();
    assert!(text.contains("nothing came from rank 1") && text.contains("fewer ranks"), "{text}");
}

#[test]
fn a_rank_out_of_range_is_told_of_its_own_argument() {
    // Alone in its group, the record of rank 1 of 1 lands at place 0.
    let platform = ThreadPlatform::new(4096);
    let mut table = vec![Record::default(); 1];
    let made = create_comm(Collective::new(&platform, &GroupOfOne, 1, 1, &mut table), Placement::alone(0));
    assert_eq!(made, Err(CollectiveError::Local(Failure::Argument(ArgError::Rank { rank: 1, nranks: 1 }))));
}

/// Ranks that make different collective calls at once (one a communicator,
/// the other a window) are told so, not that their library versions differ.
#[test]
fn ranks_in_different_collectives_are_told_so() {
    let platform = ThreadPlatform::new(4096);
    let p = platform.clone();
    let results = run(2, LIMIT, move |rank, oob| {
        let mut table = vec![Record::default(); 2];
        create_comm(Collective::new(&p, &oob, rank, 2, &mut table), Placement::alone(rank))?;
        let c = Collective::new(&p, &oob, rank, 2, &mut table);
        if rank == 0 {
            create_window(c, NodeRanks::All, &request(64, LayoutMode::Contiguous, 64)).map(drop)
        } else {
            create_comm(c, Placement::alone(rank)).map(drop)
        }
    });
    for (r, res) in (0u32..).zip(results) {
        let other = 1 - r;
        assert_eq!(res, Err(CollectiveError::Mismatch { rank: other, field: Field::Step }), "rank {r}");
    }
    let e = CollectiveError::<Failure>::Mismatch { rank: 1, field: Field::Step }.to_string();
    assert!(e.starts_with("rank 1 disagrees with rank 0 on the creation step (communicator or window"), "{e}");
    assert!(platform.leaked().is_empty(), "names left behind: {:?}", platform.leaked());
}

/// An allgather whose call number `call` (from 1) leaves rank `skip`'s
/// part of every rank's buffer as it was: that rank's record never came.
struct Skips {
    inner: ThreadOob,
    call: u32,
    skip: usize,
    calls: core::cell::Cell<u32>,
}

impl kpccl_core::Oob for Skips {
    fn allgather(&self, send: &[u8], recv: &mut [u8]) -> Result<(), OobError> {
        self.calls.set(self.calls.get() + 1);
        let part = self.skip * send.len()..(self.skip + 1) * send.len();
        let before = recv[part.clone()].to_vec();
        self.inner.allgather(send, recv)?;
        if self.calls.get() == self.call {
            recv[part].copy_from_slice(&before);
        }
        Ok(())
    }
    fn barrier(&self) -> Result<(), OobError> {
        self.inner.barrier()
    }
}

/// A record that does not come at a later step of creation is told as
/// nothing sent, not as the rank's record of the step before.
#[test]
fn a_rank_that_sent_nothing_later_is_named_as_such() {
    // Calls: 1 communicator, 2 requests, 3 segment name, 4 attach results.
    for call in 2..=4 {
        let platform = ThreadPlatform::new(4096);
        let p = platform.clone();
        let results = run(2, LIMIT, move |rank, oob| {
            let oob = Skips { inner: oob, call, skip: 1, calls: core::cell::Cell::new(0) };
            let mut table = vec![Record::default(); 2];
            create_comm(Collective::new(&p, &oob, rank, 2, &mut table), Placement::alone(rank))?;
            let c = Collective::new(&p, &oob, rank, 2, &mut table);
            create_window(c, NodeRanks::All, &request(64, LayoutMode::Contiguous, 64)).map(drop)
        });
        for (r, res) in results.into_iter().enumerate() {
            assert_eq!(res, Err(CollectiveError::NoRecord { rank: 1 }), "call {call}, rank {r}");
        }
        assert!(platform.leaked().is_empty(), "call {call}: names left behind: {:?}", platform.leaked());
    }
}

/// An allgather that records the first record sent, else copies as [`Solo`] does.
#[derive(Default)]
struct Recorder(core::cell::RefCell<Vec<u8>>);

impl kpccl_core::Oob for Recorder {
    fn allgather(&self, send: &[u8], recv: &mut [u8]) -> Result<(), OobError> {
        if self.0.borrow().is_empty() {
            self.0.borrow_mut().extend_from_slice(send);
        }
        Solo.allgather(send, recv)
    }
    fn barrier(&self) -> Result<(), OobError> {
        Ok(())
    }
}

/// An allgather whose group puts another process at every place of the
/// table (its record, `0`): this rank's own record falls outside.
struct Elsewhere(Vec<u8>);

impl kpccl_core::Oob for Elsewhere {
    fn allgather(&self, _send: &[u8], recv: &mut [u8]) -> Result<(), OobError> {
        recv.copy_from_slice(&self.0);
        Ok(())
    }
    fn barrier(&self) -> Result<(), OobError> {
        Ok(())
    }
}

/// A rank out of range whose record the out-of-band collective leaves out
/// of the table (its group is larger than the rank count) finds no failure
/// there: it is told of its own argument, as at communicator creation, and
/// does not panic.
#[test]
fn a_rank_out_of_range_of_a_window_is_told_of_its_own_argument() {
    let platform = ThreadPlatform::new(4096);
    let req = request(64, LayoutMode::Contiguous, 64);
    // The record rank 0 of 1 sends for its request.
    let recorder = Recorder::default();
    let mut table = vec![Record::default(); 1];
    let w = create_window(Collective::new(&platform, &recorder, 0, 1, &mut table), NodeRanks::All, &req).unwrap();
    w.free().unwrap();
    let elsewhere = Elsewhere(recorder.0.take());
    let made = create_window(Collective::new(&platform, &elsewhere, 1, 1, &mut table), NodeRanks::All, &req);
    let want = CollectiveError::Local(Failure::Argument(ArgError::Rank { rank: 1, nranks: 1 }));
    assert_eq!(made.map(drop), Err(want));
    let refused = Collective::new(&platform, &elsewhere, 0, 1, &mut table).local(Err(ArgError::Caller));
    let made = create_window(refused, NodeRanks::All, &req);
    assert_eq!(made.map(drop), Err(CollectiveError::Local(Failure::Argument(ArgError::Caller))));
    assert!(platform.leaked().is_empty(), "names left behind: {:?}", platform.leaked());
}

/// `request`'s window over ranks `0..n` of `oob`'s group, made on a
/// communicator of its own.
fn window_of(rank: u32, n: u32, oob: &ThreadOob, request: &WindowRequest) -> Window<ThreadPlatform> {
    let platform = ThreadPlatform::new(4096);
    let mut table = vec![Record::default(); n as usize];
    create_comm(Collective::new(&platform, oob, rank, n, &mut table), Placement::alone(rank)).unwrap();
    create_window(Collective::new(&platform, oob, rank, n, &mut table), NodeRanks::All, request).unwrap()
}

#[test]
fn a_started_fence_moves_between_threads() {
    // Compiles only if a started fence is `Send` (an executor's task may move).
    let results = run(2, LIMIT, |rank, oob| {
        let request = WindowRequest { size: 64, policy: policy(), ..WindowRequest::default() };
        let mut w = window_of(rank, 2, &oob, &request);
        let fence = w.start_fence().unwrap();
        let done = std::thread::scope(|s| s.spawn(move || polled(Ok(fence))).join().unwrap());
        (done, w.free())
    });
    assert!(results.iter().all(|r| *r == (Ok(()), Ok(()))), "{results:?}");
}

#[test]
fn a_rank_that_left_stays_left_when_it_frees_again() {
    // Rank 1 leaves, then (misuse) starts freeing: rank 0's window fence
    // still fails at once, naming it, rather than wait for its answer.
    let results = run(2, LIMIT, |rank, oob| {
        let mut request = WindowRequest { size: 64, policy: policy(), ..WindowRequest::default() };
        request.policy.timeout_ns = if cfg!(miri) { 0 } else { 5_000_000_000 };
        let w = window_of(rank, 2, &oob, &request);
        w.fence().unwrap();
        kpccl_core::Oob::barrier(&oob).unwrap();
        if rank == 1 {
            w.leave_in_place();
            w.start_freeing();
            kpccl_core::Oob::barrier(&oob).unwrap();
            return None;
        }
        kpccl_core::Oob::barrier(&oob).unwrap();
        Some(w.fence())
    });
    assert_eq!(results[0], Some(Err(FenceError::PeerLeft { rank: 1, waiter: 0 })));
}

#[test]
fn a_started_flat_fence_the_others_completed_is_dropped_without_poisoning() {
    // Rank 0 starts a flat fence, rank 1's arrival completes it, and rank 0
    // drops it unpolled (an executor's timeout firing a moment too late):
    // nothing is broken, so both ranks free the window cleanly.
    let results = run(2, LIMIT, |rank, oob| {
        let request = WindowRequest { size: 64, policy: policy(), barrier: Barrier::Flat, ..WindowRequest::default() };
        let mut w = window_of(rank, 2, &oob, &request);
        if rank == 0 {
            let started = w.start_fence().unwrap();
            kpccl_core::Oob::barrier(&oob).unwrap();
            kpccl_core::Oob::barrier(&oob).unwrap();
            drop(started);
        } else {
            kpccl_core::Oob::barrier(&oob).unwrap();
            w.fence().unwrap();
            kpccl_core::Oob::barrier(&oob).unwrap();
        }
        kpccl_core::Oob::barrier(&oob).unwrap();
        (w.poisoned(), w.free())
    });
    assert!(results.iter().all(|r| *r == (None, Ok(()))), "{results:?}");
}

#[test]
#[cfg_attr(miri, ignore = "rank 0 is left waiting for ever, which Miri reports at the end")]
fn a_rank_that_panics_is_reported_at_once_with_its_message() {
    // Rank 1 panics while rank 0 waits for it in an out-of-band barrier that
    // will never complete: `run` reports the panic, naming the rank and
    // saying what it was, without waiting for its limit.
    let limit = Duration::from_secs(20);
    let started = std::time::Instant::now();
    let outcome = std::panic::catch_unwind(|| {
        run(2, limit, |rank, oob| {
            if rank == 1 {
                panic!("rank 1 broke down");
            }
            kpccl_core::Oob::barrier(&oob)
        })
    });
    let payload = outcome.expect_err("a rank panicked");
    let message = payload.downcast_ref::<String>().map_or("(not a string)", String::as_str);
    assert!(message.contains("rank 1 panicked: rank 1 broke down"), "{message}");
    assert!(started.elapsed() < limit / 2, "reported after {:?}", started.elapsed());
}

#[test]
fn a_rank_count_that_is_not_the_groups_fails_without_a_hang() {
    // Rank 1 of a thread group of 2 says the communicator has 3 ranks, or 1
    // (then it is out of range); rank 0 says 2, or 3 when rank 1 says 2. The
    // out-of-band allgather of the wrong size still takes part, so every
    // rank fails in the protocol, rather than the others waiting in its
    // barrier for ever.
    for counts in [[2u32, 3], [2, 1], [3, 2]] {
        let results = run(2, LIMIT, move |rank, oob| {
            let platform = ThreadPlatform::new(4096);
            let n = counts[rank as usize];
            let mut table = vec![Record::default(); n as usize];
            create_comm(Collective::new(&platform, &oob, rank, n, &mut table), Placement::alone(rank)).map(drop)
        });
        assert!(results.iter().all(Result::is_err), "{counts:?}: {results:?}");
    }
}
