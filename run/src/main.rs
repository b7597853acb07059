//! `kpccl-run -n N [--timeout SECS] -- program [args...]` (`-np N` too): runs `N` ranks of
//! a program whose out-of-band collectives go through this launcher
//! (`RunOob::from_env` in the program), for users
//! without MPI.
//!
//! The ranks inherit stdout and stderr (rank 0 also stdin). The exit code
//! is 0 if every rank exited 0, else the exit code of the rank after whose
//! failure the others were killed, or else of the lowest failing rank (a
//! rank killed at `--timeout` included), 128 + the signal for a rank killed
//! by one, with a one-line summary on stderr; 128 + the launcher's signal if
//! every rank still exited 0;
//! 127/126 if the program cannot be started, 2 for a usage error. Once a
//! rank fails, the ranks still running `--abort-after` seconds later (10 by
//! default) are killed, so a frozen rank cannot hold the job. When a rank
//! dies of a signal, the launcher sweeps the segment directory afterwards
//! (as `--sweep` does). `SIGINT`, `SIGTERM` or `SIGHUP` to the launcher is
//! passed on to the ranks, which are killed `--abort-after` seconds later
//! (at once on a second signal), unless kpccl-run was started ignoring it
//! (`nohup`): then it stays ignored, by the ranks too. The ranks, and what
//! they started, die with the launcher however it ends.
#![allow(clippy::std_instead_of_core)]

use std::ffi::{OsStr, OsString};
use std::io;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use kpccl_run::{Binding, DEFAULT_ABORT_AFTER, Launch, parse_rank_count};

const USAGE: &str = "\
usage: kpccl-run -n N [--timeout SECS] [--abort-after SECS|never] [--bind-to cpu|none] [--] program [args...]
       kpccl-run --sweep [DIR]
       kpccl-run --list [--remove-stale] [DIR]
       kpccl-run --version | --help";

/// The rest of `--help`.
const HELP: &str = "\
Runs N ranks of a program, connected through KPCCL_RANK, KPCCL_NRANKS and KPCCL_RUN_SOCKET:
the program joins with RunOob::from_env (Rust), kpccl_run_oob (C) or kpccl.Comm.from_env()
(Python). Rank 0 reads stdin; every rank writes to kpccl-run's stdout and stderr.

  -n N, -np N, --nranks N
                   the number of ranks, 1 to 1024 (required)
  --timeout SECS   kill every rank still running SECS seconds after the start (default: none)
  --abort-after SECS|never
                   once a rank fails (exit code not 0, or a signal), kill every rank still
                   running SECS seconds later (default 10: time for the others to report the
                   failure themselves, as mpirun aborts a job when a rank fails); never: let
                   them run
  --bind-to cpu|none
                   cpu: run rank r on one logical CPU, the r-th of those kpccl-run may use
                   (wrapping around when the ranks outnumber them), as mpirun --bind-to
                   hwthread; none (default): wherever kpccl-run may run
  --               ends the options: the next word is the program
  --sweep [DIR]    remove the segments of dead creators from DIR (default: KPCCL_SHM_DIR,
                   else /dev/shm)
  --list [--remove-stale] [DIR]
                   the kpccl segments of this node, live and stale: creator pid and liveness,
                   rank count, size, age, attached pids; --remove-stale then removes the stale
  -V, --version    the version and the launcher protocol
  -h, --help       this help

SECS may have a fraction (0.5). SIGINT, SIGTERM or SIGHUP to kpccl-run is passed on to the
ranks; those still running --abort-after seconds later are killed (at once on a second signal).

Exit status:
  0 if every rank exited 0. Else the exit code of the rank after whose failure the others
  were killed (--abort-after), or else of the lowest rank that failed; a rank killed by
  signal S counts as 128+S (137: killed by --timeout or --abort-after, 130: Ctrl-C).
  128+S if kpccl-run got signal S and every rank exited 0. 127 if the program is not found,
  126 if it cannot be executed, 1 if the job cannot start otherwise or --sweep or --list
  fails, 2 for a usage error.

Examples:
  kpccl-run -n 4 ./my-program --size 4096
  kpccl-run -np 8 --timeout 600 --bind-to cpu -- python3 train.py
  kpccl-run --list --remove-stale

Read by kpccl-run:
  KPCCL_RUNNER          words put in front of the program (qemu-aarch64 -L ...), split on spaces

Read by the ranks:
  KPCCL_OOB_TIMEOUT_MS  how long an out-of-band collective (communicator or window creation)
                        waits for the other ranks, in ms (default 60000); then it fails on every
                        rank, naming the rank that did not come. KPCCL_TIMEOUT_MS, when set and
                        shorter, bounds it too (it bounds every wait of the library).
  KPCCL_SHM_DIR         the segment directory (default /dev/shm); swept after a rank dies of a signal";

/// `println!` that a closed stdout does not turn into a panic (exit code
/// 101): `kpccl-run --list | head -1` still ends as it should.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// `eprintln!` that a closed stderr does not turn into a panic: the exit
/// code tells how the job went even when nobody reads the summary
/// (`kpccl-run ... 2>&1 | head`).
macro_rules! say_err {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// What the command line asks for.
#[derive(Debug)]
struct Args {
    nranks: u32,
    timeout: Option<Duration>,
    abort_after: Option<Duration>,
    binding: Binding,
    program: OsString,
    args: Vec<OsString>,
}

fn main() -> ExitCode {
    // `args_os`: `args` panics on a word that is not UTF-8, even the
    // program's own path (an install directory named in Latin-1).
    let first = std::env::args_os().nth(1);
    if matches!(first.as_deref().and_then(OsStr::to_str), Some("--version" | "-V")) {
        say!("kpccl-run {} (launcher protocol {})", env!("CARGO_PKG_VERSION"), kpccl_posix::launch::wire::VERSION);
        return ExitCode::SUCCESS;
    }
    if first.as_deref() == Some(OsStr::new("--sweep")) {
        let dirs: Vec<OsString> = std::env::args_os().skip(2).collect();
        // Not the first of several silently: the user meant them all.
        if dirs.len() > 1 || dirs.iter().any(|d| d.as_encoded_bytes().starts_with(b"-")) {
            say_err!("kpccl-run: --sweep takes one directory at most\n{USAGE}");
            return ExitCode::from(2);
        }
        return sweep(dirs.first().map(PathBuf::from));
    }
    if first.as_deref() == Some(OsStr::new("--list")) {
        let rest: Vec<OsString> = std::env::args_os().skip(2).collect();
        let remove = rest.iter().any(|a| a == "--remove-stale");
        let dirs: Vec<&OsString> = rest.iter().filter(|a| *a != "--remove-stale").collect();
        if dirs.len() > 1 || dirs.iter().any(|d| d.as_encoded_bytes().starts_with(b"-")) {
            say_err!("kpccl-run: --list takes [--remove-stale] and one directory at most\n{USAGE}");
            return ExitCode::from(2);
        }
        return list(dirs.first().map(PathBuf::from), remove);
    }
    let args = match parse(std::env::args_os().skip(1)) {
        Ok(Some(a)) => a,
        Ok(None) => {
            say!("{USAGE}\n\n{HELP}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            say_err!("kpccl-run: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let mut launch = Launch::new(args.nranks).abort_after(args.abort_after).binding(args.binding).forward_signals(true);
    if let Some(t) = args.timeout {
        launch = launch.timeout(t);
    }
    match launch.run(&args.program, &args.args) {
        Ok(report) if report.exit_code() == 0 => ExitCode::SUCCESS,
        Ok(report) => {
            say_err!("kpccl-run: {report}");
            if report.status.iter().any(|s| std::os::unix::process::ExitStatusExt::signal(s).is_some()) {
                // Window creation removes names at once, but a killed rank of an
                // older version (or a crash in the microseconds before) may leave one.
                let _ = kpccl_posix::sweep(&shm_dir(None));
            }
            ExitCode::from(u8::try_from(report.exit_code()).unwrap_or(255))
        }
        Err(e) => {
            say_err!("kpccl-run: {e}");
            ExitCode::from(match e.kind() {
                io::ErrorKind::NotFound => 127,
                io::ErrorKind::PermissionDenied => 126,
                _ => 1,
            })
        }
    }
}

/// Parses the arguments after the program name; `Ok(None)` for `--help`.
fn parse(argv: impl IntoIterator<Item = OsString>) -> Result<Option<Args>, String> {
    let mut argv = argv.into_iter();
    let (mut nranks, mut timeout, mut abort_after) = (None, None, Some(DEFAULT_ABORT_AFTER));
    let mut binding = Binding::None;
    let program = loop {
        let Some(arg) = argv.next() else { return Err("no program given".into()) };
        let Some(s) = arg.to_str() else { break arg };
        // `--flag=V`, and `-nN` / `-npN` as `-n` has always taken its value.
        let (flag, inline) = match s.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_owned())),
            _ if s.starts_with("-np") && s.len() > 3 => ("-np", Some(s[3..].to_owned())),
            _ if s.starts_with("-n") && s.len() > 2 && s != "-np" => ("-n", Some(s[2..].to_owned())),
            _ => (s, None),
        };
        let mut value = |name: &str| match inline.clone() {
            Some(v) => Ok(v),
            None => argv.next().and_then(|v| v.into_string().ok()).ok_or(format!("{name} needs a value")),
        };
        match flag {
            "-h" | "--help" => return Ok(None),
            // `-np`: what MPI users type (mpirun -np N).
            "-n" | "-np" | "--nranks" => {
                // Checked here, not only by the launcher, so that it is a
                // usage error (exit 2) like every other bad flag; named as typed.
                let v = value(flag)?;
                nranks = Some(parse_rank_count(&v).map_err(|why| why.replacen("-n ", &format!("{flag} "), 1))?);
            }
            "--timeout" => {
                let v = value("--timeout")?;
                let t = seconds(&v).map_err(|why| format!("--timeout {v}: {why}"))?;
                if t.is_zero() {
                    return Err(format!("--timeout {v}: must be a positive number of seconds"));
                }
                timeout = Some(t);
            }
            "--abort-after" => {
                let v = value("--abort-after")?;
                abort_after = if v == "never" {
                    None
                } else {
                    Some(seconds(&v).map_err(|why| format!("--abort-after {v}: {why} (or never)"))?)
                };
            }
            "--bind-to" => {
                binding = match value("--bind-to")?.as_str() {
                    "cpu" => Binding::Cpu,
                    "none" => Binding::None,
                    v => return Err(format!("--bind-to {v}: expected cpu or none")),
                };
            }
            "--" => match argv.next() {
                Some(p) => break p,
                None => return Err("no program given after --".into()),
            },
            f if f.starts_with('-') => return Err(format!("unknown option {f}")),
            _ => break arg,
        }
    };
    let nranks = nranks.ok_or("-n N is required")?;
    Ok(Some(Args { nranks, timeout, abort_after, binding, program, args: argv.collect() }))
}

/// A number of seconds, 0 or more, that a `Duration` holds.
fn seconds(v: &str) -> Result<Duration, String> {
    let secs: f64 = v.parse().map_err(|_| "not a number of seconds".to_owned())?;
    if secs.is_nan() || secs < 0.0 {
        return Err("must be 0 or more seconds".into());
    }
    // Only a value past the largest fails now: say so, not "negative".
    Duration::try_from_secs_f64(secs).map_err(|_| format!("too large: at most {} seconds", Duration::MAX.as_secs()))
}

/// `dir`, else `KPCCL_SHM_DIR`, else `/dev/shm`.
fn shm_dir(dir: Option<PathBuf>) -> PathBuf {
    dir.or_else(|| std::env::var_os("KPCCL_SHM_DIR").filter(|d| !d.is_empty()).map(PathBuf::from))
        .unwrap_or_else(|| kpccl_posix::DEFAULT_SHM_DIR.into())
}

/// `kpccl-run --sweep [DIR]`.
fn sweep(dir: Option<PathBuf>) -> ExitCode {
    let path = shm_dir(dir);
    let dir = path.display();
    match kpccl_posix::sweep(&path) {
        Ok(removed) => {
            for name in &removed {
                say!("removed {dir}/{name}");
            }
            say!("kpccl-run: swept {dir}: {} leftover segment(s) removed", removed.len());
            ExitCode::SUCCESS
        }
        Err(e) => {
            say_err!("kpccl-run: cannot sweep {dir}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `kpccl-run --list [--remove-stale] [DIR]`.
fn list(dir: Option<PathBuf>, remove_stale: bool) -> ExitCode {
    let path = shm_dir(dir.clone());
    match kpccl_posix::inventory::list(&path) {
        Ok(segments) => {
            let stale = segments.iter().filter(|s| s.state == kpccl_posix::inventory::State::Stale).count();
            let table = kpccl_posix::inventory::table(&segments);
            say!("{table}{} segment(s) in {}, {stale} stale", segments.len(), path.display());
            if remove_stale && stale > 0 { sweep(dir) } else { ExitCode::SUCCESS }
        }
        Err(e) => {
            say_err!("kpccl-run: cannot list {}: {e}", path.display());
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<Option<Args>, String> {
        parse(args.iter().map(OsString::from))
    }

    #[test]
    fn accepted_forms() {
        let a = p(&["-n", "4", "--timeout", "2.5", "--", "prog", "-n", "x"]).unwrap().unwrap();
        assert_eq!((a.nranks, a.timeout), (4, Some(Duration::from_millis(2500))));
        assert_eq!((a.program.to_str(), a.args.len()), (Some("prog"), 2));
        let a = p(&["-n8", "--timeout=3", "prog"]).unwrap().unwrap();
        assert_eq!((a.nranks, a.timeout, a.args.len()), (8, Some(Duration::from_secs(3)), 0));
        let a = p(&["--nranks=2", "prog", "--", "y"]).unwrap().unwrap();
        assert_eq!((a.nranks, a.args.len()), (2, 2));
        assert!(p(&["--help"]).unwrap().is_none());
        assert_eq!(p(&["-n", "2", "prog"]).unwrap().unwrap().abort_after, Some(DEFAULT_ABORT_AFTER));
        assert_eq!(
            p(&["-n", "2", "--abort-after", "0.5", "prog"]).unwrap().unwrap().abort_after,
            Some(Duration::from_millis(500))
        );
        assert_eq!(p(&["-n", "2", "--abort-after=0", "prog"]).unwrap().unwrap().abort_after, Some(Duration::ZERO));
        assert_eq!(p(&["-n", "2", "--abort-after", "never", "prog"]).unwrap().unwrap().abort_after, None);
        assert_eq!(p(&["-n", "2", "prog"]).unwrap().unwrap().binding, Binding::None);
        assert_eq!(p(&["-n", "2", "--bind-to", "cpu", "prog"]).unwrap().unwrap().binding, Binding::Cpu);
        assert_eq!(p(&["-n", "2", "--bind-to=none", "prog"]).unwrap().unwrap().binding, Binding::None);
        assert!(p(&["-n", "2", "--bind-to", "core", "prog"]).unwrap_err().contains("expected cpu or none"));
    }

    #[test]
    fn usage_errors() {
        for bad in [
            &["prog"][..],
            &["-n"],
            &["-n", "0", "prog"],
            &["-n", "100000", "prog"],
            &["-n", "1025", "prog"],
            &["-n", "x", "prog"],
            &["-n", "2"],
            &["-n", "2", "--"],
            &["-n", "2", "--timeout", "-1", "prog"],
            &["-n", "2", "--timeout", "0", "prog"],
            &["-n", "2", "--abort-after", "-1", "prog"],
            &["-n", "2", "--abort-after", "soon", "prog"],
            &["-n", "2", "--bogus", "prog"],
        ] {
            assert!(p(bad).is_err(), "{bad:?}");
        }
    }

    /// `-np N`, as MPI users type it, is `-n N` in each of its forms; the
    /// errors name the flag typed. Before, `-np 2` was `-n p`: "not a rank count".
    #[test]
    fn np_is_n() {
        for args in [&["-np", "2", "prog"][..], &["-np2", "prog"], &["-n", "2", "prog"], &["--nranks", "2", "prog"]] {
            let a = p(args).unwrap().unwrap();
            assert_eq!((a.nranks, a.program.to_str()), (2, Some("prog")), "{args:?}");
        }
        assert_eq!(p(&["-np", "x", "prog"]).unwrap_err(), "-np x: not a rank count");
        assert_eq!(p(&["-np", "0", "prog"]).unwrap_err(), "-np 0: the rank count must be 1 to 1024");
        assert_eq!(p(&["-n0", "prog"]).unwrap_err(), "-n 0: the rank count must be 1 to 1024");
        assert_eq!(p(&["--nranks=x", "prog"]).unwrap_err(), "--nranks x: not a rank count");
        assert_eq!(p(&["-np"]).unwrap_err(), "-np needs a value");
        // As `-n=2` never was, `-np=2` is not a rank count: short flags take no `=`.
        assert_eq!(p(&["-np=2", "prog"]).unwrap_err(), "-np =2: not a rank count");
    }

    /// A value too large is called that, with the bound; before, `1e300`
    /// "must be 0 or more seconds".
    #[test]
    fn durations_out_of_range_say_which_way() {
        let why = |flag: &str, v: &str| p(&["-n", "2", flag, v, "prog"]).unwrap_err();
        let most = "too large: at most 18446744073709551615 seconds";
        assert_eq!(why("--abort-after", "1e300"), format!("--abort-after 1e300: {most} (or never)"));
        assert_eq!(why("--timeout", "inf"), format!("--timeout inf: {most}"));
        assert_eq!(why("--abort-after", "-1"), "--abort-after -1: must be 0 or more seconds (or never)");
        assert_eq!(why("--abort-after", "NaN"), "--abort-after NaN: must be 0 or more seconds (or never)");
        assert_eq!(why("--abort-after", "soon"), "--abort-after soon: not a number of seconds (or never)");
        assert_eq!(why("--timeout", "0"), "--timeout 0: must be a positive number of seconds");
        assert_eq!(why("--timeout", "-2"), "--timeout -2: must be 0 or more seconds");
    }
}
