//! The codes a failed [`RunOob`](super::RunOob) collective returns, as the
//! `code` of its [`OobError`](kpccl_core::OobError): one per cause, all negative.

/// Reading from or writing to the launcher failed (an OS error).
pub const IO: i32 = -1;
/// No reply from the launcher within the timeout (plus a second): the
/// launcher itself is stuck (a rank that is late gets [`UNRESPONSIVE`]).
pub const TIMEOUT: i32 = -2;
/// The launcher closed the connection (it exited or was killed).
pub const DISCONNECTED: i32 = -3;
/// The launcher sent something this version does not understand, or
/// reported that this rank broke the protocol.
pub const PROTOCOL: i32 = -4;
/// A rank left the job (its process exited or crashed) before every rank
/// reached this collective; every later collective fails the same way.
pub const RANK_LOST: i32 = -5;
/// The ranks called different collectives, or an allgather with different
/// lengths; every rank gets this code (the rank at fault gets
/// [`BUFFER`] or [`TOO_LARGE`]).
pub const MISMATCH: i32 = -6;
/// This rank's `recv.len()` is not `send.len() * nranks`.
pub const BUFFER: i32 = -7;
/// The collective's result would exceed the 1 GiB frame limit.
pub const TOO_LARGE: i32 = -8;
/// An earlier I/O error, timeout or protocol error broke this connection;
/// it has been closed (which the other ranks see as [`RANK_LOST`]).
pub const BROKEN: i32 = -9;
/// A rank did not reach the collective within this rank's timeout
/// (`KPCCL_OOB_TIMEOUT_MS`, or `KPCCL_TIMEOUT_MS` if shorter): stopped,
/// stuck, or busy elsewhere. The job is broken from then on: every later
/// collective fails with this code too, naming the same rank.
pub const UNRESPONSIVE: i32 = -10;
/// The caller ended the wait for the launcher's reply (Python's Ctrl-C; see
/// [`crate::interrupt`]). The connection has been closed, which the other
/// ranks see as this rank leaving the job ([`RANK_LOST`]).
pub const INTERRUPTED: i32 = -11;
/// This process is a child forked from the rank that connected: it shares
/// the rank's connection, and whatever it sent would be taken for the
/// rank's part in the job's collectives. Nothing is sent; the connection
/// stays the parent's.
pub const FORKED: i32 = -12;

/// A short description of a code, for messages.
pub fn describe(code: i32) -> &'static str {
    meaning(code).unwrap_or("not a kpccl-run out-of-band error code")
}

/// What a code means, if it is one of the launcher's.
pub fn meaning(code: i32) -> Option<&'static str> {
    Some(match code {
        IO => "I/O error on the connection to the launcher",
        TIMEOUT => "no reply from the launcher within the timeout (is kpccl-run stopped?)",
        DISCONNECTED => "the launcher closed the connection",
        PROTOCOL => "protocol error between rank and launcher",
        RANK_LOST => "a rank left the job (exited or was killed), so no collective can complete",
        MISMATCH => "the ranks called different collectives or passed different lengths",
        BUFFER => "recv.len() is not send.len() * nranks",
        TOO_LARGE => "the collective exceeds the 1 GiB limit",
        BROKEN => "the connection to the launcher broke in an earlier collective",
        UNRESPONSIVE => {
            "a rank did not reach the collective within the timeout (KPCCL_OOB_TIMEOUT_MS / KPCCL_TIMEOUT_MS)"
        }
        INTERRUPTED => "this rank stopped waiting for the collective (interrupted) and left the job",
        FORKED => "this process is a forked child of the rank: it cannot take part in the rank's collectives",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_distinct_negative_and_described() {
        let all = [
            IO,
            TIMEOUT,
            DISCONNECTED,
            PROTOCOL,
            RANK_LOST,
            MISMATCH,
            BUFFER,
            TOO_LARGE,
            BROKEN,
            UNRESPONSIVE,
            INTERRUPTED,
            FORKED,
        ];
        for (i, a) in all.iter().enumerate() {
            assert!(*a < 0);
            assert!(!describe(*a).starts_with("not a"));
            assert!(all[i + 1..].iter().all(|b| b != a));
        }
        assert!(describe(0).starts_with("not a"));
        assert_eq!(meaning(17), None);
    }
}
