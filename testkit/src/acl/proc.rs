//! Forked child processes with a bounded two-way byte channel.

#![allow(unsafe_code, dead_code)]

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::time::{Duration, Instant};

/// How long any cross-process wait may take.
pub const TIMEOUT: Duration = Duration::from_secs(20);

/// One end of the parent/child channel.
#[derive(Debug)]
pub struct Chan {
    rx: File,
    tx: File,
}

fn pipe() -> (File, File) {
    let mut fds = [0i32; 2];
    // SAFETY: `fds` has room for the two descriptors.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    assert_eq!(rc, 0, "pipe2");
    // SAFETY: fds[0] is a fresh descriptor owned by nobody else.
    let r = unsafe { File::from_raw_fd(fds[0]) };
    // SAFETY: fds[1] is a fresh descriptor owned by nobody else.
    let w = unsafe { File::from_raw_fd(fds[1]) };
    (r, w)
}

impl Chan {
    /// Sends `bytes`.
    pub fn send(&mut self, bytes: &[u8]) {
        self.tx.write_all(bytes).expect("channel write");
    }

    /// Receives exactly `N` bytes, waiting at most [`TIMEOUT`].
    pub fn recv<const N: usize>(&mut self) -> [u8; N] {
        let mut buf = [0u8; N];
        let mut got = 0;
        let deadline = Instant::now() + TIMEOUT;
        while got < N {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "channel: timed out waiting for the peer");
            let mut pfd = libc::pollfd { fd: self.rx.as_raw_fd(), events: libc::POLLIN, revents: 0 };
            let ms = i32::try_from(left.as_millis()).unwrap_or(i32::MAX);
            // SAFETY: one valid pollfd.
            let rc = unsafe { libc::poll(&raw mut pfd, 1, ms) };
            if rc <= 0 {
                continue;
            }
            let n = self.rx.read(&mut buf[got..]).expect("channel read");
            assert!(n > 0, "channel: peer closed");
            got += n;
        }
        buf
    }

    /// Sends an i32.
    pub fn send_i32(&mut self, v: i32) {
        self.send(&v.to_le_bytes());
    }

    /// Receives an i32.
    pub fn recv_i32(&mut self) -> i32 {
        i32::from_le_bytes(self.recv::<4>())
    }
}

/// A forked child running a closure.
#[derive(Debug)]
pub struct Child {
    /// Its pid.
    pub pid: i32,
    /// The parent's end of the channel.
    pub chan: Chan,
    reaped: bool,
}

/// Forks a child that runs `f` and exits 0, or 101 if it panics.
pub fn spawn(f: impl FnOnce(&mut Chan)) -> Child {
    let (p_rx, c_tx) = pipe();
    let (c_rx, p_tx) = pipe();
    // SAFETY: the tests run one at a time (see `acl::run`), so no other thread holds
    // a lock the child needs; the child only runs `f` and `_exit`s. (Under qemu-user,
    // which can deadlock a child forked while a thread is being created, `cargo xtask
    // test-aarch64` also keeps libtest from starting test threads meanwhile.)
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork");
    if pid == 0 {
        drop((p_rx, p_tx));
        let mut chan = Chan { rx: c_rx, tx: c_tx };
        let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&mut chan))).is_ok();
        // SAFETY: ends the child without running the parent's atexit handlers.
        unsafe { libc::_exit(if ok { 0 } else { 101 }) };
    }
    drop((c_rx, c_tx));
    Child { pid, chan: Chan { rx: p_rx, tx: p_tx }, reaped: false }
}

impl Child {
    /// Waits (bounded) for the child and returns its exit code (or 128 + signal).
    pub fn wait(&mut self) -> i32 {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let mut status = 0;
            // SAFETY: waits for our own child; `status` is a valid out pointer.
            let rc = unsafe { libc::waitpid(self.pid, &raw mut status, libc::WNOHANG) };
            if rc == self.pid {
                self.reaped = true;
                return if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { 128 + libc::WTERMSIG(status) };
            }
            if Instant::now() > deadline {
                self.kill();
                panic!("child {} did not finish in {TIMEOUT:?}", self.pid);
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Waits and asserts the child succeeded.
    pub fn join(mut self) {
        let code = self.wait();
        assert_eq!(code, 0, "child {} failed (exit {code})", self.pid);
    }

    /// Kills the child with SIGKILL and reaps it.
    pub fn kill(&mut self) {
        if !self.reaped {
            // SAFETY: signals our own unreaped child.
            unsafe { libc::kill(self.pid, libc::SIGKILL) };
            let mut status = 0;
            // SAFETY: reaps our own child.
            unsafe { libc::waitpid(self.pid, &raw mut status, 0) };
            self.reaped = true;
        }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        self.kill();
    }
}
