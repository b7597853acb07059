//! What the single-rank tests of the C ABI share: out-of-band callbacks for
//! one rank (gathering is copying), a failing one, and the last error text.
#![allow(dead_code, unreachable_pub)]

use core::ffi::{CStr, c_int, c_void};
use core::ptr::null_mut;

use kpccl::*;

/// One rank's allgather: a copy.
pub unsafe extern "C" fn copy(
    send: *const c_void,
    recv: *mut c_void,
    size: c_int,
    _: *mut c_void,
    dt: kpccl_shm_datatype_t,
) -> c_int {
    assert_eq!(dt, kpccl_shm_datatype_t::KPCCL_SHM_DATATYPE_CHAR);
    // SAFETY: the library passes `size` bytes to send and room for them (one rank).
    unsafe { core::ptr::copy_nonoverlapping(send.cast::<u8>(), recv.cast::<u8>(), size as usize) };
    0
}

/// An allgather that fails (returns 42) without taking part.
pub unsafe extern "C" fn fails(
    _: *const c_void,
    _: *mut c_void,
    _: c_int,
    _: *mut c_void,
    _: kpccl_shm_datatype_t,
) -> c_int {
    42
}

/// One rank's barrier: nothing to wait for.
pub unsafe extern "C" fn barrier(_: *mut c_void) -> c_int {
    0
}

/// The callbacks of one rank.
pub const GOOD: kpccl_shm_oob_cb_t = kpccl_shm_oob_cb_t { oob_allgather: Some(copy), oob_barrier: Some(barrier) };

/// This thread's `kpccl_last_error()`.
pub fn last_error() -> String {
    // SAFETY: never NULL, NUL-terminated, valid until the next failure on this thread.
    unsafe { CStr::from_ptr(kpccl_last_error()) }.to_string_lossy().into_owned()
}

/// `kpccl_shm_comm_create` of one rank with `cbs` and `group`: its code and handle.
pub fn create_with(cbs: kpccl_shm_oob_cb_t, group: usize) -> (c_int, kpccl_shm_comm_h) {
    let mut comm = null_mut();
    // SAFETY: `cbs` and `comm` are valid; the callbacks ignore the group.
    let rc = unsafe { kpccl_shm_comm_create(1, 0, 0, &cbs, group as *mut c_void, &mut comm) };
    (rc, comm)
}

/// The group `create` passes (any value: the callbacks ignore it).
pub const GROUP: usize = 0x5eed;

/// `create_with(cbs, GROUP)`.
pub fn create(cbs: kpccl_shm_oob_cb_t) -> (c_int, kpccl_shm_comm_h) {
    create_with(cbs, GROUP)
}

/// `kpccl_shm_win_alloc` of `size` bytes on `comm`, which must succeed: the base and the handle.
pub fn alloc(comm: kpccl_shm_comm_h, size: usize) -> (*mut u8, kpccl_shm_win_h) {
    let (mut base, mut win) = (null_mut(), null_mut());
    // SAFETY: `base` and `win` are valid out pointers; a bad `comm` is refused.
    let rc = unsafe { kpccl_shm_win_alloc(size, comm, &mut base, &mut win) };
    assert_eq!(rc, KPCCL_OK, "{}", last_error());
    (base.cast(), win)
}
