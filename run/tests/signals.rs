//! What becomes of the ranks when `kpccl-run` itself is killed or told to
//! stop: none may outlive it (a batch system's `SIGTERM`, a test harness's
//! timeout `SIGKILL`, a closed terminal's `SIGHUP`).
#![allow(missing_docs, clippy::std_instead_of_core)]

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const RUN: &str = env!("CARGO_BIN_EXE_kpccl-run");
/// Generous for a test, short enough that a bug fails instead of hanging.
const BOUND: Duration = Duration::from_secs(10);

/// The processes whose parent is `parent`, from `/proc`.
fn children_of(parent: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        let ppid = stat.rfind(')').and_then(|i| stat[i + 1..].split_whitespace().nth(1)?.parse::<u32>().ok());
        if ppid == Some(parent) {
            found.push(pid);
        }
    }
    found
}

/// Whether `pid` still runs (a zombie has ended).
fn runs(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rfind(')').map(|i| s[i + 1..].trim_start().starts_with('Z')))
        .is_some_and(|zombie| !zombie)
}

/// `kpccl-run` through the target runner (qemu, for aarch64); its ranks,
/// host programs here, through none.
fn launcher() -> Command {
    let mut cmd = kpccl_posix::launch::runner::command(RUN);
    cmd.env("KPCCL_RUNNER", "");
    cmd
}

/// Whether process `pid` was started with `entry` (`NAME=value`) in its environment.
fn has_env(pid: u32, entry: &str) -> bool {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
    environ.split(|&b| b == 0).any(|e| e == entry.as_bytes())
}

/// The ranks among the launcher's children (its watchdog is one too), once
/// they run the program: their environment names their rank.
fn ranks_of(launcher: u32) -> Vec<u32> {
    let rank = |pid: u32| (0..2).any(|r| has_env(pid, &format!("KPCCL_RANK={r}")));
    children_of(launcher).into_iter().filter(|&p| rank(p)).collect()
}

/// `kpccl-run -n 2 extra… -- rank…`, and the ranks' pids once both started.
#[allow(clippy::zombie_processes)] // returned: every caller waits for it
fn start(extra: &[&str], rank: &[&str]) -> (Child, Vec<u32>) {
    let mut launcher = launcher()
        .args(["-n", "2"])
        .args(extra)
        .arg("--")
        .args(rank)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    loop {
        let ranks = ranks_of(launcher.id());
        if ranks.len() == 2 {
            // Let each reach `exec` (and a wrapper start its child).
            std::thread::sleep(Duration::from_millis(200));
            return (launcher, ranks);
        }
        if started.elapsed() > BOUND {
            let _ = launcher.kill();
            let _ = launcher.wait();
            panic!("the ranks did not start");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits until none of `pids` runs; the ones still running after [`BOUND`]
/// are killed (so that the test leaves nothing) and returned.
fn survivors(pids: &[u32]) -> Vec<u32> {
    let started = Instant::now();
    while pids.iter().any(|&p| runs(p)) && started.elapsed() < BOUND {
        std::thread::sleep(Duration::from_millis(10));
    }
    let left: Vec<u32> = pids.iter().copied().filter(|&p| runs(p)).collect();
    for &p in &left {
        // SAFETY: a plain kill(2) of a process this test started (through the launcher).
        unsafe { libc::kill(i32::try_from(p).unwrap(), libc::SIGKILL) };
    }
    left
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: a plain kill(2) of the launcher this test started and has not reaped.
    assert_eq!(unsafe { libc::kill(i32::try_from(child.id()).unwrap(), sig) }, 0);
}

#[test]
fn a_launcher_killed_outright_takes_its_ranks_with_it() {
    let (mut launcher, ranks) = start(&[], &["sleep", "60"]);
    signal(&launcher, libc::SIGKILL);
    launcher.wait().unwrap();
    assert_eq!(survivors(&ranks), Vec::<u32>::new(), "ranks left running after the launcher was killed");
}

/// The kernel kills each rank with its launcher, but only orphans what a
/// rank started (`sh -c 'sleep 60; :'` runs `sleep` as the shell's child):
/// the launcher's watchdog kills that. Before, the sleeps ran on.
#[test]
fn a_launcher_killed_outright_takes_what_its_ranks_started_with_it() {
    // `; :` keeps the shell from replacing itself with the sleep.
    let (mut launcher, ranks) = start(&[], &["sh", "-c", "sleep 60; :"]);
    let started = Instant::now();
    let mut grandchildren = Vec::new();
    while grandchildren.len() < 2 && started.elapsed() < BOUND {
        std::thread::sleep(Duration::from_millis(10));
        grandchildren = ranks.iter().flat_map(|&r| children_of(r)).collect();
    }
    signal(&launcher, libc::SIGKILL);
    launcher.wait().unwrap();
    assert_eq!(grandchildren.len(), 2, "each shell started its sleep");
    assert_eq!(survivors(&ranks), Vec::<u32>::new(), "ranks left running");
    assert_eq!(survivors(&grandchildren), Vec::<u32>::new(), "what the ranks started outlived the launcher");
}

/// A launcher that ends its job itself sends its watchdog away, reaped, and
/// the watchdog kills nothing: a process a rank left running on purpose stays.
#[test]
fn a_job_that_ends_leaves_no_watchdog_and_keeps_what_a_rank_left_running() {
    let tag = format!("KPCCL_TEST_WATCHDOG={}-{:?}", std::process::id(), Instant::now());
    let (name, value) = tag.split_once('=').unwrap();
    let out = launcher()
        .args(["-n", "1", "--", "sh", "-c", "sleep 30 > /dev/null 2>&1 & echo $!"])
        .env(name, value)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let left: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    let kept = runs(left);
    let tagged: Vec<u32> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&p| p != left && runs(p) && has_env(p, &tag))
        .collect();
    // SAFETY: a plain kill(2) of the sleep this test's rank started.
    unsafe { libc::kill(i32::try_from(left).unwrap(), libc::SIGKILL) };
    assert!(kept, "the watchdog killed a process a rank left running on purpose");
    assert_eq!(tagged, Vec::<u32>::new(), "processes of the launcher left after it ended (its watchdog?)");
}

/// A job the launcher cuts short (here its `--timeout`) loses what its ranks
/// started, even a process a rank had orphaned, which no process tree holds:
/// the watchdog sweeps the job. Before, the orphan ran on.
#[test]
fn a_job_cut_short_takes_what_its_ranks_orphaned_with_it() {
    // The subshell starts the sleep, says its pid and exits: the sleep is an
    // orphan before the job ends.
    let rank = "(sleep 60 > /dev/null 2>&1 & echo $!); exec sleep 60";
    let out = launcher()
        .args(["-n", "2", "--timeout", "3", "--", "sh", "-c", rank])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success(), "{out:?}");
    let orphans: Vec<u32> =
        String::from_utf8_lossy(&out.stdout).lines().filter_map(|l| l.trim().parse().ok()).collect();
    assert_eq!(orphans.len(), 2, "each rank started its orphan: {out:?}");
    assert_eq!(survivors(&orphans), Vec::<u32>::new(), "what the ranks orphaned outlived a job cut short");
}

#[test]
fn a_terminated_launcher_ends_its_ranks_reports_and_exits_with_the_signal() {
    for sig in [libc::SIGTERM, libc::SIGHUP, libc::SIGINT] {
        let (launcher, ranks) = start(&[], &["sleep", "60"]);
        let started = Instant::now();
        signal(&launcher, sig);
        let out = launcher.wait_with_output().unwrap();
        assert_eq!(survivors(&ranks), Vec::<u32>::new(), "signal {sig}: ranks left running");
        assert!(started.elapsed() < BOUND / 2, "signal {sig}: took {:?}", started.elapsed());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(128 + sig), "signal {sig}: {}; {stderr}", out.status);
        assert!(stderr.contains(&format!("the launcher got signal {sig}")), "signal {sig}: {stderr}");
    }
}

#[test]
fn ranks_that_ignore_the_forwarded_signal_are_killed_after_the_grace_or_a_second_signal() {
    // `trap '' TERM` makes the shell and the sleep it starts ignore SIGTERM.
    let rank = ["sh", "-c", "trap '' TERM; sleep 60; :"];
    let (launcher, ranks) = start(&["--abort-after", "0.3"], &rank);
    ignoring(&ranks, libc::SIGTERM);
    let started = Instant::now();
    signal(&launcher, libc::SIGTERM);
    let out = launcher.wait_with_output().unwrap();
    assert!(started.elapsed() < BOUND / 2, "took {:?}", started.elapsed());
    assert_eq!(survivors(&ranks), Vec::<u32>::new());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("killed 0.300s after the launcher got signal 15"), "{stderr}");
    assert_eq!(out.status.code(), Some(128 + libc::SIGKILL), "{stderr}");

    let (launcher, ranks) = start(&["--abort-after", "never"], &rank);
    ignoring(&ranks, libc::SIGTERM);
    signal(&launcher, libc::SIGTERM);
    std::thread::sleep(Duration::from_millis(300));
    assert!(ranks.iter().all(|&p| runs(p)), "the ranks ignore SIGTERM");
    signal(&launcher, libc::SIGTERM);
    let out = launcher.wait_with_output().unwrap();
    assert_eq!(survivors(&ranks), Vec::<u32>::new());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("killed at the launcher's second signal 15"), "{stderr}");
}

/// Whether process `pid` ignores `sig`, from `/proc/<pid>/status`.
fn ignores(pid: u32, sig: i32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let mask = status.lines().find_map(|l| l.strip_prefix("SigIgn:")).map(str::trim).unwrap_or("0");
    u64::from_str_radix(mask, 16).unwrap_or(0) & (1 << (sig - 1)) != 0
}

/// Waits until every one of `pids` ignores `sig` (a shell rank has run its
/// `trap`): a signal sent before would end it, which is not what the test
/// checks. A fixed pause was not enough on a loaded machine.
fn ignoring(pids: &[u32], sig: i32) {
    let started = Instant::now();
    while !pids.iter().all(|&p| ignores(p, sig)) {
        assert!(started.elapsed() < BOUND, "the ranks did not come to ignore signal {sig} within {BOUND:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `nohup kpccl-run … &`, then the terminal closes: a launcher started
/// ignoring `SIGHUP` keeps ignoring it, and so do its ranks, as any
/// program's children would. Before, it caught the hang-up, passed it on to
/// ranks that no longer ignored it, and the job died.
#[test]
fn a_signal_the_launcher_was_started_ignoring_stays_ignored_by_it_and_the_ranks() {
    use std::os::unix::process::CommandExt;
    let mut cmd = launcher();
    cmd.args(["-n", "2", "--", "sleep", "60"]).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let like_nohup = || {
        // SAFETY: sets a disposition to `SIG_IGN`, as `nohup` does.
        unsafe { libc::signal(libc::SIGHUP, libc::SIG_IGN) };
        Ok(())
    };
    // SAFETY: the closure runs in the child before exec: one system call.
    unsafe { cmd.pre_exec(like_nohup) };
    let mut launcher = cmd.spawn().unwrap();
    let started = Instant::now();
    let mut ranks = ranks_of(launcher.id());
    while ranks.len() < 2 && started.elapsed() < BOUND {
        std::thread::sleep(Duration::from_millis(10));
        ranks = ranks_of(launcher.id());
    }
    let ranks_ignore = ranks.len() == 2 && ranks.iter().all(|&r| ignores(r, libc::SIGHUP));
    signal(&launcher, libc::SIGHUP);
    std::thread::sleep(Duration::from_millis(300));
    let ran_on = launcher.try_wait().unwrap().is_none() && ranks.iter().all(|&r| runs(r));
    if ran_on {
        signal(&launcher, libc::SIGTERM);
    }
    let out = launcher.wait_with_output().unwrap();
    assert_eq!(survivors(&ranks), Vec::<u32>::new());
    let stderr = String::from_utf8_lossy(&out.stderr);
    // qemu-user keeps a guest's ignored signals in its own table, and its
    // host handler for them is reset at exec: under it the ranks cannot
    // inherit what the (emulated) launcher ignores.
    let inherits = kpccl_posix::launch::runner::from_env().is_empty();
    assert!(ranks_ignore || !inherits, "the ranks do not ignore SIGHUP as their launcher was started to: {stderr}");
    assert!(ran_on, "a SIGHUP the launcher was started ignoring ended the job: {stderr}");
    assert_eq!(out.status.code(), Some(128 + libc::SIGTERM), "{stderr}");
}

/// A pseudo-terminal: (master, slave).
fn pty() -> (std::fs::File, std::os::fd::OwnedFd) {
    use std::os::fd::FromRawFd;
    let (mut master, mut slave) = (-1, -1);
    // SAFETY: openpty writes two descriptors into the locals; the name,
    // termios and window-size arguments may be NULL.
    let rc = unsafe {
        libc::openpty(&raw mut master, &raw mut slave, std::ptr::null_mut(), std::ptr::null(), std::ptr::null())
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: just opened, owned by nobody else.
    let master = unsafe { std::fs::File::from_raw_fd(master) };
    // SAFETY: as above.
    let slave = unsafe { std::os::fd::OwnedFd::from_raw_fd(slave) };
    (master, slave)
}

/// Ctrl-C at a terminal: the kernel sends `SIGINT` to the terminal's
/// foreground process group, the launcher and its ranks alike. The launcher
/// must not pass it on a second time (a Python rank would raise again in
/// its cleanup); it reports and ends the ranks that stay after the grace.
#[test]
fn a_terminals_ctrl_c_reaches_each_rank_once() {
    use std::io::Write;
    use std::os::unix::process::CommandExt;

    // Removed however the test ends.
    let scratch = kpccl_testkit::ScratchDir::under(&std::env::temp_dir(), "ctrl-c", "signals");
    let dir = scratch.path();
    let d = dir.display();
    // Each rank counts the SIGINTs it gets, after saying that it is ready.
    let script =
        format!("trap 'echo >> {d}/int.$KPCCL_RANK' INT; : > {d}/ready.$KPCCL_RANK; while :; do sleep 0.02; done");
    let (mut terminal, slave) = pty();
    let mut cmd = launcher();
    cmd.args(["-n", "2", "--abort-after", "0.5", "--", "sh", "-c", &script])
        .stdin(Stdio::from(slave))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: in the child before exec, two system calls, no allocation: a
    // session of its own whose controlling terminal is the pseudo-terminal
    // (its stdin).
    unsafe {
        cmd.pre_exec(|| {
            rustix::process::setsid()?;
            rustix::process::ioctl_tiocsctty(std::io::stdin())?;
            Ok(())
        });
    }
    let launcher = cmd.spawn().unwrap();
    let started = Instant::now();
    while !(0..2).all(|r| dir.join(format!("ready.{r}")).exists()) {
        assert!(started.elapsed() < BOUND, "the ranks did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
    terminal.write_all(b"\x03").unwrap();
    let out = launcher.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    for r in 0..2 {
        let got = std::fs::read_to_string(dir.join(format!("int.{r}"))).unwrap_or_default();
        assert_eq!(got.lines().count(), 1, "rank {r}'s SIGINTs; {stderr}");
    }
    assert!(stderr.contains("the launcher and the ranks got signal 2, sent to their process group"), "{stderr}");
    assert!(stderr.contains("killed 0.500s after the launcher got signal 2"), "{stderr}");
}

/// A launcher of two ranks that each count the `SIGTERM`s they get, in
/// `dir`, through `wrap` (words before the launcher's, such as `timeout`),
/// and in a process group of its own; the ranks are killed 0.5 s after the
/// launcher's first signal. Returns once both ranks are ready.
fn counting_terms(dir: &std::path::Path, wrap: &[&str]) -> Child {
    use std::os::unix::process::CommandExt;
    let d = dir.display();
    let script =
        format!("trap 'echo >> {d}/term.$KPCCL_RANK' TERM; : > {d}/ready.$KPCCL_RANK; while :; do sleep 0.02; done");
    let inner = launcher();
    let mut cmd = Command::new(wrap.first().map_or(inner.get_program(), |w| std::ffi::OsStr::new(w)));
    cmd.args(wrap.iter().skip(1));
    if !wrap.is_empty() {
        cmd.arg(inner.get_program());
    }
    cmd.args(inner.get_args())
        .env("KPCCL_RUNNER", "")
        .args(["-n", "2", "--abort-after", "0.5", "--", "sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let launcher = cmd.spawn().unwrap();
    let started = Instant::now();
    while !(0..2).all(|r| dir.join(format!("ready.{r}")).exists()) {
        assert!(started.elapsed() < BOUND, "the ranks did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
    launcher
}

/// Whether the launcher runs under an emulator (qemu-user keeps its guests'
/// pending signals to itself: the launcher cannot see that its watchdog got
/// a signal sent to the process group, and passes it on as before).
fn emulated() -> bool {
    let emulated = !kpccl_posix::launch::runner::from_env().is_empty();
    if emulated {
        eprintln!("skipped: the launcher runs under an emulator");
    }
    emulated
}

/// How many `SIGTERM`s each rank of [`counting_terms`] got.
fn terms(dir: &std::path::Path) -> Vec<usize> {
    (0..2).map(|r| std::fs::read_to_string(dir.join(format!("term.{r}"))).unwrap_or_default().lines().count()).collect()
}

/// Runs [`counting_terms`] through `wrap` in a scratch directory named by
/// `tag`, signals it with `send`, and checks that each rank got one
/// `SIGTERM`; the launcher's exit code and stderr, or `None` under an
/// emulator (see [`emulated`]).
fn each_rank_terms_once(tag: &str, wrap: &[&str], send: impl FnOnce(&Child)) -> Option<(Option<i32>, String)> {
    if emulated() {
        return None;
    }
    let scratch = kpccl_testkit::ScratchDir::under(&std::env::temp_dir(), tag, "signals");
    let launcher = counting_terms(scratch.path(), wrap);
    send(&launcher);
    let out = launcher.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(terms(scratch.path()), [1, 1], "each rank's SIGTERMs; {stderr}");
    Some((out.status.code(), stderr))
}

/// `kill -TERM -PGID`: the launcher and the ranks, in its process group,
/// get the signal from the sender. The launcher must not pass it on again
/// (before, each rank got it twice), and still ends the ranks after the grace.
#[test]
fn a_signal_to_the_launchers_process_group_reaches_each_rank_once() {
    let Some((_, stderr)) = each_rank_terms_once("group-term", &[], |launcher| {
        // SAFETY: a plain kill(2) of the process group of the launcher this test started.
        assert_eq!(unsafe { libc::kill(-i32::try_from(launcher.id()).unwrap(), libc::SIGTERM) }, 0);
    }) else {
        return;
    };
    assert!(stderr.contains("the launcher and the ranks got signal 15, sent to their process group"), "{stderr}");
    assert!(stderr.contains("killed 0.500s after the launcher got signal 15"), "{stderr}");
}

/// GNU `timeout` signals its child, then its whole process group: the
/// launcher gets the one request twice. Before, it took the second for a
/// second signal and killed the ranks at once, without their grace, and had
/// passed the signal on to ranks that got it from the group as well.
#[test]
fn gnu_timeouts_signal_is_one_request_that_reaches_each_rank_once() {
    if Command::new("timeout").arg("--version").output().is_err() {
        eprintln!("skipped: no timeout(1)");
        return;
    }
    // Long enough for the ranks to be ready (they are waited for first).
    let Some((code, stderr)) = each_rank_terms_once("timeout-term", &["timeout", "-s", "TERM", "2"], |_| {}) else {
        return;
    };
    assert_eq!(code, Some(124), "timeout's code for a timed-out command; {stderr}");
    assert!(stderr.contains("killed 0.500s after the launcher got signal 15"), "{stderr}");
    assert!(!stderr.contains("second signal"), "{stderr}");
}

/// `killall kpccl-run` (or `pkill kpccl-run`): every process named
/// `kpccl-run` of this job gets the signal. Before, the watchdog bore the
/// launcher's name and got it too, so the launcher took it for a signal to
/// the whole group, already at the ranks, and did not pass it on: the ranks
/// never heard of it, and were killed after the grace.
#[test]
fn a_signal_to_the_launcher_by_name_is_passed_on_to_each_rank_once() {
    let Some((_, stderr)) = each_rank_terms_once("name-term", &[], |launcher| {
        let job = [vec![launcher.id()], children_of(launcher.id())].concat();
        let named =
            |pid: &u32| std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "kpccl-run");
        for pid in job.iter().filter(|p| named(p)) {
            // SAFETY: a plain kill(2) of a process of the job this test started.
            assert_eq!(unsafe { libc::kill(i32::try_from(*pid).unwrap(), libc::SIGTERM) }, 0);
        }
    }) else {
        return;
    };
    assert!(stderr.contains("the launcher got signal 15 and passed it on to the ranks"), "{stderr}");
}

/// A launcher started with `SIGCHLD` ignored (a disposition its parent set,
/// which survives `exec`: a daemon, a Python `signal(SIGCHLD, SIG_IGN)`)
/// still waits for its ranks and exits with their code; the ranks start
/// with the default. Before, the kernel reaped the ranks itself, and every
/// job failed with "No child processes" (exit 1), whatever the ranks did.
#[test]
fn a_launcher_started_ignoring_sigchld_still_reports_its_ranks() {
    use std::os::unix::process::CommandExt;
    let mut cmd = launcher();
    // Rank 1 reports whether it ignores SIGCHLD (bit 17 of its SigIgn mask).
    let rank = "grep -q '^SigIgn:.*[13579bdf]....$' /proc/self/status && exit 9; exit $((KPCCL_RANK * 3))";
    cmd.args(["-n", "2", "--", "sh", "-c", rank]).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let ignore_sigchld = || {
        // SAFETY: sets a disposition to `SIG_IGN`; no handler runs.
        unsafe { libc::signal(libc::SIGCHLD, libc::SIG_IGN) };
        Ok(())
    };
    // SAFETY: the closure runs in the child before exec: one system call.
    unsafe { cmd.pre_exec(ignore_sigchld) };
    let started = Instant::now();
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(started.elapsed() < BOUND, "took {:?}: {stderr}", started.elapsed());
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.starts_with("kpccl-run: 1 of 2 ranks failed (rank 1: exit 3)"), "{stderr}");
}

/// Waits up to [`BOUND`] for `launcher` to end; if it does not, kills its
/// process group (the launcher, its ranks and its watchdog) and fails.
fn ended_within_bound(mut launcher: Child, what: &str) -> std::process::Output {
    let started = Instant::now();
    while launcher.try_wait().unwrap().is_none() {
        if started.elapsed() > BOUND {
            // SAFETY: a plain kill(2) of the process group of the launcher this test started.
            unsafe { libc::kill(-i32::try_from(launcher.id()).unwrap(), libc::SIGKILL) };
            let out = launcher.wait_with_output().unwrap();
            panic!("{what}: the launcher still ran after {BOUND:?}; {}", String::from_utf8_lossy(&out.stderr));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    launcher.wait_with_output().unwrap()
}

/// Ctrl-C while the launcher is still starting its ranks: the terminal's
/// `SIGINT` reaches the launcher and the ranks started so far. The launcher
/// starts no more (before, it started the rest, which never got the signal
/// and, with `--abort-after never`, ran on for ever) and ends with 130.
#[test]
fn a_group_signal_while_the_ranks_start_ends_every_rank() {
    use std::os::unix::process::CommandExt;
    if emulated() {
        return;
    }
    const N: usize = 256;
    let n = N.to_string();
    let launcher = launcher()
        .args(["-n", &n, "--abort-after", "never", "--", "sleep", "60"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    // Soon after the start: the watchdog and two ranks run.
    let started = Instant::now();
    while children_of(launcher.id()).len() < 3 {
        assert!(started.elapsed() < BOUND, "the ranks did not start");
        std::thread::sleep(Duration::from_millis(1));
    }
    // SAFETY: a plain kill(2) of the process group of the launcher this test started.
    assert_eq!(unsafe { libc::kill(-i32::try_from(launcher.id()).unwrap(), libc::SIGINT) }, 0);
    let pid = launcher.id();
    let out = ended_within_bound(launcher, "a SIGINT while starting");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(children_of(pid), Vec::<u32>::new(), "{stderr}");
    assert_eq!(out.status.code(), Some(128 + libc::SIGINT), "{stderr}");
    assert!(stderr.contains("signal 2"), "{stderr}");
}

/// `pkill -f kpccl-run` matches every process whose command line holds
/// `kpccl-run`. The watchdog's must not (before, it was the launcher's): a
/// `pkill -9 -f` killed the watchdog with the launcher, so what the ranks
/// started ran on, and a plain `pkill -f` (`SIGTERM`) reached the watchdog
/// too, so the launcher took it for a signal to its whole group and did not
/// pass it on.
#[test]
fn pkill_f_kpccl_run_reaches_the_launcher_and_not_its_watchdog() {
    if emulated() {
        return;
    }
    // A pattern only this job's launcher (and watchdog) match: the
    // command line holds `kpccl-run` before a word unique to this test.
    let tag = format!("pkill-{}-{}", std::process::id(), std::time::UNIX_EPOCH.elapsed().unwrap().as_nanos());
    let pattern = format!("kpccl-run .*{tag}");
    let pkill = |sig: &str| {
        let status = Command::new("pkill").args([sig, "-f", &pattern]).status().unwrap();
        assert!(status.success(), "pkill {sig} -f {pattern}: {status}");
    };
    // `; :` keeps the shell from replacing itself with the sleep; `$0` is the tag.
    let (mut launcher, ranks) = start(&[], &["sh", "-c", "sleep 60; :", &tag]);
    let watchdog: Vec<u32> = children_of(launcher.id()).into_iter().filter(|p| !ranks.contains(p)).collect();
    assert_eq!(watchdog.len(), 1, "the launcher's one other child");
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", watchdog[0])).unwrap();
    let shown = String::from_utf8_lossy(&cmdline).replace('\0', " ");
    let started = Instant::now();
    let mut grandchildren = Vec::new();
    while grandchildren.len() < 2 && started.elapsed() < BOUND {
        std::thread::sleep(Duration::from_millis(10));
        grandchildren = ranks.iter().flat_map(|&r| children_of(r)).collect();
    }
    pkill("-KILL");
    launcher.wait().unwrap();
    assert_eq!(grandchildren.len(), 2, "each shell started its sleep");
    assert_eq!(survivors(&ranks), Vec::<u32>::new(), "ranks left running");
    assert_eq!(survivors(&grandchildren), Vec::<u32>::new(), "what the ranks started outlived the launcher");
    assert_eq!(survivors(&watchdog), Vec::<u32>::new(), "the watchdog outlived its sweep");
    assert!(!shown.contains("kpccl-run"), "the watchdog's command line: {shown}");

    // A plain `pkill -f`: the launcher alone gets it, and passes it on.
    let Some((_, stderr)) = each_rank_terms_once(&tag, &[], |_| pkill("-TERM")) else { return };
    assert!(stderr.contains("the launcher got signal 15 and passed it on to the ranks"), "{stderr}");
}
