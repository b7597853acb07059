//! `KPCCL_LOG=off` silences the library even when another `KPCCL_*`
//! variable is refused: the communicator's creation fails with the error,
//! and logs nothing of it.

use kpccl_posix::log::{self, Level};
use kpccl_posix::{Comm, Error};
use kpccl_testkit::Solo;

#[test]
fn kpccl_log_off_holds_when_another_variable_is_refused() {
    // SAFETY: this binary has one test, so no other thread reads the environment.
    unsafe { std::env::set_var("KPCCL_LOG", "off") };
    // SAFETY: as above.
    unsafe { std::env::set_var("KPCCL_LAYOUT", "packed") };
    assert!(log::enabled(Level::Error), "the level before any communicator is the default, warn");
    let e = Comm::new(Solo, 0, 1).expect_err("KPCCL_LAYOUT=packed is refused");
    assert!(matches!(e, Error::Config { var: "KPCCL_LAYOUT", .. }), "{e}");
    assert!(!log::enabled(Level::Error), "KPCCL_LOG=off was ignored: the refusal was logged");
}
