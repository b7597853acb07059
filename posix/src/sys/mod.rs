//! The crate's system calls: thin wrappers that turn return codes into
//! `io::Result`. The only place (with `window/access.rs`) that needs `unsafe`.
#![allow(unsafe_code)]

mod futex;
mod shm;
mod socket;

pub(crate) use futex::{futex_wait, futex_wake};
pub(crate) use shm::{Fd, Mapping, free_space, map_shared};
pub(crate) use socket::NoSigpipe;

use std::io;

/// The system page size.
pub(crate) fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let v = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(v).ok().filter(|p| p.is_power_of_two()).unwrap_or(4096)
}

/// The effective user id.
pub(crate) fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Fills `buf` from the kernel's random source.
pub(crate) fn getrandom(buf: &mut [u8]) -> io::Result<()> {
    let mut filled = 0;
    while filled < buf.len() {
        let rest = &mut buf[filled..];
        // SAFETY: `rest` is a valid writable buffer of `rest.len()` bytes.
        let n = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
        match usize::try_from(n) {
            Ok(n) => filled += n,
            Err(_) => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
    Ok(())
}

/// Whether a process `pid` exists (it may be a zombie), by `kill(pid, 0)`.
pub(crate) fn process_exists(pid: u64) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else { return false };
    if pid <= 0 {
        return false;
    }
    // SAFETY: signal 0 only checks that `pid` exists and may be signalled.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Whether this process may create files in `dir` (`access(W_OK | X_OK)`).
pub(crate) fn can_write(dir: &std::path::Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(p) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else { return false };
    // SAFETY: `p` is a valid C string; access reads it and nothing else.
    unsafe { libc::access(p.as_ptr(), libc::W_OK | libc::X_OK) == 0 }
}

/// Makes `dir` (mode 0700) unless it exists, and accepts it only if it is a
/// real directory (not a link) of this user that nobody else may enter: in a
/// shared tmpfs, another user could have made it first (`segment_dir` says
/// what is wrong).
pub(crate) fn private_dir(dir: &std::path::Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
        _ => {}
    }
    match crate::segment_dir::problem(dir, true) {
        Some(_) => Err(io::Error::from_raw_os_error(libc::EACCES)),
        None if dir.is_dir() => Ok(()),
        None => Err(io::Error::from_raw_os_error(libc::ENOENT)),
    }
}
