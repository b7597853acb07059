//! A device window (`KPCCL_SHM_MEMORY_ASCEND`) through the C ABI with one
//! rank, on the host simulator (`KPCCL_ASCEND=sim`): the address returned is
//! device memory, fences and free work, and ACL failures read as their code.
//! One test in its own binary: it sets the process's environment.
#![cfg(feature = "ascend")]
#![allow(missing_docs, clippy::undocumented_unsafe_blocks, clippy::multiple_unsafe_ops_per_block)]

use core::ffi::c_int;
use core::ptr::null_mut;

use kpccl::*;

mod support;
use kpccl_ascend::codes::{ACL_MEMCPY_DEVICE_TO_HOST, ACL_MEMCPY_HOST_TO_DEVICE};
use kpccl_ascend::sim::HostSim;
use kpccl_ascend::{AclRuntime, Memcpy};
use support::{barrier, copy, last_error};

#[test]
fn a_device_window_on_the_simulator() {
    let sim_dir = format!("/dev/shm/kpccl-test-{}-ffi-device", std::process::id());
    // SAFETY: the only test of this binary; no other thread reads the environment.
    unsafe {
        std::env::set_var("KPCCL_ASCEND", "sim");
        std::env::set_var("ASCEND_SIM_DIR", &sim_dir);
    }
    let cbs = kpccl_shm_oob_cb_t { oob_allgather: Some(copy), oob_barrier: Some(barrier) };
    let mut comm = null_mut();
    assert_eq!(unsafe { kpccl_shm_comm_create(1, 0, 0, &cbs, null_mut(), &mut comm) }, KPCCL_OK);
    let mut attr = core::mem::MaybeUninit::<kpccl_shm_win_attr_t>::uninit();
    assert_eq!(unsafe { kpccl_shm_win_attr_init(attr.as_mut_ptr()) }, KPCCL_OK);
    let mut attr = unsafe { attr.assume_init() };
    attr.memory_kind = kpccl_shm_memory_kind_t::KPCCL_SHM_MEMORY_ASCEND as c_int;
    attr.device = 2;

    let (mut base, mut win) = (null_mut(), null_mut());
    assert_eq!(unsafe { kpccl_shm_win_alloc_ex(4096, comm, &attr, &mut base, &mut win) }, KPCCL_OK, "{}", last_error());
    assert!(!base.is_null());
    let (mut size, mut ptr) = (0usize, null_mut());
    assert_eq!(unsafe { kpccl_shm_win_query(win, 0, &mut size, &mut ptr) }, KPCCL_OK);
    assert_eq!((size, ptr), (4096, base));
    // The address is device memory: the runtime copies to and from it.
    let rt = HostSim::new();
    let data = [7u8; 64];
    let mut back = [0u8; 64];
    unsafe {
        rt.memcpy(Memcpy {
            dst: base,
            dst_max: 4096,
            src: data.as_ptr().cast(),
            count: 64,
            kind: ACL_MEMCPY_HOST_TO_DEVICE,
        })
    }
    .unwrap();
    assert_eq!(unsafe { kpccl_shm_win_fence(win) }, KPCCL_OK);
    assert_eq!(unsafe { kpccl_shm_peer_fence(win, 0) }, KPCCL_OK);
    unsafe { rt.memcpy(Memcpy::exact(back.as_mut_ptr().cast(), base, 64, ACL_MEMCPY_DEVICE_TO_HOST)) }.unwrap();
    assert_eq!(back, data);
    assert_eq!(unsafe { kpccl_shm_win_free(win) }, KPCCL_OK, "{}", last_error());

    // Size 0: no allocation, a NULL base.
    assert_eq!(unsafe { kpccl_shm_win_alloc_ex(0, comm, &attr, &mut base, &mut win) }, KPCCL_OK, "{}", last_error());
    assert!(base.is_null());
    assert_eq!(unsafe { kpccl_shm_win_free(win) }, KPCCL_OK, "{}", last_error());

    // A device the simulator does not have: the ACL code is in the text.
    attr.device = 99;
    assert_eq!(unsafe { kpccl_shm_win_alloc_ex(64, comm, &attr, &mut base, &mut win) }, KPCCL_ERROR);
    assert!(base.is_null() && win.is_null());
    let text = last_error();
    assert!(text.contains("kpccl_shm_win_alloc_ex: aclrtSetDevice failed: ACL error 107001"), "{text}");
    assert_eq!(unsafe { kpccl_shm_comm_destroy(comm) }, KPCCL_OK);
    assert!(!std::path::Path::new(&sim_dir).exists(), "simulator state left in {sim_dir}");
}
