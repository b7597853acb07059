//! Process identity for the simulator: bare tgid, start time, liveness, and a clock in
//! the same unit as start times (clock ticks since boot).

/// `USER_HZ`: `/proc` reports times in these ticks on every Linux architecture.
const TICKS_PER_SEC: u64 = 100;

/// The stat line of `pid`: `Ok(None)` if no such process runs.
fn stat_line(pid: i32) -> std::io::Result<Option<String>> {
    // "/proc/./": qemu-user intercepts "/proc/self/stat" and "/proc/<own pid>/stat"
    // and fakes fields; this path reaches the kernel's view for every pid.
    match std::fs::read_to_string(format!("/proc/./{pid}/stat")) {
        Ok(text) => Ok(Some(text)),
        // ESRCH: it exited between the open and the read.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH) => Ok(None),
        Err(e) => Err(e),
    }
}

/// `(state, starttime)` of `pid`, if it runs.
fn stat(pid: i32) -> Option<(u8, u64)> {
    parse_stat(&stat_line(pid).ok()??)
}

/// `(state, starttime)` from a stat line.
fn parse_stat(text: &str) -> Option<(u8, u64)> {
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
    alive_by(stat_line(pid), start)
}

/// [`alive`] from what reading the stat line gave. A read that failed for
/// another reason than the process being gone (no descriptor left, say) says
/// nothing: the process counts as alive, as a sweep must never destroy a live
/// process's keys on a guess.
fn alive_by(line: std::io::Result<Option<String>>, start: u64) -> bool {
    match line {
        Ok(Some(text)) => parse_stat(&text).is_some_and(|(state, s)| !matches!(state, b'Z' | b'X') && s == start),
        Ok(None) => false,
        Err(_) => true,
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
    /// A stat line that could not be read for want of a descriptor leaves the
    /// process alive; before, any failed read made it dead, and the sweep of
    /// a process short of descriptors destroyed live processes' keys.
    #[test]
    fn only_a_process_that_is_gone_is_dead() {
        let me = super::own_pid();
        let start = super::start_ticks(me).unwrap();
        assert!(super::alive(me, start));
        assert!(!super::alive(me, start + 1), "another start time is another process");
        let emfile = std::io::Error::from_raw_os_error(libc::EMFILE);
        assert!(super::alive_by(Err(emfile), start), "an unread line says nothing");
        assert!(!super::alive_by(Ok(None), start), "gone");
        let line = |state: &str| format!("{me} (a b) {state} 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 {start} 0 0");
        assert!(super::alive_by(Ok(Some(line("S"))), start), "sleeping");
        assert!(!super::alive_by(Ok(Some(line("Z"))), start), "a zombie");
    }

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
