//! `kpccl_shm_comm_set_release`: a communicator that owns its out-of-band
//! group, so that `kpccl_shm_comm_destroy` releases what a helper such as
//! `kpccl_shm_comm_create_mpi` (kpccl_mpi.h) made for it.

use core::ffi::{c_int, c_void};

use crate::comm::{self, kpccl_shm_comm_h};

/// Makes `kpccl_shm_comm_destroy(comm)` call `release(group)` once, after
/// the communicator is gone, with the `group` it was created with. The
/// callbacks are never called after that, and windows allocated on the
/// communicator do not use them, so `release` may free the group (an MPI
/// communicator, memory). Setting it again replaces the previous one;
/// `NULL` clears it. Local (no collective).
///
/// # Safety
/// `comm` is any value (checked: see `kpccl_shm_comm_h`); `release` is
/// `NULL` or a function valid to call with the communicator's group.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kpccl_shm_comm_set_release(
    comm: kpccl_shm_comm_h,
    release: Option<unsafe extern "C" fn(group: *mut c_void)>,
) -> c_int {
    ffi_boundary!("kpccl_shm_comm_set_release", {
        // SAFETY: `comm` is checked before use (`comm::get`).
        let c = unsafe { comm::get(comm, "comm") }?;
        c.oob().set_release(release);
        Ok(())
    })
}
