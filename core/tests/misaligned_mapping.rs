//! A platform that breaks its contract: `create` or `open` hands back a
//! mapping of the window's full length whose address is not aligned to the
//! page. Every rank must fail window creation, naming the rank that got it
//! and both alignments, rather than panic (the rank on the misaligned
//! mapping, on its first atomic or header access) and leave the others
//! waiting for it; no name may be left behind.
#![cfg(not(loom))] // the window API is compiled out under loom
#![allow(missing_docs, clippy::std_instead_of_core, clippy::alloc_instead_of_core)]

use core::ptr::NonNull;
use core::time::Duration;

use kpccl_core::error::PlatformOp;
use kpccl_core::protocol::Record;
use kpccl_core::sync::{AtomicU64, Ordering};
use kpccl_core::threads::{HeapSegment, ThreadPlatform, run};
use kpccl_core::{
    Collective, CollectiveError, Failure, NodeRanks, Platform, PlatformError, Segment, WindowRequest, create_window,
};
use kpccl_testkit::{Hooked, Mapped};

/// A hang shows as a panic of `run` after this long (Miri reports deadlocks itself).
const LIMIT: Duration = Duration::from_secs(if cfg!(miri) { 1 << 40 } else { 20 });

/// The page of the test platform.
const PAGE: u64 = 4096;

/// The real mapping, or (`shift` above 0) one of the window's full length
/// that starts `shift` bytes into a private buffer: its length is honest,
/// its address off the page. The real mapping is kept either way, as a
/// platform would keep its handle.
#[derive(Debug)]
struct Shifted {
    real: HeapSegment,
    buffer: Option<HeapSegment>,
    shift: usize,
}

impl Shifted {
    /// `real`, or a buffer of its length plus a page seen `shift` bytes in.
    fn new(real: HeapSegment, shift: usize) -> Self {
        if shift == 0 {
            return Self { real, buffer: None, shift };
        }
        // Unique names: the tests of this file run at once in one process.
        static NEXT: AtomicU64 = AtomicU64::new(0);
        // Relaxed: only uniqueness matters (the RMW gives it); it orders nothing.
        let name = format!("misaligned-{}", NEXT.fetch_add(1, Ordering::Relaxed));
        let scratch = ThreadPlatform::new(PAGE);
        let buffer = scratch.create(&name, real.len() as u64 + PAGE).unwrap();
        // The buffer lives as long as its mapping; its name is not needed.
        scratch.unlink(&name).unwrap();
        Self { real, buffer: Some(buffer), shift }
    }
}

impl Segment for Shifted {
    fn base(&self) -> NonNull<u8> {
        match &self.buffer {
            // In bounds: the buffer is a page longer than the window.
            Some(b) => NonNull::new(b.base().as_ptr().wrapping_add(self.shift)).unwrap(),
            None => self.real.base(),
        }
    }
    fn len(&self) -> usize {
        self.real.len()
    }
    fn reserve(&self, offset: u64, len: u64) -> Result<(), PlatformError> {
        self.real.reserve(offset, len)
    }
}

/// Two ranks make a window whose `call` maps `shift` bytes off the page;
/// returns each rank's result.
fn create(call: Mapped, shift: usize) -> Vec<Result<(), CollectiveError>> {
    let platform = Hooked::new(PAGE, move |made, s: HeapSegment| Shifted::new(s, if made == call { shift } else { 0 }));
    let probe = platform.inner.clone();
    let results = run(2, LIMIT, move |rank, oob| {
        let mut table = vec![Record::default(); 2];
        let request = WindowRequest { size: 256, ..WindowRequest::default() };
        let w = create_window(Collective::new(&platform, &oob, rank, 2, &mut table), NodeRanks::All, &request)?;
        w.free().map_err(CollectiveError::from)
    });
    assert_eq!(probe.leaked(), Vec::<String>::new(), "a name was left behind");
    results
}

/// Every rank fails, naming `culprit`, the mapping's alignment and the page.
fn check(call: Mapped, shift: usize, culprit: u32) {
    let error = PlatformError::misaligned(1 << shift.trailing_zeros(), PAGE);
    assert_eq!(error.op, PlatformOp::Alignment);
    let failure = Failure::Platform(error);
    let results = create(call, shift);
    for (rank, result) in (0u32..).zip(results) {
        let want = if rank == culprit {
            CollectiveError::Local(failure)
        } else {
            CollectiveError::Peer { rank: culprit, failure }
        };
        assert_eq!(result, Err(want), "{call:?} mapped {shift} bytes off the page: rank {rank}");
    }
}

/// Off by a byte and by a word, the atomics cannot be reached; off by a
/// line, they can, but neither the data segments' alignment nor the lines
/// each contended word has to itself hold.
const SHIFTS: [usize; 3] = [1, 4, 128];

#[test]
fn a_misaligned_mapping_from_open_fails_every_rank() {
    for shift in SHIFTS {
        check(Mapped::Opened, shift, 1);
    }
}

#[test]
fn a_misaligned_mapping_from_create_fails_every_rank() {
    for shift in SHIFTS {
        check(Mapped::Created, shift, 0);
    }
}

#[test]
fn the_error_names_both_alignments() {
    let e = PlatformError::misaligned(8, PAGE);
    assert_eq!(
        e.to_string(),
        "cannot accept the segment's mapping: its address is aligned to 8 bytes, the window needs 4096 (the page size)"
    );
}

/// The reference run: unshifted, the same double makes a window on every rank.
#[test]
fn an_aligned_mapping_makes_the_window() {
    let results = create(Mapped::Created, 0);
    assert!(results.iter().all(Result::is_ok), "{results:?}");
}
