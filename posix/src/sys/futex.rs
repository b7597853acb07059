//! Futex wait and wake on words in memory shared between processes: never
//! `futex::Flags::PRIVATE`, which would key the wait on this process's
//! address space and miss wakes from peers.

use std::time::Duration;

use kpccl_core::sync::AtomicU32;
use rustix::io::Errno;
use rustix::thread::futex;

/// Sleeps while `*word == expected`, for at most `timeout` (None: no limit).
/// Returns `false` only when the timeout expired; interruptions, value
/// changes and wakes return `true` (the caller re-checks its condition).
pub(crate) fn futex_wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) -> bool {
    let ts = timeout.map(|d| futex::Timespec {
        tv_sec: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: d.subsec_nanos().into(),
    });
    futex::wait(word.as_core(), futex::Flags::empty(), expected, ts.as_ref()) != Err(Errno::TIMEDOUT)
}

/// "Wake everyone": the kernel reads the count as a C `int`.
const ALL: u32 = i32::MAX as u32;

/// Wakes every process sleeping on `word`.
pub(crate) fn futex_wake(word: &AtomicU32) {
    // An error here (EFAULT, EINVAL) would mean `word` is not a u32 we can
    // reach, which the reference rules out: there is nothing to report.
    let _ = futex::wake(word.as_core(), futex::Flags::empty(), ALL);
}
