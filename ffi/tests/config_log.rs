//! A `KPCCL_*` variable refused at `kpccl_shm_comm_create` is logged once:
//! the Rust API logs the refusal, and the C layer must not log it again.
//! The test runs itself in a process of its own, with the variable set,
//! and counts the lines on its stderr.
#![allow(missing_docs)]

mod support;
use kpccl::{KPCCL_ERROR, kpccl_error_code_t, kpccl_last_error_code};
use support::{GOOD, create, last_error};

/// Set in the process that makes the communicator.
const CHILD: &str = "KPCCL_TEST_CONFIG_LOG_CHILD";

#[test]
fn a_refused_variable_is_logged_once() {
    if std::env::var_os(CHILD).is_some() {
        let (rc, _) = create(GOOD);
        assert_eq!(rc, KPCCL_ERROR, "KPCCL_SPIN=abc was accepted");
        assert_eq!(kpccl_last_error_code(), kpccl_error_code_t::KPCCL_ERR_INVALID_ARGUMENT, "{}", last_error());
        return;
    }
    let out = kpccl_posix::launch::runner::test_alone("a_refused_variable_is_logged_once")
        .env(CHILD, "1")
        .env("KPCCL_SPIN", "abc")
        .env_remove("KPCCL_LOG")
        .output()
        .expect("the test binary runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let said = stderr.lines().filter(|l| l.contains("KPCCL_SPIN=\"abc\" is invalid")).count();
    assert_eq!(said, 1, "the refusal was logged {said} times:\n{stderr}");
}
