//! A platform that breaks its contract: `create` or `open` hands back a
//! mapping shorter than the window, or one of its full length at an address
//! off the page. Every rank must fail window creation, naming the rank that
//! got it (and the length, or both alignments), rather than panic (the rank
//! on the broken mapping, at its first header or atomic access) and leave
//! the others waiting for it; no name may be left behind.
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

/// How a mapping breaks the contract.
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// It says it is this many bytes long, fewer than it has.
    Short(usize),
    /// Its full length, seen this many bytes off the page.
    Shifted(usize),
}

impl Fault {
    /// What every rank is told of the rank that got it.
    fn failure(self) -> Failure {
        Failure::Platform(match self {
            Self::Short(len) => PlatformError { op: PlatformOp::Size, code: i64::try_from(len).unwrap() },
            Self::Shifted(shift) => PlatformError::misaligned(1 << shift.trailing_zeros(), PAGE),
        })
    }
}

/// The real mapping, seen through `fault`. A shifted one is a private
/// buffer a page longer, seen `shift` bytes in; the real mapping is kept
/// either way, as a platform would keep its handle.
#[derive(Debug)]
struct Broken {
    real: HeapSegment,
    len: usize,
    shifted: Option<(HeapSegment, usize)>,
}

impl Broken {
    fn new(real: HeapSegment, fault: Option<Fault>) -> Self {
        let len = real.len();
        match fault {
            None => Self { real, len, shifted: None },
            Some(Fault::Short(short)) => Self { real, len: short.min(len), shifted: None },
            Some(Fault::Shifted(shift)) => {
                // Unique names: the tests of this file run at once in one process.
                static NEXT: AtomicU64 = AtomicU64::new(0);
                // Relaxed: only uniqueness matters (the RMW gives it); it orders nothing.
                let name = format!("shifted-{}", NEXT.fetch_add(1, Ordering::Relaxed));
                let scratch = ThreadPlatform::new(PAGE);
                let buffer = scratch.create(&name, len as u64 + PAGE).unwrap();
                // The buffer lives as long as its mapping; its name is not needed.
                scratch.unlink(&name).unwrap();
                Self { real, len, shifted: Some((buffer, shift)) }
            }
        }
    }
}

impl Segment for Broken {
    fn base(&self) -> NonNull<u8> {
        match &self.shifted {
            // In bounds: the buffer is a page longer than the window.
            Some((buffer, shift)) => NonNull::new(buffer.base().as_ptr().wrapping_add(*shift)).unwrap(),
            None => self.real.base(),
        }
    }
    fn len(&self) -> usize {
        self.len
    }
    fn reserve(&self, offset: u64, len: u64) -> Result<(), PlatformError> {
        self.real.reserve(offset, len)
    }
}

/// Two ranks make a window whose `call` maps with `fault` (none: as the
/// platform maps); returns each rank's result.
fn create(call: Mapped, fault: Option<Fault>) -> Vec<Result<(), CollectiveError>> {
    let platform = Hooked::new(PAGE, move |made, s: HeapSegment| Broken::new(s, fault.filter(|_| made == call)));
    let probe = platform.inner.clone();
    let results = run(2, LIMIT, move |rank, oob| {
        let mut table = vec![Record::default(); 2];
        let request = WindowRequest { size: 256, ..WindowRequest::default() };
        let w = create_window(Collective::new(&platform, &oob, rank, 2, &mut table), NodeRanks::All, &request)?;
        assert_eq!(w.own_segment().len, 256);
        w.free().map_err(CollectiveError::from)
    });
    assert_eq!(probe.leaked(), Vec::<String>::new(), "{fault:?}: a name was left behind");
    results
}

/// Every rank fails, naming `culprit` and what is wrong with its mapping.
fn check(call: Mapped, fault: Fault, culprit: u32) {
    let failure = fault.failure();
    for (rank, result) in (0u32..).zip(create(call, Some(fault))) {
        let want = if rank == culprit {
            CollectiveError::Local(failure)
        } else {
            CollectiveError::Peer { rank: culprit, failure }
        };
        assert_eq!(result, Err(want), "{call:?} mapped {fault:?}: rank {rank}");
    }
}

/// The window here is two pages: 100 bytes hold not even the header; one
/// page the header, rank table and sync blocks, but not the data. Off by a
/// byte and by a word, the atomics cannot be reached; off by a line, they
/// can, but neither the data segments' alignment nor the lines each
/// contended word has to itself hold.
const FAULTS: [Fault; 6] =
    [Fault::Short(0), Fault::Short(100), Fault::Short(4096), Fault::Shifted(1), Fault::Shifted(4), Fault::Shifted(128)];

#[test]
fn a_broken_mapping_from_open_fails_every_rank() {
    for fault in FAULTS {
        check(Mapped::Opened, fault, 1);
    }
}

#[test]
fn a_broken_mapping_from_create_fails_every_rank() {
    for fault in FAULTS {
        check(Mapped::Created, fault, 0);
    }
}

#[test]
fn a_misaligned_mapping_is_said_in_bytes() {
    let e = PlatformError::misaligned(8, PAGE);
    assert_eq!(e.op, PlatformOp::Alignment);
    assert_eq!(
        e.to_string(),
        "cannot accept the segment's mapping: its address is aligned to 8 bytes, the window needs 4096 (the page size)"
    );
}

/// The reference run: the same double, unbroken, makes the window on every rank.
#[test]
fn a_whole_mapping_makes_the_window() {
    let results = create(Mapped::Created, None);
    assert!(results.iter().all(Result::is_ok), "{results:?}");
}
