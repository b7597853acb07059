//! The crate's system calls, through rustix's safe wrappers: `unsafe` is left
//! only around what rustix itself marks unsafe or lacks (mmap, munmap,
//! madvise, `posix_fallocate` and the close of a segment file in `shm.rs`;
//! the memory views are in `window/access.rs`), around the one instruction
//! that reads the thread pointer (`thread.rs`), around the fork handler
//! that closes segment files in a child (`fork.rs`), and around
//! `sched_getaffinity` with a set sized to the machine (`affinity.rs`).

mod affinity;
mod cgroup;
mod fork;
mod futex;
mod shm;
mod socket;
mod thread;

pub(crate) use affinity::{affinity, cpu_set};
pub(crate) use cgroup::cpu_quota;
pub(crate) use fork::generation as fork_generation;
pub(crate) use futex::{futex_wait, futex_wake};
pub(crate) use shm::{Fd, Mapping, free_space, map_shared};
pub(crate) use socket::NoSigpipe;
pub(crate) use thread::{global_heavy_fence, register_global_heavy_fence};
pub use thread::{heavy_fence, heavy_fence_works, prepare_heavy_fence, thread_token};

use std::io;

use rustix::io::Errno;

/// The system page size.
pub(crate) fn page_size() -> u64 {
    u64::try_from(rustix::param::page_size()).ok().filter(|p| p.is_power_of_two()).unwrap_or(4096)
}

/// An upper bound on what this process can map, for refusing windows that
/// could never be: the next power of two above an address on this thread's
/// stack (stacks lie near the top of the user address space: 2^47 on
/// x86-64, 2^39 to 2^52 on aarch64 by kernel configuration), at least
/// 1 TiB, and at most the `RLIMIT_AS` soft limit.
pub(crate) fn address_space() -> u64 {
    let local = 0u8;
    let near_top = core::ptr::addr_of!(local).addr() as u64;
    let estimate = near_top.checked_next_power_of_two().unwrap_or(u64::MAX).max(1 << 40);
    let limit = rustix::process::getrlimit(rustix::process::Resource::As).current;
    limit.map_or(estimate, |l| estimate.min(l))
}

/// The effective user id.
pub(crate) fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Fills `buf` from the kernel's random source.
pub(crate) fn getrandom(buf: &mut [u8]) -> io::Result<()> {
    let mut filled = 0;
    while filled < buf.len() {
        match rustix::rand::getrandom(&mut buf[filled..], rustix::rand::GetRandomFlags::empty()) {
            Ok(n) => filled += n,
            Err(Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Whether a process `pid` exists (it may be a zombie), by `kill(pid, 0)`.
pub(crate) fn process_exists(pid: u64) -> bool {
    let Some(pid) = i32::try_from(pid).ok().and_then(rustix::process::Pid::from_raw) else { return false };
    // The conversion from u64 leaves no negative pid (a group); `from_raw` refuses zero.
    matches!(rustix::process::test_kill_process(pid), Ok(()) | Err(Errno::PERM))
}

/// Whether this process may create files in `dir` (`access(W_OK | X_OK)`).
pub(crate) fn can_write(dir: &std::path::Path) -> bool {
    use rustix::fs::Access;
    rustix::fs::access(dir, Access::WRITE_OK | Access::EXEC_OK).is_ok()
}

/// Makes `dir` (mode 0700) unless it exists, and accepts it only if it is a
/// real directory (not a link) of this user that nobody else may enter: in a
/// shared tmpfs, another user could have made it first (`segment_dir` says
/// what is wrong).
pub(crate) fn private_dir(dir: &std::path::Path) -> io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
        Err(_) => {}
        // 0700 whatever the umask says (one without the owner's bits would
        // make a directory the check below refuses). Only its owner may
        // change it, in a sticky directory as in any other.
        Ok(()) => {
            if let Err(e) = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)) {
                // Made here, empty: nobody else would remove it before a sweep.
                let _ = std::fs::remove_dir(dir);
                return Err(e);
            }
        }
    }
    match crate::segment_dir::problem(dir, true) {
        Some(_) => Err(Errno::ACCESS.into()),
        None if dir.is_dir() => Ok(()),
        None => Err(Errno::NOENT.into()),
    }
}
