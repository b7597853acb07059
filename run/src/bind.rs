//! Binding ranks to CPUs (`--bind-to cpu`), as `mpirun --bind-to hwthread`
//! binds them: rank r runs on the r-th logical CPU the launcher may use,
//! wrapping around when the ranks outnumber them. The binding is made in
//! the child between fork and exec, so nothing the rank starts (a wrapper's
//! program, the threads of an emulator) escapes it.
//!
//! The CPU sets are sized to the machine, as glibc's `CPU_ALLOC` lets a
//! program do: rustix's fixed 1024-CPU set is refused (`EINVAL`) by a kernel
//! with more possible CPUs, and cannot name a CPU from 1024 up.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;

// A kernel CPU set is an array of `unsigned long`: `u64` words hold it bit
// for bit only where that is 64 bits, as on the targets this crate builds for.
const _: () = assert!(size_of::<libc::c_ulong>() == size_of::<u64>());

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
    let set = kpccl_posix::cpu_set()
        .map_err(|e| io::Error::new(e.kind(), format!("cannot read the CPUs to bind ranks to: {e}")))?;
    let cpus = cpus_in(&set);
    if cpus.is_empty() {
        return Err(io::Error::other("this process may run on no CPU it can name"));
    }
    Ok(cpus)
}

/// The CPUs whose bits `set` has, in increasing order.
fn cpus_in(set: &[u64]) -> Vec<usize> {
    (0..set.len() * 64).filter(|&c| set[c / 64] & (1 << (c % 64)) != 0).collect()
}

/// A set of `cpu` alone, as long as it takes to hold it: the kernel reads
/// the CPUs past its end as not in the set.
fn only(cpu: usize) -> Vec<u64> {
    let mut set = vec![0u64; cpu / 64 + 1];
    set[cpu / 64] = 1 << (cpu % 64);
    set
}

/// Makes the process `cmd` starts run on `cpu` alone.
pub(crate) fn bind(cmd: &mut Command, cpu: usize) {
    // Built here, before the fork: the child may not allocate.
    let set = only(cpu);
    let bytes = size_of_val(set.as_slice());
    let pin = move || {
        // SAFETY: `set` (the closure's own) is readable for `bytes` bytes, a
        // CPU set of `unsigned long` words (`u64` here: the assert above);
        // the kernel only reads it.
        let rc = unsafe { libc::sched_setaffinity(0, bytes, set.as_ptr().cast::<libc::cpu_set_t>()) };
        // `last_os_error` holds the code alone: no allocation.
        if rc == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
    };
    // SAFETY: the closure runs in the forked child before exec: one system
    // call on a set built before the fork, no allocation, no lock.
    unsafe { cmd.pre_exec(pin) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_may_run_on_the_cpus_it_is_told() {
        let cpus = allowed_cpus().unwrap();
        let fixed = rustix::thread::sched_getaffinity(None).expect("at most 1024 CPUs here");
        assert_eq!(cpus.len(), fixed.count() as usize);
        assert!(cpus.iter().all(|&c| fixed.is_set(c)), "{cpus:?}");
    }

    /// A child bound to a CPU runs there alone, read back from `/proc`.
    #[test]
    fn a_bound_child_runs_on_its_cpu_alone() {
        let cpu = *allowed_cpus().unwrap().last().unwrap();
        let mut cmd = Command::new("grep");
        cmd.args(["^Cpus_allowed_list:", "/proc/self/status"]);
        bind(&mut cmd, cpu);
        let out = cmd.output().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout).split_whitespace().nth(1), Some(cpu.to_string().as_str()));
    }

    /// A CPU from 1024 up makes a set long enough to name it; before,
    /// `bind` panicked (index out of bounds in rustix's 1024-CPU set). This
    /// machine has no CPU 1500 (else it runs there): the kernel refuses it,
    /// the spawn fails.
    #[test]
    fn a_cpu_past_1023_is_named_not_a_panic() {
        assert_eq!((only(1500).len(), only(1500)[23]), (24, 1 << (1500 % 64)));
        assert_eq!(cpus_in(&only(1500)), [1500]);
        let mut cmd = Command::new("true");
        bind(&mut cmd, 1500);
        match cmd.status() {
            Ok(s) => assert!(allowed_cpus().unwrap().contains(&1500) && s.success(), "{s}"),
            Err(e) => assert_eq!(e.raw_os_error(), Some(libc::EINVAL), "{e}"),
        }
    }
}
