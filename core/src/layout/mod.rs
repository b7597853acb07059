//! The window layout: a pure function from the ranks' requests to every
//! offset of the shared segment.
//!
//! ```text
//! 0            header (384 B: constants; the poison word; the flat barrier's counter)
//! rank_table   nranks x RankEntry (64 B)
//! sync_base    one sync block per rank j, read (spun on) by j only:
//!                line 0            WaitRecord (j's doorbell)
//!                line 1 + k        window-fence slot of round k, written by (j - 2^k) mod n
//!                line 1 + R + i    PeerLine written by rank i: its peer-fence epoch,
//!                                  its signal count, its count of j's signals taken
//!              (page-padded in aligned mode, so j's reservation places it on j's node)
//! data_base    data segments, in rank order
//! ```
//! Every rank computes the same layout from the same allgathered inputs; the
//! digest of those inputs goes into the header so that a rank that computed
//! from different inputs is caught at attach.

mod digest;
pub mod shared;

pub use digest::Digest;
use shared::{Header, LINE, PeerLine, RankEntry};

use crate::error::LayoutError;

/// The version of the shared layout and protocol; bumped on any change.
pub const VERSION: u32 = 7;

/// `size_of::<Header>()`, as stored in the header.
const HEADER_SIZE: u32 = 384;
const _: () = assert!(size_of::<Header>() == HEADER_SIZE as usize);

/// The most ranks a window may have.
pub const MAX_RANKS: u32 = 1024;
const _: () = assert!(MAX_RANKS <= crate::fence::NAMEABLE_RANKS, "two ranks fit the poison word");

/// The longest a window may be, in bytes. A window is one shared-memory
/// segment, a file sized by `ftruncate`, whose length is an `off_t`: a
/// signed 64-bit file offset, so no file holds more than `i64::MAX` bytes
/// (asking for more fails there with `EINVAL` or `EFBIG`, on the creator
/// alone). Every rank maps the whole window and reaches into it with
/// pointer offsets, which past `isize::MAX` are undefined behaviour
/// (`ptr::add`), so it must fit an `isize` too (less on 32-bit targets).
pub const MAX_TOTAL: u64 = {
    let isize_max = isize::MAX.unsigned_abs() as u64;
    if isize_max < i64::MAX.unsigned_abs() { isize_max } else { i64::MAX.unsigned_abs() }
};

/// The smallest alignment of a data segment in contiguous mode.
pub const MIN_SEGMENT_ALIGN: u64 = 64;

/// How data segments are placed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LayoutMode {
    /// Rank r's segment follows rank r-1's, aligned to the requested alignment
    /// (at least 64 bytes), like `MPI_Win_allocate_shared`.
    #[default]
    Contiguous,
    /// Every segment starts on a page and is padded to a page, so its owner's
    /// reservation (its first touch) puts it on the owner's NUMA node.
    Aligned,
}

crate::codes!(LayoutMode: u32 { Contiguous = 0, Aligned = 1 });

/// The inputs every rank must agree on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LayoutParams {
    /// Ranks in the window.
    pub nranks: u32,
    /// How data segments are placed.
    pub mode: LayoutMode,
    /// The alignment of every data segment (a power of two; raised to 64 bytes,
    /// and to the page in aligned mode).
    pub align: u64,
    /// The page size (a power of two, at least one [`LINE`]).
    pub page: u64,
}

impl LayoutParams {
    /// Checks the parameters on their own.
    pub fn validate(&self) -> Result<(), LayoutError> {
        if self.nranks == 0 || self.nranks > MAX_RANKS {
            return Err(LayoutError::RankCount { nranks: self.nranks, max: MAX_RANKS });
        }
        if !self.align.is_power_of_two() {
            return Err(LayoutError::Alignment { align: self.align });
        }
        if !self.page.is_power_of_two() || self.page < LINE {
            return Err(LayoutError::PageSize { page: self.page });
        }
        if self.align > self.page {
            return Err(LayoutError::AlignmentAbovePage { align: self.align, page: self.page });
        }
        Ok(())
    }

    /// The alignment data segments actually get.
    #[must_use]
    pub fn segment_align(&self) -> u64 {
        let floor = match self.mode {
            LayoutMode::Contiguous => MIN_SEGMENT_ALIGN,
            LayoutMode::Aligned => self.page,
        };
        self.align.max(floor)
    }
}

/// What a region of the window holds (for checks and diagnostics).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegionKind {
    /// The header.
    Header,
    /// The rank table.
    RankTable,
    /// The sync block read by a rank.
    Sync(u32),
    /// The data segment of a rank.
    Data(u32),
}

/// A byte range of the window and the alignment it is promised.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    /// What it holds.
    pub kind: RegionKind,
    /// Where it starts.
    pub offset: u64,
    /// How long it is.
    pub len: u64,
    /// The alignment `offset` is guaranteed to have.
    pub align: u64,
}

/// Every offset of a window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    params: LayoutParams,
    rounds: u32,
    rank_table: u64,
    sync_base: u64,
    sync_stride: u64,
    data_base: u64,
    total: u64,
    digest: u64,
}

fn align_up(v: u64, align: u64) -> Result<u64, LayoutError> {
    debug_assert!(align.is_power_of_two());
    v.checked_add(align - 1).map(|x| x & !(align - 1)).ok_or(LayoutError::Overflow)
}

fn mul(a: u64, b: u64) -> Result<u64, LayoutError> {
    a.checked_mul(b).ok_or(LayoutError::Overflow)
}

fn add(a: u64, b: u64) -> Result<u64, LayoutError> {
    a.checked_add(b).ok_or(LayoutError::Overflow)
}

/// A window of `total` bytes, more than `max`, told by the rank that asked
/// for the most (the lowest on a tie), the same on every rank. Empty
/// segments add nothing to the page-aligned data base, so a total past any
/// limit has a rank with a non-empty request to name.
fn too_large(nranks: u32, size: &impl Fn(u32) -> u64, total: u128, max: u64) -> LayoutError {
    let (mut rank, mut most) = (0, 0);
    for r in 0..nranks {
        let s = size(r);
        if s > most {
            (rank, most) = (r, s);
        }
    }
    LayoutError::TooLarge { rank, size: most, total, max }
}

pub use crate::fence::rounds;

impl Layout {
    /// Lays out a window for `params` where rank `r`'s segment is `size(r)` bytes.
    pub fn new(params: LayoutParams, size: impl Fn(u32) -> u64) -> Result<Self, LayoutError> {
        params.validate()?;
        let n = u64::from(params.nranks);
        let rounds = rounds(params.nranks);
        let rank_table = size_of::<Header>() as u64;
        let rank_table_end = add(rank_table, mul(n, size_of::<RankEntry>() as u64)?)?;
        let lines = 1 + u64::from(rounds) + n;
        let (sync_base, sync_stride) = match params.mode {
            LayoutMode::Contiguous => (align_up(rank_table_end, LINE)?, lines * LINE),
            LayoutMode::Aligned => (align_up(rank_table_end, params.page)?, align_up(lines * LINE, params.page)?),
        };
        let sync_end = add(sync_base, mul(n, sync_stride)?)?;
        let data_base = align_up(sync_end, params.page)?;
        if data_base > MAX_TOTAL {
            return Err(LayoutError::Overflow);
        }

        let mut digest = Digest::default()
            .u64(u64::from(VERSION))
            .u64(n)
            .u64(u64::from(params.mode.code()))
            .u64(params.align)
            .u64(params.page);
        // The data area in 128 bits, which cannot overflow: at most MAX_RANKS
        // sizes below 2^64, each after a rounding up by less than 2^64. So an
        // impossible window is told by its total and the rank that asked the
        // most, the same on every rank, and not by a failing `ftruncate` on
        // the creator alone.
        let up = |v: u128, align: u64| (v + u128::from(align - 1)) & !u128::from(align - 1);
        let mut end = u128::from(data_base);
        for r in 0..params.nranks {
            let s = size(r);
            digest = digest.u64(s);
            end = up(end, params.segment_align()) + u128::from(s);
        }
        let total = up(end, params.page);
        let total = u64::try_from(total)
            .ok()
            .filter(|&t| t <= MAX_TOTAL)
            .ok_or_else(|| too_large(params.nranks, &size, total, MAX_TOTAL))?;
        Ok(Self { params, rounds, rank_table, sync_base, sync_stride, data_base, total, digest: digest.finish() })
    }

    /// The layout if its window is at most `max` bytes (what a rank can map:
    /// [`crate::Platform::max_window_len`]), else [`LayoutError::TooLarge`]
    /// naming the rank that asked for the most; `size` as for [`Layout::new`].
    pub fn within(self, max: u64, size: impl Fn(u32) -> u64) -> Result<Self, LayoutError> {
        if self.total <= max {
            return Ok(self);
        }
        Err(too_large(self.params.nranks, &size, u128::from(self.total), max))
    }

    /// The parameters the layout was built from.
    #[must_use]
    pub fn params(&self) -> LayoutParams {
        self.params
    }

    /// Ranks in the window.
    #[must_use]
    pub fn nranks(&self) -> u32 {
        self.params.nranks
    }

    /// Rounds of the window fence.
    #[must_use]
    pub fn rounds(&self) -> u32 {
        self.rounds
    }

    /// The segment's total length, a multiple of the page size.
    #[must_use]
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The digest of every input of the layout.
    #[must_use]
    pub fn digest(&self) -> u64 {
        self.digest
    }

    /// Offset of rank `r`'s rank-table entry.
    #[must_use]
    pub fn rank_entry(&self, r: u32) -> u64 {
        self.rank_table + u64::from(r) * size_of::<RankEntry>() as u64
    }

    /// Offset of the sync block that rank `reader` spins on.
    #[must_use]
    pub fn sync_block(&self, reader: u32) -> u64 {
        self.sync_base + u64::from(reader) * self.sync_stride
    }

    /// The line of a sync block holding its [`shared::WaitRecord`].
    pub const WAIT_LINE: u32 = 0;

    /// The line of a sync block holding the window-fence slot of `round`.
    #[must_use]
    pub const fn round_line_index(round: u32) -> u32 {
        1 + round
    }

    /// The line of a sync block holding the [`PeerLine`] written by `writer`.
    #[must_use]
    pub fn peer_line_index(&self, writer: u32) -> u32 {
        1 + self.rounds + writer
    }

    /// Offset of `rank`'s [`shared::WaitRecord`].
    #[must_use]
    pub fn wait_record(&self, rank: u32) -> u64 {
        self.sync_block(rank) + u64::from(Self::WAIT_LINE) * LINE
    }

    /// Offset of the window-fence slot of `round` that `reader` spins on.
    #[must_use]
    pub fn round_slot(&self, round: u32, reader: u32) -> u64 {
        self.sync_block(reader) + u64::from(Self::round_line_index(round)) * LINE
    }

    /// Offset of the [`PeerLine`] written by `writer` for `reader`.
    #[must_use]
    pub fn peer_line(&self, writer: u32, reader: u32) -> u64 {
        self.sync_block(reader) + u64::from(self.peer_line_index(writer)) * LINE
    }

    /// Offset of the peer-fence slot written by `writer` and read by `reader`.
    #[must_use]
    pub fn peer_slot(&self, writer: u32, reader: u32) -> u64 {
        self.peer_line(writer, reader) + core::mem::offset_of!(PeerLine, fence) as u64
    }

    /// Offset of the count of signals `writer` has sent to `reader`.
    #[must_use]
    pub fn signal_slot(&self, writer: u32, reader: u32) -> u64 {
        self.peer_line(writer, reader) + core::mem::offset_of!(PeerLine, signals) as u64
    }

    /// Offset of the count of `signaller`'s signals that `taker` has waited for.
    #[must_use]
    pub fn taken_slot(&self, taker: u32, signaller: u32) -> u64 {
        self.peer_line(taker, signaller) + core::mem::offset_of!(PeerLine, taken) as u64
    }

    /// The bytes of the sync area that rank `r` spins on.
    #[must_use]
    pub fn sync_region(&self, r: u32) -> Region {
        let align = match self.params.mode {
            LayoutMode::Contiguous => LINE,
            LayoutMode::Aligned => self.params.page,
        };
        Region { kind: RegionKind::Sync(r), offset: self.sync_block(r), len: self.sync_stride, align }
    }

    /// The header and rank table, which the creator writes.
    #[must_use]
    pub fn shared_prefix(&self) -> Region {
        Region { kind: RegionKind::Header, offset: 0, len: self.sync_base, align: self.params.page }
    }

    /// Whether `len` bytes at `offset` can be a data segment of this layout:
    /// aligned as segments are, within the data area (past the header, the
    /// rank table and the sync blocks) and the window.
    #[must_use]
    pub fn holds_segment(&self, offset: u64, len: u64) -> bool {
        offset >= self.data_base
            && offset.is_multiple_of(self.params.segment_align())
            && offset.checked_add(len).is_some_and(|end| end <= self.total)
    }

    /// Every data segment in rank order, given the same `size` as [`Layout::new`].
    pub fn segments<F: Fn(u32) -> u64>(&self, size: F) -> impl Iterator<Item = Region> + use<F> {
        let align = self.params.segment_align();
        let mut end = self.data_base;
        (0..self.params.nranks).map(move |r| {
            // Cannot overflow: `new` walked the same sums and kept the total
            // within MAX_TOTAL, below 2^63.
            let offset = (end + (align - 1)) & !(align - 1);
            let len = size(r);
            end = offset + len;
            Region { kind: RegionKind::Data(r), offset, len, align }
        })
    }

    /// Every region of the window: header, rank table, sync blocks, data segments.
    pub fn regions(&self, size: impl Fn(u32) -> u64) -> impl Iterator<Item = Region> {
        let n = self.params.nranks;
        let header =
            Region { kind: RegionKind::Header, offset: 0, len: size_of::<Header>() as u64, align: self.params.page };
        let table = Region {
            kind: RegionKind::RankTable,
            offset: self.rank_table,
            len: u64::from(n) * size_of::<RankEntry>() as u64,
            align: 64,
        };
        [header, table].into_iter().chain((0..n).map(|r| self.sync_region(r))).chain(self.segments(size))
    }

    /// The header this layout implies.
    #[must_use]
    pub fn header(&self) -> Header {
        Header {
            magic: shared::MAGIC,
            version: VERSION,
            header_size: HEADER_SIZE,
            nranks: self.params.nranks,
            mode: self.params.mode.code(),
            page_size: self.params.page,
            total_len: self.total,
            digest: self.digest,
            rank_table: self.rank_table,
            sync_base: self.sync_base,
            sync_stride: self.sync_stride,
            data_base: self.data_base,
            ..Header::default()
        }
    }
}

#[cfg(test)]
mod tests;
