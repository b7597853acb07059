//! Process identity and liveness from `/proc`: a pid plus its start time, so
//! that a recycled pid is never mistaken for a live peer.

use kpccl_core::ProcessIdentity;

use crate::sys;

/// `(state, starttime)` of `pid` from `/proc/<pid>/stat`.
fn stat(pid: u64) -> Option<(u8, u64)> {
    // "/proc/./": qemu-user intercepts "/proc/self/stat" and "/proc/<own pid>/stat"
    // and fakes the start time, which would make peers see this rank as dead.
    let text = std::fs::read_to_string(format!("/proc/./{pid}/stat")).ok()?;
    // The command name is in parentheses and may contain anything: parse after the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?.bytes().next()?;
    // starttime is field 22 of the line; `state` was field 3.
    let start = fields.nth(22 - 4)?.parse().ok()?;
    Some((state, start))
}

/// This process's identity.
pub(crate) fn current() -> ProcessIdentity {
    let pid = u64::from(std::process::id());
    ProcessIdentity { pid, start_time: stat(pid).map_or(0, |(_, s)| s), uid: sys::euid() }
}

/// Whether `who` still runs: the pid exists, is not a zombie, and started when `who` did.
pub(crate) fn is_alive(who: &ProcessIdentity) -> bool {
    if !sys::process_exists(who.pid) {
        return false;
    }
    match stat(who.pid) {
        Some((state, start)) => !matches!(state, b'Z' | b'X') && (who.start_time == 0 || start == who.start_time),
        // No /proc (or no permission): the pid exists, which is all we can tell.
        None => true,
    }
}
