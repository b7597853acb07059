//! A rank-table entry written over after creation (a stray write of a peer's)
//! is refused, not followed: a segment that no longer lies in the data area
//! is an error naming the rank, never a panic or a pointer into the sync
//! blocks, and a rank's own segment does not depend on the shared table.
#![cfg(not(loom))] // the window API is compiled out under loom
#![allow(missing_docs, clippy::std_instead_of_core, clippy::alloc_instead_of_core)]

use core::mem::offset_of;
use core::time::Duration;
use std::sync::{Arc, Barrier};
use std::vec;
use std::vec::Vec;

use kpccl_core::layout::shared::RankEntry;
use kpccl_core::threads::{ThreadPlatform, run};
use kpccl_core::{Collective, FenceError, LayoutMode, NodeRanks, Record, Window, WindowRequest, create_window};

const NRANKS: u32 = 2;
const SIZE: u64 = 4096;

/// Writes `value` over field `field` (a byte offset into [`RankEntry`]) of
/// rank `rank`'s entry in `w`'s shared table.
fn overwrite(w: &Window<ThreadPlatform>, rank: u32, field: usize, value: u64) {
    let own = w.own_segment();
    let own_offset = usize::try_from(w.rank_entry(w.rank()).unwrap().offset).unwrap();
    let at = usize::try_from(w.layout().rank_entry(rank)).unwrap() + field;
    let field = own.ptr.as_ptr().wrapping_sub(own_offset).wrapping_add(at);
    // SAFETY: `own.ptr - own_offset` is the window's first byte and `at` an
    // 8-byte field of the rank table inside it; the other rank reads no
    // entry meanwhile (it waits on the test's barrier).
    unsafe { field.cast::<[u8; 8]>().write_volatile(value.to_ne_bytes()) };
}

#[test]
fn an_overwritten_entry_is_refused_and_the_own_segment_kept() {
    let page = 4096;
    let barrier = Arc::new(Barrier::new(NRANKS as usize));
    let results = run(NRANKS, Duration::from_secs(60), move |rank, oob| {
        let platform = ThreadPlatform::new(page);
        let mut table = vec![Record::default(); NRANKS as usize];
        let request = WindowRequest { size: SIZE, mode: LayoutMode::Aligned, ..WindowRequest::default() };
        let w = create_window(Collective::new(&platform, &oob, rank, NRANKS, &mut table), NodeRanks::All, &request)
            .unwrap();
        // Both out of creation: no rank reads the table while rank 0 writes it.
        barrier.wait();
        let mut seen = Vec::new();
        if rank == 0 {
            let (layout, peer, own) = (*w.layout(), w.segment(1).unwrap(), w.own_segment());
            let valid = w.rank_entry(1).unwrap();
            let (offset, size) = (offset_of!(RankEntry, offset), offset_of!(RankEntry, size));
            for (field, value) in [
                (offset, layout.sync_block(1)), // into the sync blocks
                (offset, 0),                    // onto the header
                (offset, layout.total()),       // past the window
                (offset, valid.offset + 8),     // misaligned
                (size, layout.total()),         // past the window's end
                (size, u64::MAX),               // an end that overflows
            ] {
                overwrite(&w, 1, field, value);
                seen.push(w.segment(1).map(|_| ()));
                overwrite(&w, 1, offset, valid.offset);
                overwrite(&w, 1, size, valid.size);
            }
            assert_eq!(w.segment(1), Ok(peer), "the restored entry is followed again");
            overwrite(&w, 0, offset, layout.sync_block(0));
            assert_eq!(w.segment(0), Ok(own), "the own segment is not read back from the table");
            assert_eq!(w.own_segment(), own);
        }
        barrier.wait();
        let freed = w.free();
        (seen, freed)
    });
    let refused = Err(FenceError::RankTableOverwritten { rank: 1 });
    assert_eq!(results[0].0, vec![refused; 6]);
    for (rank, (_, freed)) in results.iter().enumerate() {
        assert_eq!(*freed, Ok(()), "rank {rank} frees the window");
    }
}
