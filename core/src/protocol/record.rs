//! The fixed-width record every rank contributes to each out-of-band
//! allgather, and the encoding of a [`Failure`] inside it.
//!
//! Every stage of every collective uses this one record size: when a rank's
//! callback fails, the one extra "flush" allgather it makes lines up with
//! whatever allgather the others are in (see [`super::lockstep`]).

use bytemuck::{Pod, Zeroable};

use super::lockstep::LockstepRecord;
use crate::error::{ArgError, AttachError, Failure, FenceError, LayoutError, OobError, PlatformError, PlatformOp};
use crate::layout::{MAX_RANKS, VERSION};
use crate::platform::{CPU_WORDS, ProcessIdentity};

/// `"KPCR"`: marks a record of this protocol.
const RECORD_MAGIC: u32 = u32::from_le_bytes(*b"KPCR");

pub use crate::platform::NAME_LEN;

/// Which collective step a record belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum Stage {
    /// Communicator creation: identities.
    Comm = 1,
    /// Window creation: every rank's request.
    Request = 2,
    /// Window creation: the creator's segment name.
    Create = 3,
    /// Window creation: every rank's attach result.
    Attach = 4,
    /// Window creation over several nodes: every rank's confirm fence result
    /// (a node's fence cannot tell another node's ranks).
    Ready = 5,
}

/// One rank's contribution to an allgather. Plain old data, 304 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct Record {
    magic: u32,
    version: u32,
    stage: u32,
    pub(crate) rank: u32,
    pub(crate) nranks: u32,
    failure_kind: u32,
    failure_sub: u32,
    pub(crate) mode: u32,
    failure_value: u64,
    pub(crate) align: u64,
    pub(crate) size: u64,
    pub(crate) page: u64,
    pub(crate) pid: u64,
    pub(crate) start_time: u64,
    pub(crate) uid: u32,
    pub(crate) memory_kind: u32,
    /// The [`crate::fence::Barrier`] code this rank would choose.
    pub(crate) barrier: u32,
    /// The rank's CPU quota in CPUs, 0 if none ([`crate::Platform::cpu_quota`];
    /// Stage::Comm).
    pub(crate) quota: u32,
    pub(crate) name: [u8; NAME_LEN],
    /// The digest of the rank's node identity (every stage; used at Stage::Comm).
    pub(crate) node: u64,
    /// The rank's number among its node's ranks, as the caller gave it.
    pub(crate) local_rank: u32,
    /// The CPUs the rank's process may use ([`crate::Platform::cpu_count`]:
    /// its affinity and CPU quota; Stage::Comm).
    pub(crate) parallelism: u32,
    /// The rank's affinity ([`crate::CpuMask`]; Stage::Comm).
    pub(crate) cpus: [u64; CPU_WORDS],
}

// Every stage has this one size (the flush rule, see the module docs).
const _: () = assert!(core::mem::size_of::<Record>() == 304);
const _: () = assert!(core::mem::offset_of!(Record, node) == 160);

impl Default for Record {
    fn default() -> Self {
        Self::zeroed()
    }
}

impl Record {
    /// A record of `stage` from `rank` of `nranks`, identified as `who`.
    pub(crate) fn new(stage: Stage, rank: u32, nranks: u32, who: &ProcessIdentity) -> Self {
        Self {
            magic: RECORD_MAGIC,
            version: VERSION,
            stage: stage as u32,
            rank,
            nranks,
            pid: who.pid,
            start_time: who.start_time,
            uid: who.uid,
            ..Self::default()
        }
    }

    /// The process that sent the record.
    #[must_use]
    pub fn identity(&self) -> ProcessIdentity {
        ProcessIdentity { pid: self.pid, start_time: self.start_time, uid: self.uid }
    }

    /// Whether the record belongs to this protocol and version.
    pub(crate) fn is_ours(&self) -> bool {
        self.magic == RECORD_MAGIC && self.version == VERSION
    }

    /// Whether the record is from `stage`.
    pub(crate) fn is(&self, stage: Stage) -> bool {
        self.stage == stage as u32
    }

    /// The segment name carried (Create stage), if it is non-empty, valid
    /// UTF-8 and NUL-terminated (at most `NAME_LEN - 1` bytes).
    pub(crate) fn name(&self) -> Option<&str> {
        let len = self.name.iter().position(|&b| b == 0)?;
        core::str::from_utf8(&self.name[..len]).ok().filter(|s| !s.is_empty())
    }

    pub(crate) fn set_name(&mut self, name: &str) {
        let len = name.len().min(NAME_LEN - 1);
        self.name = [0; NAME_LEN];
        self.name[..len].copy_from_slice(&name.as_bytes()[..len]);
    }
}

impl LockstepRecord for Record {
    type Failure = Failure;

    fn oob_failure(e: OobError) -> Failure {
        Failure::Oob(e)
    }

    fn fail(&mut self, f: Failure) {
        if self.failure_kind == 0 {
            (self.failure_kind, self.failure_sub, self.failure_value) = encode(f);
        }
    }

    fn failure(&self) -> Option<Failure> {
        decode(self.failure_kind, self.failure_sub, self.failure_value)
    }
}

fn pair(a: u32, b: u32) -> u64 {
    u64::from(a) << 32 | u64::from(b)
}

#[allow(clippy::cast_possible_truncation)] // the halves of `pair`
fn unpair(v: u64) -> (u32, u32) {
    ((v >> 32) as u32, v as u32)
}

fn encode_layout(e: LayoutError) -> (u32, u64) {
    match e {
        LayoutError::RankCount { nranks, .. } => (1, u64::from(nranks)),
        LayoutError::Alignment { align } => (2, align),
        LayoutError::PageSize { page } => (3, page),
        LayoutError::Overflow => (4, 0),
        LayoutError::AlignmentAbovePage { align, page } => (5, pair(align.trailing_zeros(), page.trailing_zeros())),
        // Told by the rank it names (to other nodes, or to ranks that can
        // map more), as much as a record carries.
        LayoutError::TooLarge { max, .. } | LayoutError::Unmappable { max } => (6, max),
    }
}

#[allow(clippy::cast_possible_truncation)] // values were encoded from u32s
fn decode_layout(sub: u32, v: u64) -> Option<LayoutError> {
    Some(match sub {
        1 => LayoutError::RankCount { nranks: v as u32, max: MAX_RANKS },
        2 => LayoutError::Alignment { align: v },
        3 => LayoutError::PageSize { page: v },
        4 => LayoutError::Overflow,
        5 => LayoutError::AlignmentAbovePage { align: 1 << (unpair(v).0 % 64), page: 1 << (unpair(v).1 % 64) },
        6 => LayoutError::Unmappable { max: v },
        _ => return None,
    })
}

const PLATFORM_OPS: [PlatformOp; 12] = [
    PlatformOp::Create,
    PlatformOp::Open,
    PlatformOp::Resize,
    PlatformOp::Reserve,
    PlatformOp::Map,
    PlatformOp::Unlink,
    PlatformOp::Stat,
    PlatformOp::Random,
    PlatformOp::Owner,
    PlatformOp::Size,
    PlatformOp::Fit,
    PlatformOp::Alignment,
];

#[allow(clippy::cast_possible_truncation)] // PLATFORM_OPS has 12 entries
fn encode(f: Failure) -> (u32, u32, u64) {
    match f {
        Failure::Argument(ArgError::Rank { rank, nranks }) => (1, 0, pair(rank, nranks)),
        Failure::Argument(ArgError::Size { size }) => (1, 1, size),
        Failure::Argument(ArgError::Caller) => (1, 2, 0),
        Failure::Argument(ArgError::Layout(e)) => {
            let (sub, v) = encode_layout(e);
            (1, 100 + sub, v)
        }
        Failure::Oob(OobError { code }) => (2, 0, code as u32 as u64),
        Failure::Platform(PlatformError { op, code }) => {
            let sub = PLATFORM_OPS.iter().position(|&o| o == op).unwrap_or(0) as u32;
            (3, sub, code as u64)
        }
        Failure::Attach(e) => match e {
            AttachError::Magic => (4, 0, 0),
            AttachError::Version { found, .. } => (4, 1, u64::from(found)),
            AttachError::Digest => (4, 2, 0),
            AttachError::Header => (4, 3, 0),
            AttachError::RankTable { rank } => (4, 4, u64::from(rank)),
            AttachError::Name { rank } => (4, 5, u64::from(rank)),
        },
        Failure::Fence(e) => match e {
            FenceError::Timeout { peer } => (5, 0, u64::from(peer)),
            FenceError::PeerDead { rank } => (5, 1, u64::from(rank)),
            FenceError::Aborted { rank } => (5, 2, u64::from(rank)),
            FenceError::GaveUp { rank, waited_for } => (5, 4, pair(rank, waited_for)),
            FenceError::InvalidRank { rank, nranks } => (5, 3, pair(rank, nranks)),
            FenceError::PeerLeft { rank, waiter } => (5, 5, pair(rank, waiter)),
            FenceError::RankTableOverwritten { rank } => (5, 6, u64::from(rank)),
        },
        Failure::Unknown { kind } => (6, 0, u64::from(kind)),
    }
}

#[allow(clippy::cast_possible_truncation)] // values were encoded from u32s and i32s
fn decode(kind: u32, sub: u32, v: u64) -> Option<Failure> {
    let decoded = match (kind, sub) {
        (0, _) => return None,
        (1, 0) => Some(Failure::Argument(ArgError::Rank { rank: unpair(v).0, nranks: unpair(v).1 })),
        (1, 1) => Some(Failure::Argument(ArgError::Size { size: v })),
        (1, 2) => Some(Failure::Argument(ArgError::Caller)),
        (1, s) if s > 100 => decode_layout(s - 100, v).map(|e| Failure::Argument(ArgError::Layout(e))),
        (2, _) => Some(Failure::Oob(OobError { code: v as u32 as i32 })),
        (3, s) => PLATFORM_OPS.get(s as usize).map(|&op| Failure::Platform(PlatformError { op, code: v as i64 })),
        (4, 0) => Some(Failure::Attach(AttachError::Magic)),
        (4, 1) => Some(Failure::Attach(AttachError::Version { found: v as u32, expected: VERSION })),
        (4, 2) => Some(Failure::Attach(AttachError::Digest)),
        (4, 3) => Some(Failure::Attach(AttachError::Header)),
        (4, 4) => Some(Failure::Attach(AttachError::RankTable { rank: v as u32 })),
        (4, 5) => Some(Failure::Attach(AttachError::Name { rank: v as u32 })),
        (5, 0) => Some(Failure::Fence(FenceError::Timeout { peer: v as u32 })),
        (5, 1) => Some(Failure::Fence(FenceError::PeerDead { rank: v as u32 })),
        (5, 2) => Some(Failure::Fence(FenceError::Aborted { rank: v as u32 })),
        (5, 4) => Some(Failure::Fence(FenceError::GaveUp { rank: unpair(v).0, waited_for: unpair(v).1 })),
        (5, 3) => Some(Failure::Fence(FenceError::InvalidRank { rank: unpair(v).0, nranks: unpair(v).1 })),
        (5, 5) => Some(Failure::Fence(FenceError::PeerLeft { rank: unpair(v).0, waiter: unpair(v).1 })),
        (5, 6) => Some(Failure::Fence(FenceError::RankTableOverwritten { rank: v as u32 })),
        _ => None,
    };
    Some(decoded.unwrap_or(Failure::Unknown { kind }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_failure_survives_the_round_trip() {
        let failures = [
            Failure::Argument(ArgError::Rank { rank: 7, nranks: 3 }),
            Failure::Argument(ArgError::Size { size: u64::MAX }),
            Failure::Argument(ArgError::Layout(LayoutError::Alignment { align: 3 })),
            Failure::Argument(ArgError::Layout(LayoutError::Overflow)),
            Failure::Argument(ArgError::Layout(LayoutError::Unmappable { max: 1 << 40 })),
            Failure::Argument(ArgError::Layout(LayoutError::AlignmentAbovePage { align: 1 << 20, page: 4096 })),
            Failure::Argument(ArgError::Caller),
            Failure::Oob(OobError { code: -5 }),
            Failure::Platform(PlatformError { op: PlatformOp::Reserve, code: 28 }),
            Failure::Platform(PlatformError { op: PlatformOp::Size, code: 4096 }),
            Failure::Platform(PlatformError { op: PlatformOp::Fit, code: 1 << 40 }),
            Failure::Platform(PlatformError::misaligned(8, 1 << 16)),
            Failure::Attach(AttachError::RankTable { rank: 2 }),
            Failure::Attach(AttachError::Name { rank: 3 }),
            Failure::Attach(AttachError::Version { found: 9, expected: VERSION }),
            Failure::Fence(FenceError::PeerDead { rank: 4 }),
            Failure::Fence(FenceError::GaveUp { rank: 2, waited_for: 7 }),
            Failure::Fence(FenceError::PeerLeft { rank: 6, waiter: 3 }),
            Failure::Fence(FenceError::InvalidRank { rank: 1, nranks: 1 }),
            Failure::Fence(FenceError::RankTableOverwritten { rank: 5 }),
        ];
        for f in failures {
            let mut r = Record::default();
            r.fail(f);
            assert_eq!(r.failure(), Some(f));
        }
        assert_eq!(Record::default().failure(), None);
    }

    #[test]
    fn names_round_trip_and_truncate() {
        let mut r = Record::default();
        r.set_name("kpccl-0-1-abc");
        assert_eq!(r.name(), Some("kpccl-0-1-abc"));
        r.set_name(&"x".repeat(200));
        assert_eq!(r.name().map(str::len), Some(NAME_LEN - 1));
        // A peer's name without its NUL, or empty, or not UTF-8, is none.
        r.name = [b'x'; NAME_LEN];
        assert_eq!(r.name(), None);
        r.set_name("");
        assert_eq!(r.name(), None);
        r.name[..2].copy_from_slice(&[0xff, 0xfe]);
        assert_eq!(r.name(), None);
    }
}
