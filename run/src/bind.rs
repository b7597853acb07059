//! Binding ranks to CPUs (`--bind-to cpu`), as `mpirun --bind-to hwthread`
//! binds them: rank r runs on the r-th logical CPU the launcher may use,
//! wrapping around when the ranks outnumber them. The binding is made in
//! the child between fork and exec, so nothing the rank starts (a wrapper's
//! program, the threads of an emulator) escapes it.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;

use rustix::thread::{CpuSet, sched_getaffinity, sched_setaffinity};

/// Where each rank may run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Binding {
    /// Wherever the launcher may run (the default).
    #[default]
    None,
    /// Rank r on one logical CPU, the r-th the launcher may use (modulo
    /// their count): `mpirun --bind-to hwthread`.
    Cpu,
}

/// The CPUs this process may run on, in increasing order.
pub(crate) fn allowed_cpus() -> io::Result<Vec<usize>> {
    let set = sched_getaffinity(None).map_err(|e| {
        let max = CpuSet::MAX_CPU;
        io::Error::new(e.kind(), format!("cannot read the CPUs to bind ranks to (a set of {max} CPUs): {e}"))
    })?;
    let cpus: Vec<usize> = (0..CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).collect();
    if cpus.is_empty() {
        return Err(io::Error::other("this process may run on no CPU it can name"));
    }
    Ok(cpus)
}

/// Makes the process `cmd` starts run on `cpu` alone.
pub(crate) fn bind(cmd: &mut Command, cpu: usize) {
    let mut set = CpuSet::new();
    set.set(cpu);
    // SAFETY: the closure runs in the forked child before exec: one system
    // call on a set the closure owns, no allocation, no lock.
    unsafe { cmd.pre_exec(move || sched_setaffinity(None, &set).map_err(io::Error::from)) };
}
