//! What tests change about their own process for a while: a resource limit
//! lowered, a child forked.

use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

/// A soft resource limit lowered for a test, restored when dropped (a failed
/// assertion included: the clean-up after it needs what it limits). One test
/// per binary: the limit is the process's.
#[derive(Debug)]
pub struct LoweredLimit {
    resource: Resource,
    saved: Rlimit,
}

impl LoweredLimit {
    /// `resource`'s soft limit set to `current` until the value is dropped.
    ///
    /// # Panics
    /// If the limit cannot be set: the test cannot run.
    pub fn new(resource: Resource, current: u64) -> Self {
        let lowered = Self { resource, saved: getrlimit(resource) };
        lowered.set(current);
        lowered
    }

    /// Sets the soft limit to `current` (the hard one stays).
    ///
    /// # Panics
    /// If it cannot be set.
    pub fn set(&self, current: u64) {
        let limit = Rlimit { current: Some(current), maximum: self.saved.maximum };
        setrlimit(self.resource, limit).unwrap_or_else(|e| panic!("cannot set {:?} to {current}: {e}", self.resource));
    }
}

impl Drop for LoweredLimit {
    fn drop(&mut self) {
        let _ = setrlimit(self.resource, self.saved);
    }
}

/// The number the next descriptor opened gets: the lowest free one.
///
/// # Panics
/// If `/dev/null` cannot be opened.
#[must_use]
pub fn lowest_free_descriptor() -> u64 {
    let probe = std::fs::File::open("/dev/null").expect("/dev/null");
    u64::try_from(std::os::fd::AsRawFd::as_raw_fd(&probe)).expect("a descriptor is not negative")
}

/// Runs `child` in a child forked from this process, which exits at once
/// with the code `child` returned; that code. In a child of a threaded
/// process (every test binary), a lock another thread held at the fork
/// stays held: `child` should make system calls, or use what glibc keeps
/// usable in a child (its allocator), only.
///
/// # Panics
/// If the fork or the wait fails, or the child dies of a signal.
#[allow(unsafe_code)]
pub fn in_forked_child(child: impl FnOnce() -> i32) -> i32 {
    // SAFETY: the child runs `child` (within this function's contract) and
    // `_exit`s, running nothing else of the parent's (no destructors, no
    // exit handlers).
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed: {}", std::io::Error::last_os_error());
    if pid == 0 {
        let code = child();
        // SAFETY: as above.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waits for the child just made; `status` is writable.
    assert_eq!(unsafe { libc::waitpid(pid, &raw mut status, 0) }, pid, "waitpid");
    assert!(libc::WIFEXITED(status), "the child died: {status:#x}");
    libc::WEXITSTATUS(status)
}

/// Waits for `child` at most `bound`: its status, or `None` once it was
/// still running then (it is killed and reaped). For tests whose failure
/// would be a hang.
pub fn wait_or_kill(child: &mut std::process::Child, bound: std::time::Duration) -> Option<std::process::ExitStatus> {
    let deadline = std::time::Instant::now() + bound;
    loop {
        if let Some(status) = child.try_wait().expect("waiting for a child") {
            return Some(status);
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}
