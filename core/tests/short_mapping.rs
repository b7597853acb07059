//! A platform that breaks its contract: `create` or `open` hands back a
//! mapping shorter than the window. Every rank must fail window creation,
//! naming the rank that got it, rather than panic (the rank on the short
//! mapping) and leave the others waiting for it; no name may be left behind.
#![cfg(not(loom))] // the window API is compiled out under loom
#![allow(missing_docs, clippy::std_instead_of_core, clippy::alloc_instead_of_core)]

use core::ptr::NonNull;
use core::time::Duration;

use kpccl_core::error::PlatformOp;
use kpccl_core::protocol::Record;
use kpccl_core::threads::{HeapSegment, run};
use kpccl_core::{
    Collective, CollectiveError, Failure, NodeRanks, PlatformError, Segment, WindowRequest, create_window,
};
use kpccl_testkit::{Hooked, Mapped};

/// A hang shows as a panic of `run` after this long (Miri reports deadlocks itself).
const LIMIT: Duration = Duration::from_secs(if cfg!(miri) { 1 << 40 } else { 20 });

/// A heap segment that says it is `len` bytes long, fewer than it has.
#[derive(Debug)]
struct Short {
    inner: HeapSegment,
    len: usize,
}

impl Segment for Short {
    fn base(&self) -> NonNull<u8> {
        self.inner.base()
    }
    fn len(&self) -> usize {
        self.len
    }
    fn reserve(&self, offset: u64, len: u64) -> Result<(), PlatformError> {
        self.inner.reserve(offset, len)
    }
}

/// Two ranks make a window whose `call` maps `len` bytes; returns each rank's result.
fn create(call: Mapped, len: usize) -> Vec<Result<(), CollectiveError>> {
    let platform = Hooked::new(4096, move |made, s: HeapSegment| {
        let len = if made == call { len.min(s.len()) } else { s.len() };
        Short { inner: s, len }
    });
    let probe = platform.inner.clone();
    let results = run(2, LIMIT, move |rank, oob| {
        let mut table = vec![Record::default(); 2];
        let request = WindowRequest { size: 256, ..WindowRequest::default() };
        let w = create_window(Collective::new(&platform, &oob, rank, 2, &mut table), NodeRanks::All, &request)?;
        // A window made on a short mapping would not hold its data segments.
        assert_eq!(w.own_segment().len, 256);
        w.free().map_err(CollectiveError::from)
    });
    assert_eq!(probe.leaked(), Vec::<String>::new(), "a name was left behind");
    results
}

/// Every rank fails, naming `culprit` and the short length.
fn check(call: Mapped, len: usize, culprit: u32) {
    let failure = Failure::Platform(PlatformError { op: PlatformOp::Size, code: i64::try_from(len).unwrap() });
    let results = create(call, len);
    for (rank, result) in (0u32..).zip(results) {
        let want = if rank == culprit {
            CollectiveError::Local(failure)
        } else {
            CollectiveError::Peer { rank: culprit, failure }
        };
        assert_eq!(result, Err(want), "{call:?} mapped {len} bytes: rank {rank}");
    }
}

/// The window here is two pages: 100 bytes hold not even the header; one
/// page the header, rank table and sync blocks, but not the data.
const SHORT: [usize; 3] = [0, 100, 4096];

#[test]
fn a_short_mapping_from_open_fails_every_rank() {
    for len in SHORT {
        check(Mapped::Opened, len, 1);
    }
}

#[test]
fn a_short_mapping_from_create_fails_every_rank() {
    for len in SHORT {
        check(Mapped::Created, len, 0);
    }
}
