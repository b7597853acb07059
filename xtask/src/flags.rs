//! The command line: `cargo xtask <task> [flags]`,
//! parsed with lexopt (the shell conventions: `--prefix=DIR` or `--prefix DIR`,
//! `-n3` or `-n 3`); the help text below is written by hand, as it reads.

use lexopt::prelude::*;

use crate::cmd::{Result, bail, err};

pub(crate) const HELP: &str = "\
cargo xtask <task> [flags]

Tasks:
  test [--quick]                 the whole host suite, in order, stopping at the first failure:
                                 rustfmt, clippy -D warnings, no_std build for aarch64-unknown-none
                                 (and no libc in kpccl-core's tree), cargo test, loom (clippy, then
                                 the models, under --cfg loom), Miri, rustdoc -D warnings, C tests,
                                 Rust over MPI, benchmark smoke run, the Python package (pip install
                                 ./python into $KPCCL_PY_VENV or target/py-venv, which .ci/run makes,
                                 then its pytest suite); ends with `N passed, N failed` (steps).
                                 --quick skips loom and Miri.
  test-aarch64 [--install] [--cross]
                                 the workspace's tests, doctests, examples and C tests built for
                                 aarch64-unknown-linux-gnu and run under qemu-aarch64; kpccl-core
                                 built for aarch64-unknown-none; ends with `N passed, N failed` (tests).
                                 --install installs missing prerequisites (rustup target, apt packages).
                                 --cross uses `cross` (Docker or Podman) instead of the local toolchain.
  header [--check]               ffi/include/kpccl.h from ffi/src, by cbindgen (ffi/cbindgen.toml);
                                 --check fails if the committed header differs (`cargo xtask test`
                                 checks it too).
  install [--prefix DIR]         libkpccl as a system library under $DESTDIR/DIR (default /usr/local):
                                 libkpccl.so.X.Y.Z (SONAME libkpccl.so.X) and links, libkpccl.a,
                                 kpccl.h, kpccl_mpi.h, kpccl.pc, kpccl-static.pc, the CMake package
                                 (kpccl::kpccl), bin/kpccl-run, lib/kpccl/sim/libascendcl.so.
  c-test [--aarch64]             the C tests alone, on the host (the last step of `test`); --aarch64:
                                 built for aarch64-unknown-linux-gnu, run under qemu (as in test-aarch64).
  demo [-n N] [-- ARGS...]       the main demo: N ranks (default 4) share a window without MPI
                                 (`cargo run --release -p kpccl-run --example demo -- -n N ARGS...`).
  soak [--minutes M] [-n N]      N ranks (default 8) for M minutes (default 10): windows of random
                                 uneven sizes made and freed, random-pairing handoffs and window
                                 fences, every word verified; no segment may be left.
  bench [--smoke] [ARGS...]      the benchmark suite (bench/): writes BENCHMARKS.md and
                                 docs/fence-latency.svg (with --parts or --ranks, under
                                 target/kpccl-bench/partial/); --smoke runs it once (part of `test`).
  help                           this text.
";

/// The longest soak `--minutes` takes: a year.
const MAX_SOAK_MINUTES: u64 = 366 * 24 * 60;

#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Task {
    Help,
    Test { quick: bool },
    TestAarch64 { install: bool, cross: bool },
    Demo { ranks: u32, rest: Vec<String> },
    Header { check: bool },
    CTest { aarch64: bool },
    Install { prefix: std::path::PathBuf },
    Soak { minutes: u64, ranks: u32 },
}

pub(crate) fn parse(args: impl IntoIterator<Item = String>) -> Result<Task> {
    let mut args: Vec<String> = args.into_iter().collect();
    // Everything after the first `--` goes to the demo untouched.
    let rest = args.iter().position(|a| a == "--").map(|i| args.split_off(i)[1..].to_vec());
    // `cargo xtask soak --help` asks for help, not for an error about a flag.
    if args.iter().any(|a| a == "--help" || a == "-h") {
        return Ok(Task::Help);
    }
    let mut p = lexopt::Parser::from_args(args);
    let task = match p.next().map_err(|e| err!("{e}"))? {
        None => return Ok(Task::Help),
        Some(Value(task)) => task.into_string().map_err(|t| err!("unknown task {t:?}"))?,
        Some(other) => bail!("{}", other.unexpected()),
    };
    let Some(parsed) = task_flags(&task, &mut p, rest.is_some()).transpose() else { bail!("unknown task {task:?}") };
    let task = parsed.map_err(|e| err!("`{task}`: {e}"))?;
    Ok(match (task, rest) {
        (Task::Demo { ranks, .. }, Some(rest)) => Task::Demo { ranks, rest },
        (task, _) => task,
    })
}

/// The flags of `task`, up to the end or the first `--` (`dashdash`: there
/// was one, which only `demo` takes); `None` for an unknown task.
fn task_flags(task: &str, p: &mut lexopt::Parser, dashdash: bool) -> Result<Option<Task>, lexopt::Error> {
    if dashdash && task != "demo" {
        return Err("`--` is for `demo`'s own arguments".into());
    }
    Ok(Some(match task {
        "help" => {
            let [] = switches(p, [])?;
            Task::Help
        }
        "test" => {
            let [quick] = switches(p, ["quick"])?;
            Task::Test { quick }
        }
        "test-aarch64" => {
            let [install, cross] = switches(p, ["install", "cross"])?;
            Task::TestAarch64 { install, cross }
        }
        "soak" => {
            let (mut minutes, mut ranks) = (10, 8);
            while let Some(arg) = p.next()? {
                match arg {
                    Long("minutes") => minutes = p.value()?.parse()?,
                    Short('n') => ranks = p.value()?.parse()?,
                    _ => return Err(arg.unexpected()),
                }
            }
            // The run's seconds, and the launcher's timeout beyond them, must fit in a u64.
            if minutes > MAX_SOAK_MINUTES {
                return Err(format!("`--minutes {minutes}` is more than {MAX_SOAK_MINUTES} (a year)").into());
            }
            if ranks == 0 {
                return Err("`-n` needs a positive rank count".into());
            }
            Task::Soak { minutes, ranks }
        }
        "demo" => {
            let mut ranks = 4;
            while let Some(arg) = p.next()? {
                match arg {
                    Short('n') => ranks = p.value()?.parse()?,
                    Value(v) => return Err(format!("unexpected {v:?} (pass extra demo arguments after `--`)").into()),
                    _ => return Err(arg.unexpected()),
                }
                if ranks == 0 {
                    return Err("`-n` needs a positive rank count".into());
                }
            }
            Task::Demo { ranks, rest: Vec::new() }
        }
        "c-test" => {
            let [aarch64] = switches(p, ["aarch64"])?;
            Task::CTest { aarch64 }
        }
        "install" => {
            let mut prefix = std::path::PathBuf::from(crate::install::DEFAULT_PREFIX);
            while let Some(arg) = p.next()? {
                match arg {
                    Long("prefix") => prefix = p.value()?.into(),
                    _ => return Err(arg.unexpected()),
                }
                if prefix.as_os_str().is_empty() {
                    return Err("`--prefix` needs a directory".into());
                }
            }
            Task::Install { prefix }
        }
        "header" => {
            let [check] = switches(p, ["check"])?;
            Task::Header { check }
        }
        _ => return Ok(None),
    }))
}

/// The rest of the arguments, for a task whose flags are all `--name`
/// switches: which of `names` were given.
fn switches<const N: usize>(p: &mut lexopt::Parser, names: [&str; N]) -> Result<[bool; N], lexopt::Error> {
    let mut given = [false; N];
    while let Some(arg) = p.next()? {
        let i = match &arg {
            Long(name) => names.iter().position(|n| n == name),
            _ => None,
        };
        *i.and_then(|i| given.get_mut(i)).ok_or_else(|| arg.unexpected())? = true;
    }
    Ok(given)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<Task> {
        parse(args.iter().map(|s| (*s).to_owned()))
    }

    #[test]
    fn parses_tasks() {
        assert_eq!(p(&[]).unwrap(), Task::Help);
        assert_eq!(p(&["soak", "--help"]).unwrap(), Task::Help);
        assert_eq!(p(&["install", "-h"]).unwrap(), Task::Help);
        assert_eq!(p(&["test"]).unwrap(), Task::Test { quick: false });
        assert_eq!(p(&["test", "--quick"]).unwrap(), Task::Test { quick: true });
        assert_eq!(p(&["test-aarch64", "--cross"]).unwrap(), Task::TestAarch64 { install: false, cross: true });
        assert_eq!(p(&["header", "--check"]).unwrap(), Task::Header { check: true });
        assert_eq!(p(&["c-test"]).unwrap(), Task::CTest { aarch64: false });
        assert_eq!(p(&["c-test", "--aarch64"]).unwrap(), Task::CTest { aarch64: true });
        assert_eq!(p(&["install", "--prefix", "/opt/k"]).unwrap(), Task::Install { prefix: "/opt/k".into() });
        assert_eq!(p(&["install"]).unwrap(), Task::Install { prefix: "/usr/local".into() });
        assert_eq!(p(&["demo"]).unwrap(), Task::Demo { ranks: 4, rest: vec![] });
        assert_eq!(p(&["demo", "-n", "8"]).unwrap(), Task::Demo { ranks: 8, rest: vec![] });
        assert_eq!(p(&["demo", "-n3", "--", "-v"]).unwrap(), Task::Demo { ranks: 3, rest: vec!["-v".into()] });
        assert_eq!(
            p(&["demo", "-n=5", "--", "--", "x"]).unwrap(),
            Task::Demo { ranks: 5, rest: vec!["--".into(), "x".into()] }
        );
        assert_eq!(p(&["install", "--prefix=/opt/k"]).unwrap(), Task::Install { prefix: "/opt/k".into() });
        assert_eq!(p(&["soak", "--minutes", "2", "-n", "3"]).unwrap(), Task::Soak { minutes: 2, ranks: 3 });
        assert_eq!(p(&["--help"]).unwrap(), Task::Help);
    }

    #[test]
    fn rejects_nonsense() {
        assert!(p(&["tset"]).is_err());
        assert!(p(&["test", "--slow"]).is_err());
        assert!(p(&["header", "--fix"]).is_err());
        assert!(p(&["install", "--prefix"]).is_err());
        assert!(p(&["demo", "-n"]).is_err());
        assert!(p(&["demo", "-n", "0"]).is_err());
        assert!(p(&["demo", "-n", "x"]).is_err());
        assert!(p(&["demo", "8"]).is_err());
        assert!(p(&["test", "--", "x"]).is_err());
        assert!(p(&["install", "--prefix="]).is_err());
        assert!(p(&["help", "me"]).is_err());
        assert!(p(&["soak", "--minutes", "307445734561825862"]).is_err());
        assert!(p(&["soak", "-n", "0"]).is_err());
    }
}
