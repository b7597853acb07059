//! Creation errors that name their cause: the rank that died or stopped
//! answering (from the launcher's word, or from the liveness of the ranks
//! on this node), and the launcher's error codes in words.

use kpccl_core::{CollectiveError, Failure, ProcessIdentity};

use crate::Error;
use crate::launch::{self, Departure, Ending};
use crate::liveness;

/// The rank whose loss explains a failed creation, if any: what the
/// launcher said (when an out-of-band collective failed under it), else the
/// first rank of this node whose process is gone.
fn lost_rank(e: &CollectiveError, peers: &[(u32, ProcessIdentity)]) -> Option<Departure> {
    let oob_failed =
        matches!(e, CollectiveError::Local(Failure::Oob(_)) | CollectiveError::Peer { failure: Failure::Oob(_), .. });
    if oob_failed && let Some(d) = launch::last_departure() {
        return Some(d);
    }
    peers.iter().find(|(_, who)| !liveness::is_alive(who)).map(|&(rank, who)| Departure {
        rank,
        pid: u32::try_from(who.pid).ok(),
        ending: Ending::Gone,
    })
}

/// `e`, from a creation (`during`: "window creation"), with its cause named
/// where it can be; `peers` are the other ranks of this node, if known.
pub(crate) fn creation_error(e: CollectiveError, during: &'static str, peers: &[(u32, ProcessIdentity)]) -> Error {
    if let Some(departure) = lost_rank(&e, peers) {
        return Error::RankLost { during, departure, cause: e };
    }
    match e {
        CollectiveError::Local(Failure::Oob(o)) if launch::in_use() => Error::Launcher { rank: None, code: o.code },
        CollectiveError::Peer { rank, failure: Failure::Oob(o) } if launch::in_use() => {
            Error::Launcher { rank: Some(rank), code: o.code }
        }
        e => Error::Collective(e),
    }
}
