//! `kpccl_shm_comm_set_release`: destroying a communicator releases its
//! group once, after the communicator is gone, and never otherwise.
#![allow(missing_docs, clippy::undocumented_unsafe_blocks, clippy::multiple_unsafe_ops_per_block)]

use core::ffi::c_void;
use core::ptr::null_mut;
use std::sync::Mutex;

use kpccl::*;

mod support;
use support::{GOOD, create_with};

/// The groups released so far (tests run in parallel: each uses its own group).
static RELEASED: Mutex<Vec<usize>> = Mutex::new(Vec::new());

unsafe extern "C" fn release(group: *mut c_void) {
    RELEASED.lock().unwrap().push(group as usize);
}

fn released(group: usize) -> usize {
    RELEASED.lock().unwrap().iter().filter(|&&g| g == group).count()
}

fn create(group: usize) -> kpccl_shm_comm_h {
    let (rc, comm) = create_with(GOOD, group);
    assert_eq!(rc, KPCCL_OK);
    comm
}

#[test]
fn destroy_releases_the_group_once_and_windows_outlive_it() {
    let group = 0xa11;
    let comm = create(group);
    assert_eq!(unsafe { kpccl_shm_comm_set_release(comm, Some(release)) }, KPCCL_OK);
    let (mut base, mut win) = (null_mut(), null_mut());
    assert_eq!(unsafe { kpccl_shm_win_alloc(64, comm, &mut base, &mut win) }, KPCCL_OK);
    assert_eq!(released(group), 0, "released before destroy");
    assert_eq!(unsafe { kpccl_shm_comm_destroy(comm) }, KPCCL_OK);
    assert_eq!(released(group), 1);
    // The window does not need the group any more.
    assert_eq!(unsafe { kpccl_shm_win_fence(win) }, KPCCL_OK);
    assert_eq!(unsafe { kpccl_shm_win_free(win) }, KPCCL_OK);
    // A second destroy is refused (stale) and releases nothing more.
    assert_eq!(unsafe { kpccl_shm_comm_destroy(comm) }, KPCCL_ERROR);
    assert_eq!(released(group), 1);
}

#[test]
fn a_cleared_release_is_not_called() {
    let group = 0xc1ea;
    let comm = create(group);
    assert_eq!(unsafe { kpccl_shm_comm_set_release(comm, Some(release)) }, KPCCL_OK);
    assert_eq!(unsafe { kpccl_shm_comm_set_release(comm, None) }, KPCCL_OK);
    assert_eq!(unsafe { kpccl_shm_comm_destroy(comm) }, KPCCL_OK);
    assert_eq!(released(group), 0);
}

#[test]
fn a_stale_communicator_is_refused() {
    let comm = create(0x57a1e);
    assert_eq!(unsafe { kpccl_shm_comm_destroy(comm) }, KPCCL_OK);
    assert_eq!(unsafe { kpccl_shm_comm_set_release(comm, Some(release)) }, KPCCL_ERROR);
    assert_eq!(unsafe { kpccl_shm_comm_set_release(null_mut(), Some(release)) }, KPCCL_ERROR);
    assert_eq!(released(0x57a1e), 0);
}
