//! `kpccl_run_oob` outside a real launcher: a malformed `KPCCL_*` variable
//! is the caller's invalid setting (`KPCCL_ERR_INVALID_ARGUMENT`, as the
//! header classes invalid `KPCCL_*` variables), a launcher that cannot be
//! reached an out-of-band failure, and so is no launcher at all. One test
//! in a binary of its own: it sets the process's environment.
#![allow(missing_docs, clippy::undocumented_unsafe_blocks, clippy::multiple_unsafe_ops_per_block)]

use core::ffi::{c_int, c_void};
use core::ptr::null_mut;

use kpccl::*;

mod support;
use support::last_error;

/// `kpccl_run_oob` with the launcher's variables set to these values.
fn run_oob(socket: &str, rank: &str, nranks: &str) -> c_int {
    // SAFETY: the only test of this binary: no other thread reads the environment.
    unsafe {
        std::env::set_var("KPCCL_RUN_SOCKET", socket);
        std::env::set_var("KPCCL_RANK", rank);
        std::env::set_var("KPCCL_NRANKS", nranks);
    }
    let mut cbs = kpccl_shm_oob_cb_t { oob_allgather: None, oob_barrier: None };
    let (mut group, mut r, mut n): (*mut c_void, c_int, c_int) = (null_mut(), -1, -1);
    unsafe { kpccl_run_oob(&mut cbs, &mut group, &mut r, &mut n) }
}

#[test]
fn a_malformed_launcher_variable_is_an_invalid_argument() {
    // Not started by `kpccl-run` at all: there is no out-of-band layer, which
    // is no argument's fault (Python's `Comm.from_env()` raises `kpccl.Error`
    // for it). Before, this read "`environment` is invalid: …".
    // SAFETY: the only test of this binary: no other thread reads the environment.
    unsafe { std::env::remove_var("KPCCL_RUN_SOCKET") };
    let mut cbs = kpccl_shm_oob_cb_t { oob_allgather: None, oob_barrier: None };
    let (mut group, mut r, mut n): (*mut c_void, c_int, c_int) = (null_mut(), -1, -1);
    assert_eq!(unsafe { kpccl_run_oob(&mut cbs, &mut group, &mut r, &mut n) }, KPCCL_ERROR);
    assert_eq!(
        last_error(),
        "kpccl_run_oob: not started by kpccl-run (KPCCL_RUN_SOCKET is not set): run `kpccl-run -n N -- ./prog`"
    );
    assert_eq!(kpccl_last_error_code(), kpccl_error_code_t::KPCCL_ERR_OUT_OF_BAND);

    // A path no launcher listens on (an abstract name nobody bound).
    let nowhere = format!("@kpccl-test-no-launcher-{}", std::process::id());
    for (rank, nranks, says) in
        [("one", "2", "KPCCL_RANK"), ("0", "-2", "KPCCL_NRANKS"), ("3", "2", "rank 3"), ("", "2", "KPCCL_RANK")]
    {
        assert_eq!(run_oob(&nowhere, rank, nranks), KPCCL_ERROR);
        let text = last_error();
        assert!(text.starts_with("kpccl_run_oob: ") && text.contains(says), "{rank}/{nranks}: {text}");
        assert_eq!(
            kpccl_last_error_code(),
            kpccl_error_code_t::KPCCL_ERR_INVALID_ARGUMENT,
            "KPCCL_RANK={rank:?} KPCCL_NRANKS={nranks:?}: {text}"
        );
    }
    // Well-formed, but nobody listens: the launcher cannot be reached.
    assert_eq!(run_oob(&nowhere, "0", "2"), KPCCL_ERROR);
    assert_eq!(kpccl_last_error_code(), kpccl_error_code_t::KPCCL_ERR_OUT_OF_BAND, "{}", last_error());
}
