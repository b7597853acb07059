//! Error types: one small `Copy` enum per operation family.
//!
//! Every error crosses rank boundaries as a [`Failure`] encoded in a
//! fixed-width record, so that every rank of a collective reports the same
//! verdict, naming the rank that failed and why.

use core::fmt;

/// Why a fence or barrier wait ended without its condition being met.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FenceError {
    /// The wait's deadline passed while this rank waited on `peer`.
    Timeout {
        /// The rank that did not arrive.
        peer: u32,
    },
    /// The process of `rank` is gone.
    PeerDead {
        /// The dead rank.
        rank: u32,
    },
    /// `rank` left the window (freed or dropped it) before it answered a
    /// wait of `waiter`'s: a fence or wait that does not match one of `rank`'s.
    PeerLeft {
        /// The rank that left.
        rank: u32,
        /// The rank whose wait it left unanswered.
        waiter: u32,
    },
    /// `rank` gave up on this window (a failed or cancelled wait); the window can only be freed.
    Aborted {
        /// The rank that gave up.
        rank: u32,
    },
    /// `rank` gave up on this window when its timeout passed while it
    /// waited for `waited_for` (the rank to look at: stopped, or stuck
    /// behind another); the window can only be freed.
    GaveUp {
        /// The rank that gave up.
        rank: u32,
        /// The rank it waited for.
        waited_for: u32,
    },
    /// A rank outside `0..nranks` was named.
    InvalidRank {
        /// The rank asked for.
        rank: u32,
        /// The window's rank count.
        nranks: u32,
    },
    /// `rank`'s entry in the window's rank table no longer describes a data
    /// segment of the window: something wrote over it after creation.
    RankTableOverwritten {
        /// The rank whose entry was overwritten.
        rank: u32,
    },
}

impl FenceError {
    /// The error with every rank it names passed through `rename` (a
    /// window's ranks to its communicator's). The bounds of
    /// [`Self::InvalidRank`] are the window's own and stay.
    #[must_use]
    pub fn renamed(self, rename: impl Fn(u32) -> u32) -> Self {
        match self {
            Self::Timeout { peer } => Self::Timeout { peer: rename(peer) },
            Self::PeerDead { rank } => Self::PeerDead { rank: rename(rank) },
            Self::PeerLeft { rank, waiter } => Self::PeerLeft { rank: rename(rank), waiter: rename(waiter) },
            Self::Aborted { rank } => Self::Aborted { rank: rename(rank) },
            Self::GaveUp { rank, waited_for } => Self::GaveUp { rank: rename(rank), waited_for: rename(waited_for) },
            Self::InvalidRank { .. } => self,
            Self::RankTableOverwritten { rank } => Self::RankTableOverwritten { rank: rename(rank) },
        }
    }
}

impl fmt::Display for FenceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Timeout { peer } => write!(f, "timed out waiting for rank {peer}"),
            Self::PeerDead { rank } => write!(f, "rank {rank} died"),
            Self::PeerLeft { rank, waiter } => write!(
                f,
                "rank {rank} left the window (freed or dropped it) while rank {waiter} still waited for it \
                 (a fence or wait it did not match)"
            ),
            Self::Aborted { rank } => {
                write!(
                    f,
                    "rank {rank} abandoned the window (a wait of its failed or was interrupted, or it gave up on the window)"
                )
            }
            Self::GaveUp { rank, waited_for } => {
                write!(f, "rank {rank} timed out waiting for rank {waited_for} and abandoned the window")
            }
            Self::InvalidRank { rank, nranks } => {
                write!(f, "rank {rank} is out of range: the window has ranks 0 to {}", nranks.saturating_sub(1))
            }
            Self::RankTableOverwritten { rank } => write!(
                f,
                "the window's rank table entry of rank {rank} was overwritten after creation \
                 (it no longer lies in the window's data area)"
            ),
        }
    }
}

impl core::error::Error for FenceError {}

/// The window layout cannot be built from the ranks' requests.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayoutError {
    /// The rank count is 0 or above `max`.
    RankCount {
        /// The rank count asked for.
        nranks: u32,
        /// The most ranks a window may have (`MAX_RANKS`).
        max: u32,
    },
    /// An alignment is zero or not a power of two.
    Alignment {
        /// The alignment asked for.
        align: u64,
    },
    /// The segment alignment exceeds the page size (segments are aligned
    /// within a mapping that is itself only page-aligned).
    AlignmentAbovePage {
        /// The alignment asked for.
        align: u64,
        /// The page size.
        page: u64,
    },
    /// The page size is not a power of two of at least 128 bytes.
    PageSize {
        /// The page size given.
        page: u64,
    },
    /// The fixed part of the window (header, rank table, sync blocks)
    /// overflows (only page sizes no platform has get there).
    Overflow,
    /// The segments asked for add up to more than a window can span on this
    /// system (one shared-memory segment's length, or what a rank can map);
    /// `rank` asked for the most (the lowest such rank on a tie).
    TooLarge {
        /// The rank with the largest request.
        rank: u32,
        /// Its request, in bytes.
        size: u64,
        /// The window's total length (every segment, the header and the sync
        /// blocks); wider than 64 bits, as the sum of 64-bit sizes may be.
        total: u128,
        /// The longest window there may be (`layout::MAX_TOTAL`, or less where
        /// a rank cannot map that much).
        max: u64,
    },
    /// [`LayoutError::TooLarge`] as the other ranks are told it (a record
    /// has no room for all of it): the failing rank's node's window is
    /// more than that rank can map.
    Unmappable {
        /// What that rank can map, in bytes.
        max: u64,
    },
}

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::RankCount { nranks, max } => write!(f, "rank count {nranks} is outside 1 to {max}"),
            Self::Alignment { align } => write!(f, "alignment {align} is not a power of two"),
            Self::AlignmentAbovePage { align, page } => {
                write!(f, "alignment {align} exceeds the page size {page}")
            }
            Self::PageSize { page } => write!(f, "page size {page} is not a power of two >= 128"),
            Self::Overflow => f.write_str("the window's total size overflows"),
            Self::Unmappable { max } => write!(f, "its node's window is more than it can map ({max} bytes)"),
            Self::TooLarge { rank, size, total, max } => write!(
                f,
                "rank {rank} asked for {size} bytes: the window's total of {total} bytes is more than a \
                 window can span on this system ({max} bytes)"
            ),
        }
    }
}

impl core::error::Error for LayoutError {}

/// The operating-system call a [`PlatformError`] comes from.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlatformOp {
    /// Creating the named segment.
    Create,
    /// Opening an existing named segment.
    Open,
    /// Setting the segment's size.
    Resize,
    /// Reserving backing memory for a range (e.g. `fallocate`).
    Reserve,
    /// Mapping the segment into the address space.
    Map,
    /// Removing the segment's name.
    Unlink,
    /// Reading the segment's owner and size.
    Stat,
    /// Getting random bytes.
    Random,
    /// The segment belongs to another user.
    Owner,
    /// The segment has another size than the window needs.
    Size,
    /// Fitting the window in the segment directory's free space (the check
    /// that stands for the reservation when memory is reserved lazily); the
    /// code is the bytes free.
    Fit,
    /// The segment's mapping starts at an address not aligned to the page,
    /// which the window's layout assumes; the code holds both alignments
    /// (see [`PlatformError::misaligned`]).
    Alignment,
}

impl fmt::Display for PlatformOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Create => "create the shared segment",
            Self::Open => "open the shared segment",
            Self::Resize => "size the shared segment",
            Self::Reserve => "reserve memory for the window (is the segment directory full?)",
            Self::Map => "map the shared segment",
            Self::Unlink => "unlink the shared segment",
            Self::Stat => "inspect the shared segment",
            Self::Random => "get random bytes for the segment name",
            Self::Owner => "accept the segment: it belongs to another user",
            Self::Size => "accept the segment: its size is not the window's",
            Self::Fit => "fit the window in the segment directory",
            Self::Alignment => "accept the segment's mapping: its address is not aligned to the page",
        })
    }
}

/// A failed platform call: which one, and the OS error code (errno on POSIX).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlatformError {
    /// What was attempted.
    pub op: PlatformOp,
    /// The OS error code, or the offending value for [`PlatformOp::Owner`]
    /// and [`PlatformOp::Size`], or both alignments for
    /// [`PlatformOp::Alignment`] (see [`PlatformError::alignments`]).
    pub code: i64,
}

impl PlatformError {
    /// A mapping whose address is aligned to `found` bytes where the window
    /// needs `needed` (both powers of two): their exponents, in the high and
    /// low halves of the code, so that a record carries them to every rank.
    #[must_use]
    pub fn misaligned(found: u64, needed: u64) -> Self {
        let code = (i64::from(needed.trailing_zeros()) << 32) | i64::from(found.trailing_zeros());
        Self { op: PlatformOp::Alignment, code }
    }

    /// For [`PlatformOp::Alignment`]: the alignment the mapping has and the
    /// one the window needs, in bytes.
    #[must_use]
    pub fn alignments(&self) -> Option<(u64, u64)> {
        let exponent = |bits: i64| 1u64 << (bits & 63);
        (self.op == PlatformOp::Alignment).then(|| (exponent(self.code), exponent(self.code >> 32)))
    }
}

impl fmt::Display for PlatformError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.op {
            PlatformOp::Owner => write!(f, "cannot {} (uid {})", self.op, self.code),
            PlatformOp::Size => write!(f, "cannot {} ({} bytes)", self.op, self.code),
            PlatformOp::Fit => write!(f, "cannot {}: {} bytes free", self.op, self.code),
            PlatformOp::Alignment => {
                let (found, needed) = self.alignments().unwrap_or_default();
                write!(
                    f,
                    "cannot accept the segment's mapping: its address is aligned to {found} bytes, the window needs \
                     {needed} (the page size)"
                )
            }
            _ => write!(f, "cannot {}: os error {}", self.op, self.code),
        }
    }
}

impl core::error::Error for PlatformError {}

/// The out-of-band collective failed (a non-zero return from a callback).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OobError {
    /// What the callback returned.
    pub code: i32,
}

impl fmt::Display for OobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the out-of-band collective failed (returned {})", self.code)
    }
}

impl core::error::Error for OobError {}

/// A request that is wrong on its own, before any other rank is consulted.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgError {
    /// `rank` is not in `0..nranks`.
    Rank {
        /// The rank given.
        rank: u32,
        /// The rank count given.
        nranks: u32,
    },
    /// The layout options are invalid.
    Layout(LayoutError),
    /// The requested size does not fit this process's address space.
    Size {
        /// The size asked for.
        size: u64,
    },
    /// The caller (e.g. the C API, or a bad `KPCCL_*` variable) refused an
    /// argument on that rank before the collective; that rank's own error says which.
    Caller,
}

/// `what value is out of range: whose has ranks 0 to n-1`: how every API
/// words a rank outside its group. Not Rust's `0..n`, which a C or Python
/// user reads as including `n`.
#[derive(Clone, Copy, Debug)]
pub struct RankOutOfRange<'a, V> {
    /// What the value is ("rank", "local_rank").
    pub what: &'a str,
    /// The value given (signed where the caller's language allows it).
    pub value: V,
    /// Whose ranks ("the communicator", "this window").
    pub whose: &'a str,
    /// How many ranks there are.
    pub nranks: u32,
}

impl<V: fmt::Display> fmt::Display for RankOutOfRange<'_, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} is out of range: ", self.what, self.value)?;
        match self.nranks {
            0 => f.write_str("there are no ranks"),
            n => write!(f, "{} has ranks 0 to {}", self.whose, n - 1),
        }
    }
}

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Rank { rank, nranks } => {
                RankOutOfRange { what: "rank", value: rank, whose: "the communicator", nranks }.fmt(f)
            }
            Self::Layout(e) => e.fmt(f),
            Self::Size { size } => {
                write!(f, "size {size} cannot be mapped: a process maps at most {} bytes", isize::MAX)
            }
            Self::Caller => f.write_str("an argument was refused there (that rank's own error says which)"),
        }
    }
}

impl core::error::Error for ArgError {}

/// A window's shared header does not match what this rank computed.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttachError {
    /// The magic number is wrong: this is not a kpccl window.
    Magic,
    /// The window was made by an incompatible library version.
    Version {
        /// The version found in the header.
        found: u32,
        /// This library's layout version.
        expected: u32,
    },
    /// The layout digest differs: the ranks' inputs differ.
    Digest,
    /// A header field other than the digest differs.
    Header,
    /// The rank table entry of `rank` differs.
    RankTable {
        /// The mismatching entry.
        rank: u32,
    },
    /// The way into the segment that `rank`, its creator, sent is no
    /// segment name (empty, not UTF-8, or without its terminating NUL).
    Name {
        /// The creator that sent it.
        rank: u32,
    },
}

impl fmt::Display for AttachError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Magic => f.write_str("the segment is not a kpccl window (bad magic)"),
            Self::Version { found, expected } => {
                write!(f, "the window has layout version {found}, this library {expected}")
            }
            Self::Digest => f.write_str("the window's layout digest differs from this rank's"),
            Self::Header => f.write_str("the window header differs from this rank's view"),
            Self::RankTable { rank } => write!(f, "the window's entry for rank {rank} differs from this rank's view"),
            Self::Name { rank } => write!(
                f,
                "rank {rank} sent no usable way into the window's segment (its name is empty, not UTF-8, or \
                 lacks its terminating NUL)"
            ),
        }
    }
}

impl core::error::Error for AttachError {}

/// What went wrong on one rank, in a form every rank can be told.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// The rank's own arguments were invalid.
    Argument(ArgError),
    /// The rank's out-of-band callback failed.
    Oob(OobError),
    /// A platform call failed on the rank.
    Platform(PlatformError),
    /// The rank refused the shared header.
    Attach(AttachError),
    /// The rank's wait in the window's first barrier failed.
    Fence(FenceError),
    /// A failure this library version cannot decode (from another version).
    Unknown {
        /// The undecoded failure kind.
        kind: u32,
    },
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Argument(e) => write!(f, "invalid argument: {e}"),
            Self::Oob(e) => e.fmt(f),
            Self::Platform(e) => e.fmt(f),
            Self::Attach(e) => e.fmt(f),
            Self::Fence(e) => e.fmt(f),
            Self::Unknown { kind } => write!(f, "unknown failure (kind {kind})"),
        }
    }
}

/// Which field two ranks disagree on.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    /// The library or protocol version.
    Version,
    /// The rank count.
    RankCount,
    /// The layout mode.
    Mode,
    /// The segment alignment.
    Alignment,
    /// The page size.
    PageSize,
    /// The user id (segments are private to one user).
    User,
    /// The memory kind (host or device).
    MemoryKind,
    /// The window-fence algorithm (an unknown code).
    Barrier,
    /// The step of creation the record is from: the ranks are in
    /// different collective calls (a communicator's and a window's, or
    /// different steps of one).
    Step,
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Version => "library version",
            Self::RankCount => "rank count",
            Self::Mode => "layout mode",
            Self::Alignment => "alignment",
            Self::PageSize => "page size",
            Self::User => "user id",
            Self::MemoryKind => "memory kind",
            Self::Barrier => "window-fence algorithm",
            Self::Step => {
                "creation step (communicator or window: every rank must make the same collective calls in the \
                 same order)"
            }
        })
    }
}

/// Why a collective (communicator or window creation) failed. Every rank of
/// the collective returns an error; the rank that caused it is named.
///
/// The lockstep part (`Local`, `Peer`, `Mismatch`) is generic over what a
/// rank reports (`F`) and what ranks can disagree on (`M`), so that every
/// lockstep protocol (this crate's communicators and windows, and
/// `kpccl-ascend`'s device windows with their own failures) shares one shape
/// and one wording; `Layout` and `LocalRank` come from host windows and
/// communicators only.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CollectiveError<F = Failure, M = Field> {
    /// This rank failed.
    Local(F),
    /// Another rank failed; this rank is fine but cannot go on alone.
    Peer {
        /// The failing rank (the lowest, if several failed).
        rank: u32,
        /// What happened there.
        failure: F,
    },
    /// Nothing came from `rank` in an out-of-band allgather (its record is
    /// all zero): the callbacks' group has fewer ranks than `nranks`, or
    /// their allgather does not fill every rank's part.
    NoRecord {
        /// The first rank whose record is empty.
        rank: u32,
    },
    /// `rank`'s request disagrees with rank 0's on `field`.
    Mismatch {
        /// The first disagreeing rank.
        rank: u32,
        /// What it disagrees on.
        field: M,
    },
    /// The process whose record the out-of-band allgather put at rank
    /// `place`'s place says it is rank `says`: two processes claim one rank
    /// number (`shared`), or the out-of-band collective orders the ranks
    /// otherwise than they number themselves.
    RankClaim {
        /// The place (the out-of-band collective's rank) of the first offender.
        place: u32,
        /// The rank number that process gave.
        says: u32,
        /// Whether another process gave the same rank number.
        shared: bool,
    },
    /// The layout of the requested window cannot be built (e.g. sizes overflow).
    Layout(LayoutError),
    /// The local ranks given do not number each node's ranks `0..n`: `rank`
    /// (the first offender, in rank order) gave `local_rank`.
    LocalRank {
        /// The offending rank.
        rank: u32,
        /// The local rank it gave.
        local_rank: u32,
        /// Its node's index (nodes are numbered by their lowest rank).
        node: u32,
        /// How many ranks that node has.
        local_size: u32,
        /// The earlier rank of that node that gave the same local rank, if any.
        clash: Option<u32>,
    },
}

impl<F: fmt::Display, M: fmt::Display> fmt::Display for CollectiveError<F, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Local(e) => e.fmt(f),
            Self::Peer { rank, failure } => write!(f, "rank {rank} failed: {failure}"),
            // Rank 0 is found disagreeing only with the rank judging the
            // table (its rank count, its stage), not with itself.
            Self::NoRecord { rank } => write!(
                f,
                "nothing came from rank {rank} in the out-of-band allgather: the callbacks' group has fewer ranks \
                 than the rank count, or its allgather does not fill every rank's part"
            ),
            Self::Mismatch { rank: 0, field } => write!(f, "rank 0 disagrees with this rank on the {field}"),
            Self::Mismatch { rank, field } => {
                write!(f, "rank {rank} disagrees with rank 0 on the {field}")
            }
            // Said in the user's terms: the rank numbers the processes gave,
            // not the table positions they were gathered into.
            Self::RankClaim { says, shared: true, .. } => write!(
                f,
                "two processes both say they are rank {says}: each process must give its own rank, 0 to the rank \
                 count - 1"
            ),
            Self::RankClaim { place, says, shared: false } => write!(
                f,
                "the process at rank {place}'s place in the out-of-band exchange says it is rank {says}: the \
                 out-of-band collective must order the ranks as they number themselves"
            ),
            // Names the rank and says why on its own.
            Self::Layout(e @ LayoutError::TooLarge { .. }) => e.fmt(f),
            Self::Layout(e) => write!(f, "the window cannot be laid out: {e}"),
            Self::LocalRank { rank, local_rank, node, local_size, clash } => {
                match clash {
                    // u32::MAX: `protocol::AUTO_LOCAL_RANK` (the protocol is compiled out under loom).
                    Some(other) if *local_rank == u32::MAX => write!(
                        f,
                        "rank {rank} asks to be numbered on its node but rank {other} of node {node} gives its \
                         local_rank"
                    )?,
                    Some(other) => write!(
                        f,
                        "rank {rank} says local_rank {local_rank} but node {node} already has local_rank \
                         {local_rank} (rank {other})"
                    )?,
                    None => write!(
                        f,
                        "rank {rank} says local_rank {local_rank} but node {node} has only {local_size} rank{}",
                        if *local_size == 1 { "" } else { "s" }
                    )?,
                }
                write!(f, ": a node's local ranks must be 0 to {}, one per rank", local_size.saturating_sub(1))
            }
        }
    }
}

impl<F: fmt::Display + fmt::Debug, M: fmt::Display + fmt::Debug> core::error::Error for CollectiveError<F, M> {}

impl<F, M> CollectiveError<F, M> {
    /// The [`RankClaim`](Self::RankClaim) of the process at `place` that says
    /// it is rank `says`, given the rank number every place gave (`claims`,
    /// in place order): whether another process gave the same number.
    pub fn rank_claim(place: u32, says: u32, claims: impl IntoIterator<Item = u32>) -> Self {
        let shared = (0u32..).zip(claims).any(|(other, claim)| other != place && claim == says);
        Self::RankClaim { place, says, shared }
    }
}

impl From<FenceError> for CollectiveError {
    fn from(e: FenceError) -> Self {
        Self::Local(Failure::Fence(e))
    }
}

#[cfg(test)]
mod tests {
    use std::string::ToString;

    use super::{ArgError, CollectiveError, Failure, Field};

    /// Messages say the last valid rank, as C and Python users read ranges:
    /// Rust's `0..3` reads as if rank 3 were valid.
    #[test]
    fn a_rank_out_of_range_names_the_last_valid_rank() {
        let e = ArgError::Rank { rank: 3, nranks: 3 };
        assert_eq!(e.to_string(), "rank 3 is out of range: the communicator has ranks 0 to 2");
        assert_eq!(ArgError::Rank { rank: 0, nranks: 0 }.to_string(), "rank 0 is out of range: there are no ranks");
        let e = super::FenceError::InvalidRank { rank: 2, nranks: 2 };
        assert_eq!(e.to_string(), "rank 2 is out of range: the window has ranks 0 to 1");
    }

    /// A value refused names the bound it passed, in words a C or Python
    /// user reads (not Rust's `1..=1024`).
    #[test]
    fn a_refused_size_or_rank_count_names_its_bound() {
        let e = ArgError::Size { size: u64::MAX };
        let (size, max) = (u64::MAX, isize::MAX);
        assert_eq!(e.to_string(), std::format!("size {size} cannot be mapped: a process maps at most {max} bytes"));
        let e = super::LayoutError::RankCount { nranks: 1025, max: 1024 };
        assert_eq!(e.to_string(), "rank count 1025 is outside 1 to 1024");
    }

    /// Rank 0 is only ever found disagreeing with the rank that reads the
    /// message (its rank count): never "rank 0 disagrees with rank 0".
    #[test]
    fn a_disagreement_of_rank_0_is_with_this_rank() {
        let e = CollectiveError::<Failure, Field>::Mismatch { rank: 0, field: Field::RankCount };
        assert_eq!(e.to_string(), "rank 0 disagrees with this rank on the rank count");
        let e = CollectiveError::<Failure, Field>::Mismatch { rank: 2, field: Field::Alignment };
        assert_eq!(e.to_string(), "rank 2 disagrees with rank 0 on the alignment");
    }

    /// A rank number given twice, or out of the out-of-band order, is told as
    /// what the processes said, not as a disagreement on "the rank number".
    #[test]
    fn a_wrong_rank_claim_says_what_the_processes_said() {
        let e = CollectiveError::<Failure, Field>::RankClaim { place: 2, says: 1, shared: true };
        assert_eq!(
            e.to_string(),
            "two processes both say they are rank 1: each process must give its own rank, 0 to the rank count - 1"
        );
        let e = CollectiveError::<Failure, Field>::RankClaim { place: 2, says: 3, shared: false };
        assert!(
            e.to_string().starts_with("the process at rank 2's place in the out-of-band exchange says it is rank 3")
        );
    }
}
