//! The out-of-band collectives a communicator is built on.
//!
//! Users bring these (MPI, PMIx, sockets, the `kpccl-run` launcher); the core
//! calls them only during communicator and window creation.

use crate::error::OobError;

/// Out-of-band collectives over the ranks of one communicator.
///
/// Every rank calls each function the same number of times, in the same
/// order, with buffers of the same length.
pub trait Oob {
    /// Gathers every rank's `send` into `recv`, rank `r`'s bytes at
    /// `r * send.len()`. `recv.len() == send.len() * nranks`.
    fn allgather(&self, send: &[u8], recv: &mut [u8]) -> Result<(), OobError>;
    /// Returns once every rank has called it.
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
