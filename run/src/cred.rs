//! Who is on the other end of a socket (`SO_PEERCRED`): the hub accepts
//! ranks of its own user only, since any user can connect to an abstract
//! socket whose name `/proc/net/unix` lists.
//!
//! With `bind`, the only `unsafe` of the launcher lives here.

use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;

/// The effective uid and the pid of the process at the other end of `stream`
/// (as it was when it connected).
pub(crate) fn peer(stream: &UnixStream) -> io::Result<(u32, u32)> {
    let mut cred = libc::ucred { pid: 0, uid: 0, gid: 0 };
    let mut len = libc::socklen_t::try_from(size_of::<libc::ucred>()).map_err(|_| io::ErrorKind::InvalidInput)?;
    // SAFETY: the fd is open for the borrow of `stream`; `cred` and `len` are
    // live, writable locals and `len` holds `cred`'s exact size, so the kernel
    // writes at most that many bytes into `cred`.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&raw mut cred).cast::<libc::c_void>(),
            &raw mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((cred.uid, u32::try_from(cred.pid).unwrap_or(0)))
}

/// This process's effective uid.
pub(crate) fn my_uid() -> u32 {
    // SAFETY: geteuid takes no arguments, touches no memory of ours and cannot fail.
    unsafe { libc::geteuid() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_socket_pair_is_our_own() {
        let (a, _b) = UnixStream::pair().unwrap();
        assert_eq!(peer(&a).unwrap(), (my_uid(), std::process::id()));
    }
}
