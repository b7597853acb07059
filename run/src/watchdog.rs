//! What a launcher killed outright leaves behind. Each rank dies with the
//! launcher (`PR_SET_PDEATHSIG`), but what a rank started does not: `sh -c
//! 'prog; true'` runs `prog` as the shell's child, which is only orphaned
//! when the shell dies, and runs on, adopted by init, waiting for peers that
//! may never come.
//!
//! Every process of a job was started with its hub's `KPCCL_RUN_SOCKET` in
//! its environment (inherited from its rank), a name no other job has. The
//! watchdog, a process forked before the first rank, waits on a pipe that
//! only the launcher writes to. A launcher whose ranks all exited tells it
//! to go; one that cut its job short (a timeout, a failed rank, a signal)
//! tells it to sweep, for what a killed rank had orphaned escapes the
//! killing of its process tree; one that dies says nothing. To sweep, or on
//! nothing said, the watchdog kills every process of the launcher's user
//! whose environment holds the job's entry, pass after pass until none is
//! left (a process killed cannot fork again; one forked just before is
//! found by the next pass). The ranks stay in the
//! launcher's process group, so a terminal's Ctrl-C and rank 0's reads of
//! the terminal work as before.

use std::ffi::CStr;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;
use rustix::pipe::PipeFlags;
use rustix::process::{Pid, Signal, WaitOptions};

use crate::SOCKET_ENV;

/// Passes over `/proc` at most (each kills what the one before missed).
const PASSES: usize = 64;
/// How long a launcher waits for its watchdog to leave before killing it.
const LEAVE_BOUND: Duration = Duration::from_secs(2);
/// The same, when it asked for a sweep (passes over `/proc`, slower under an emulator).
const SWEEP_BOUND: Duration = Duration::from_secs(20);
/// The launcher's word: go, killing nothing.
const GO: u8 = 1;
/// The launcher's word: kill what is left of the job, then go.
const SWEEP: u8 = 2;
/// Signals the watchdog ignores: `SIGQUIT` asks a job to stop (the launcher
/// handles it, or dies of it, and then the watchdog has work to do), and
/// `SIGPIPE` is no reason to go. (`GROUP_SIGNALS` stay blocked instead:
/// ignoring a pending signal discards it.)
const IGNORED: [libc::c_int; 2] = [libc::SIGQUIT, libc::SIGPIPE];

/// The watchdog's process name (`comm`, at most 15 bytes).
const WATCHDOG_NAME: &CStr = c"kpccl-watchdog";

/// The signals the watchdog keeps pending (blocked): one sent to the
/// launcher's whole process group reaches the watchdog too, and the
/// launcher then sees it there ([`Watchdog::got`]).
const GROUP_SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// A job's watchdog, from before its first rank starts until the launcher
/// drops it (which tells it to go, and reaps it).
#[derive(Debug)]
pub(crate) struct Watchdog {
    pid: Pid,
    /// The pipe's only write end (close-on-exec: no rank holds it).
    to_watchdog: Option<OwnedFd>,
    /// Whether to sweep the job when dropped ([`Watchdog::sweep_when_dropped`]).
    sweep: bool,
}

impl Watchdog {
    /// Starts the watchdog of the job whose hub is `socket`. Call it before
    /// any rank starts, and before the hub serves (no thread of the hub runs
    /// yet).
    pub(crate) fn start(socket: &str) -> io::Result<Watchdog> {
        let entry = format!("{SOCKET_ENV}={socket}").into_bytes();
        let uid = rustix::process::geteuid().as_raw();
        let (low_read, low_write) = rustix::pipe::pipe_with(PipeFlags::CLOEXEC)?;
        // Above the standard streams, which a launcher started without them
        // would have given to the pipe (and the watchdog keeps stderr).
        let read = rustix::io::fcntl_dupfd_cloexec(&low_read, 3)?;
        let write = rustix::io::fcntl_dupfd_cloexec(&low_write, 3)?;
        drop((low_read, low_write));
        // Blocked across the fork, so that the watchdog has them blocked from
        // its first instruction: a signal sent to the group stays pending
        // there (see `got`), never taken by the launcher's handler, which
        // the fork copies. The launcher's thread unblocks them after it.
        let before = block(&GROUP_SIGNALS);
        // SAFETY: in the child, `watch` makes system calls only (no
        // allocation, no lock another thread could have held at the fork, no
        // panic) and ends with `_exit`, as a child of a threaded process must.
        let forked = unsafe { libc::fork() };
        if forked != 0 {
            restore(&before);
        }
        match forked {
            -1 => Err(io::Error::last_os_error()),
            0 => watch(&read, write.as_raw_fd(), &entry, uid),
            pid => {
                let pid = Pid::from_raw(pid).ok_or(io::ErrorKind::Other)?;
                Ok(Watchdog { pid, to_watchdog: Some(write), sweep: false })
            }
        }
    }
}

impl Watchdog {
    /// Whether the watchdog got `sig`: as it is in the launcher's process
    /// group and nobody signals it alone, the signal was sent to the whole
    /// group (a terminal's Ctrl-C, `kill -TERM -PGID`, GNU `timeout`), so
    /// the ranks, which stay in the group, got it too. It stays pending
    /// there, blocked (ignored, it would be dropped); under an emulator
    /// that keeps its guests' pending signals to itself, this says no.
    pub(crate) fn got(&self, sig: Signal) -> bool {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid.as_raw_nonzero()));
        let Ok(status) = status else { return false };
        let bit = 1u64 << (sig.as_raw() - 1);
        // Sent to the process (shared) or, by `tgkill`, to its one thread.
        let pending = |field: &str| status.lines().find_map(|l| l.strip_prefix(field)).map(str::trim);
        ["ShdPnd:", "SigPnd:"]
            .into_iter()
            .filter_map(pending)
            .any(|mask| u64::from_str_radix(mask, 16).is_ok_and(|m| m & bit != 0))
    }
}

impl Watchdog {
    /// The launcher cut the job short and killed its ranks' process trees:
    /// once dropped, the watchdog also kills what those had orphaned (a
    /// rank's `sh -c '(prog &); …'`), which no tree holds any more.
    pub(crate) fn sweep_when_dropped(&mut self) {
        self.sweep = true;
    }
}

impl Drop for Watchdog {
    /// The launcher ended its job itself: the watchdog goes, killing nothing
    /// (what a rank left running on purpose stays, as without a watchdog),
    /// or sweeps the job first if it was cut short.
    fn drop(&mut self) {
        if let Some(w) = self.to_watchdog.take() {
            // One byte into an empty pipe: it does not block.
            let _ = rustix::io::write(&w, &[if self.sweep { SWEEP } else { GO }]);
        }
        let until = Instant::now() + if self.sweep { SWEEP_BOUND } else { LEAVE_BOUND };
        loop {
            match rustix::process::waitpid(Some(self.pid), WaitOptions::NOHANG) {
                Ok(None) if Instant::now() < until => std::thread::sleep(Duration::from_millis(1)),
                // Stuck (a fork gone wrong under an emulator): not left behind.
                Ok(None) => {
                    let _ = rustix::process::kill_process(self.pid, Signal::KILL);
                    let _ = rustix::process::waitpid(Some(self.pid), WaitOptions::empty());
                    return;
                }
                // Reaped, or reaped by someone else (a `wait` for any child).
                Ok(Some(_)) | Err(_) => return,
            }
        }
    }
}

/// The watchdog: waits for the launcher's word or its end, then kills the
/// job's processes if it ended without a word or asked for a sweep.
fn watch(read: &OwnedFd, write: RawFd, entry: &[u8], uid: u32) -> ! {
    // `GROUP_SIGNALS` are blocked already (across the fork), for good.
    // A name of its own: `pkill kpccl-run` or `killall kpccl-run` signals
    // the launcher alone, which passes the signal on; had the watchdog got
    // it too, the launcher would take it for one sent to the whole group,
    // already at the ranks, and not pass it on. And a command line of its
    // own, for `pkill -f kpccl-run`: `pkill -9 -f` killed the watchdog with
    // the launcher, and what the ranks started ran on.
    let _ = rustix::thread::set_name(WATCHDOG_NAME);
    rename_command_line();
    for sig in IGNORED {
        // SAFETY: sets a disposition to `SIG_IGN`; no handler runs.
        unsafe { libc::signal(sig, libc::SIG_IGN) };
    }
    // SAFETY: the launcher's write end, of which this is a copy: closed so
    // that the launcher's is the only one.
    unsafe { libc::close(write) };
    close_all_but(read.as_raw_fd());
    quiet_stdin_stdout();
    let _ = rustix::process::chdir(c"/");
    let mut byte = [0u8; 1];
    let heard = loop {
        match rustix::io::read(read, &mut byte) {
            Err(Errno::INTR) => {}
            other => break other,
        }
    };
    let dead = heard == Ok(0);
    if dead || (heard == Ok(1) && byte[0] == SWEEP) {
        let mut killed = Killed { pids: [0; 1024], len: 0 };
        for _ in 0..PASSES {
            if !kill_pass(entry, uid, &mut killed) {
                break;
            }
            // Let the killed die before the next look.
            let _ = rustix::thread::nanosleep(&rustix::thread::Timespec { tv_sec: 0, tv_nsec: 1_000_000 });
        }
        if dead {
            say_killed(killed.len);
        }
    }
    // SAFETY: ends the process without running the launcher's exit handlers.
    unsafe { libc::_exit(0) }
}

/// Writes the watchdog's name over its command line (the launcher's, kept by
/// the fork), the rest of it zeroed, so that `/proc/<pid>/cmdline` (what
/// `ps -f` shows and `pkill -f` matches) reads `kpccl-watchdog`. The
/// arguments' place comes from `/proc/self/stat`, and is written through
/// `/proc/self/mem`: a place that is wrong, or none (an emulator's made-up
/// `stat` says 0), fails the write instead of the watchdog.
fn rename_command_line() {
    let Some((start, end)) = argument_area() else { return };
    let Ok(len) = usize::try_from(end - start) else { return };
    let Ok(mem) = rustix::fs::open(c"/proc/self/mem", OFlags::WRONLY | OFlags::CLOEXEC, Mode::empty()) else {
        return;
    };
    // The area's last byte stays 0: else the kernel takes the command line
    // to run on into the environment (`setproctitle`).
    let mut zeros = [0u8; 256];
    let name = WATCHDOG_NAME.to_bytes_with_nul();
    let mut at = 0;
    while at < len {
        let n = (len - at).min(zeros.len());
        let piece = zeros.get_mut(..n).unwrap_or_default();
        piece.fill(0);
        if at == 0 {
            let shown = name.len().min(n.saturating_sub(1));
            piece.get_mut(..shown).unwrap_or_default().copy_from_slice(name.get(..shown).unwrap_or_default());
        }
        // The watchdog's own copy of the launcher's stack (the fork's): no
        // Rust object of the watchdog lives there, and the launcher's is not touched.
        if rustix::io::pwrite(&mem, piece, start + at as u64).is_err() {
            return;
        }
        at += n;
    }
}

/// Where the process's arguments are: `arg_start` and `arg_end`, fields 48
/// and 49 of `/proc/self/stat` (read without allocating).
fn argument_area() -> Option<(u64, u64)> {
    let stat = rustix::fs::open(c"/proc/self/stat", OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()).ok()?;
    let mut buf = [0u8; 2048];
    let mut len = 0;
    while let Some(rest) = buf.get_mut(len..).filter(|r| !r.is_empty()) {
        match rustix::io::read(&stat, rest) {
            Ok(0) | Err(_) => break,
            Ok(n) => len += n,
        }
    }
    arguments_in(buf.get(..len)?)
}

/// `arg_start` and `arg_end` in the text of a `/proc/<pid>/stat`, if they
/// make an area (not the zeros of a made-up one).
fn arguments_in(stat: &[u8]) -> Option<(u64, u64)> {
    // After the name, in parentheses and holding any byte: field 3 on.
    let after = stat.get(stat.iter().rposition(|&b| b == b')')? + 1..)?;
    let mut fields = after.split(|&b| b == b' ').filter(|f| !f.is_empty());
    let field = |f: &[u8]| core::str::from_utf8(f).ok()?.trim_end().parse::<u64>().ok();
    let start = field(fields.nth(48 - 3)?)?;
    let end = field(fields.next()?)?;
    (start != 0 && end > start).then_some((start, end))
}

/// Blocks `signals` for the calling thread; returns its mask before.
fn block(signals: &[libc::c_int]) -> libc::sigset_t {
    let set = crate::signals::signal_set(signals);
    // SAFETY: zeroed is a valid sigset for the call to overwrite.
    let mut before: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: adds the live local's signals to the calling thread's mask,
    // the previous mask into the other live local (a system call).
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &raw const set, &raw mut before) };
    before
}

/// Puts back the calling thread's signal mask [`block`] returned.
fn restore(before: &libc::sigset_t) {
    // SAFETY: sets the thread's mask from a live sigset (a system call).
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, before, std::ptr::null_mut()) };
}

/// Closes every descriptor above the standard streams but `keep` (the
/// launcher's other descriptors, such as another thread's pipe to a child,
/// whose reader waits for all of them to close), as `/proc/self/fd` lists them.
fn close_all_but(keep: RawFd) {
    let Ok(dir) =
        rustix::fs::open(c"/proc/self/fd", OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
    else {
        return;
    };
    let mut space = [MaybeUninit::<u8>::uninit(); 2048];
    let mut entries = rustix::fs::RawDir::new(&dir, &mut space);
    while let Some(Ok(entry)) = entries.next() {
        let Some(fd) = number(entry.file_name()).and_then(|n| RawFd::try_from(n).ok()) else { continue };
        if fd > 2 && fd != keep && fd != dir.as_raw_fd() {
            // SAFETY: nothing in this process uses the descriptor after this
            // (the watchdog holds only `keep` and `dir`).
            unsafe { libc::close(fd) };
        }
    }
}

/// Points stdin and stdout at `/dev/null`: the watchdog reads and writes
/// neither (a reader of the launcher's stdout is not kept waiting by it).
fn quiet_stdin_stdout() {
    let Ok(null) = rustix::fs::open(c"/dev/null", OFlags::RDWR | OFlags::CLOEXEC, Mode::empty()) else { return };
    for fd in [0, 1] {
        // SAFETY: replaces a standard stream the watchdog does not use with `/dev/null`.
        unsafe { libc::dup2(null.as_raw_fd(), fd) };
    }
}

/// The processes killed so far (without allocating: past the first 1 024,
/// every one counts as new).
struct Killed {
    pids: [i32; 1024],
    len: usize,
}

impl Killed {
    /// Notes `pid`; whether it was not killed before (a process takes a
    /// while to die, and until then its environment still reads).
    fn note(&mut self, pid: Pid) -> bool {
        let pid = pid.as_raw_nonzero().get();
        let known = self.pids.get(..self.len).unwrap_or_default();
        if known.contains(&pid) {
            return false;
        }
        if let Some(slot) = self.pids.get_mut(self.len) {
            *slot = pid;
        }
        self.len += 1;
        true
    }
}

/// One pass over `/proc`: kills every process of `uid` whose environment
/// holds `entry`; whether one of them had not been killed before.
fn kill_pass(entry: &[u8], uid: u32, killed: &mut Killed) -> bool {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let Ok(proc) = rustix::fs::open(c"/proc", flags, Mode::empty()) else { return false };
    let mut space = [MaybeUninit::<u8>::uninit(); 4096];
    let mut entries = rustix::fs::RawDir::new(&proc, &mut space);
    let mut fresh = false;
    while let Some(Ok(e)) = entries.next() {
        let Some(pid) = number(e.file_name()).and_then(|n| i32::try_from(n).ok()).and_then(Pid::from_raw) else {
            continue;
        };
        // Opened once: the environment read and the signal sent are the same process's.
        let Ok(process) = rustix::fs::openat(&proc, e.file_name(), flags, Mode::empty()) else { continue };
        if rustix::fs::fstat(&process).map_or(true, |s| s.st_uid != uid) {
            continue;
        }
        let Ok(environ) = rustix::fs::openat(&process, c"environ", OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())
        else {
            continue;
        };
        if holds(&environ, entry) && kill(&process, pid) {
            fresh |= killed.note(pid);
        }
    }
    fresh
}

/// `SIGKILL` to the process whose `/proc` directory is `process`: by that
/// descriptor (so a pid reused meanwhile is not hit), by pid on a kernel
/// without `pidfd_send_signal` (before 5.1).
fn kill(process: &OwnedFd, pid: Pid) -> bool {
    match rustix::process::pidfd_send_signal(process, Signal::KILL) {
        Ok(()) => true,
        Err(Errno::SRCH) => false,
        Err(_) => rustix::process::kill_process(pid, Signal::KILL).is_ok(),
    }
}

/// Whether the environment block `fd` reads (entries each ended by a NUL)
/// holds the entry `entry`, read in pieces without allocating. A zombie's
/// reads as empty.
fn holds(fd: impl AsFd, entry: &[u8]) -> bool {
    let mut buf = [0u8; 4096];
    // How much of `entry` the entry being read matches so far; `None`: it differs.
    let mut at = Some(0);
    loop {
        let n = match rustix::io::read(&fd, &mut buf) {
            Ok(0) | Err(_) => return at == Some(entry.len()),
            Ok(n) => n,
        };
        for &b in buf.get(..n).unwrap_or_default() {
            at = match at {
                _ if b == 0 && at == Some(entry.len()) => return true,
                _ if b == 0 => Some(0),
                Some(i) if entry.get(i) == Some(&b) => Some(i + 1),
                _ => None,
            };
        }
    }
}

/// A directory entry's name as a number, if it is one (`str::parse`
/// allocates nothing, as the forked watchdog must not).
fn number(name: &CStr) -> Option<u64> {
    name.to_str().ok()?.parse().ok()
}

/// Tells stderr how many processes the watchdog killed, if any (formatted
/// without allocating).
fn say_killed(killed: usize) {
    if killed == 0 {
        return;
    }
    let (digits, n) = decimal(killed);
    for part in [
        &b"kpccl-run: the launcher died; its watchdog killed "[..],
        digits.get(n..).unwrap_or_default(),
        b" process(es) of its job\n",
    ] {
        // SAFETY: writes initialised bytes of a live slice to stderr.
        unsafe { libc::write(2, part.as_ptr().cast(), part.len()) };
    }
}

/// `n` in decimal: its digits are `.0[.1..]`.
fn decimal(mut n: usize) -> ([u8; 20], usize) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    while let Some(slot) = at.checked_sub(1).and_then(|i| digits.get_mut(i)) {
        *slot = b'0' + u8::try_from(n % 10).unwrap_or(0);
        at -= 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    (digits, at)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(block: &[u8], entry: &str) -> bool {
        let (r, w) = rustix::pipe::pipe().unwrap();
        let writer = std::thread::spawn({
            let block = block.to_vec();
            move || rustix::io::write(&w, &block).unwrap()
        });
        let found = holds(&r, entry.as_bytes());
        writer.join().unwrap();
        found
    }

    #[test]
    fn an_environment_holds_the_entry_only_whole() {
        let e = "KPCCL_RUN_SOCKET=@job";
        assert!(held(b"A=1\0KPCCL_RUN_SOCKET=@job\0B=2\0", e));
        assert!(held(b"KPCCL_RUN_SOCKET=@job\0", e));
        assert!(held(b"KPCCL_RUN_SOCKET=@job", e), "a last entry without its NUL");
        assert!(!held(b"KPCCL_RUN_SOCKET=@job2\0", e), "another job's");
        assert!(!held(b"X_KPCCL_RUN_SOCKET=@job\0", e));
        assert!(!held(b"A=KPCCL_RUN_SOCKET=@job\0", e));
        assert!(!held(b"", e), "a zombie's");
        // Across the reader's 4096-byte pieces.
        let mut long = vec![b'x'; 4090];
        long.extend_from_slice(b"\0KPCCL_RUN_SOCKET=@job\0");
        assert!(held(&long, e));
    }

    #[test]
    fn the_argument_area_is_read_past_any_name_and_not_from_zeros() {
        let fields = |args: &str| {
            let mut f: Vec<String> = (3..48).map(|i| i.to_string()).collect();
            f.push(args.into());
            f.push("0\n".into());
            f.join(" ")
        };
        let stat = format!("42 (a) b (c) {}", fields("4096 4200 4300 4400 4500"));
        assert_eq!(arguments_in(stat.as_bytes()), Some((4096, 4200)));
        assert_eq!(arguments_in(format!("42 (q) {}", fields("0 0 0 0 0")).as_bytes()), None, "qemu's");
        assert_eq!(arguments_in(b"42 (short) S 1"), None);
        // This process's own, but under qemu-user, whose made-up `stat` has zeros there.
        let emulated = cfg!(target_arch = "aarch64")
            && std::env::var_os("CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER").is_some();
        if !emulated {
            let (start, end) = argument_area().expect("this process's argument area");
            assert!(end > start, "this process's: {start:#x}..{end:#x}");
        }
    }

    #[test]
    fn numbers_and_digits() {
        assert_eq!(number(c"1234"), Some(1234));
        assert_eq!(number(c"self"), None);
        assert_eq!(number(c""), None);
        assert_eq!(number(c"99999999999999999999999"), None);
        let text = |n| {
            let (d, at) = decimal(n);
            String::from_utf8(d[at..].to_vec()).unwrap()
        };
        assert_eq!((text(0), text(4096), text(usize::MAX)), ("0".into(), "4096".into(), usize::MAX.to_string()));
    }
}
