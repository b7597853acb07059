//! No rank outlives its launcher. Each rank is killed by the kernel when the
//! launcher dies, however it dies (`PR_SET_PDEATHSIG`, even for `SIGKILL`;
//! what the rank started, by the launcher's watchdog: see `watchdog.rs`);
//! and a launch that forwards signals ([`Launch::forward_signals`](crate::Launch::forward_signals))
//! catches `SIGINT`, `SIGTERM` and `SIGHUP` instead of dying of them, so
//! that it can pass them on to its ranks, wait for them and report.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::Duration;

use kpccl_core::sync::{AtomicU32, AtomicU64, Ordering};
use rustix::process::{Signal, getpid, getppid, set_parent_process_death_signal};

/// The signals a forwarding launch catches: those that ask a job to stop.
const CAUGHT: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// How many caught signals arrived (since the process started), each
/// request once (see `SAME_REQUEST`).
static ARRIVED: AtomicU32 = AtomicU32::new(0);
/// The last caught signal.
static LAST: AtomicU32 = AtomicU32::new(0);
/// 1 if the last caught signal came from the kernel (`SI_KERNEL`): a
/// terminal's Ctrl-C or hang-up, which the kernel sends to the whole
/// foreground process group, the ranks included.
static FROM_KERNEL: AtomicU32 = AtomicU32::new(0);
/// The sender (`si_pid`) of the last signal a process sent (`SI_USER`), 0 for none.
static LAST_SENDER: AtomicU32 = AtomicU32::new(0);
/// When that signal arrived, in `CLOCK_MONOTONIC` nanoseconds.
static LAST_SENT_AT: AtomicU64 = AtomicU64::new(0);

/// A signal that comes again from the same process within this time is the
/// same request sent twice, not a second one: GNU `timeout` signals its
/// child, then its whole process group, the child included.
const SAME_REQUEST: Duration = Duration::from_millis(100);

extern "C" fn note(sig: libc::c_int, info: *mut libc::siginfo_t, _context: *mut libc::c_void) {
    // SAFETY: the kernel passes an `SA_SIGINFO` handler a valid `siginfo_t`.
    let info = unsafe { &*info };
    let code = info.si_code;
    // SAFETY: as above; `si_pid` is the sender's for `SI_USER`, the only
    // code it is used for.
    let sender = unsafe { info.si_pid() };
    let sig = u32::try_from(sig).unwrap_or(0);
    let sender = u32::try_from(sender).unwrap_or(0);
    let at = monotonic_ns();
    if code == libc::SI_USER && again(sig, sender, at) {
        return;
    }
    // Relaxed, all: the handler's own state (it runs with the caught
    // signals blocked, one at a time), or published by the Release below.
    let (user_sender, user_at) = if code == libc::SI_USER { (sender, at) } else { (0, 0) };
    LAST_SENDER.store(user_sender, Ordering::Relaxed);
    LAST_SENT_AT.store(user_at, Ordering::Relaxed);
    FROM_KERNEL.store(u32::from(code == libc::SI_KERNEL), Ordering::Relaxed);
    LAST.store(sig, Ordering::Relaxed);
    // Release: pairs with the Acquire load in `Caught::received`, which then reads `LAST`.
    ARRIVED.fetch_add(1, Ordering::Release);
}

/// Whether `sig` from process `sender` at `at` repeats the last caught
/// signal (same number, same sending process, within `SAME_REQUEST`).
fn again(sig: u32, sender: u32, at: u64) -> bool {
    // Relaxed, all: only the handler writes them, one signal at a time.
    let same = LAST.load(Ordering::Relaxed) == sig && LAST_SENDER.load(Ordering::Relaxed) == sender;
    let since = at.wrapping_sub(LAST_SENT_AT.load(Ordering::Relaxed));
    same && sender != 0 && ARRIVED.load(Ordering::Relaxed) > 0 && u128::from(since) < SAME_REQUEST.as_nanos()
}

/// `CLOCK_MONOTONIC` in nanoseconds (async-signal-safe: one system call).
fn monotonic_ns() -> u64 {
    // SAFETY: a zeroed timespec is a valid value for the kernel to overwrite.
    let mut t: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: writes the live local; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &raw mut t) };
    let secs = u64::try_from(t.tv_sec).unwrap_or(0);
    let nanos = u64::try_from(t.tv_nsec).unwrap_or(0);
    secs.saturating_mul(1_000_000_000).saturating_add(nanos)
}

/// Makes the process `cmd` starts die (`SIGKILL`) when the thread that
/// starts it ends: in a launcher, when the launcher does.
pub(crate) fn die_with_launcher(cmd: &mut Command) {
    let launcher = getpid();
    // SAFETY: the closure runs in the forked child before exec: two system
    // calls and a comparison, no allocation, no lock.
    unsafe {
        cmd.pre_exec(move || {
            set_parent_process_death_signal(Some(Signal::KILL))?;
            // The launcher died before the line above: no signal will come.
            // (A raw code: nothing may allocate between fork and exec.)
            if getppid() != Some(launcher) {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}

/// Makes the rank `cmd` starts hear a caught signal that reaches it between
/// its fork and its exec: there it runs the launcher's handler, copied by
/// the fork, which only counts it (in the rank's copy of the counters), and
/// the program never learns of it. A terminal's Ctrl-C while the launcher
/// starts its ranks hit a rank so. Last before exec, the rank puts the
/// caught signals back to their default, then raises the one it (or the
/// launcher, after `caught` was last looked at) got, dying of it as the
/// program would have at its start.
///
/// Returns whether a caught signal had come before the rank was started:
/// then the caller starts no more. One look decides both (a signal between
/// two looks would reach neither the launcher's decision nor the rank: it
/// was delivered to the group before the fork, and the rank's copy of the
/// count already holds it).
#[must_use]
pub(crate) fn pass_on_at_exec(cmd: &mut Command, caught: &Caught) -> bool {
    // Copied into the closure: nothing may allocate between fork and exec.
    let mut handled = [0; CAUGHT.len()];
    for (slot, (sig, _)) in handled.iter_mut().zip(&caught.previous) {
        *slot = *sig;
    }
    // Acquire: see `note`; what the launcher had seen when it started the rank.
    let seen = ARRIVED.load(Ordering::Acquire);
    let at_exec = move || {
        for &sig in handled.iter().filter(|&&s| s != 0) {
            // SAFETY: sets a disposition to the default; no handler runs.
            unsafe { libc::signal(sig, libc::SIG_DFL) };
        }
        // Acquire: pairs with the Release in this process's `note`.
        if ARRIVED.load(Ordering::Acquire) != seen {
            // Relaxed: ordered by the Acquire load above.
            let sig = LAST.load(Ordering::Relaxed);
            // SAFETY: raises a signal whose disposition is now the default.
            unsafe { libc::raise(libc::c_int::try_from(sig).unwrap_or(libc::SIGTERM)) };
        }
        Ok(())
    };
    // SAFETY: the closure runs in the forked child before exec: `sigaction`,
    // atomic loads and `raise`, all async-signal-safe; no allocation, no lock.
    unsafe { cmd.pre_exec(at_exec) };
    seen != caught.base
}

/// `SIGINT`, `SIGTERM` and `SIGHUP` caught (for the whole process) while
/// this lives, but for those the process ignores; the previous dispositions
/// come back when it is dropped.
pub(crate) struct Caught {
    previous: Vec<(libc::c_int, libc::sigaction)>,
    /// `ARRIVED` when it was installed.
    base: u32,
}

impl Caught {
    pub(crate) fn install() -> io::Result<Caught> {
        // Acquire: see `note`.
        let mut caught = Caught { previous: Vec::new(), base: ARRIVED.load(Ordering::Acquire) };
        // Relaxed: no handler of ours is installed yet. A signal of an
        // earlier launch is not this one's request.
        LAST_SENDER.store(0, Ordering::Relaxed);
        for sig in CAUGHT {
            if ignored(sig)? {
                // `nohup`, or a script's `&`: it stays ignored, by the
                // launcher and by the ranks, which inherit it.
                continue;
            }
            // SAFETY: a zeroed sigaction is a valid "default, no flags, empty mask" value.
            let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
            action.sa_sigaction =
                note as extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) as libc::sighandler_t;
            // Restarted: the hub's threads and the launcher's waits go on.
            // With its origin: see `FROM_KERNEL`.
            action.sa_flags = libc::SA_RESTART | libc::SA_SIGINFO;
            // One handler at a time: each reads what the one before stored.
            action.sa_mask = signal_set(&CAUGHT);
            // SAFETY: as above.
            let mut previous: libc::sigaction = unsafe { std::mem::zeroed() };
            // SAFETY: both pointers are to live locals; the handler only
            // stores to two atomics, which is async-signal-safe.
            if unsafe { libc::sigaction(sig, &raw const action, &raw mut previous) } != 0 {
                return Err(io::Error::last_os_error());
            }
            caught.previous.push((sig, previous));
        }
        Ok(caught)
    }

    /// The caught signals that arrived since [`Caught::install`].
    pub(crate) fn received(&self) -> Received {
        // Acquire: see `note`.
        let count = ARRIVED.load(Ordering::Acquire).wrapping_sub(self.base);
        // Relaxed, both: ordered by the Acquire load above.
        let last = match i32::try_from(LAST.load(Ordering::Relaxed)) {
            Ok(libc::SIGINT) => Signal::INT,
            Ok(libc::SIGHUP) => Signal::HUP,
            _ => Signal::TERM,
        };
        let from_terminal = FROM_KERNEL.load(Ordering::Relaxed) != 0;
        Received { count, last, from_terminal }
    }
}

/// The set of `signals`.
pub(crate) fn signal_set(signals: &[libc::c_int]) -> libc::sigset_t {
    // SAFETY: a zeroed sigset is valid for `sigemptyset` to initialise.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: initialises the live local.
    unsafe { libc::sigemptyset(&raw mut set) };
    for &sig in signals {
        // SAFETY: adds a valid signal number to the live local.
        unsafe { libc::sigaddset(&raw mut set, sig) };
    }
    set
}

/// Whether the process ignores `sig` (`SIG_IGN`).
fn ignored(sig: libc::c_int) -> io::Result<bool> {
    // SAFETY: a zeroed sigaction is a valid value for the kernel to overwrite.
    let mut current: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: reads the disposition into a live local; changes nothing.
    if unsafe { libc::sigaction(sig, std::ptr::null(), &raw mut current) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(current.sa_sigaction == libc::SIG_IGN)
}

/// `SIGCHLD` as a launcher needs it while this lives: not ignored, nor with
/// `SA_NOCLDWAIT`, either of which makes the kernel reap the ranks itself, so
/// that waiting for them fails (`ECHILD`). A parent's `SIG_IGN` survives
/// `exec` (a daemon's, Python's `signal(SIGCHLD, SIG_IGN)`): started so,
/// `kpccl-run` failed every job with "No child processes". The ranks start
/// with the default; the previous disposition comes back when it is dropped.
pub(crate) struct ChildrenWaited {
    previous: Option<libc::sigaction>,
}

impl ChildrenWaited {
    pub(crate) fn install() -> io::Result<ChildrenWaited> {
        // SAFETY: a zeroed sigaction is a valid value for the kernel to overwrite.
        let mut current: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: reads the disposition into a live local; changes nothing.
        if unsafe { libc::sigaction(libc::SIGCHLD, std::ptr::null(), &raw mut current) } != 0 {
            return Err(io::Error::last_os_error());
        }
        if current.sa_sigaction != libc::SIG_IGN && current.sa_flags & libc::SA_NOCLDWAIT == 0 {
            return Ok(ChildrenWaited { previous: None });
        }
        // A handler of the process's own stays, without the flag.
        let mut action = current;
        action.sa_flags &= !libc::SA_NOCLDWAIT;
        if action.sa_sigaction == libc::SIG_IGN {
            action.sa_sigaction = libc::SIG_DFL;
        }
        // SAFETY: a valid disposition from a live local.
        if unsafe { libc::sigaction(libc::SIGCHLD, &raw const action, std::ptr::null_mut()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(ChildrenWaited { previous: Some(current) })
    }
}

impl Drop for ChildrenWaited {
    fn drop(&mut self) {
        if let Some(previous) = &self.previous {
            // SAFETY: restores a disposition `sigaction` gave us, from a live local.
            unsafe { libc::sigaction(libc::SIGCHLD, previous, std::ptr::null_mut()) };
        }
    }
}

/// What [`Caught::received`] saw.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Received {
    /// How many signals.
    pub(crate) count: u32,
    /// The last one.
    pub(crate) last: Signal,
    /// The last one came from a terminal, to the launcher's whole process
    /// group: the ranks, which stay in it, got it too and need no other.
    pub(crate) from_terminal: bool,
}

impl Drop for Caught {
    fn drop(&mut self) {
        for (sig, previous) in &self.previous {
            // SAFETY: restores a disposition `sigaction` gave us, from a live local.
            unsafe { libc::sigaction(*sig, previous, std::ptr::null_mut()) };
        }
    }
}
