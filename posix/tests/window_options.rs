//! What a window makes of the options it is given outside the `KPCCL_*`
//! variables: an explicit [`Config`] is held to the variables' bounds.
#![allow(missing_docs, clippy::std_instead_of_core)]

use std::time::Duration;

use kpccl_posix::{Comm, Config};
use kpccl_testkit::{ScratchDir, Solo};

/// A liveness interval of zero would make every sleeping wait spin on
/// `/proc` instead of sleeping: it is a millisecond, as `KPCCL_LIVENESS_MS=0`.
#[test]
fn a_zero_liveness_interval_is_a_millisecond() {
    let dir = ScratchDir::new("window-options", "liveness");
    let config = Config { shm_dir: dir.path().to_owned(), liveness: Duration::ZERO, ..Config::default() };
    let comm = Comm::builder(Solo, 0, 1).config(config).build().unwrap();
    let win = comm.window(8).alloc().unwrap();
    assert_eq!(win.raw().policy().liveness_ns, 1_000_000);
    win.free().unwrap();
}
