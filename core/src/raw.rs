//! The crate's unsafe views over mapped shared memory. Everything here
//! checks bounds and alignment before it casts (the sync blocks once, when
//! a window is built; see [`SyncBlocks`]).
#![allow(unsafe_code)]

use core::mem::{align_of, offset_of, size_of};
use core::ptr::NonNull;

use bytemuck::Pod;

use crate::fence::{self, SyncArea};
use crate::layout::Layout;
use crate::layout::shared::{Header, LINE, PeerLine, WaitRecord};
use crate::sync::{AtomicU32, AtomicU64};

/// A mapped segment seen as bytes. Other processes write it concurrently, so
/// it hands out atomics, or copies of `Pod` structures read at moments the
/// protocol guarantees no one writes them.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Mapped {
    base: NonNull<u8>,
    len: usize,
}

impl Mapped {
    /// # Safety
    /// `base..base + len` must stay mapped, readable and writable while the
    /// returned value (or anything borrowed from it) is in use.
    pub(crate) unsafe fn new(base: NonNull<u8>, len: usize) -> Self {
        Self { base, len }
    }

    /// Pointer to `offset`, if `offset..offset + size` lies inside and `offset` is `align`-aligned.
    #[inline]
    fn at(&self, offset: u64, size: usize, align: usize) -> Option<NonNull<u8>> {
        let offset = usize::try_from(offset).ok()?;
        if offset.checked_add(size)? > self.len || !(self.base.as_ptr() as usize + offset).is_multiple_of(align) {
            return None;
        }
        // SAFETY: `offset + size <= len`, so the result is inside the mapping.
        Some(unsafe { self.base.add(offset) })
    }

    /// Reads the `T` at `offset`, or `None` if it lies outside.
    pub(crate) fn read<T: Pod>(&self, offset: u64) -> Option<T> {
        let p = self.at(offset, size_of::<T>(), align_of::<T>())?;
        // SAFETY: in bounds and aligned; any bytes are a valid `T` (`Pod`); a
        // volatile read because another process may have written the bytes.
        Some(unsafe { p.cast::<T>().as_ptr().read_volatile() })
    }

    /// Copies the bytes at `offset..offset + buf.len()` into `buf`. Panics if
    /// they lie outside (a layout bug).
    pub(crate) fn read_bytes(&self, offset: u64, buf: &mut [u8]) {
        let p = self.at(offset, buf.len(), 1).expect("read outside the window");
        // SAFETY: the source is in bounds (checked) and cannot overlap `buf`,
        // which is this process's own memory; the caller reads only bytes no
        // one writes concurrently.
        unsafe { core::ptr::copy_nonoverlapping(p.as_ptr(), buf.as_mut_ptr(), buf.len()) };
    }

    /// Writes `v` at `offset`. Panics if it lies outside (a layout bug).
    pub(crate) fn write<T: Pod>(&self, offset: u64, v: T) {
        let p = self.at(offset, size_of::<T>(), align_of::<T>()).expect("write outside the window");
        // SAFETY: in bounds and aligned; called only on regions no other rank
        // touches at that moment (the creator's header, a rank's own pages).
        unsafe { p.cast::<T>().as_ptr().write_volatile(v) }
    }

    /// A pointer to `offset..offset + len` if it lies inside (for data segments).
    pub(crate) fn range(&self, offset: u64, len: u64) -> Option<NonNull<u8>> {
        self.at(offset, usize::try_from(len).ok()?, 1)
    }
}

/// [`LINE`] as a byte count of this platform.
const LINE_BYTES: usize = 128;
const _: () = assert!(LINE_BYTES as u64 == LINE);

/// [`Header`] as the atomics the fences use (the poison word and the flat
/// barrier's arrivals); the fields before them are read as plain data.
#[repr(C)]
pub(crate) struct HeaderWords {
    _fields: [AtomicU64; 16],
    /// [`Header::poison`].
    pub(crate) poison: AtomicU32,
    /// [`Header::full_fence_wakes`].
    pub(crate) full_fence_wakes: AtomicU32,
    _padding: [AtomicU32; 30],
    /// [`Header::arrivals`].
    pub(crate) arrivals: AtomicU64,
    _padding2: [AtomicU64; 15],
}

/// Line [`Layout::WAIT_LINE`] of a sync block: [`WaitRecord`] as atomics.
#[repr(C)]
pub(crate) struct WaitLine {
    /// [`WaitRecord::doorbell`].
    pub(crate) doorbell: AtomicU32,
    /// [`WaitRecord::sleeping`].
    pub(crate) sleeping: AtomicU32,
    /// [`WaitRecord::cpu`].
    pub(crate) cpu: AtomicU32,
    _padding: AtomicU32,
    /// [`WaitRecord::left`].
    pub(crate) left: AtomicU64,
    _reserved: [AtomicU64; 5],
    /// [`WaitRecord::flat_arrived`].
    pub(crate) flat_arrived: AtomicU64,
    /// [`WaitRecord::blocked`].
    pub(crate) blocked: AtomicU32,
    _padding2: AtomicU32,
    _reserved2: [AtomicU64; 6],
}

/// Every other line of a sync block, as atomics: a window-fence round's slot
/// (`epoch`), or the [`PeerLine`] one writer keeps for the block's reader.
#[repr(C)]
pub(crate) struct SyncLine {
    /// [`PeerLine::fence`], or the slot of a window-fence round.
    pub(crate) epoch: AtomicU64,
    /// [`PeerLine::signals`].
    pub(crate) signals: AtomicU64,
    /// [`PeerLine::taken`].
    pub(crate) taken: AtomicU64,
    _reserved: [AtomicU64; 13],
}

// The atomic views are the bytemuck-checked `Pod` structures of the shared
// format, word for word (an atomic has its integer's size), and need no more
// alignment than the 8 bytes `SyncBlocks::new` checks.
const _: () = {
    assert!(size_of::<HeaderWords>() == size_of::<Header>());
    assert!(offset_of!(HeaderWords, poison) == offset_of!(Header, poison));
    assert!(offset_of!(HeaderWords, full_fence_wakes) == offset_of!(Header, full_fence_wakes));
    assert!(offset_of!(HeaderWords, arrivals) == offset_of!(Header, arrivals));
    assert!(size_of::<WaitLine>() == LINE_BYTES && size_of::<WaitRecord>() == LINE_BYTES);
    assert!(offset_of!(WaitLine, doorbell) == offset_of!(WaitRecord, doorbell));
    assert!(offset_of!(WaitLine, sleeping) == offset_of!(WaitRecord, sleeping));
    assert!(offset_of!(WaitLine, flat_arrived) == offset_of!(WaitRecord, flat_arrived));
    assert!(offset_of!(WaitLine, cpu) == offset_of!(WaitRecord, cpu));
    assert!(offset_of!(WaitLine, blocked) == offset_of!(WaitRecord, blocked));
    assert!(offset_of!(WaitLine, left) == offset_of!(WaitRecord, left));
    assert!(size_of::<SyncLine>() == LINE_BYTES && size_of::<PeerLine>() == LINE_BYTES);
    assert!(offset_of!(SyncLine, epoch) == offset_of!(PeerLine, fence));
    assert!(offset_of!(SyncLine, signals) == offset_of!(PeerLine, signals));
    assert!(offset_of!(SyncLine, taken) == offset_of!(PeerLine, taken));
    assert!(align_of::<HeaderWords>() <= 8 && align_of::<WaitLine>() <= 8 && align_of::<SyncLine>() <= 8);
};

/// A window's sync blocks and header words as typed lines, bounds-checked
/// once when the window is built: a slot is reached by indexing, with no
/// check left on the fence path (measured: a 2-rank `peer_fence` ping-pong
/// 75 ns with per-access byte-offset checks, 58 ns without, the bare flag
/// exchange with `pause` 58 ns).
///
/// Crate-private, and reached only through [`SyncArea`] by the fences of a
/// [`crate::Window`], which pass their own rank (checked when the window is
/// made) and ranks the fences check (`partner`, `check_member`) or compute
/// modulo the rank count, and rounds below `rounds(nranks)`: so the rank and
/// round bounds are `debug_assert!`s (a caller outside that argument would
/// need a real check).
#[derive(Clone, Copy, Debug)]
pub(crate) struct SyncBlocks {
    /// The window's header.
    header: NonNull<HeaderWords>,
    /// Line 0 of rank 0's sync block; rank `r`'s line `l` is `r * block_lines + l` lines on.
    base: NonNull<SyncLine>,
    /// Ranks, hence sync blocks.
    nranks: u32,
    /// Window-fence rounds: lines `1..=rounds` of a block.
    rounds: u32,
    /// The line of a block written by rank 0 ([`Layout::peer_line_index`]`(0)`).
    first_peer_line: u32,
    /// Lines from one sync block to the next.
    block_lines: usize,
}

impl SyncBlocks {
    /// The header and sync blocks of `layout` inside `mem`. Panics if they do
    /// not lie inside it, aligned, or the lines the fences index do not fit a
    /// block: the layout was verified, so that is a bug.
    pub(crate) fn new(mem: &Mapped, layout: &Layout) -> Self {
        let (nranks, rounds) = (layout.nranks(), layout.rounds());
        let region = layout.sync_region(0);
        let stride = usize::try_from(region.len).expect("a sync block fits the mapping");
        assert!(stride.is_multiple_of(LINE_BYTES), "sync blocks are whole lines");
        let block_lines = stride / LINE_BYTES;
        // Line indices grow with their rank or round: the last ones bound them all.
        let last_line = layout.peer_line_index(nranks.checked_sub(1).expect("a window has ranks"));
        assert!(rounds == fence::rounds(nranks), "the layout's rounds are the window fence's");
        assert!(
            Layout::WAIT_LINE < Layout::round_line_index(0)
                && Layout::round_line_index(rounds) <= layout.peer_line_index(0)
                && (last_line as usize) < block_lines,
            "every line the fences use fits a sync block"
        );
        let total = stride.checked_mul(nranks as usize).expect("sync blocks fit the mapping");
        let base = mem.at(region.offset, total, align_of::<SyncLine>()).expect("sync blocks lie inside the window");
        let header = mem.at(0, size_of::<HeaderWords>(), align_of::<HeaderWords>()).expect("the header lies inside");
        Self {
            header: header.cast(),
            base: base.cast(),
            nranks,
            rounds,
            first_peer_line: layout.peer_line_index(0),
            block_lines,
        }
    }

    /// The header's atomic words.
    #[inline]
    pub(crate) fn header(&self) -> &HeaderWords {
        // SAFETY: `new` checked that the header lies inside the mapping,
        // aligned; every field is an atomic, and the mapping outlives `self`.
        unsafe { self.header.as_ref() }
    }

    /// Line `line` of `reader`'s sync block.
    ///
    /// # Safety
    /// `reader < nranks`, and `line` is [`Layout::WAIT_LINE`], a round's line
    /// or a rank's peer line (below `first_peer_line + nranks`).
    #[inline]
    unsafe fn line(&self, reader: u32, line: u32) -> &SyncLine {
        debug_assert!(reader < self.nranks && (line as usize) < self.block_lines, "rank {reader}, line {line}");
        // SAFETY: `new` checked that `nranks` blocks of `block_lines` lines lie
        // inside the mapping, 8-aligned, and that every line the caller may
        // name is below `block_lines`.
        let at = unsafe { self.base.add(reader as usize * self.block_lines + line as usize) };
        // SAFETY: a line inside the mapping, 8-aligned; a `SyncLine` is one
        // line of atomics (checked at compile time above); the mapping
        // outlives `self`.
        unsafe { at.as_ref() }
    }

    /// `rank`'s wait line.
    #[inline]
    fn wait_line(&self, rank: u32) -> &WaitLine {
        debug_assert!(rank < self.nranks, "rank {rank} of {}", self.nranks);
        // SAFETY: `rank < nranks` (see the type: the fences' ranks are checked
        // or computed modulo `nranks`), and `WAIT_LINE` is a line of every block.
        let line = unsafe { self.line(rank, Layout::WAIT_LINE) };
        // SAFETY: a `WaitLine` is, like a `SyncLine`, one line of atomics, no
        // more than 8-aligned (checked at compile time above): the same
        // memory seen with other field boundaries, for as long as `line`.
        unsafe { &*core::ptr::from_ref(line).cast::<WaitLine>() }
    }

    /// The line `writer` keeps in `reader`'s block.
    #[inline]
    fn peer_line(&self, writer: u32, reader: u32) -> &SyncLine {
        // Another rank's line would be another slot: the block's bound is not enough.
        debug_assert!(writer < self.nranks && reader < self.nranks, "ranks {writer}, {reader} of {}", self.nranks);
        // SAFETY: both ranks below `nranks` (see the type), so the line is a
        // peer line of a block.
        unsafe { self.line(reader, self.first_peer_line + writer) }
    }

    /// The line of `round` in `reader`'s block.
    #[inline]
    fn round_line(&self, round: u32, reader: u32) -> &SyncLine {
        debug_assert!(round < self.rounds && reader < self.nranks, "round {round}, rank {reader}");
        // SAFETY: `round < rounds` (the fences loop below `rounds(nranks)`,
        // which `new` checked is the layout's) and `reader < nranks` (see the
        // type), so the line is a round's line of a block.
        unsafe { self.line(reader, Layout::round_line_index(round)) }
    }
}

/// The fences' words of a mapped window, for the fences of [`crate::Window`]
/// only (see [`SyncBlocks`] for why the bounds are debug-checked).
impl SyncArea for SyncBlocks {
    #[inline]
    fn nranks(&self) -> u32 {
        self.nranks
    }
    #[inline]
    fn peer_slot(&self, writer: u32, reader: u32) -> &AtomicU64 {
        &self.peer_line(writer, reader).epoch
    }
    #[inline]
    fn signal_slot(&self, writer: u32, reader: u32) -> &AtomicU64 {
        &self.peer_line(writer, reader).signals
    }
    #[inline]
    fn taken_slot(&self, taker: u32, signaller: u32) -> &AtomicU64 {
        &self.peer_line(taker, signaller).taken
    }
    #[inline]
    fn round_slot(&self, round: u32, reader: u32) -> &AtomicU64 {
        &self.round_line(round, reader).epoch
    }
    #[inline]
    fn doorbell(&self, rank: u32) -> &AtomicU32 {
        &self.wait_line(rank).doorbell
    }
    #[inline]
    fn sleeping(&self, rank: u32) -> &AtomicU32 {
        &self.wait_line(rank).sleeping
    }
    #[inline]
    fn poison_word(&self) -> &AtomicU32 {
        &self.header().poison
    }
    #[inline]
    fn arrivals(&self) -> &AtomicU64 {
        &self.header().arrivals
    }
    #[inline]
    fn flat_arrived(&self, rank: u32) -> &AtomicU64 {
        &self.wait_line(rank).flat_arrived
    }
    fn last_cpu(&self, rank: u32) -> &AtomicU32 {
        &self.wait_line(rank).cpu
    }
    fn blocked(&self, rank: u32) -> &AtomicU32 {
        &self.wait_line(rank).blocked
    }
    fn left(&self, rank: u32) -> &AtomicU64 {
        &self.wait_line(rank).left
    }
}

#[cfg(test)]
mod tests {
    use std::vec;
    use std::vec::Vec;

    use super::*;
    use crate::layout::{LayoutMode, LayoutParams};

    /// One line of a heap window: 128-aligned on every target (a `u64` is
    /// only 4-aligned on 32-bit x86, where the atomic views need 8).
    #[derive(Clone, Copy)]
    #[repr(C, align(128))]
    struct Line([u64; 16]);

    /// A zeroed, line-aligned heap window of `nranks` empty segments, and its layout.
    fn window(nranks: u32, mode: LayoutMode) -> (Vec<Line>, Layout) {
        let layout = Layout::new(LayoutParams { nranks, mode, align: 64, page: 4096 }, |_| 0).expect("a layout");
        (vec![Line([0; 16]); usize::try_from(layout.total()).expect("small") / LINE_BYTES], layout)
    }

    fn blocks(buf: &mut [Line], layout: &Layout) -> SyncBlocks {
        // SAFETY: the buffer outlives the view (both live in the test's frame).
        let mem = unsafe { Mapped::new(NonNull::from(&mut *buf).cast(), buf.len() * LINE_BYTES) };
        SyncBlocks::new(&mem, layout)
    }

    /// Every word the typed lines reach is the one the layout's byte offsets name.
    #[test]
    fn typed_lines_are_the_layouts_offsets() {
        for mode in [LayoutMode::Contiguous, LayoutMode::Aligned] {
            for n in [1, 2, 3, 5, 8] {
                let (mut buf, layout) = window(n, mode);
                let base = buf.as_ptr() as usize;
                let s = blocks(&mut buf, &layout);
                let at = |p: *const u8| (p as usize - base) as u64;
                let at64 = |w: &AtomicU64| at(w.as_ptr().cast());
                let at32 = |w: &AtomicU32| at(w.as_ptr().cast());
                assert_eq!(at32(s.poison_word()), offset_of!(Header, poison) as u64);
                assert_eq!(at64(s.arrivals()), offset_of!(Header, arrivals) as u64);
                for r in 0..n {
                    let wait = layout.wait_record(r);
                    assert_eq!(at32(s.doorbell(r)), wait + offset_of!(WaitRecord, doorbell) as u64);
                    assert_eq!(at32(s.sleeping(r)), wait + offset_of!(WaitRecord, sleeping) as u64);
                    assert_eq!(at64(s.flat_arrived(r)), wait + offset_of!(WaitRecord, flat_arrived) as u64);
                    assert_eq!(at32(s.last_cpu(r)), wait + offset_of!(WaitRecord, cpu) as u64);
                    assert_eq!(at32(s.blocked(r)), wait + offset_of!(WaitRecord, blocked) as u64);
                    assert_eq!(at64(s.left(r)), wait + offset_of!(WaitRecord, left) as u64);
                    for round in 0..layout.rounds() {
                        assert_eq!(at64(s.round_slot(round, r)), layout.round_slot(round, r), "round {round} of {n}");
                    }
                    for w in 0..n {
                        assert_eq!(at64(s.peer_slot(w, r)), layout.peer_slot(w, r), "{w} -> {r} of {n}");
                        assert_eq!(at64(s.signal_slot(w, r)), layout.signal_slot(w, r));
                        assert_eq!(at64(s.taken_slot(w, r)), layout.taken_slot(w, r));
                    }
                }
            }
        }
    }

    /// The bounds are debug-asserted: a rank the fences should have refused is
    /// caught in debug builds (and by the tests, Miri and loom).
    #[cfg(debug_assertions)]
    #[test]
    #[should_panic(expected = "ranks 3, 0 of 3")]
    fn an_unchecked_rank_is_caught_in_debug_builds() {
        let (mut buf, layout) = window(3, LayoutMode::Contiguous);
        let _ = blocks(&mut buf, &layout).peer_slot(3, 0);
    }
}
