//! What the rank programs of these tests share.
#![allow(clippy::std_instead_of_core)]

use std::fmt::Display;
use std::process::ExitCode;

use kpccl_posix::launch::RunOob;

/// The CPUs this process may run on, in increasing order.
pub fn allowed_cpus() -> std::io::Result<Vec<usize>> {
    let set = rustix::thread::sched_getaffinity(None)?;
    Ok((0..rustix::thread::CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).collect())
}

/// The launcher's out-of-band layer for the rank program `program`, or exit
/// code 2 (with a message) when not started by `kpccl-run` or the launcher
/// cannot be reached.
pub fn launched_oob(program: &str) -> Result<RunOob, ExitCode> {
    match RunOob::from_env() {
        Ok(Some(oob)) => Ok(oob),
        Ok(None) => Err(usage_error(format_args!("{program}: run me under kpccl-run"))),
        Err(e) => Err(usage_error(format_args!("{program}: cannot reach the launcher: {e}"))),
    }
}

/// Prints `message` on stderr and gives exit code 2, which every rank
/// program of these tests means as "bad usage, or not under the launcher".
pub fn usage_error(message: impl Display) -> ExitCode {
    eprintln!("{message}");
    ExitCode::from(2)
}
