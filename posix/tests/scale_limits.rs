//! The edges of a window's numbers: empty and one-byte segments beside
//! each other, and requests whose rounding up to pages passes every limit,
//! refused alike on every rank, naming the rank that asked.
#![allow(missing_docs)]

use core::time::Duration;

use kpccl_core::{MAX_RANKS, threads};
use kpccl_posix::{Comm, ErrorKind};

#[test]
fn empty_and_one_byte_segments_sit_side_by_side() {
    let outcomes = threads::run(4, Duration::from_secs(60), |rank, oob| {
        let comm = Comm::new(oob, rank, 4).map_err(|e| e.to_string())?;
        let win = comm.window(usize::from(rank % 2 == 1)).alloc().map_err(|e| e.to_string())?;
        let lens: Result<Vec<usize>, _> = (0..4).map(|r| win.segment(r).map(|s| s.len)).collect();
        let lens = lens.map_err(|e| e.to_string())?;
        win.fence().map_err(|e| e.to_string())?;
        win.free().map_err(|e| e.to_string())?;
        Ok::<_, String>(lens)
    });
    for outcome in outcomes {
        assert_eq!(outcome.unwrap(), [0, 1, 0, 1]);
    }
}

#[test]
fn a_size_whose_rounding_overflows_is_refused_on_every_rank() {
    // 2^63 - 4096: the page-rounded total is 2^64 bytes, past any file offset.
    const HUGE: usize = (1 << 63) - 4096;
    // The limit quoted is this system's, as for a request just past it (it
    // quoted 2^63 - 1, the most any system maps).
    let limit = |text: &str| text.rsplit_once('(').map(|(_, l)| l.to_owned());
    let past = refusals(1 << 60);
    for (kind, text) in refusals(HUGE) {
        assert_eq!(kind, ErrorKind::InvalidArgument, "{text}");
        assert!(text.starts_with(&format!("rank 1 asked for {HUGE} bytes")), "{text}");
        assert_eq!(limit(&text), limit(&past[0].1), "{text}");
    }
}

/// Every rank's error when rank 1 of 2 asks for `size` bytes.
fn refusals(size: usize) -> Vec<(ErrorKind, String)> {
    let outcomes = threads::run(2, Duration::from_secs(60), move |rank, oob| {
        let comm = Comm::new(oob, rank, 2).map_err(|e| e.to_string())?;
        match comm.window(if rank == 1 { size } else { 0 }).alloc() {
            Ok(_) => Err(format!("rank {rank}: a window of {size} bytes was made")),
            Err(e) => Ok::<_, String>((e.kind(), e.to_string())),
        }
    });
    outcomes.into_iter().map(Result::unwrap).collect()
}

#[test]
fn one_rank_past_the_most_is_refused_naming_the_bound() {
    let outcomes = threads::run(1, Duration::from_secs(10), |_, oob| {
        Comm::new(oob, 0, MAX_RANKS + 1).map(drop).map_err(|e| (e.kind(), e.to_string()))
    });
    let (kind, text) = outcomes.into_iter().next().unwrap().unwrap_err();
    assert_eq!(kind, ErrorKind::InvalidArgument, "{text}");
    assert!(text.contains(&format!("rank count {} is outside 1 to {MAX_RANKS}", MAX_RANKS + 1)), "{text}");
}
