//! The `#[repr(C)]` structures that live in shared memory, with their layout
//! pinned at compile time. Only fixed-width fields: x86_64 and aarch64
//! processes (and differently built libraries) must agree on every offset.

use core::mem::{offset_of, size_of};

use bytemuck::{Pod, Zeroable};

/// The cache-line size of the shared layout: 128 bytes on every architecture
/// (adjacent-line prefetch on x86_64, 128-byte lines on some aarch64 cores),
/// a constant of the format rather than of the CPU.
pub const LINE: u64 = 128;

/// `"KPCCLWIN"`, little-endian.
pub const MAGIC: u64 = u64::from_le_bytes(*b"KPCCLWIN");

/// The window header, at offset 0 of the segment.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct Header {
    /// [`MAGIC`].
    pub magic: u64,
    /// [`super::VERSION`].
    pub version: u32,
    /// `size_of::<Header>()`.
    pub header_size: u32,
    /// Ranks in the window.
    pub nranks: u32,
    /// The layout mode's code.
    pub mode: u32,
    /// The page size the layout was computed with.
    pub page_size: u64,
    /// The segment's total length.
    pub total_len: u64,
    /// [`super::Layout::digest`] of the inputs.
    pub digest: u64,
    /// Offset of the rank table.
    pub rank_table: u64,
    /// Offset of rank 0's sync block.
    pub sync_base: u64,
    /// Distance between two ranks' sync blocks.
    pub sync_stride: u64,
    /// Offset of the data area.
    pub data_base: u64,
    /// How the window fence runs: a [`crate::fence::Barrier`] code, agreed at creation.
    pub barrier: u32,
    /// Zero.
    pub padding0: u32,
    /// Zero.
    pub reserved: [u64; 5],
    /// Non-zero once a rank abandoned the window (an atomic word; see `crate::fence::poison`).
    /// It sits on its own line: it is only touched on failure paths.
    pub poison: u32,
    /// Non-zero if a rank could not register for the heavy fence of light
    /// wake-ups (written once, before creation's last fence; see
    /// `Platform::register_global_heavy_fence`): the window keeps full fences.
    pub full_fence_wakes: u32,
    /// Zero.
    pub padding: [u32; 30],
    /// Arrivals at the flat barrier (an atomic word; see `crate::fence::flat_fence`),
    /// on a line of its own: every rank writes it at every fence.
    pub arrivals: u64,
    /// Zero.
    pub padding2: [u64; 15],
}

/// One rank's entry in the rank table.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct RankEntry {
    /// Offset of the rank's data segment.
    pub offset: u64,
    /// Length of the rank's data segment (may be 0).
    pub size: u64,
    /// The rank's process id.
    pub pid: u64,
    /// The rank's process start time.
    pub start_time: u64,
    /// The rank's user id.
    pub uid: u32,
    /// Zero.
    pub padding: u32,
    /// Zero.
    pub reserved: [u64; 3],
}

/// The first line of every rank's sync block: how peers wake it. Its first
/// 64 bytes hold what other ranks read on every hand-off and what changes
/// rarely; its second 64 bytes what changes at every wait (on its own cache
/// line, so those stores do not take the first half from the readers).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct WaitRecord {
    /// The futex word the rank sleeps on; signallers bump it before waking.
    pub doorbell: u32,
    /// Non-zero while the rank may be asleep on `doorbell`.
    pub sleeping: u32,
    /// The CPU the rank last ran on, plus one (0: not known): with `blocked`,
    /// a hint that lets the waiters beside it choose between polling and
    /// giving their CPU away.
    pub cpu: u32,
    /// Zero.
    pub padding: u32,
    /// Non-zero once the rank has left the window (freed or dropped it):
    /// it takes part in no more fences.
    pub left: u64,
    /// Zero.
    pub reserved: [u64; 5],
    /// How many flat-barrier fences the rank has arrived at (written by the
    /// rank only; read by waiters' checks, to find a rank that has not come).
    pub flat_arrived: u64,
    /// Non-zero while the rank is blocked in a wait nobody has signalled
    /// since; a flat-barrier wait's mark names its fence (top bit set) and
    /// lapses when that fence completes.
    pub blocked: u32,
    /// Zero.
    pub padding2: u32,
    /// Zero.
    pub reserved2: [u64; 6],
}

/// The line rank `i` writes for rank `j` (in `j`'s sync block, so `j` spins
/// on memory it touched first): every word has the single writer `i`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct PeerLine {
    /// `i`'s peer-fence epoch towards `j`.
    pub fence: u64,
    /// How many one-way signals `i` has sent to `j`.
    pub signals: u64,
    /// How many of `j`'s signals `i` has waited for (read by `i` only).
    pub taken: u64,
    /// Zero.
    pub reserved: [u64; 13],
}

const _: () = {
    assert!(size_of::<Header>() == 384);
    assert!(size_of::<PeerLine>() as u64 == LINE);
    assert!(offset_of!(PeerLine, fence) == 0);
    assert!(offset_of!(Header, poison) as u64 == LINE);
    assert!(offset_of!(Header, arrivals) as u64 == 2 * LINE);
    assert!(size_of::<RankEntry>() == 64);
    assert!(size_of::<WaitRecord>() as u64 == LINE);
    assert!(offset_of!(WaitRecord, sleeping) == 4);
    assert!(offset_of!(WaitRecord, cpu) == 8);
    assert!(offset_of!(WaitRecord, left) == 16);
    assert!(offset_of!(WaitRecord, flat_arrived) == 64);
    assert!(offset_of!(WaitRecord, blocked) == 72);
};
