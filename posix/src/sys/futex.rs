//! Futex wait and wake on words in memory shared between processes: never
//! `FUTEX_PRIVATE_FLAG`, which would key the wait on this process's address
//! space and miss wakes from peers.

use std::time::Duration;

use kpccl_core::sync::AtomicU32;

/// Sleeps while `*word == expected`, for at most `timeout` (None: no limit).
/// Returns `false` only when the timeout expired; interruptions, value
/// changes and wakes return `true` (the caller re-checks its condition).
pub(crate) fn futex_wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) -> bool {
    let ts = timeout.map(|d| libc::timespec {
        tv_sec: libc::time_t::try_from(d.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_nsec: libc::c_long::from(d.subsec_nanos() as i32),
    });
    let ts_ptr = ts.as_ref().map_or(std::ptr::null(), std::ptr::from_ref);
    // SAFETY: `word` is a valid, aligned u32 for the call's duration; `ts_ptr` is
    // null or points to a live timespec. FUTEX_WAIT only reads both.
    let rc = unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAIT, expected, ts_ptr) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ETIMEDOUT)
}

/// Wakes every process sleeping on `word`.
pub(crate) fn futex_wake(word: &AtomicU32) {
    // SAFETY: `word` is a valid, aligned u32; FUTEX_WAKE does not access memory
    // beyond hashing the address.
    unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, i32::MAX) };
}
