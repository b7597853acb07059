//! Reads and writes on the launcher's connection that give up at one
//! deadline, whatever signals interrupt them.
//!
//! A socket's own timeouts (`SO_RCVTIMEO`, `SO_SNDTIMEO`) start again after
//! every signal that interrupts the call (`EINTR`, which `read_exact` and
//! `write_all` retry): a rank that a profiler's timer interrupts every few
//! milliseconds would wait for a stuck launcher for good. Here every call
//! moves what it can without blocking, and waits with `poll` for what is
//! left of the deadline when it can move nothing; while an interrupt hook
//! is in force ([`crate::interrupt`]) the wait goes in slices, and its
//! check may end it.

use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::io::Errno;
use rustix::net::{RecvFlags, SendFlags};

use crate::interrupt;

/// The connection, until `at` (the launcher's hub reads its hellos
/// through one too: a peer that trickles cannot hold it longer).
#[derive(Debug)]
pub struct Deadline<'s> {
    stream: &'s UnixStream,
    at: Instant,
}

/// The error of a wait that the interrupt hook's check ended.
#[derive(Debug)]
struct Ended;

impl std::fmt::Display for Ended {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the wait for the launcher was interrupted")
    }
}

impl std::error::Error for Ended {}

/// Whether `e` says that the interrupt hook's check ended the wait.
pub(super) fn ended(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.is::<Ended>())
}

impl<'s> Deadline<'s> {
    /// `stream`, for at most `within` from now.
    pub fn new(stream: &'s UnixStream, within: Duration) -> Self {
        // A deadline past what `Instant` holds is never reached: a day is as good.
        let at = Instant::now().checked_add(within).unwrap_or_else(|| Instant::now() + Duration::from_secs(86_400));
        Self { stream, at }
    }

    /// Waits until the stream is ready for `flags` (or hung up, which the
    /// next read or write reports).
    pub(super) fn ready(&self, flags: PollFlags) -> io::Result<()> {
        loop {
            if interrupt::ended() {
                return Err(io::Error::other(Ended));
            }
            let left = self.at.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::ErrorKind::TimedOut.into());
            }
            let every = interrupt::slice();
            let slice = every.map_or(left, |e| e.min(left));
            // Only a wait of more than i64::MAX seconds does not convert: a second then.
            let slice = Timespec::try_from(slice).unwrap_or(Timespec { tv_sec: 1, tv_nsec: 0 });
            let mut fds = [PollFd::new(self.stream, flags)];
            match rustix::event::poll(&mut fds, Some(&slice)) {
                Ok(n) if n > 0 => return Ok(()),
                Ok(_) | Err(Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
            if every.is_some() && interrupt::check() {
                return Err(io::Error::other(Ended));
            }
        }
    }
}

impl Read for Deadline<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            match rustix::net::recv(self.stream, &mut *buf, RecvFlags::DONTWAIT) {
                Ok((n, _)) => return Ok(n),
                // Nothing yet (or a signal): wait for it, within what is left.
                Err(Errno::AGAIN | Errno::INTR) => self.ready(PollFlags::IN)?,
                Err(e) => return Err(e.into()),
            }
        }
    }
}

impl Write for Deadline<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            // NOSIGNAL: a launcher that is gone is an `EPIPE` error, never a
            // `SIGPIPE` (which kills a C rank by default).
            match rustix::net::send(self.stream, buf, SendFlags::NOSIGNAL | SendFlags::DONTWAIT) {
                Ok(n) => return Ok(n),
                // No room (the launcher does not read), or a signal: wait for room.
                Err(Errno::AGAIN | Errno::INTR) => self.ready(PollFlags::OUT)?,
                Err(e) => return Err(e.into()),
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
