//! `kpccl_last_error_code`: each failure's class, with one rank, and the
//! texts C users read (ranges in words, not Rust's `0..2`).
#![allow(missing_docs, clippy::undocumented_unsafe_blocks, clippy::multiple_unsafe_ops_per_block)]

use core::ptr::null_mut;

use kpccl::*;

mod support;
use support::{GOOD, alloc, create, fails, last_error};

#[test]
fn a_thread_without_failures_has_no_code() {
    let code = std::thread::spawn(|| kpccl_last_error_code()).join().unwrap();
    assert_eq!(code, kpccl_error_code_t::KPCCL_ERR_NONE);
}

#[test]
fn failures_are_classified_and_ranges_read_in_words() {
    let (rc, comm) = create(GOOD);
    assert_eq!(rc, KPCCL_OK, "{}", last_error());
    let (_, win) = alloc(comm, 64);

    assert_eq!(unsafe { kpccl_shm_peer_fence(win, 2) }, KPCCL_ERROR);
    assert_eq!(kpccl_last_error_code(), kpccl_error_code_t::KPCCL_ERR_INVALID_ARGUMENT);
    assert_eq!(last_error(), "kpccl_shm_peer_fence: remote_rank 2 is out of range: this window has ranks 0 to 0");

    // A success keeps the last failure's class, as it keeps its text.
    assert_eq!(unsafe { kpccl_shm_win_fence(win) }, KPCCL_OK);
    assert_eq!(kpccl_last_error_code(), kpccl_error_code_t::KPCCL_ERR_INVALID_ARGUMENT);

    let (mut base2, mut win2) = (null_mut(), null_mut());
    assert_eq!(unsafe { kpccl_shm_win_alloc(64, null_mut(), &mut base2, &mut win2) }, KPCCL_ERROR);
    assert_eq!(kpccl_last_error_code(), kpccl_error_code_t::KPCCL_ERR_INVALID_ARGUMENT);
    assert_eq!(unsafe { kpccl_shm_win_free(win) }, KPCCL_OK);
    assert_eq!(unsafe { kpccl_shm_comm_destroy(comm) }, KPCCL_OK);

    let cbs = GOOD;
    let mut comm = null_mut();
    assert_eq!(unsafe { kpccl_shm_comm_create(0, 0, 0, &cbs, null_mut(), &mut comm) }, KPCCL_ERROR);
    assert!(last_error().ends_with("nranks 0 is out of range: a communicator has 1 to 1024 ranks"), "{}", last_error());
    // A local rank's range is its node's, which is not known yet: said so.
    assert_eq!(unsafe { kpccl_shm_comm_create(1, 0, 1, &cbs, null_mut(), &mut comm) }, KPCCL_ERROR);
    assert_eq!(
        last_error(),
        "kpccl_shm_comm_create: local_rank 1 is out of range: it numbers the caller among the ranks of its node, \
         0 to that node's rank count - 1 (at most nranks - 1 = 0), or is KPCCL_LOCAL_RANK_AUTO (-1) to number \
         the node's ranks in rank order"
    );
    assert_eq!(kpccl_last_error_code(), kpccl_error_code_t::KPCCL_ERR_INVALID_ARGUMENT);
}

#[test]
fn a_failing_callback_is_an_out_of_band_failure() {
    let (rc, comm) = create(kpccl_shm_oob_cb_t { oob_allgather: Some(fails), ..GOOD });
    assert_eq!(rc, KPCCL_ERROR);
    assert!(comm.is_null());
    assert_eq!(kpccl_last_error_code(), kpccl_error_code_t::KPCCL_ERR_OUT_OF_BAND, "{}", last_error());
}

/// What `kpccl_mpi.h` uses for its own refusals (`MPI_COMM_NULL`): the text
/// and class read back as after any failed call.
#[test]
fn a_helper_records_its_failure_as_the_last_error() {
    std::thread::spawn(|| {
        let code = kpccl_error_code_t::KPCCL_ERR_INVALID_ARGUMENT as core::ffi::c_int;
        assert_eq!(unsafe { kpccl_record_error(code, c"helper: `comm` is MPI_COMM_NULL".as_ptr()) }, KPCCL_OK);
        assert_eq!(last_error(), "helper: `comm` is MPI_COMM_NULL");
        assert_eq!(kpccl_last_error_code(), kpccl_error_code_t::KPCCL_ERR_INVALID_ARGUMENT);

        assert_eq!(unsafe { kpccl_record_error(0, c"no failure".as_ptr()) }, KPCCL_ERROR);
        assert!(last_error().starts_with("kpccl_record_error: `code` is invalid"), "{}", last_error());
        assert_eq!(unsafe { kpccl_record_error(42, c"no class".as_ptr()) }, KPCCL_ERROR);
        assert_eq!(unsafe { kpccl_record_error(code, core::ptr::null()) }, KPCCL_ERROR);
        assert_eq!(last_error(), "kpccl_record_error: `msg` is NULL");
    })
    .join()
    .unwrap();
}
