//! Creation errors that name their cause: the rank that died or stopped
//! answering (from the launcher's word, or from the liveness of the ranks
//! on this node), and the launcher's error codes in words.

use std::path::Path;

use kpccl_core::error::PlatformOp;
use kpccl_core::{CollectiveError, Failure, PlatformError, ProcessIdentity};

use crate::launch::{self, Departure, Ending};
use crate::segment_dir::{self, DirError};
use crate::{Error, liveness};

/// The failure, on this rank or the rank that reported it, if it could be
/// the trace of a lost rank: a failed out-of-band call, or a segment that
/// could not be opened (its creator is gone). A failure with a cause of its
/// own (a bad argument, a disagreement) is never blamed on a rank that has
/// since exited.
fn failure_of_loss(e: &CollectiveError) -> Option<Failure> {
    let failure = match *e {
        CollectiveError::Local(f) | CollectiveError::Peer { failure: f, .. } => f,
        _ => return None,
    };
    let open = |op| matches!(op, PlatformOp::Open | PlatformOp::Stat);
    match failure {
        Failure::Oob(_) => Some(failure),
        Failure::Platform(p) if open(p.op) => Some(failure),
        _ => None,
    }
}

/// The rank whose loss explains a failed creation, if any: what the
/// launcher said (when an out-of-band collective failed under it), else the
/// first rank of this node whose process is gone.
fn lost_rank(e: &CollectiveError, peers: &[(u32, ProcessIdentity)]) -> Option<Departure> {
    let failure = failure_of_loss(e)?;
    if matches!(failure, Failure::Oob(_))
        && let Some(d) = launch::last_departure()
    {
        return Some(d);
    }
    peers.iter().find(|(_, who)| !liveness::is_alive(who)).map(|&(rank, who)| Departure {
        rank,
        pid: u32::try_from(who.pid).ok(),
        ending: Ending::Gone,
    })
}

/// What is wrong with the segment directory `dir` (`private`: a simulated
/// node's), when creating a segment in it failed for want of permission.
fn dir_error(e: &CollectiveError, dir: &Path, private: bool) -> Option<DirError> {
    let (CollectiveError::Local(Failure::Platform(PlatformError { op: PlatformOp::Create, code }))
    | CollectiveError::Peer { failure: Failure::Platform(PlatformError { op: PlatformOp::Create, code }), .. }) = *e
    else {
        return None;
    };
    let refused = [libc::EACCES, libc::EPERM, libc::ENOTDIR, libc::ELOOP, libc::EEXIST].map(i64::from);
    if !refused.contains(&code) {
        return None;
    }
    segment_dir::problem(dir, private).map(|problem| DirError { path: dir.to_owned(), problem })
}

/// `e`, from a creation (`during`: "window creation"), with its cause named
/// where it can be; `peers` are the other ranks of this node, if known;
/// `dir` is the segment directory (and whether it is a simulated node's).
pub(crate) fn creation_error(
    e: CollectiveError,
    during: &'static str,
    peers: &[(u32, ProcessIdentity)],
    dir: Option<(&Path, bool)>,
) -> Error {
    if let Some(departure) = lost_rank(&e, peers) {
        return Error::RankLost { during, departure, cause: e };
    }
    // A rank of another node failed in its node's directory, not in `dir`.
    let dir = dir.filter(|_| on_this_node(&e, peers));
    if let Some(problem) = dir.and_then(|(dir, private)| dir_error(&e, dir, private)) {
        return Error::SegmentDir(problem);
    }
    if let Some((dir, _)) = dir {
        match e {
            CollectiveError::Local(Failure::Platform(error)) => {
                return Error::Platform { dir: dir.to_owned(), rank: None, error };
            }
            CollectiveError::Peer { rank, failure: Failure::Platform(error) } => {
                return Error::Platform { dir: dir.to_owned(), rank: Some(rank), error };
            }
            _ => {}
        }
    }
    match e {
        CollectiveError::Local(Failure::Oob(o)) if launcher_code(o.code) => {
            Error::Launcher { rank: None, code: o.code }
        }
        CollectiveError::Peer { rank, failure: Failure::Oob(o) } if launcher_code(o.code) => {
            Error::Launcher { rank: Some(rank), code: o.code }
        }
        e => Error::Collective(e),
    }
}

/// Whether `e` failed on this node: on this rank, or on one of `peers`
/// (the other ranks of this node), whose segment directory is this rank's.
fn on_this_node(e: &CollectiveError, peers: &[(u32, ProcessIdentity)]) -> bool {
    match *e {
        CollectiveError::Peer { rank, .. } => peers.iter().any(|&(peer, _)| peer == rank),
        _ => true,
    }
}

/// Whether `code`, returned by an out-of-band call, is the launcher's (not
/// the code of a callback of the user's that wraps it).
pub(crate) fn launcher_code(code: i32) -> bool {
    launch::in_use() && launch::code::meaning(code).is_some()
}

/// The level at which rank `me` logs `e`, a failed collective that every
/// rank reports: an error on the rank it is about, so that a refused call
/// is logged once and not once per rank; debug on the others. A loss is
/// logged by every rank (the lost one cannot).
pub(crate) fn failure_level(e: &Error, me: u32) -> crate::log::Level {
    use crate::log::Level;
    let about = |rank: u32| if rank == me { Level::Error } else { Level::Debug };
    match e {
        // The caller refused an argument and said so already.
        Error::Collective(CollectiveError::Local(Failure::Argument(kpccl_core::error::ArgError::Caller))) => {
            Level::Debug
        }
        Error::Collective(CollectiveError::Peer { .. }) | Error::Launcher { rank: Some(_), .. } => Level::Debug,
        Error::Platform { rank: Some(_), .. } => Level::Debug,
        Error::Collective(
            CollectiveError::Mismatch { rank, .. }
            | CollectiveError::LocalRank { rank, .. }
            | CollectiveError::RankClaim { place: rank, .. }
            | CollectiveError::Layout(kpccl_core::LayoutError::TooLarge { rank, .. }),
        ) => about(*rank),
        // Every rank sees it alike: rank 0 says it.
        Error::Collective(CollectiveError::Layout(_) | CollectiveError::NoRecord { .. }) => about(0),
        _ => Level::Error,
    }
}

#[cfg(test)]
mod tests {
    use kpccl_core::error::ArgError;
    use kpccl_core::{CollectiveError, Failure};

    use super::failure_level;
    use crate::Error;
    use crate::log::Level;

    #[test]
    fn a_refused_collective_is_an_error_on_one_rank_only() {
        let local = CollectiveError::LocalRank { rank: 2, local_rank: 2, node: 1, local_size: 2, clash: None };
        let levels: Vec<Level> = (0..4).map(|me| failure_level(&Error::Collective(local), me)).collect();
        assert_eq!(levels, [Level::Debug, Level::Debug, Level::Error, Level::Debug]);
        let peer = CollectiveError::Peer { rank: 1, failure: Failure::Argument(ArgError::Rank { rank: 9, nranks: 2 }) };
        assert_eq!(failure_level(&Error::Collective(peer), 0), Level::Debug);
        let own = CollectiveError::Local(Failure::Argument(ArgError::Rank { rank: 9, nranks: 2 }));
        assert_eq!(failure_level(&Error::Collective(own), 1), Level::Error);
        // A window too large is logged by the rank that asked for it.
        let big = CollectiveError::Layout(kpccl_core::LayoutError::TooLarge { rank: 1, size: 1, total: 1, max: 0 });
        let levels: Vec<Level> = (0..3).map(|me| failure_level(&Error::Collective(big), me)).collect();
        assert_eq!(levels, [Level::Debug, Level::Error, Level::Debug]);
    }
}
