//! The error type of the Rust API.

use std::fmt;

use kpccl_core::error::PlatformOp;
use kpccl_core::{CollectiveError, Failure, FenceError};

use crate::launch::{Departure, code};

/// Everything that can go wrong in the Rust API.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// A collective (communicator or window creation) failed on every rank.
    Collective(CollectiveError),
    /// A fence failed (timeout, dead peer, bad rank).
    Fence(FenceError),
    /// An access fell outside a rank's segment.
    OutOfBounds {
        /// The rank whose segment was accessed.
        rank: u32,
        /// The first byte accessed.
        offset: usize,
        /// Bytes accessed.
        len: usize,
        /// The segment's length.
        size: usize,
    },
    /// `rank` runs on another node than this rank: shared memory does not
    /// cross nodes (move that data with MPI).
    OtherNode {
        /// The rank asked for.
        rank: u32,
        /// Its node.
        node: u32,
        /// This rank's node.
        this_node: u32,
    },
    /// A rank died, left or stopped answering during a collective, so it
    /// failed on this rank.
    RankLost {
        /// The collective ("window creation").
        during: &'static str,
        /// The rank, and how it was lost.
        departure: Departure,
        /// What failed on this rank.
        cause: CollectiveError,
    },
    /// Segments cannot be created in the segment directory: which one, and why.
    SegmentDir(crate::DirError),
    /// A system call on a window's segment failed, on this rank or another
    /// of this node: what it was doing, where, and the system's reason.
    Platform {
        /// The segment directory.
        dir: std::path::PathBuf,
        /// The rank it failed on (`None`: this one).
        rank: Option<u32>,
        /// The call and its errno.
        error: kpccl_core::PlatformError,
    },
    /// An out-of-band collective of the `kpccl-run` launcher failed.
    Launcher {
        /// The rank on which it failed (`None`: this one).
        rank: Option<u32>,
        /// The launcher's code (see [`launch::code`](crate::launch::code)).
        code: i32,
    },
    /// A collective called in a child forked from the process that made the
    /// communicator: the child has its parent's identity and out-of-band
    /// connection, so its collective would take the parent's place in the
    /// other ranks'.
    ForkedChild {
        /// The process that made the communicator.
        parent: u64,
        /// This process.
        child: u64,
    },
    /// What tells this rank's node from others could not be read (no
    /// descriptor or memory left): a rank that guessed would take itself
    /// for another node's.
    NodeIdentity {
        /// The file.
        path: &'static str,
        /// The system's error number.
        code: i32,
    },
    /// A `KPCCL_*` environment variable (or an option) has an invalid value.
    Config {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// What it should be.
        expected: &'static str,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Collective(e) => e.fmt(f),
            Self::Fence(e) => e.fmt(f),
            Self::OutOfBounds { rank, offset, len, size } => {
                write!(f, "{len} bytes at {offset} are outside rank {rank}'s segment of {size} bytes")
            }
            Self::OtherNode { rank, node, this_node } => write!(
                f,
                "rank {rank} is on node {node}, not on this node {this_node}: shared memory does not cross nodes \
                 (use MPI between nodes)"
            ),
            Self::RankLost { during, departure, cause } => {
                write!(f, "{}; on this rank: ", departure.during(during))?;
                match cause {
                    CollectiveError::Local(Failure::Oob(o)) if crate::explain::launcher_code(o.code) => {
                        write!(f, "{} (launcher code {})", code::describe(o.code), o.code)
                    }
                    cause => cause.fmt(f),
                }
            }
            Self::SegmentDir(e) => e.fmt(f),
            Self::Platform { dir, rank, error } => {
                if let Some(r) = rank {
                    write!(f, "on rank {r}: ")?;
                }
                let dir = dir.display();
                match error.op {
                    PlatformOp::Owner | PlatformOp::Size | PlatformOp::Fit | PlatformOp::Alignment => {
                        write!(f, "{error} in {dir}")
                    }
                    op => {
                        let reason = i32::try_from(error.code).map(std::io::Error::from_raw_os_error);
                        match reason {
                            Ok(reason) => write!(f, "cannot {op} in {dir}: {reason}")?,
                            Err(_) => write!(f, "cannot {op} in {dir}: error {}", error.code)?,
                        }
                        match hint(error) {
                            Some(hint) => write!(f, " ({hint})"),
                            None => Ok(()),
                        }
                    }
                }
            }
            Self::Launcher { rank, code } => {
                f.write_str("the launcher's out-of-band collective failed")?;
                if let Some(r) = rank {
                    write!(f, " on rank {r}")?;
                }
                write!(f, ": {} (code {code})", code::describe(*code))
            }
            Self::ForkedChild { parent, child } => write!(
                f,
                "the communicator was made before this process was forked from it (in process {parent}; this is \
                 {child}): a forked child cannot take part in its collectives (make windows in the parent)"
            ),
            Self::NodeIdentity { path, code } => write!(
                f,
                "cannot read {path}, which tells this rank's node from the others: {}",
                std::io::Error::from_raw_os_error(*code)
            ),
            Self::Config { var, value, expected } => write!(f, "{var}={value:?} is invalid: expected {expected}"),
        }
    }
}

/// What to do about a failed system call, where the errno alone does not say.
fn hint(error: &kpccl_core::PlatformError) -> Option<&'static str> {
    let code = i32::try_from(error.code).ok()?;
    match (error.op, code) {
        // Windows stay below i64::MAX bytes: the process's limit is what refused.
        (_, libc::EFBIG) => Some("the window is past the rank's file size limit: raise `ulimit -f`"),
        // Not the directory: attaching opens the creator's descriptor (see `way_in.rs`).
        (PlatformOp::Open, libc::EACCES | libc::EPERM) => Some(
            "ranks attach through the creating rank's /proc/<pid>/fd, which the kernel opens only to the same user \
             when the creator is dumpable: do not run ranks set-uid or as other users, nor call \
             prctl(PR_SET_DUMPABLE, 0)",
        ),
        _ => None,
    }
}

/// No `source()`: every message already says its cause in full (a wrapped
/// fence or collective error is printed as part of it), so a reporter that
/// walks the chain of causes would print it twice.
impl std::error::Error for Error {}

impl From<CollectiveError> for Error {
    fn from(e: CollectiveError) -> Self {
        Self::Collective(e)
    }
}

impl From<FenceError> for Error {
    fn from(e: FenceError) -> Self {
        Self::Fence(e)
    }
}

#[cfg(test)]
mod tests {
    use super::Error;

    /// A reporter that prints an error and then its causes (anyhow's `{:#}`)
    /// says each thing once.
    #[test]
    fn a_wrapped_error_is_said_once() {
        use std::error::Error as _;
        let fence = Error::from(kpccl_core::FenceError::PeerDead { rank: 1 });
        assert!(fence.to_string().contains("rank 1"), "{fence}");
        assert!(fence.source().is_none(), "the message already says it: {fence}");
        let collective = Error::from(kpccl_core::CollectiveError::Peer {
            rank: 1,
            failure: kpccl_core::Failure::Fence(kpccl_core::FenceError::PeerDead { rank: 2 }),
        });
        assert!(collective.source().is_none(), "the message already says it: {collective}");
    }

    /// A refused attach says why the kernel refuses it and what to do, not
    /// only "permission denied" in a directory the attach never looked in.
    #[test]
    fn a_refused_attach_says_what_to_do() {
        use kpccl_core::PlatformError;
        use kpccl_core::error::PlatformOp;
        let refused = PlatformError { op: PlatformOp::Open, code: i64::from(libc::EACCES) };
        let text = Error::Platform { dir: "/dev/shm".into(), rank: Some(1), error: refused }.to_string();
        assert!(text.contains("os error 13") && text.contains("PR_SET_DUMPABLE"), "{text}");
        let gone = PlatformError { op: PlatformOp::Open, code: i64::from(libc::ENOENT) };
        let text = Error::Platform { dir: "/dev/shm".into(), rank: None, error: gone }.to_string();
        assert!(text.ends_with("(os error 2)"), "no hint where the errno says it: {text}");
    }

    /// A platform's misaligned mapping carries alignments, not an errno.
    #[test]
    fn a_misaligned_mapping_is_said_in_bytes() {
        let error = kpccl_core::PlatformError::misaligned(8, 4096);
        let text = Error::Platform { dir: "/dev/shm".into(), rank: Some(1), error }.to_string();
        assert_eq!(
            text,
            "on rank 1: cannot accept the segment's mapping: its address is aligned to 8 bytes, the window needs 4096 \
             (the page size) in /dev/shm"
        );
    }

    #[test]
    fn an_access_past_the_address_space_is_named_as_asked() {
        let e = Error::OutOfBounds { rank: 1, offset: usize::MAX, len: 8, size: 4096 };
        assert_eq!(e.to_string(), format!("8 bytes at {} are outside rank 1's segment of 4096 bytes", usize::MAX));
    }
}
