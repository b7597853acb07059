//! The C ABI driven from Rust with one rank and an in-process out-of-band
//! "allgather" (a copy): the whole life cycle, and the refusals, without
//! MPI or a launcher, so that `cargo test` (also under qemu) covers it. The
//! multi-rank behaviour is the C tests' job (`ffi/tests/c`).
#![allow(missing_docs, clippy::undocumented_unsafe_blocks, clippy::multiple_unsafe_ops_per_block)]

use core::ffi::{CStr, c_int, c_void};
use core::ptr::null_mut;

use kpccl::*;

unsafe extern "C" fn copy(
    send: *const c_void,
    recv: *mut c_void,
    size: c_int,
    group: *mut c_void,
    dt: kpccl_shm_datatype_t,
) -> c_int {
    assert_eq!(dt, kpccl_shm_datatype_t::KPCCL_SHM_DATATYPE_CHAR);
    assert_eq!(group as usize, 0x5eed);
    // One rank: gathering is copying.
    unsafe { core::ptr::copy_nonoverlapping(send.cast::<u8>(), recv.cast::<u8>(), size as usize) };
    0
}

unsafe extern "C" fn fails(
    _: *const c_void,
    _: *mut c_void,
    _: c_int,
    _: *mut c_void,
    _: kpccl_shm_datatype_t,
) -> c_int {
    42
}

unsafe extern "C" fn barrier(_: *mut c_void) -> c_int {
    0
}

fn last_error() -> String {
    unsafe { CStr::from_ptr(kpccl_last_error()) }.to_string_lossy().into_owned()
}

fn create(allgather: kpccl_shm_oob_cb_t) -> (c_int, kpccl_shm_comm_h) {
    let mut cbs = allgather;
    let mut comm = null_mut();
    let rc = unsafe { kpccl_shm_comm_create(1, 0, 0, &mut cbs, 0x5eed as *mut c_void, &mut comm) };
    (rc, comm)
}

const GOOD: kpccl_shm_oob_cb_t = kpccl_shm_oob_cb_t { oob_allgather: Some(copy), oob_barrier: Some(barrier) };

#[test]
fn a_window_lives_and_dies() {
    let (rc, comm) = create(GOOD);
    assert_eq!(rc, KPCCL_OK, "{}", last_error());
    let (mut base, mut win) = (null_mut(), null_mut());
    assert_eq!(unsafe { kpccl_shm_win_alloc(4000, comm, &mut base, &mut win) }, KPCCL_OK, "{}", last_error());
    assert!(!base.is_null());
    let public = unsafe { &*win };
    assert_eq!((public.rank, public.nranks), (0, 1));
    unsafe { core::ptr::write_bytes(base.cast::<u8>(), 7, 4000) };
    assert_eq!(unsafe { kpccl_shm_win_fence(win) }, KPCCL_OK);
    assert_eq!(unsafe { kpccl_shm_peer_fence(win, 0) }, KPCCL_OK);
    let (mut size, mut ptr) = (0usize, null_mut());
    assert_eq!(unsafe { kpccl_shm_win_query(win, 0, &mut size, &mut ptr) }, KPCCL_OK);
    assert_eq!((size, ptr), (4000, base));
    assert_eq!(unsafe { kpccl_shm_peer_fence(win, 1) }, KPCCL_ERROR);
    assert!(last_error().contains("remote_rank"), "{}", last_error());
    assert_eq!(unsafe { kpccl_shm_win_free(win) }, KPCCL_OK);
    assert_eq!(unsafe { kpccl_shm_win_free(win) }, KPCCL_ERROR);
    assert!(last_error().starts_with("kpccl_shm_win_free: `win` is not a live window handle"), "{}", last_error());
    assert_eq!(unsafe { kpccl_shm_comm_destroy(comm) }, KPCCL_OK);
    assert_eq!(unsafe { kpccl_shm_comm_destroy(comm) }, KPCCL_ERROR);
}

#[test]
fn size_zero_has_no_base_and_attributes_apply() {
    let (_, comm) = create(GOOD);
    let mut attr = core::mem::MaybeUninit::<kpccl_shm_win_attr_t>::uninit();
    assert_eq!(unsafe { kpccl_shm_win_attr_init(attr.as_mut_ptr()) }, KPCCL_OK);
    let mut attr = unsafe { attr.assume_init() };
    attr.layout = kpccl_shm_layout_t::KPCCL_SHM_LAYOUT_ALIGNED as c_int;
    let (mut base, mut win) = (core::ptr::dangling_mut::<c_void>(), null_mut());
    assert_eq!(unsafe { kpccl_shm_win_alloc_ex(0, comm, &attr, &mut base, &mut win) }, KPCCL_OK, "{}", last_error());
    assert!(base.is_null() && !win.is_null());
    assert_eq!(unsafe { kpccl_shm_win_free(win) }, KPCCL_OK);
    attr.memory_kind = kpccl_shm_memory_kind_t::KPCCL_SHM_MEMORY_ASCEND as c_int;
    assert_eq!(unsafe { kpccl_shm_win_alloc_ex(64, comm, &attr, &mut base, &mut win) }, KPCCL_ERROR);
    assert!(base.is_null() && win.is_null());
    // Without KPCCL_ASCEND, and without CANN, the error says how to simulate.
    if std::env::var_os("KPCCL_ASCEND").is_none() {
        assert!(last_error().contains("set KPCCL_ASCEND=sim"), "{}", last_error());
    }
    assert_eq!(unsafe { kpccl_shm_comm_destroy(comm) }, KPCCL_OK);
}

#[test]
fn a_failing_callback_fails_the_call() {
    let (rc, comm) = create(kpccl_shm_oob_cb_t { oob_allgather: Some(fails), ..GOOD });
    assert_eq!(rc, KPCCL_ERROR);
    assert!(comm.is_null());
    assert!(last_error().contains("returned 42"), "{}", last_error());
    let (rc, comm) = create(kpccl_shm_oob_cb_t { oob_allgather: None, ..GOOD });
    assert_eq!(rc, KPCCL_ERROR);
    assert!(comm.is_null());
    assert!(last_error().contains("oob->oob_allgather"), "{}", last_error());
}

#[test]
fn nothing_is_dereferenced_before_it_is_checked() {
    let mut local = [0u64; 4];
    let foreign: kpccl_shm_win_h = local.as_mut_ptr().cast();
    assert_eq!(unsafe { kpccl_shm_win_fence(foreign) }, KPCCL_ERROR);
    assert_eq!(unsafe { kpccl_shm_win_fence(null_mut()) }, KPCCL_ERROR);
    assert_eq!(unsafe { kpccl_shm_comm_destroy(foreign.cast()) }, KPCCL_ERROR);
    assert_eq!(local, [0; 4]);
    assert_eq!(unsafe { kpccl_log_error(core::ptr::null()) }, KPCCL_ERROR);
    assert_eq!(kpccl_version(), KPCCL_VERSION);
}

#[test]
fn one_rank_is_one_node() {
    let mut cbs = GOOD;
    let mut comm = null_mut();
    let rc = unsafe { kpccl_shm_comm_create(1, 0, KPCCL_LOCAL_RANK_AUTO, &mut cbs, 0x5eed as *mut c_void, &mut comm) };
    assert_eq!(rc, KPCCL_OK, "{}", last_error());
    let mut info = kpccl_shm_comm_info_t::default();
    assert_eq!(unsafe { kpccl_shm_comm_query(comm, &mut info) }, KPCCL_OK);
    let got = (info.rank, info.nranks, info.nnodes, info.node, info.local_rank, info.local_size);
    assert_eq!(got, (0, 1, 1, 0, 0, 1));
    let mut ranks = [-1; 2];
    assert_eq!(unsafe { kpccl_shm_comm_node_ranks(comm, ranks.as_mut_ptr(), 2) }, KPCCL_OK);
    assert_eq!(ranks, [0, -1]);
    assert_eq!(unsafe { kpccl_shm_comm_node_ranks(comm, ranks.as_mut_ptr(), 0) }, KPCCL_ERROR);
    assert!(last_error().contains("capacity"), "{}", last_error());
    assert_eq!(unsafe { kpccl_shm_comm_query(comm, null_mut()) }, KPCCL_ERROR);
    assert!(last_error().contains("`info` is NULL"), "{}", last_error());
    assert_eq!(unsafe { kpccl_shm_comm_destroy(comm) }, KPCCL_OK);
    assert_eq!(unsafe { kpccl_shm_comm_query(comm, &mut info) }, KPCCL_ERROR);
    // A local rank beyond the node: refused on every rank (here, the only one).
    let rc = unsafe { kpccl_shm_comm_create(1, 0, -2, &mut cbs, 0x5eed as *mut c_void, &mut comm) };
    assert_eq!(rc, KPCCL_ERROR);
    assert!(last_error().contains("local_rank"), "{}", last_error());
}
