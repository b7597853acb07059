//! What the rank programs of these tests share.
#![allow(clippy::std_instead_of_core)]

use std::process::ExitCode;

use kpccl_posix::launch::RunOob;

/// The launcher's out-of-band layer for the rank program `program`, or exit
/// code 2 (with a message) when not started by `kpccl-run` or the launcher
/// cannot be reached.
pub fn launched_oob(program: &str) -> Result<RunOob, ExitCode> {
    match RunOob::from_env() {
        Ok(Some(oob)) => Ok(oob),
        Ok(None) => {
            eprintln!("{program}: run me under kpccl-run");
            Err(ExitCode::from(2))
        }
        Err(e) => {
            eprintln!("{program}: cannot reach the launcher: {e}");
            Err(ExitCode::from(2))
        }
    }
}
