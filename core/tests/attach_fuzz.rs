//! Fuzzing the attach-time validation: a byte of the header or rank table is
//! corrupted between creation and a peer's attach. The attaching rank must
//! refuse the window (and so every rank must fail) whenever the byte matters,
//! and nothing may panic, hang or leak a name, whatever the byte.
//!
//! Not under Miri: the injected corruption itself is a plain write racing
//! with rank 0's reads of its header (an artefact of the injection).
#![cfg(not(any(miri, loom)))] // loom: the window API is compiled out
#![allow(missing_docs, clippy::std_instead_of_core, clippy::alloc_instead_of_core)]

use core::mem::offset_of;
use core::time::Duration;

use kpccl_core::layout::shared::{Header, RankEntry};
use kpccl_core::protocol::Record;
use kpccl_core::threads::{HeapSegment, run};
use kpccl_core::{LayoutMode, Segment, WindowRequest};
use kpccl_testkit::{Hooked, Mapped};
use proptest::prelude::*;

const NRANKS: u32 = 2;
const HEADER: usize = size_of::<Header>();
const TABLE_END: usize = HEADER + NRANKS as usize * size_of::<RankEntry>();

/// Whether a corrupted byte at `offset` must make the attach fail: any byte
/// of the header but the poison word, and the checked fields of an entry.
fn matters(offset: usize) -> bool {
    let poison = offset_of!(Header, poison);
    if offset < HEADER {
        return !(poison..poison + 4).contains(&offset);
    }
    let within = (offset - HEADER) % size_of::<RankEntry>();
    within < offset_of!(RankEntry, padding)
}

/// Creates a 2-rank window with rank 1's view corrupted at `offset`; returns
/// whether each rank got a window.
fn attach_with_corruption(offset: usize, xor: u8) -> Vec<bool> {
    // Flips bits of one byte of the segment when rank 1 opens it.
    let platform = Hooked::new(4096, move |made, s: HeapSegment| {
        if made == Mapped::Opened {
            assert!(offset < s.len());
            // SAFETY: in bounds (asserted).
            let byte = unsafe { s.base().as_ptr().add(offset) };
            // SAFETY: a byte of the header or rank table, which no rank writes after creation.
            unsafe { *byte ^= xor };
        }
        s
    });
    let probe = platform.clone();
    let made = run(NRANKS, Duration::from_secs(20), move |rank, oob| {
        let mut table = vec![Record::default(); NRANKS as usize];
        let mut request = WindowRequest { size: 256, mode: LayoutMode::Contiguous, ..WindowRequest::default() };
        request.policy.timeout_ns = 2_000_000_000;
        kpccl_core::create_window(
            kpccl_core::Collective::new(&platform, &oob, rank, NRANKS, &mut table),
            kpccl_core::NodeRanks::All,
            &request,
        )
        .is_ok()
    });
    assert_eq!(probe.inner.leaked(), Vec::<String>::new(), "a name was left behind");
    made
}

fn check(offset: usize, xor: u8) {
    let made = attach_with_corruption(offset, xor);
    if matters(offset) {
        assert_eq!(made, vec![false, false], "a corrupted byte at {offset} (^{xor:#x}) was accepted");
    } else {
        assert_eq!(made[0], made[1], "ranks disagree on a window corrupted at {offset}");
    }
}

/// The regression corpus: one byte of every header field and of every
/// checked rank-table field, plus the unchecked padding and the poison word.
#[test]
fn corpus() {
    let fields =
        [0, 8, 12, 16, 20, 24, 32, 40, 48, 56, 64, 72, 80, 84, 120, 128, 131, 132, 200, 255, 256, 263, 300, 383];
    let entry = [0, 8, 16, 24, 32, 36, 40, 63];
    let offsets = fields.into_iter().chain([0, 1].into_iter().flat_map(|r| entry.map(|o| HEADER + r * 64 + o)));
    for offset in offsets {
        check(offset, 0x01);
        check(offset, 0x80);
    }
}

proptest! {
    // No regression files: the corpus above is the committed one.
    #![proptest_config(ProptestConfig {
        cases: 64,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]
    #[test]
    fn any_corrupted_byte(offset in 0..TABLE_END, xor in 1..=255u8) {
        check(offset, xor);
    }
}
