//! Process identity for the simulator: bare tgid, start time, liveness, and a clock in
//! the same unit as start times (clock ticks since boot).

/// `USER_HZ`: `/proc` reports times in these ticks on every Linux architecture.
const TICKS_PER_SEC: u64 = 100;

/// `(state, starttime)` of `pid` from its stat line.
fn stat(pid: i32) -> Option<(u8, u64)> {
    // "/proc/./": qemu-user intercepts "/proc/self/stat" and "/proc/<own pid>/stat"
    // and fakes fields; this path reaches the kernel's view for every pid.
    let text = std::fs::read_to_string(format!("/proc/./{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 2..];
    let mut fields = rest.split_ascii_whitespace();
    let state = *fields.next()?.as_bytes().first()?;
    // starttime is field 22 of the line; `state` was field 3.
    let start = fields.nth(18)?.parse().ok()?;
    Some((state, start))
}

/// The start time of `pid` in ticks since boot, if it runs.
pub(crate) fn start_ticks(pid: i32) -> Option<u64> {
    stat(pid).map(|(_, s)| s)
}

/// Whether `pid` still runs and is the process that started at `start`.
pub(crate) fn alive(pid: i32, start: u64) -> bool {
    match stat(pid) {
        Some((state, s)) => !matches!(state, b'Z' | b'X') && s == start,
        None => false,
    }
}

/// The process that holds a `flock` on the file with inode `ino`, from
/// `/proc/locks` (lines such as `1: FLOCK  ADVISORY  WRITE 4242 00:1a:977 0 EOF`;
/// a blocked waiter's line has `->` after the number).
pub(crate) fn flock_holder(ino: u64) -> Option<i32> {
    let text = std::fs::read_to_string("/proc/locks").ok()?;
    holder_in(&text, ino)
}

fn holder_in(locks: &str, ino: u64) -> Option<i32> {
    locks.lines().find_map(|line| {
        let f: Vec<&str> = line.split_ascii_whitespace().collect();
        let on_file = f.get(1) == Some(&"FLOCK") && f.get(5)?.rsplit(':').next()?.parse() == Ok(ino);
        if on_file { f.get(4)?.parse().ok() } else { None }
    })
}

/// Now, in ticks since boot (the unit of [`start_ticks`]).
pub(crate) fn now_ticks() -> u64 {
    let text = std::fs::read_to_string("/proc/uptime").unwrap_or_default();
    let secs = text.split_ascii_whitespace().next().unwrap_or("0");
    let (whole, frac) = secs.split_once('.').unwrap_or((secs, "0"));
    let whole: u64 = whole.parse().unwrap_or(0);
    let frac: u64 = format!("{frac:0<2}")[..2].parse().unwrap_or(0);
    whole * TICKS_PER_SEC + frac
}

/// This process's pid as the host sees it: the first `NSpid:` value of
/// `/proc/self/status`, else `getpid()`.
pub(crate) fn bare_tgid() -> i32 {
    let own = std::process::id();
    let status = std::fs::read_to_string(format!("/proc/./{own}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))
        .and_then(|v| v.split_ascii_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| i32::try_from(own).unwrap_or(i32::MAX))
}

/// This process's pid (`getpid()`).
pub(crate) fn own_pid() -> i32 {
    i32::try_from(std::process::id()).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_holder_of_a_flock_is_read_from_proc_locks() {
        let locks = "1: POSIX  ADVISORY  WRITE 10 00:1a:977 0 EOF\n\
                     2: FLOCK  ADVISORY  WRITE 4242 00:1a:977 0 EOF\n\
                     2: -> FLOCK  ADVISORY  WRITE 4343 00:1a:977 0 EOF\n\
                     3: FLOCK  ADVISORY  WRITE 77 00:1a:978 0 EOF\n";
        assert_eq!(super::holder_in(locks, 977), Some(4242));
        assert_eq!(super::holder_in(locks, 978), Some(77));
        assert_eq!(super::holder_in(locks, 979), None);
    }
}
