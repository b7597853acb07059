//! A `KPCCL_ASCEND` that names no runtime is an invalid `KPCCL_*` variable:
//! `KPCCL_ERR_INVALID_ARGUMENT`, as `KPCCL_ASCEND_PID_VALIDATION=2` is, not a
//! failure of the device runtime. One test in its own binary: it sets the
//! process's environment.
#![cfg(feature = "ascend")]
#![allow(missing_docs, clippy::undocumented_unsafe_blocks, clippy::multiple_unsafe_ops_per_block)]

use core::ffi::c_int;
use core::ptr::null_mut;

use kpccl::*;

mod support;
use support::{GOOD, create, last_error};

#[test]
fn an_unknown_device_runtime_is_an_invalid_argument() {
    // SAFETY: the only test of this binary; no other thread reads the environment.
    unsafe {
        std::env::set_var("KPCCL_ASCEND", "bogus");
        std::env::remove_var("KPCCL_ASCEND_PID_VALIDATION");
    }
    let (rc, comm) = create(GOOD);
    assert_eq!(rc, KPCCL_OK, "{}", last_error());
    let mut attr = core::mem::MaybeUninit::<kpccl_shm_win_attr_t>::uninit();
    assert_eq!(unsafe { kpccl_shm_win_attr_init(attr.as_mut_ptr()) }, KPCCL_OK);
    let mut attr = unsafe { attr.assume_init() };
    attr.memory_kind = kpccl_shm_memory_kind_t::KPCCL_SHM_MEMORY_ASCEND as c_int;
    let (mut base, mut win) = (null_mut(), null_mut());

    assert_eq!(unsafe { kpccl_shm_win_alloc_ex(64, comm, &attr, &mut base, &mut win) }, KPCCL_ERROR);
    assert!(base.is_null() && win.is_null());
    assert_eq!(last_error(), "kpccl_shm_win_alloc_ex: KPCCL_ASCEND=\"bogus\" is invalid: expected acl, sim or auto");
    assert_eq!(kpccl_last_error_code(), kpccl_error_code_t::KPCCL_ERR_INVALID_ARGUMENT);

    // The same class as the other device variable's refusal.
    unsafe {
        std::env::set_var("KPCCL_ASCEND", "sim");
        std::env::set_var("KPCCL_ASCEND_PID_VALIDATION", "2");
    }
    assert_eq!(unsafe { kpccl_shm_win_alloc_ex(64, comm, &attr, &mut base, &mut win) }, KPCCL_ERROR);
    assert!(last_error().contains("KPCCL_ASCEND_PID_VALIDATION=\"2\" is invalid"), "{}", last_error());
    assert_eq!(kpccl_last_error_code(), kpccl_error_code_t::KPCCL_ERR_INVALID_ARGUMENT);

    // Both refusals took part in the window's collective: the next window is made.
    assert_eq!(unsafe { kpccl_shm_win_alloc(64, comm, &mut base, &mut win) }, KPCCL_OK, "{}", last_error());
    assert_eq!(unsafe { kpccl_shm_win_free(win) }, KPCCL_OK);
    assert_eq!(unsafe { kpccl_shm_comm_destroy(comm) }, KPCCL_OK);
}
