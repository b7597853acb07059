//! The class of an [`Error`], for callers that act on failures without
//! reading their text (the C API's `kpccl_last_error_code` reports the same
//! classes).

use kpccl_core::error::PlatformOp;
use kpccl_core::{CollectiveError, Failure, FenceError, PlatformError};

use crate::Error;
use crate::launch::{Ending, code};

/// What kind of failure an [`Error`] is.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// A bad argument or setting, on this rank or (in a collective) another:
    /// a rank out of range, an access outside a segment, ranks that disagree,
    /// an invalid `KPCCL_*` variable.
    InvalidArgument,
    /// A wait reached its deadline (`KPCCL_TIMEOUT_MS` or the window's),
    /// on this rank or on another that then abandoned the window; or, under
    /// the launcher, a live rank did not reach a collective in time.
    Timeout,
    /// A peer process died, left, or abandoned the window.
    DeadPeer,
    /// Out of memory or of space in the segment directory, or past the
    /// process's file size limit (`ulimit -f`).
    NoSpace,
    /// Not allowed: a segment or directory of another user, or its mode.
    Permission,
    /// The device runtime (ACL) failed.
    DeviceRuntime,
    /// The out-of-band collectives (MPI callbacks, the launcher) failed.
    OutOfBand,
    /// Another operating-system failure.
    System,
    /// A failure this library cannot classify (e.g. from another version).
    Internal,
}

impl ErrorKind {
    /// A short lowercase name: `"invalid argument"`, `"timeout"`, ….
    pub fn name(self) -> &'static str {
        match self {
            Self::InvalidArgument => "invalid argument",
            Self::Timeout => "timeout",
            Self::DeadPeer => "dead peer",
            Self::NoSpace => "no space",
            Self::Permission => "permission",
            Self::DeviceRuntime => "device runtime",
            Self::OutOfBand => "out-of-band",
            Self::System => "system",
            Self::Internal => "internal",
        }
    }

    /// The class of a failed collective, wherever it failed.
    pub fn of_collective(e: &CollectiveError) -> ErrorKind {
        match e {
            CollectiveError::Local(f) | CollectiveError::Peer { failure: f, .. } => Self::of_failure(f),
            CollectiveError::Mismatch { .. }
            | CollectiveError::NoRecord { .. }
            | CollectiveError::RankClaim { .. }
            | CollectiveError::Layout(_)
            | CollectiveError::LocalRank { .. } => Self::InvalidArgument,
            _ => Self::Internal,
        }
    }

    /// The class of one rank's failure.
    pub fn of_failure(f: &Failure) -> ErrorKind {
        match f {
            Failure::Argument(_) => Self::InvalidArgument,
            Failure::Oob(_) => Self::OutOfBand,
            Failure::Platform(p) => Self::of_platform(p),
            // A header that differs: the ranks' inputs (or versions) differ.
            Failure::Attach(_) => Self::InvalidArgument,
            Failure::Fence(e) => Self::of_fence(e),
            _ => Self::Internal,
        }
    }

    /// The class of a failed wait.
    pub fn of_fence(e: &FenceError) -> ErrorKind {
        match e {
            FenceError::Timeout { .. } | FenceError::GaveUp { .. } => Self::Timeout,
            FenceError::PeerDead { .. } | FenceError::PeerLeft { .. } | FenceError::Aborted { .. } => Self::DeadPeer,
            FenceError::InvalidRank { .. } => Self::InvalidArgument,
            _ => Self::Internal,
        }
    }

    /// The class of a failed platform call, by its errno.
    pub fn of_platform(p: &PlatformError) -> ErrorKind {
        match p.op {
            PlatformOp::Owner => return Self::Permission,
            PlatformOp::Size => return Self::InvalidArgument,
            PlatformOp::Fit => return Self::NoSpace,
            // A platform that broke its contract: no errno, nothing the caller set.
            PlatformOp::Alignment => return Self::Internal,
            _ => {}
        }
        match i32::try_from(p.code).unwrap_or(-1) {
            // EFBIG: past the file size limit (`ulimit -f`).
            libc::ENOSPC | libc::ENOMEM | libc::EDQUOT | libc::EFBIG | libc::EMFILE | libc::ENFILE => Self::NoSpace,
            libc::EACCES | libc::EPERM => Self::Permission,
            libc::ENAMETOOLONG | libc::EINVAL => Self::InvalidArgument,
            _ => Self::System,
        }
    }
}

impl core::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

impl Error {
    /// The class of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::Collective(e) => ErrorKind::of_collective(e),
            Self::Fence(e) => ErrorKind::of_fence(e),
            Self::OutOfBounds { .. } | Self::OtherNode { .. } | Self::ForkedChild { .. } | Self::Config { .. } => {
                ErrorKind::InvalidArgument
            }
            // A rank that never came, alive or not: the deadline passed.
            Self::RankLost { departure, .. } => match departure.ending {
                Ending::Unresponsive(_) => ErrorKind::Timeout,
                _ => ErrorKind::DeadPeer,
            },
            Self::SegmentDir(e) => match e.problem {
                crate::DirProblem::NotADirectory => ErrorKind::InvalidArgument,
                _ => ErrorKind::Permission,
            },
            Self::Launcher { code: code::TIMEOUT | code::UNRESPONSIVE, .. } => ErrorKind::Timeout,
            Self::Launcher { code: code::RANK_LOST, .. } => ErrorKind::DeadPeer,
            Self::Launcher { .. } => ErrorKind::OutOfBand,
            Self::Platform { error, .. } => ErrorKind::of_platform(error),
            // By its errno, as a failed open of a segment: EMFILE is no space.
            Self::NodeIdentity { code, .. } => {
                ErrorKind::of_platform(&PlatformError { op: PlatformOp::Open, code: i64::from(*code) })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use kpccl_core::error::ArgError;
    use kpccl_core::error::PlatformOp;
    use kpccl_core::{CollectiveError, Failure, FenceError, PlatformError};

    use super::ErrorKind;
    use crate::Error;

    #[test]
    fn errors_fall_into_their_classes() {
        let platform =
            |op, code| Error::Collective(CollectiveError::Local(Failure::Platform(PlatformError { op, code })));
        assert_eq!(platform(PlatformOp::Reserve, i64::from(libc::ENOSPC)).kind(), ErrorKind::NoSpace);
        assert_eq!(platform(PlatformOp::Create, i64::from(libc::EACCES)).kind(), ErrorKind::Permission);
        assert_eq!(platform(PlatformOp::Owner, 1000).kind(), ErrorKind::Permission);
        assert_eq!(
            Error::Collective(CollectiveError::Local(Failure::Platform(PlatformError::misaligned(8, 4096)))).kind(),
            ErrorKind::Internal
        );
        assert_eq!(platform(PlatformOp::Map, i64::from(libc::EIO)).kind(), ErrorKind::System);
        assert_eq!(Error::Fence(FenceError::Timeout { peer: 1 }).kind(), ErrorKind::Timeout);
        assert_eq!(Error::Fence(FenceError::PeerDead { rank: 1 }).kind(), ErrorKind::DeadPeer);
        assert_eq!(Error::Fence(FenceError::InvalidRank { rank: 2, nranks: 2 }).kind(), ErrorKind::InvalidArgument);
        let peer_arg = CollectiveError::Peer { rank: 3, failure: Failure::Argument(ArgError::Caller) };
        assert_eq!(Error::Collective(peer_arg).kind(), ErrorKind::InvalidArgument);
        let peer_oob = CollectiveError::Peer { rank: 3, failure: Failure::Oob(kpccl_core::OobError { code: 5 }) };
        assert_eq!(Error::Collective(peer_oob).kind(), ErrorKind::OutOfBand);
        assert_eq!(Error::Launcher { rank: None, code: 1 }.kind(), ErrorKind::OutOfBand);
        assert_eq!(
            Error::Launcher { rank: Some(1), code: crate::launch::code::UNRESPONSIVE }.kind(),
            ErrorKind::Timeout
        );
        assert_eq!(Error::Launcher { rank: None, code: crate::launch::code::RANK_LOST }.kind(), ErrorKind::DeadPeer);
        let lost = |ending| Error::RankLost {
            during: "window creation",
            departure: crate::launch::Departure { rank: 1, pid: Some(42), ending },
            cause: CollectiveError::Local(Failure::Oob(kpccl_core::OobError { code: crate::launch::code::RANK_LOST })),
        };
        let late = core::time::Duration::from_millis(1500);
        assert_eq!(lost(crate::launch::Ending::Unresponsive(late)).kind(), ErrorKind::Timeout);
        assert_eq!(lost(crate::launch::Ending::Signal(9)).kind(), ErrorKind::DeadPeer);
        assert_eq!(ErrorKind::DeadPeer.to_string(), "dead peer");
        let full = PlatformError { op: PlatformOp::Reserve, code: i64::from(libc::ENOSPC) };
        let e = Error::Platform { dir: "/dev/shm".into(), rank: Some(2), error: full };
        assert_eq!(e.kind(), ErrorKind::NoSpace);
        let text = e.to_string();
        assert!(text.starts_with("on rank 2: cannot reserve memory"), "{text}");
        assert!(text.contains("in /dev/shm: No space left on device (os error 28)"), "{text}");
    }
}
