//! The out-of-band collectives a communicator is built on.
//!
//! Users bring these (MPI, PMIx, sockets, the `kpccl-run` launcher); the core
//! calls them only during communicator and window creation.

use crate::error::OobError;

/// Out-of-band collectives over the ranks of one communicator.
///
/// Every rank calls each function the same number of times, in the same
/// order, with buffers of the same length. The core calls only
/// [`Oob::allgather`]; [`Oob::barrier`] serves the layers above it
/// (`kpccl-posix`'s `Comm::barrier`).
///
/// Failing: return an [`OobError`] (any non-zero code of yours) before this
/// rank takes part, or after the collective completed on it. The core then
/// calls `allgather` exactly once more with the same length (a flush
/// carrying the failure), which either completes the others' call or is
/// their next one, so every rank fails together. A rank that fails in the
/// middle of a collective the others have not finished leaves them waiting.
pub trait Oob {
    /// Gathers every rank's `send` into `recv`, rank `r`'s bytes at
    /// `r * send.len()`. `recv.len() == send.len() * nranks`. The core
    /// zeroes `recv` first: a part left unwritten reads as no record from
    /// that rank.
    ///
    /// Memory ordering: when it returns, everything every rank did before
    /// its call happens-before what this rank does next (a segment's creator
    /// zeroes it and writes its header before one allgather; the others read
    /// them after it). Messages between processes give this; in one address
    /// space, use Release/Acquire, as a counting barrier does.
    fn allgather(&self, send: &[u8], recv: &mut [u8]) -> Result<(), OobError>;
    /// Returns once every rank has called it (with the same ordering as
    /// [`Oob::allgather`]).
    fn barrier(&self) -> Result<(), OobError>;
}

impl<T: Oob + ?Sized> Oob for &T {
    fn allgather(&self, send: &[u8], recv: &mut [u8]) -> Result<(), OobError> {
        (**self).allgather(send, recv)
    }
    fn barrier(&self) -> Result<(), OobError> {
        (**self).barrier()
    }
}
