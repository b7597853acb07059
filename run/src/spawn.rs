//! The launcher: starts the hub and `n` ranks of a program, waits for them
//! (bounded by an optional timeout) and reports how each ended.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use kpccl_posix::launch::runner;
use rustix::pipe::PipeFlags;
use rustix::process::Signal;

use crate::signals::{self, Caught};
use crate::watchdog::Watchdog;
use crate::{Binding, Hub, NRANKS_ENV, RANK_ENV, SOCKET_ENV};

/// Longest pause between two looks at the children.
const MAX_POLL: Duration = Duration::from_millis(10);
/// How long the launcher looks whether a signal it got was sent to its whole
/// process group (the ranks got it then, and need no other) before it
/// passes it on: GNU `timeout` signals the launcher, then the group.
const SETTLE: Duration = Duration::from_millis(50);
/// How long the launcher waits for the ranks it killed to die: one in
/// uninterruptible sleep (a fault on a hung file system) dies of `SIGKILL`
/// only when it wakes, maybe never; the launcher reports it and goes.
const REAP_BOUND: Duration = Duration::from_secs(10);

/// How long the ranks still running may go on after one fails, by default:
/// long enough for survivors to report the failure themselves (they hear
/// of a lost rank at once, of a frozen one when their timeout ends), short
/// enough that a frozen rank does not hold the job for ever.
pub const DEFAULT_ABORT_AFTER: Duration = Duration::from_secs(10);

/// Starts `n` ranks of one program, each with `KPCCL_RANK`, `KPCCL_NRANKS`
/// and `KPCCL_RUN_SOCKET` set so that [`RunOob::from_env`](crate::RunOob::from_env)
/// connects it to the job's [`Hub`].
///
/// Ranks inherit stdout and stderr; rank 0 inherits stdin, the others read
/// `/dev/null`. A rank that fails does not stop the others at once (those in
/// a collective with it get an error from the hub), but the ranks still
/// running [`DEFAULT_ABORT_AFTER`] later are killed, as `mpirun` kills a job
/// when a rank fails (see [`Launch::abort_after`]). No rank outlives the
/// launcher: the kernel kills each (`SIGKILL`) when the thread that called
/// [`Launch::run`] ends, however it ends, and if the process dies meanwhile
/// (even of `SIGKILL`), a watchdog process it started kills what the ranks
/// started (every process of its user whose environment has this job's
/// `KPCCL_RUN_SOCKET`); it does so too when the launcher cuts the job short
/// (a timeout, a failed rank, a signal), for what a killed rank orphaned.
/// Under qemu-user the
/// program goes through the target runner (`KPCCL_RUNNER`, or on aarch64
/// `CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER`, split on whitespace).
///
/// ```no_run
/// use std::time::Duration;
/// use kpccl_run::Launch;
///
/// let report = Launch::new(4).timeout(Duration::from_secs(60)).run("./my-rank-program", ["--size", "4096"])?;
/// assert!(report.success(), "{report}");
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Launch {
    nranks: u32,
    timeout: Option<Duration>,
    abort_after: Option<Duration>,
    binding: Binding,
    forward_signals: bool,
    env: Vec<(OsString, OsString)>,
}

impl Launch {
    /// A launch of `nranks` ranks, with no timeout, [`DEFAULT_ABORT_AFTER`]
    /// and no extra environment.
    pub fn new(nranks: u32) -> Launch {
        Launch {
            nranks,
            timeout: None,
            abort_after: Some(DEFAULT_ABORT_AFTER),
            binding: Binding::None,
            forward_signals: false,
            env: Vec::new(),
        }
    }

    /// Where the ranks may run (see [`Binding`]; default: unbound).
    pub fn binding(mut self, binding: Binding) -> Launch {
        self.binding = binding;
        self
    }

    /// Kills (`SIGKILL`) every rank still running `timeout` after the start.
    pub fn timeout(mut self, timeout: Duration) -> Launch {
        self.timeout = Some(timeout);
        self
    }

    /// Once a rank fails (exits with a code other than 0, or dies of a
    /// signal), kills (`SIGKILL`) every rank still running `grace` later;
    /// `None`: let them run.
    pub fn abort_after(mut self, grace: Option<Duration>) -> Launch {
        self.abort_after = grace;
        self
    }

    /// While [`Launch::run`] runs, catches `SIGINT`, `SIGTERM` and `SIGHUP`
    /// (for the whole process; the previous dispositions come back after)
    /// instead of dying of them: the first is passed on to every rank still
    /// running (and what each started; not one sent to the launcher's whole
    /// process group, which the ranks are in and got it from: a terminal's
    /// Ctrl-C or hang-up, GNU `timeout`, `kill -TERM -PGID`), which are
    /// killed [`Launch::abort_after`] later if still running (at once on a
    /// second signal: not the same signal again from the same process
    /// within a tenth of a second, as `timeout` sends it), and the [`Report`]
    /// says so. A signal that comes while the ranks are being started stops
    /// the start: the ranks not started yet never are (see
    /// [`Report::not_started`]). For a launcher program such as
    /// `kpccl-run`: handlers of its own for these signals are replaced
    /// while the launch runs. A signal the process ignores (`nohup`, a
    /// script's `cmd &`) stays ignored, by it and by the ranks.
    pub fn forward_signals(mut self, forward: bool) -> Launch {
        self.forward_signals = forward;
        self
    }

    /// Sets an environment variable for every rank (the launcher's own
    /// `KPCCL_RANK`, `KPCCL_NRANKS` and `KPCCL_RUN_SOCKET` win over these).
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Launch {
        self.env.push((key.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    /// Runs `program args…` as every rank and waits for all of them.
    ///
    /// An error means the job could not start (no hub, a rank that cannot
    /// be spawned: the ranks already started are killed) or a child could
    /// not be waited for; how the ranks ended is in the [`Report`]. While it
    /// runs, a `SIGCHLD` the process ignores (or whose handler has
    /// `SA_NOCLDWAIT`) is back to its default, so that the ranks can be waited for.
    pub fn run<I, S>(&self, program: impl AsRef<OsStr>, args: I) -> io::Result<Report>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let start = Instant::now();
        let program = program.as_ref();
        let args: Vec<OsString> = args.into_iter().map(|a| a.as_ref().to_owned()).collect();
        // Served only once every rank is started: see `Hub::bind`.
        let mut hub = Hub::bind(self.nranks)?;
        // Before the first rank starts, so that no signal goes unseen.
        let caught = if self.forward_signals { Some(Caught::install()?) } else { None };
        // Before the watchdog and the ranks start, back after they are reaped.
        let _waited = signals::ChildrenWaited::install()?;
        let runner = runner::from_env();
        let cpus = match self.binding {
            Binding::None => None,
            Binding::Cpu => Some(crate::bind::allowed_cpus()?),
        };
        // Before the first rank, and dropped after the last is reaped (or
        // killed, on an early return): it acts if the launcher dies, or
        // sweeps a job cut short.
        let mut watchdog = Watchdog::start(hub.socket())
            .map_err(|e| io::Error::new(e.kind(), format!("cannot start the launcher's watchdog: {e}")))?;
        let mut ranks = Ranks(Vec::with_capacity(self.nranks as usize));
        for rank in 0..self.nranks {
            let mut cmd = match runner.split_first() {
                Some((first, rest)) => {
                    let mut c = Command::new(first);
                    c.args(rest).arg(program);
                    c
                }
                None => Command::new(program),
            };
            cmd.args(&args)
                .envs(self.env.iter().map(|(k, v)| (k, v)))
                .env(RANK_ENV, rank.to_string())
                .env(NRANKS_ENV, self.nranks.to_string())
                .env(SOCKET_ENV, hub.socket());
            if rank != 0 {
                cmd.stdin(Stdio::null());
            }
            signals::die_with_launcher(&mut cmd);
            if let Some(cpus) = &cpus {
                crate::bind::bind(&mut cmd, cpus[rank as usize % cpus.len()]);
            }
            // A signal while the ranks start (a terminal's Ctrl-C) reached
            // those started, or is passed on to them: none after it starts.
            if caught.as_ref().is_some_and(|c| signals::pass_on_at_exec(&mut cmd, c)) {
                break;
            }
            // The child's copy of `exec_mark` closes at its exec (see `reached_exec`).
            let (exec_watch, exec_mark) = rustix::pipe::pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK)?;
            let child = cmd.spawn().map_err(|e| {
                let words: Vec<_> = runner.iter().map(|w| w.as_os_str()).chain([program]).collect();
                let shown: Vec<_> = words.iter().map(|w| w.to_string_lossy()).collect();
                io::Error::new(e.kind(), format!("cannot start rank {rank} ({}): {e}", shown.join(" ")))
            })?;
            drop(exec_mark);
            ranks.0.push(Rank { child, status: None, exec_watch });
        }
        // Those never started end at once, as killed by the launcher's
        // signal: a started rank that outlives it (one that handles it)
        // learns at its next collective that they will never come.
        let not_started: Vec<u32> = (0..self.nranks).skip(ranks.0.len()).collect();
        let stopped_by = ExitStatus::from_raw(caught.as_ref().map_or(libc::SIGTERM, |c| c.received().last.as_raw()));
        for &rank in &not_started {
            hub.rank_ended(rank, 0, stopped_by);
        }
        hub.serve()?;
        let deadline = self.timeout.and_then(|t| start.checked_add(t));
        let (ended, signal) = ranks.wait(&hub, deadline, self.abort_after, caught.as_ref(), &watchdog)?;
        let timed_out = ended == Ended::Deadline;
        let abandoned = match ended {
            Ended::Abandoned { failed } => Some(failed),
            _ => None,
        };
        let interrupted =
            signal.map(|(signal, passed_on)| Interrupted { signal, passed_on, again: ended == Ended::SignalledAgain });
        let cut_short = ended != Ended::AllExited || !not_started.is_empty();
        let never_connected = if cut_short { hub.never_connected() } else { Vec::new() };
        // Looked at before they are killed: what held them.
        let stuck = if cut_short { ranks.describe_running(&never_connected) } else { Vec::new() };
        let unstarted: Vec<u32> = never_connected
            .iter()
            .copied()
            .filter(|&r| ranks.0.get(r as usize).is_some_and(|k| k.status.is_none() && !reached_exec(&k.exec_watch)))
            .collect();
        let (killed, unreaped) = if cut_short { ranks.kill_rest(&hub)? } else { (Vec::new(), Vec::new()) };
        if cut_short {
            watchdog.sweep_when_dropped();
        }
        // A rank that exited by itself just before (not reaped yet) had not
        // connected either, but was not lost that way.
        let never_connected = never_connected.into_iter().filter(|r| killed.contains(r)).collect();
        let unstarted = unstarted.into_iter().filter(|r| killed.contains(r)).collect();
        let oob_failure = hub.failure();
        drop(hub);
        let status = ranks
            .0
            .iter()
            .map(|r| r.status.unwrap_or_else(|| ExitStatus::from_raw(-1)))
            .chain(not_started.iter().map(|_| stopped_by))
            .collect();
        Ok(Report {
            status,
            killed,
            never_connected,
            unstarted,
            not_started,
            unreaped,
            stuck,
            timed_out,
            timeout: self.timeout,
            abandoned,
            abort_after: self.abort_after,
            interrupted,
            elapsed: start.elapsed(),
            oob_failure,
        })
    }
}

#[derive(Debug)]
struct Rank {
    child: Child,
    status: Option<ExitStatus>,
    /// The read end of a close-on-exec pipe whose write end only the child holds.
    exec_watch: OwnedFd,
}

/// Whether a child has reached `exec` (or ended), by the pipe it was started
/// with: its copy of the write end, close-on-exec, was the last one, so the
/// pipe reads as ended once that happened. A child stuck between fork and
/// exec (an emulated launcher's fork deadlocked) still holds it.
fn reached_exec(exec_watch: &OwnedFd) -> bool {
    let mut byte = [0u8; 1];
    // Non-blocking: `EAGAIN` while a writer is left; 0 bytes once none is.
    !matches!(rustix::io::read(exec_watch, &mut byte), Err(rustix::io::Errno::AGAIN))
}

/// Why [`Ranks::wait`] returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ended {
    /// Every rank exited.
    AllExited,
    /// The launch's timeout passed.
    Deadline,
    /// The grace after rank `failed` failed passed.
    Abandoned { failed: u32 },
    /// The grace after the launcher's first signal passed.
    Signalled,
    /// The launcher got a second signal.
    SignalledAgain,
}

/// What started the grace after which the ranks still running are killed.
#[derive(Clone, Copy, Debug)]
enum Abort {
    Failed(u32),
    Signalled,
}

/// The ranks killed, and those of them not reaped as (rank, pid).
type Reaped = (Vec<u32>, Vec<(u32, u32)>);

/// The children; dropping it kills and reaps any still running, so no
/// early return leaves a rank behind.
#[derive(Debug)]
struct Ranks(Vec<Rank>);

impl Ranks {
    /// Reaps ranks as they exit until all have, `deadline` passes, `grace`
    /// passes after the first rank that failed or after the first signal
    /// `caught`, or a second signal comes; the first signal (and whether it
    /// was passed on to the ranks still running) comes with why it returned.
    /// Whether the first was sent to the launcher's whole process group, the
    /// ranks included, the `watchdog` (in that group) tells.
    fn wait(
        &mut self,
        hub: &Hub,
        deadline: Option<Instant>,
        grace: Option<Duration>,
        caught: Option<&Caught>,
        watchdog: &Watchdog,
    ) -> io::Result<(Ended, Option<(i32, bool)>)> {
        let mut pause = Duration::from_millis(1);
        let mut abort: Option<(Abort, Instant)> = None;
        // The first signal, from a terminal or not, and when it was seen.
        let mut first: Option<(Signal, bool, Instant)> = None;
        // The first signal, once it is known whether the ranks got it.
        let mut signal: Option<(Signal, bool)> = None;
        let ended = loop {
            if let Some(got) = caught.map(Caught::received)
                && got.count > 0
            {
                if first.is_some() && got.count > 1 {
                    break Ended::SignalledAgain;
                }
                if first.is_none() {
                    let now = Instant::now();
                    first = Some((got.last, got.from_terminal, now));
                    let at = grace.and_then(|g| now.checked_add(g));
                    if let Some(at) = at.filter(|&at| abort.is_none_or(|(_, sooner)| at < sooner)) {
                        abort = Some((Abort::Signalled, at));
                    }
                }
            }
            if let Some((sig, from_terminal, seen)) = first
                && signal.is_none()
            {
                // Not twice: a Python rank would raise again in its cleanup.
                let to_group = from_terminal || watchdog.got(sig);
                if to_group || seen.elapsed() >= SETTLE {
                    signal = Some((sig, !to_group));
                    if !to_group {
                        self.signal_running(sig);
                    }
                }
            }
            let mut running = 0;
            for (rank, r) in (0..).zip(self.0.iter_mut()) {
                if r.status.is_some() {
                    continue;
                }
                match r.child.try_wait()? {
                    Some(s) => {
                        r.status = Some(s);
                        hub.rank_ended(rank, r.child.id(), s);
                        pause = Duration::from_millis(1);
                        if !s.success() && abort.is_none() {
                            abort =
                                grace.and_then(|g| Instant::now().checked_add(g)).map(|at| (Abort::Failed(rank), at));
                        }
                    }
                    None => running += 1,
                }
            }
            if running == 0 {
                break Ended::AllExited;
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| d <= now) {
                break Ended::Deadline;
            }
            match abort.filter(|&(_, at)| at <= now) {
                Some((Abort::Failed(failed), _)) => break Ended::Abandoned { failed },
                Some((Abort::Signalled, _)) => break Ended::Signalled,
                None => {}
            }
            let next = [deadline, abort.map(|(_, at)| at)].into_iter().flatten().min();
            let left = next.map_or(MAX_POLL, |d| d.saturating_duration_since(now));
            std::thread::sleep(pause.min(left));
            pause = (pause * 2).min(MAX_POLL);
        };
        // A second signal before the first was passed on: it was not.
        let signal = signal.or(first.map(|(s, ..)| (s, false)));
        Ok((ended, signal.map(|(s, passed_on)| (s.as_raw(), passed_on))))
    }

    /// The pids of the ranks still running.
    fn running(&self) -> Vec<u32> {
        self.0.iter().filter(|r| r.status.is_none()).map(|r| r.child.id()).collect()
    }

    /// Passes `signal` on to every rank still running, with what it started.
    fn signal_running(&self, signal: Signal) {
        crate::tree::signal_trees(&self.running(), signal);
    }

    /// What every rank still running is doing, from `/proc`, marking those
    /// in `never_connected`.
    fn describe_running(&self, never_connected: &[u32]) -> Vec<String> {
        let running = (0..).zip(&self.0).filter(|(_, r)| r.status.is_none()).map(|(rank, _)| rank);
        running
            .zip(crate::tree::describe(&self.running()))
            .map(|(rank, what)| {
                let note = if never_connected.contains(&rank) { " (never connected)" } else { "" };
                format!("rank {rank}{note}: {what}")
            })
            .collect()
    }

    /// Kills (all at once) and reaps every rank still running; returns the
    /// ranks that died of it (a rank may exit by itself meanwhile, e.g. on
    /// hearing from the hub that a killed peer is gone), and those that did
    /// not die within [`REAP_BOUND`] (see [`Ranks::reap_within`]).
    fn kill_rest(&mut self, hub: &Hub) -> io::Result<Reaped> {
        // With what they started (a wrapper's program); one that exited
        // meanwhile is reaped below either way.
        crate::tree::kill_trees(&self.running());
        self.reap_within(Some(hub), REAP_BOUND, Child::try_wait)
    }

    /// Reaps the ranks still running, just sent `SIGKILL`, with `try_wait`,
    /// for `bound` at most: a rank in uninterruptible sleep dies only when it
    /// wakes, and the launcher must not wait for ever. Returns the ranks that
    /// died of `SIGKILL`, those among them not reaped in time as (rank,
    /// pid): they read as killed, and init reaps them once the launcher is
    /// gone.
    fn reap_within(
        &mut self,
        hub: Option<&Hub>,
        bound: Duration,
        mut try_wait: impl FnMut(&mut Child) -> io::Result<Option<ExitStatus>>,
    ) -> io::Result<Reaped> {
        let until = Instant::now() + bound;
        let mut pause = Duration::from_millis(1);
        let mut killed = Vec::new();
        loop {
            for (rank, r) in (0..).zip(self.0.iter_mut()) {
                if r.status.is_some() {
                    continue;
                }
                if let Some(status) = try_wait(&mut r.child)? {
                    r.status = Some(status);
                    if let Some(hub) = hub {
                        hub.rank_ended(rank, r.child.id(), status);
                    }
                    if status.signal() == Some(libc::SIGKILL) {
                        killed.push(rank);
                    }
                }
            }
            if self.0.iter().all(|r| r.status.is_some()) || Instant::now() >= until {
                break;
            }
            std::thread::sleep(pause.min(until.saturating_duration_since(Instant::now())));
            pause = (pause * 2).min(MAX_POLL);
        }
        let mut unreaped = Vec::new();
        for (rank, r) in (0..).zip(self.0.iter_mut()).filter(|(_, r)| r.status.is_none()) {
            let status = ExitStatus::from_raw(libc::SIGKILL);
            r.status = Some(status);
            if let Some(hub) = hub {
                hub.rank_ended(rank, r.child.id(), status);
            }
            killed.push(rank);
            unreaped.push((rank, r.child.id()));
        }
        killed.sort_unstable();
        Ok((killed, unreaped))
    }
}

impl Drop for Ranks {
    fn drop(&mut self) {
        crate::tree::kill_trees(&self.running());
        let _ = self.reap_within(None, REAP_BOUND, Child::try_wait);
    }
}

/// How a launch ended.
#[non_exhaustive]
#[derive(Clone, Debug)]
pub struct Report {
    /// Every rank's exit status, in rank order (see `not_started` and
    /// `unreaped` for those that have none of their own).
    pub status: Vec<ExitStatus>,
    /// The ranks the launcher killed (`SIGKILL`): at the timeout, or at the
    /// end of the grace after a failure.
    pub killed: Vec<u32>,
    /// The ranks killed without having connected to the launcher (at the
    /// timeout, or after the grace): stuck before their first out-of-band
    /// call, or never started.
    pub never_connected: Vec<u32>,
    /// Those of them whose process never reached `exec` (of the program, or
    /// of the runner in front of it): still the launcher's forked copy, as
    /// an emulated launcher's fork can leave it.
    pub unstarted: Vec<u32>,
    /// The ranks never started: the launcher got a signal (see
    /// [`Launch::forward_signals`]) while it started the ranks, and started
    /// no more. Their status reads as killed by that signal.
    pub not_started: Vec<u32>,
    /// The ranks killed that had not died 10 s later, as (rank, pid): in
    /// uninterruptible sleep (a hung file system). The launcher did not wait
    /// for them; their status reads as killed (`SIGKILL`).
    pub unreaped: Vec<(u32, u32)>,
    /// What each rank still running was doing then, before it was killed,
    /// from `/proc`: `rank 2 (never connected): pid 812 qemu-aarch64 [qemu-aarch64
    /// -L aarch64-linux-gnu prog] (S in futex_wait_queue, 3 threads)`, with
    /// the processes it started after `>`.
    pub stuck: Vec<String>,
    /// Whether the timeout expired before every rank had exited.
    pub timed_out: bool,
    /// The timeout the launch had.
    pub timeout: Option<Duration>,
    /// The failed rank after which the ranks still running were killed,
    /// [`Launch::abort_after`] later (they are in `killed`).
    pub abandoned: Option<u32>,
    /// The grace the launch had after a failure.
    pub abort_after: Option<Duration>,
    /// The signal the launcher got, if any (see [`Launch::forward_signals`]).
    pub interrupted: Option<Interrupted>,
    /// From the start of the hub to the last rank reaped.
    pub elapsed: Duration,
    /// The first failure the hub reported to the ranks (ranks that disagreed
    /// on a collective, or a rank that left while others needed it).
    pub oob_failure: Option<String>,
}

impl Report {
    /// Whether every rank exited with code 0 (so none was killed).
    pub fn success(&self) -> bool {
        self.status.iter().all(ExitStatus::success)
    }

    /// The lowest rank that did not exit with code 0, and its status.
    pub fn first_failure(&self) -> Option<(u32, ExitStatus)> {
        (0..).zip(&self.status).find(|(_, s)| !s.success()).map(|(r, s)| (r, *s))
    }

    /// A shell-style exit code for the job: 0 on success, else the exit
    /// code of the rank that failed first (the one after which the others
    /// were killed, else the lowest that failed), or 128 + the signal that
    /// killed it; 128 + the launcher's signal if it got one and every rank
    /// exited 0.
    pub fn exit_code(&self) -> i32 {
        let abandoned_by = self.abandoned.and_then(|r| self.status.get(r as usize)).copied();
        match abandoned_by.or_else(|| self.first_failure().map(|(_, s)| s)) {
            Some(s) => shell_code(s),
            None => self.interrupted.map_or(0, |i| 128 + i.signal),
        }
    }
}

/// The signal a launcher got (see [`Launch::forward_signals`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interrupted {
    /// The first signal.
    pub signal: i32,
    /// Whether the launcher passed it on to the ranks: not when it was sent
    /// to the launcher's whole process group (a terminal's Ctrl-C, `kill
    /// -TERM -PGID`), which the ranks got it from too.
    pub passed_on: bool,
    /// Whether a second one came (and killed the ranks still running).
    pub again: bool,
}

fn shell_code(s: ExitStatus) -> i32 {
    s.code().or_else(|| s.signal().map(|sig| 128 + sig)).unwrap_or(255)
}

/// One line: the ranks that failed and how, the timeout, the hub's failure.
impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.status.len();
        let failed: Vec<(u32, ExitStatus)> = (0..)
            .zip(&self.status)
            .filter(|(r, s)| !s.success() && !self.not_started.contains(r))
            .map(|(r, s)| (r, *s))
            .collect();
        if failed.is_empty() && self.not_started.is_empty() {
            write!(f, "all {n} ranks exited 0")?;
        } else if failed.is_empty() {
            write!(f, "the {} ranks started of {n} exited 0", n - self.not_started.len())?;
        } else {
            write!(f, "{} of {n} ranks failed (", failed.len())?;
            for (i, (rank, s)) in failed.iter().enumerate() {
                let sep = if i == 0 { "" } else { ", " };
                match (s.code(), s.signal()) {
                    (Some(c), _) => write!(f, "{sep}rank {rank}: exit {c}")?,
                    (None, Some(_)) if self.killed.contains(rank) => {
                        match (self.abandoned, self.interrupted, self.abort_after) {
                            (Some(first), _, Some(g)) => {
                                write!(f, "{sep}rank {rank}: killed {:.3}s after rank {first} failed", g.as_secs_f64())?
                            }
                            (None, Some(Interrupted { signal, again: true, .. }), _) => {
                                write!(f, "{sep}rank {rank}: killed at the launcher's second signal {signal}")?
                            }
                            (None, Some(Interrupted { signal, .. }), Some(g)) if !self.timed_out => write!(
                                f,
                                "{sep}rank {rank}: killed {:.3}s after the launcher got signal {signal}",
                                g.as_secs_f64()
                            )?,
                            _ => write!(f, "{sep}rank {rank}: killed at timeout")?,
                        }
                    }
                    (None, Some(sig)) => write!(f, "{sep}rank {rank}: signal {sig}")?,
                    (None, None) => write!(f, "{sep}rank {rank}: {s}")?,
                }
            }
            write!(f, ")")?;
        }
        write!(f, " in {:.3}s", self.elapsed.as_secs_f64())?;
        if let (true, Some(t)) = (self.timed_out, self.timeout) {
            write!(f, "; timed out after {:.3}s", t.as_secs_f64())?;
        }
        match self.interrupted {
            Some(Interrupted { signal, passed_on: true, .. }) => {
                write!(f, "; the launcher got signal {signal} and passed it on to the ranks")?
            }
            Some(Interrupted { signal, passed_on: false, .. }) => {
                write!(f, "; the launcher and the ranks got signal {signal}, sent to their process group")?
            }
            None => {}
        }
        if let (Some(first), Some(last)) = (self.not_started.first(), self.not_started.last()) {
            let signal = self.interrupted.map_or(String::new(), |i| format!(" signal {}", i.signal));
            write!(f, "; ranks {first} to {last} not started: the launcher got{signal} while starting them")?;
        }
        for (rank, pid) in &self.unreaped {
            let bound = REAP_BOUND.as_secs_f64();
            write!(
                f,
                "; rank {rank} (pid {pid}) did not die within {bound:.3}s of SIGKILL, left unreaped (uninterruptible sleep?)"
            )?;
        }
        if !self.never_connected.is_empty() {
            write!(f, "; ranks {:?} never connected to the launcher", self.never_connected)?;
            if !self.unstarted.is_empty() {
                write!(f, " ({:?} never reached exec)", self.unstarted)?;
            }
        }
        if !self.stuck.is_empty() {
            write!(f, "; before the kill: {}", self.stuck.join("; "))?;
        }
        if let Some(why) = &self.oob_failure {
            write!(f, "; out-of-band: {why}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_is_seen_once_no_copy_of_the_mark_is_left() {
        let (watch, mark) = rustix::pipe::pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK).unwrap();
        // A copy still held (a child between fork and exec holds one).
        assert!(!reached_exec(&watch));
        // A child that execs drops its inherited copy; then the last is ours.
        let mut child = Command::new("sleep").arg("5").spawn().unwrap();
        assert!(!reached_exec(&watch));
        drop(mark);
        // The kernel closes the child's copy a moment after it lets a
        // vfork-style parent go on: look again for a while.
        let start = Instant::now();
        while !reached_exec(&watch) && start.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(reached_exec(&watch));
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// Ending a job whose ranks are all stuck takes a fixed number of looks
    /// at `/proc` (to describe them, then to kill them with what they
    /// started), not a few per rank: 512 ranks took 6 s to end at their
    /// timeout, and the time grew with the square of their number.
    #[test]
    fn ending_many_ranks_looks_at_proc_a_few_times_not_once_per_rank() {
        const N: u32 = 8;
        let hub = Hub::bind(N).unwrap();
        let mut ranks = Ranks(Vec::new());
        for _ in 0..N {
            let (exec_watch, _) = rustix::pipe::pipe().unwrap();
            let child = Command::new("sleep").arg("60").stdin(Stdio::null()).spawn().unwrap();
            ranks.0.push(Rank { child, status: None, exec_watch });
        }
        let looks = || crate::tree::tests::LOOKS.with(std::cell::Cell::get);
        let before = looks();
        let stuck = ranks.describe_running(&[]);
        let (killed, _) = ranks.kill_rest(&hub).unwrap();
        assert_eq!((stuck.len(), killed.len()), (N as usize, N as usize));
        assert!(stuck[3].starts_with("rank 3: pid ") && stuck[3].contains("sleep"), "{stuck:?}");
        assert!(looks() - before <= 3, "{} looks at /proc for {N} ranks", looks() - before);
    }

    /// A rank that does not die of `SIGKILL` (in uninterruptible sleep on a
    /// hung file system; here a reaper that never sees it end) holds the
    /// launcher `bound` at most, then is reported by rank and pid as killed.
    /// Before, `kill_rest` waited for it for ever.
    #[test]
    fn a_rank_that_does_not_die_of_sigkill_is_reported_not_waited_for() {
        let hub = Hub::bind(3).unwrap();
        let mut ranks = Ranks(Vec::new());
        for _ in 0..3 {
            let (exec_watch, _) = rustix::pipe::pipe().unwrap();
            let child = Command::new("sleep").arg("60").stdin(Stdio::null()).spawn().unwrap();
            ranks.0.push(Rank { child, status: None, exec_watch });
        }
        let stuck = ranks.0[1].child.id();
        crate::tree::kill_trees(&ranks.running());
        let bound = Duration::from_millis(300);
        let started = Instant::now();
        let never_ends = |c: &mut Child| if c.id() == stuck { Ok(None) } else { c.try_wait() };
        let (killed, unreaped) = ranks.reap_within(Some(&hub), bound, never_ends).unwrap();
        let took = started.elapsed();
        assert!(took >= bound && took < bound + Duration::from_secs(5), "took {took:?}");
        assert_eq!((killed, unreaped), (vec![0, 1, 2], vec![(1, stuck)]));
        assert_eq!(ranks.0[1].status.and_then(|s| s.signal()), Some(libc::SIGKILL));
        // Really reaped here: the test leaves no zombie.
        assert_eq!(ranks.0[1].child.wait().unwrap().signal(), Some(libc::SIGKILL));
        let report = Report { unreaped: vec![(1, 812)], ..report(&[-9, -9, -9], &[0, 1, 2]) };
        assert_eq!(report.exit_code(), 128 + libc::SIGKILL);
        assert!(
            report.to_string().ends_with(
                "; rank 1 (pid 812) did not die within 10.000s of SIGKILL, left unreaped (uninterruptible sleep?)"
            ),
            "{report}"
        );
    }

    /// Ranks never started (the launcher got a signal while starting them)
    /// are named once, as a range, not as failures each; the job's code is
    /// the signal's.
    #[test]
    fn ranks_never_started_are_one_note() {
        let interrupted = Some(Interrupted { signal: 2, passed_on: false, again: false });
        let cut = Report { not_started: vec![2, 3], interrupted, ..report(&[-2, 0, -2, -2], &[]) };
        assert_eq!(cut.exit_code(), 130);
        let text = cut.to_string();
        assert!(text.starts_with("1 of 4 ranks failed (rank 0: signal 2) in "), "{text}");
        assert!(text.contains("; ranks 2 to 3 not started: the launcher got signal 2 while starting them"), "{text}");
        let handled = Report { not_started: vec![2, 3], interrupted, ..report(&[0, 0, -2, -2], &[]) };
        assert_eq!(handled.exit_code(), 130);
        assert!(handled.to_string().starts_with("the 2 ranks started of 4 exited 0 in "), "{handled}");
    }

    fn report(codes: &[i32], killed: &[u32]) -> Report {
        // Wait statuses: exit code c is c << 8, death by signal s is s.
        let status = codes.iter().map(|&c| ExitStatus::from_raw(if c < 0 { -c } else { c << 8 })).collect();
        Report {
            status,
            killed: killed.to_vec(),
            never_connected: Vec::new(),
            unstarted: Vec::new(),
            not_started: Vec::new(),
            unreaped: Vec::new(),
            stuck: Vec::new(),
            timed_out: !killed.is_empty(),
            timeout: Some(Duration::from_secs(5)),
            abandoned: None,
            abort_after: Some(DEFAULT_ABORT_AFTER),
            interrupted: None,
            elapsed: Duration::from_millis(1500),
            oob_failure: None,
        }
    }

    #[test]
    fn exit_code_is_the_first_failing_rank() {
        assert_eq!(report(&[0, 0], &[]).exit_code(), 0);
        assert!(report(&[0, 0], &[]).success());
        assert_eq!(report(&[0, 3, 4], &[]).exit_code(), 3);
        assert_eq!(report(&[0, -9, 4], &[1]).exit_code(), 137);
        assert_eq!(report(&[0, 3, 4], &[]).first_failure().map(|(r, _)| r), Some(1));
    }

    #[test]
    fn exit_code_is_the_failure_the_others_were_killed_after() {
        // Rank 0 froze, rank 1 failed, rank 0 was killed after the grace:
        // the job failed of rank 1's exit 3, not of the launcher's SIGKILL.
        let abandoned = Report { timed_out: false, abandoned: Some(1), ..report(&[-9, 3], &[0]) };
        assert_eq!(abandoned.exit_code(), 3);
        let interrupted = Interrupted { signal: 15, passed_on: true, again: false };
        let handled = Report { interrupted: Some(interrupted), ..report(&[0, 0], &[]) };
        assert_eq!(handled.exit_code(), 128 + 15, "ranks that handled the signal and exited 0");
        assert!(handled.to_string().ends_with("; the launcher got signal 15 and passed it on to the ranks"));
    }

    #[test]
    fn summary_is_one_line() {
        let s = report(&[0, 3, -9], &[2]).to_string();
        assert_eq!(
            s,
            "2 of 3 ranks failed (rank 1: exit 3, rank 2: killed at timeout) in 1.500s; timed out after 5.000s"
        );
        assert_eq!(report(&[0], &[]).to_string(), "all 1 ranks exited 0 in 1.500s");
        let abandoned = Report { timed_out: false, abandoned: Some(1), ..report(&[-9, 3], &[0]) };
        assert_eq!(
            abandoned.to_string(),
            "2 of 2 ranks failed (rank 0: killed 10.000s after rank 1 failed, rank 1: exit 3) in 1.500s"
        );
        let stuck = Report { never_connected: vec![2], ..report(&[0, 0, -9], &[2]) };
        assert!(stuck.to_string().ends_with("; ranks [2] never connected to the launcher"), "{stuck}");
        let seen = Report { stuck: vec!["rank 2 (never connected): pid 7 qemu-aarch64 (S)".into()], ..stuck };
        assert!(
            seen.to_string().ends_with("launcher; before the kill: rank 2 (never connected): pid 7 qemu-aarch64 (S)")
        );
    }
}
