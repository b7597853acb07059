//! A communicator over MPI (feature `mpi`, the `mpi` crate): the Rust
//! counterpart of `kpccl_mpi.h`, for a Rust program started by `mpirun`.
//!
//! ```no_run
//! let universe = mpi::initialize().expect("MPI is initialized once");
//! let comm = kpccl_posix::mpi::node_comm(&universe.world())?;   // this node's ranks
//! let win = comm.window(4096).alloc()?;
//! win.fence()?;
//! win.free()?;
//! # Ok::<(), kpccl_posix::Error>(())
//! ```

use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::CommunicatorCollectives;

use crate::{Comm, Error, Oob, OobError};

/// The out-of-band collectives over an MPI communicator (of one node, as
/// [`node_comm`] makes it). MPI reports errors by aborting the job (its
/// default error handler), so the calls themselves never fail here.
pub struct MpiOob {
    node: SimpleCommunicator,
}

impl core::fmt::Debug for MpiOob {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("MpiOob").field("rank", &self.node.rank()).field("size", &self.node.size()).finish()
    }
}

impl MpiOob {
    /// The MPI communicator the collectives run over.
    pub fn communicator(&self) -> &SimpleCommunicator {
        &self.node
    }
}

impl Oob for MpiOob {
    fn allgather(&self, send: &[u8], recv: &mut [u8]) -> Result<(), OobError> {
        // Bytes gathered as bytes (MPI_UINT8_T): nothing to convert.
        self.node.all_gather_into(send, recv);
        Ok(())
    }

    fn barrier(&self) -> Result<(), OobError> {
        self.node.barrier();
        Ok(())
    }
}

/// The communicator of the caller's node, from any MPI communicator
/// (collective over `comm`): `comm` split by node
/// (`MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)`), the rank in the split being
/// the rank and local rank. Dropping the result frees the split.
pub fn node_comm<C: Communicator>(comm: &C) -> Result<Comm<MpiOob>, Error> {
    let node = comm.split_shared(0);
    let (rank, size) = (node.rank(), node.size());
    let rank = u32::try_from(rank).expect("MPI ranks are not negative");
    let size = u32::try_from(size).expect("MPI sizes are not negative");
    Comm::new(MpiOob { node }, rank, size)
}
