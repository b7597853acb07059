//! Writing to the launcher's socket without `SIGPIPE`.

use std::io::{self, Write};
use std::os::unix::net::UnixStream;

use rustix::io::Errno;
use rustix::net::SendFlags;

/// A writer on a connected socket that never raises `SIGPIPE`: a peer that is
/// gone is an `EPIPE` error. Rust programs ignore `SIGPIPE`, but C programs
/// keep its default action, which kills the rank when the launcher dies first.
#[derive(Debug)]
pub(crate) struct NoSigpipe<'a>(pub(crate) &'a UnixStream);

impl Write for NoSigpipe<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        loop {
            match rustix::net::send(self.0, buf, SendFlags::NOSIGNAL) {
                Err(Errno::INTR) => {}
                done => return Ok(done?),
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Set in the re-executed test process, which restores `SIGPIPE`'s default.
    const CHILD: &str = "KPCCL_TEST_SIGPIPE_CHILD";

    fn write_to_a_closed_peer() -> io::Result<()> {
        let (a, b) = UnixStream::pair()?;
        drop(b);
        NoSigpipe(&a).write_all(b"hello")
    }

    #[test]
    fn a_gone_peer_is_an_error_not_a_signal() {
        if std::env::var_os(CHILD).is_some() {
            // rustix has no safe way to restore a signal's default action.
            #[allow(unsafe_code)]
            // SAFETY: resetting a signal's disposition has no memory-safety preconditions.
            unsafe {
                libc::signal(libc::SIGPIPE, libc::SIG_DFL)
            };
            let e = write_to_a_closed_peer().expect_err("the peer is gone");
            assert_eq!(e.kind(), io::ErrorKind::BrokenPipe);
            return;
        }
        // This test again, alone, in a process with SIGPIPE's default action
        // (through the target's runner, e.g. qemu, like the launcher's ranks).
        let status = crate::launch::runner::test_alone("sys::socket::tests::a_gone_peer_is_an_error_not_a_signal")
            .env(CHILD, "1")
            .status()
            .unwrap();
        assert!(status.success(), "the child died: {status}");
    }
}
