//! The `kpccl-run` binary end to end: its exit code, its summary, its usage
//! errors, `--list` and the sweep after a rank killed by a signal. The ranks
//! are this test binary again, running the ignored test [`rank`] (through
//! the target runner, as the launcher starts every program).
#![allow(missing_docs, clippy::std_instead_of_core)]

use std::ffi::OsString;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use kpccl_posix::Oob;
use kpccl_run::{RunOob, code};
use kpccl_testkit::Solo;

const RUN: &str = env!("CARGO_BIN_EXE_kpccl-run");
/// No run here may take longer (the launcher kills what is left).
const BOUND: Duration = Duration::from_secs(20);
/// Set for the ranks: what [`rank`] does.
const MODE: &str = "KPCCL_CLI_TEST_MODE";

/// `kpccl-run -n N --timeout SECS -- <this binary, running [`rank`] in mode>`.
fn ranks(n: &str, secs: &str, mode: &str, envs: &[(&str, &std::ffi::OsStr)]) -> Output {
    let exe = std::env::current_exe().unwrap().to_string_lossy().into_owned();
    let args =
        ["-n", n, "--timeout", secs, "--", &exe, "--exact", "rank", "--ignored", "--nocapture", "--test-threads=1"];
    let mut envs = envs.to_vec();
    envs.push((MODE, mode.as_ref()));
    kpccl_run_with(&args, &envs)
}

/// One rank: an allgather and a barrier, after rank 1 exits early
/// (`die-early`) or aborts (`killed`), or rank 0 sleeps (`hang`). Exits with
/// 0 if they succeed in mode `ok`, 3 if they fail with the launcher's
/// `RANK_LOST`, 1 or 4 otherwise; a survivor prints what the launcher said
/// of the lost rank.
#[test]
#[ignore = "a rank program for the other tests, started by kpccl-run"]
fn rank() {
    let mode = std::env::var(MODE).expect("run by the tests of this file only");
    let oob = RunOob::from_env().expect("the hub answers").expect("started by kpccl-run");
    let rank = oob.rank();
    match (mode.as_str(), rank) {
        ("die-early", 1) => {
            println!("rank 1: exiting before the allgather");
            std::process::exit(0);
        }
        ("killed", 1) => std::process::abort(),
        ("hang", 0) => std::thread::sleep(Duration::from_secs(60)),
        _ => {}
    }
    let mut all = vec![0u8; 4 * oob.nranks() as usize];
    let done = oob.allgather(&rank.to_le_bytes(), &mut all).and_then(|()| oob.barrier());
    let exit = match done {
        Ok(()) if mode == "ok" && all.chunks_exact(4).zip(0u32..).all(|(c, r)| c == r.to_le_bytes()) => 0,
        Ok(()) => 1,
        Err(e) => {
            if let Some(d) = oob.departure() {
                println!("rank {rank}: {}", d.during("the probe"));
            }
            if e.code == code::RANK_LOST { 3 } else { 4 }
        }
    };
    std::process::exit(exit);
}

/// `kpccl-run` itself, through the target runner as `Launch` would.
fn kpccl_run(args: &[&str]) -> Output {
    kpccl_run_with(args, &[])
}

/// The command line that starts `kpccl-run`: through the target runner if
/// any (qemu, when the tests run for aarch64 on another machine).
fn kpccl_run_words() -> Vec<OsString> {
    let runner = std::env::var_os("KPCCL_RUNNER").or_else(|| {
        if cfg!(target_arch = "aarch64") {
            std::env::var_os("CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER")
        } else {
            None
        }
    });
    let mut words: Vec<OsString> =
        runner.map(|r| r.to_string_lossy().split_whitespace().map(OsString::from).collect()).unwrap_or_default();
    words.push(RUN.into());
    words
}

/// `kpccl-run args…` with `envs` set, through the target runner if any.
fn kpccl_run_with(args: &[&str], envs: &[(&str, &std::ffi::OsStr)]) -> Output {
    let words = kpccl_run_words();
    let start = Instant::now();
    let out = Command::new(&words[0])
        .args(&words[1..])
        .args(args)
        .env("KPCCL_OOB_TIMEOUT_MS", "10000")
        .envs(envs.iter().copied())
        .output()
        .unwrap();
    assert!(start.elapsed() < BOUND, "kpccl-run {args:?} took {:?}", start.elapsed());
    out
}

/// A summary nobody reads (stderr a pipe whose reader left, as in
/// `kpccl-run ... 2>&1 | head -1`) changes nothing: the exit code is the
/// failing rank's, not a panic's 101.
#[test]
fn a_closed_stderr_leaves_the_exit_code_to_the_ranks() {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let words = kpccl_run_words();
    let exe = std::env::current_exe().unwrap();
    let status = Command::new(&words[0])
        .args(&words[1..])
        .args(["-n", "3", "--timeout", "20", "--"])
        .arg(exe)
        .args(["--exact", "rank", "--ignored", "--nocapture", "--test-threads=1"])
        .env(MODE, "die-early")
        .env("KPCCL_OOB_TIMEOUT_MS", "10000")
        .stdout(std::process::Stdio::null())
        .stderr(writer)
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(3));
}

#[test]
fn kpccl_run_exits_like_its_first_failing_rank() {
    let ok = ranks("4", "20", "ok", &[]);
    assert_eq!(ok.status.code(), Some(0), "{ok:?}");
    assert!(ok.stderr.is_empty(), "a summary only on failure: {ok:?}");

    let died = ranks("3", "20", "die-early", &[]);
    assert_eq!(died.status.code(), Some(3), "{died:?}");
    let err = String::from_utf8_lossy(&died.stderr);
    assert!(err.starts_with("kpccl-run: 2 of 3 ranks failed (rank 0: exit 3, rank 2: exit 3)"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    let out = String::from_utf8_lossy(&died.stdout);
    assert!(out.contains("rank 1: exiting before the allgather"), "the ranks' stdout is passed through: {out}");

    let hung = ranks("2", "0.3", "hang", &[]);
    assert_eq!(hung.status.code(), Some(128 + 9), "{hung:?}");
}

/// `kpccl-run` run from a path that is not UTF-8 (an install directory
/// named in Latin-1) works, and its commands take such directories. Before,
/// it panicked (exit 101) reading its own arguments.
#[test]
fn kpccl_run_takes_words_that_are_not_utf8() {
    use std::os::unix::ffi::OsStrExt as _;
    use std::os::unix::process::CommandExt as _;
    let words = kpccl_run_words();
    let latin1 = std::ffi::OsStr::from_bytes(b"/opt/caf\xe9/bin/kpccl-run");
    let run = |args: &[&std::ffi::OsStr]| {
        let mut cmd = Command::new(&words[0]);
        if words.len() == 1 {
            cmd.arg0(latin1);
        }
        // The rank, `true`, is a host program: through no runner.
        cmd.args(&words[1..]).args(args).env("KPCCL_RUNNER", "").output().unwrap()
    };
    let ok = run(&["-n".as_ref(), "1".as_ref(), "--".as_ref(), "true".as_ref()]);
    assert_eq!(ok.status.code(), Some(0), "{ok:?}");
    let dir = std::ffi::OsStr::from_bytes(b"/nonexistent-\xe9");
    for command in ["--sweep", "--list"] {
        let out = run(&[command.as_ref(), dir]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{command}: {out:?}");
        assert!(stderr.contains("/nonexistent-\u{fffd}: No such file"), "{command}: {stderr}");
    }
}

#[test]
fn kpccl_run_usage_errors_exit_2() {
    for args in [
        &[][..],
        &["--", "true"],
        &["-n", "0", "--", "true"],
        &["-n", "100000", "--", "true"],
        &["-n", "2", "--frobnicate", "true"],
        // Before, the second directory (or the flag) was ignored, or swept as a directory.
        &["--sweep", "/nonexistent/kpccl-a", "/nonexistent/kpccl-b"],
        &["--sweep", "--remove-stale"],
    ] {
        let out = kpccl_run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("usage: kpccl-run"), "{args:?}");
    }
}

#[test]
fn kpccl_run_says_its_version() {
    for flag in ["--version", "-V"] {
        let out = kpccl_run(&[flag]);
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{flag}: {out:?}");
        let protocol = kpccl_posix::launch::wire::VERSION;
        let want = format!("kpccl-run {} (launcher protocol {protocol})", env!("CARGO_PKG_VERSION"));
        assert_eq!(said.trim(), want, "{flag}");
    }
}

/// A directory `/dev/shm/kpccl-<tag>-<pid>` of this test's, and the name in
/// it of a segment of this user's whose creator is dead (pid 2^22 + 1 is
/// above Linux's pid_max: never a live process), with serial `serial`.
fn dir_and_dead_name(tag: &str, serial: u64) -> (std::path::PathBuf, std::path::PathBuf) {
    let dir = std::path::PathBuf::from(format!("/dev/shm/kpccl-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    let name = dir.join(format!("kpccl-{uid}-{}-5-{serial:016x}", (1 << 22) + 1));
    (dir, name)
}

/// A rank killed by a signal is named, with the signal, to the others; and
/// kpccl-run then sweeps the segment directory (here, of a dead creator's
/// leftover planted for it: no window was made).
#[test]
fn a_killed_rank_is_named_with_its_signal_and_kpccl_run_sweeps_after_it() {
    let (dir, dead) = dir_and_dead_name("runsweep", 7);
    let foreign = dir.join("kpccl-not-a-segment");
    std::fs::write(&dead, b"x").unwrap();
    std::fs::write(&foreign, b"x").unwrap();
    let out = ranks("3", "20", "killed", &[("KPCCL_SHM_DIR", dir.as_os_str())]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let swept = !dead.exists();
    let kept = foreign.exists();
    std::fs::remove_dir_all(&dir).unwrap();
    // Rank 0 is the first failing rank: it got the expected error (3).
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert!(stdout.contains("rank 1 died during the probe (pid "), "{stdout}");
    assert!(stdout.contains(&format!("signal {})", libc::SIGABRT)), "{stdout}");
    assert!(swept && kept, "swept the dead creator's name: {swept}, kept the stranger: {kept}");
}

/// `kpccl-run --list` shows this process's live window (unlinked, found in
/// its memory map) and a stale name planted beside it, and
/// `--remove-stale` removes the stale one only.
#[test]
fn kpccl_run_lists_live_and_stale_segments_and_removes_the_stale_only() {
    use kpccl_core::layout::shared::{Header, MAGIC};

    let (dir, stale) = dir_and_dead_name("runlist", 9);
    let config = kpccl_posix::Config { shm_dir: dir.clone(), ..kpccl_posix::Config::default() };
    let comm = kpccl_posix::Comm::builder(Solo, 0, 1).config(config).build().unwrap();
    let win = comm.window(8192).alloc().unwrap();
    let mut header = vec![0u8; size_of::<Header>()];
    header[..8].copy_from_slice(&MAGIC.to_ne_bytes());
    let at = core::mem::offset_of!(Header, nranks);
    header[at..at + 4].copy_from_slice(&3u32.to_ne_bytes());
    std::fs::write(&stale, &header).unwrap();

    let d = dir.to_string_lossy().into_owned();
    let listed = kpccl_run(&["--list", &d]);
    let removed = kpccl_run(&["--list", "--remove-stale", &d]);
    let gone = !stale.exists();
    let still = win.fence();
    drop(win);
    std::fs::remove_dir_all(&dir).unwrap();

    let text = String::from_utf8_lossy(&listed.stdout);
    assert_eq!(listed.status.code(), Some(0), "{listed:?}");
    let me = std::process::id().to_string();
    let live = text.lines().find(|l| l.starts_with("live")).unwrap_or_else(|| panic!("no live segment:\n{text}"));
    let cols: Vec<&str> = live.split_whitespace().collect();
    // STATE CREATOR ALIVE RANKS SIZE(2 words) AGE ATTACHED SEGMENT
    assert_eq!((cols[1], cols[2], cols[3]), (me.as_str(), "yes", "1"), "{live}");
    assert!(cols[7].split(',').any(|p| p == me) && cols[8].starts_with(&d), "{live}");
    let old = text.lines().find(|l| l.starts_with("stale")).unwrap_or_else(|| panic!("no stale segment:\n{text}"));
    let cols: Vec<&str> = old.split_whitespace().collect();
    assert_eq!((cols[2], cols[3], cols[7]), ("no", "3", "-"), "{old}");
    assert!(text.contains("2 segment(s) in ") && text.contains(", 1 stale"), "{text}");
    assert_eq!(removed.status.code(), Some(0), "{removed:?}");
    assert!(gone, "the stale name is still there: {removed:?}");
    assert!(still.is_ok(), "the live window was disturbed: {still:?}");
}

/// `kpccl-run --list` as an unprivileged user runs it: without
/// CAP_SYS_ADMIN / CAP_CHECKPOINT_RESTORE, `/proc/PID/map_files/*` cannot be
/// opened, so a nameless (`#<inode>`) window's header is read through the
/// descriptor its process holds (`/proc/PID/fd/N`), which the same user may
/// open.
#[test]
fn kpccl_run_lists_a_live_nameless_window_without_cap_sys_admin() {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 || std::process::Command::new("setpriv").arg("--version").output().is_err() {
        eprintln!("needs root and setpriv to drop the capabilities");
        return;
    }
    let dir = std::path::PathBuf::from(format!("/dev/shm/kpccl-runlist-nocap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = kpccl_posix::Config { shm_dir: dir.clone(), ..kpccl_posix::Config::default() };
    let comm = kpccl_posix::Comm::builder(Solo, 0, 1).config(config).build().unwrap();
    let win = comm.window(8192).alloc().unwrap();
    let d = dir.to_string_lossy().into_owned();
    let privileged = kpccl_run(&["--list", &d]);
    // Same uid (root may still ptrace-read its own processes), no CAP_SYS_ADMIN.
    let unprivileged = std::process::Command::new("setpriv")
        .args(["--bounding-set=-sys_admin,-checkpoint_restore", "--inh-caps=-all"])
        .args(kpccl_run_words())
        .args(["--list", &d])
        .output()
        .unwrap();
    drop(win);
    std::fs::remove_dir_all(&dir).unwrap();
    let with = String::from_utf8_lossy(&privileged.stdout).into_owned();
    let without = String::from_utf8_lossy(&unprivileged.stdout).into_owned();
    assert!(with.lines().any(|l| l.starts_with("live")), "privileged listing:\n{with}");
    assert!(
        without.lines().any(|l| l.starts_with("live")),
        "the live window vanished from the unprivileged listing:\n{without}\n(privileged:\n{with})\n{unprivileged:?}"
    );
}

/// `kpccl-run --list` never blocks on what stands under a segment's name,
/// even while a regular file and a FIFO keep swapping places there (a FIFO
/// opened to read waits for a writer): the file is opened without blocking
/// and judged by what was opened. Before, 14 of 60 listings hung so.
#[test]
fn kpccl_run_list_never_blocks_on_a_fifo() {
    let (dir, name) = dir_and_dead_name("runlist-fifo", 9);
    let (file, fifo) = (dir.join("file.tmp"), dir.join("fifo.tmp"));
    let fifo_c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    let stop = std::sync::Arc::new(kpccl_core::sync::AtomicU32::new(0));
    let swapper = {
        let (stop, name) = (std::sync::Arc::clone(&stop), name.clone());
        std::thread::spawn(move || {
            // Relaxed: a stop flag, publishing nothing else.
            while stop.load(kpccl_core::sync::Ordering::Relaxed) == 0 {
                let _ = std::fs::write(&file, b"");
                let _ = std::fs::rename(&file, &name);
                // SAFETY: a NUL-terminated path.
                unsafe { libc::mkfifo(fifo_c.as_ptr(), 0o600) };
                let _ = std::fs::rename(&fifo, &name);
            }
        })
    };
    let words = kpccl_run_words();
    let blocked = (0..20)
        .filter(|_| {
            let mut child = Command::new(&words[0])
                .args(&words[1..])
                .arg("--list")
                .arg(&dir)
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap();
            kpccl_testkit::wait_or_kill(&mut child, Duration::from_secs(3)).is_none()
        })
        .count();
    // Relaxed: as above; the join orders the rest.
    stop.store(1, kpccl_core::sync::Ordering::Relaxed);
    swapper.join().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(blocked, 0, "kpccl-run --list blocked on a FIFO");
}

/// `kpccl-run --help` says what a user needs without the sources: every
/// option, the exit status, examples. Before, the exit codes were only in
/// the rustdoc of `main.rs`, and `-np` was not an option.
#[test]
fn kpccl_run_help_states_the_options_and_the_exit_status() {
    let out = kpccl_run(&["--help"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let help = String::from_utf8_lossy(&out.stdout);
    for option in
        ["-n N, -np N, --nranks N", "--timeout", "--abort-after", "--bind-to", "--sweep", "--list", "--version"]
    {
        assert!(help.contains(option), "{option} is not explained:\n{help}");
    }
    let status = help.split("Exit status:").nth(1).unwrap_or_else(|| panic!("no exit status:\n{help}"));
    for said in ["0 if every rank exited 0", "128+S", "137", "130", "127", "126", "2 for a usage error"] {
        assert!(status.contains(said), "the exit status does not say {said:?}:\n{help}");
    }
    assert!(help.contains("Examples:\n  kpccl-run -n 4 "), "{help}");
}

/// `kpccl-run -np N`, as MPI users type it, runs N ranks. Before: "-n p:
/// not a rank count", exit 2.
#[test]
fn kpccl_run_takes_np_as_mpirun_does() {
    let words = kpccl_run_words();
    // The rank, a host shell, goes through no runner; it says its rank count.
    let out = Command::new(&words[0])
        .args(&words[1..])
        .args(["-np", "3", "--", "sh", "-c", "echo \"$KPCCL_NRANKS\""])
        .env("KPCCL_RUNNER", "")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "3\n3\n3\n");
    let bad = kpccl_run(&["-np", "x", "--", "true"]);
    assert_eq!(bad.status.code(), Some(2), "{bad:?}");
    assert!(String::from_utf8_lossy(&bad.stderr).starts_with("kpccl-run: -np x: not a rank count\n"), "{bad:?}");
}
