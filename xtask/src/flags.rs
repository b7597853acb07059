//! The command line: `cargo xtask <task> [flags]`.

use crate::cmd::{Result, bail};

pub(crate) const HELP: &str = "\
cargo xtask <task> [flags]

Tasks:
  test [--quick]                 the whole host suite, in order, stopping at the first failure:
                                 rustfmt, clippy -D warnings, no_std build for aarch64-unknown-none
                                 (and no libc in kpccl-core's tree), cargo test, loom, Miri, rustdoc
                                 -D warnings, C tests, Rust over MPI, benchmark smoke run, the Python
                                 package (pip install ./python into $KPCCL_PY_VENV or target/py-venv,
                                 which .ci/run makes, then its pytest suite); ends with
                                 `N passed, N failed` (steps).
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
                                 (`cargo run --release -p kpccl-tests --bin kpccl-demo -- -n N ARGS...`).
  soak [--minutes M] [-n N]      N ranks (default 8) for M minutes (default 10): windows of random
                                 uneven sizes made and freed, random-pairing handoffs and window
                                 fences, every word verified; no segment may be left.
  bench [--smoke] [ARGS...]      the benchmark suite (bench/): writes BENCHMARKS.md and
                                 docs/fence-latency.svg; --smoke runs it once (part of `test`).
  help                           this text.
";

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
    let mut args = args.into_iter();
    let Some(task) = args.next() else { return Ok(Task::Help) };
    match task.as_str() {
        "help" | "-h" | "--help" => no_more(args, Task::Help),
        "test" => {
            let mut quick = false;
            for arg in args {
                match arg.as_str() {
                    "--quick" => quick = true,
                    _ => bail!("`test` does not take {arg:?}"),
                }
            }
            Ok(Task::Test { quick })
        }
        "test-aarch64" => {
            let (mut install, mut cross) = (false, false);
            for arg in args {
                match arg.as_str() {
                    "--install" => install = true,
                    "--cross" => cross = true,
                    _ => bail!("`test-aarch64` does not take {arg:?}"),
                }
            }
            Ok(Task::TestAarch64 { install, cross })
        }
        "soak" => {
            let (mut minutes, mut ranks) = (10, 8);
            while let Some(arg) = args.next() {
                let value = args.next().ok_or_else(|| crate::cmd::err!("{arg} needs a value"))?;
                match arg.as_str() {
                    "--minutes" => {
                        minutes = value.parse().map_err(|_| crate::cmd::err!("--minutes takes a whole number"))?
                    }
                    "-n" => ranks = value.parse().map_err(|_| crate::cmd::err!("-n takes a rank count"))?,
                    _ => bail!("`soak` does not take {arg:?}"),
                }
            }
            Ok(Task::Soak { minutes, ranks })
        }
        "demo" => {
            let mut ranks = 4;
            let mut rest = Vec::new();
            while let Some(arg) = args.next() {
                let value = match arg.as_str() {
                    "-n" => args.next(),
                    "--" => {
                        rest.extend(args.by_ref());
                        break;
                    }
                    _ => match arg.strip_prefix("-n") {
                        Some(v) => Some(v.trim_start_matches('=').to_owned()),
                        None => bail!("`demo` does not take {arg:?} (pass extra demo arguments after `--`)"),
                    },
                };
                let Some(value) = value else { bail!("`-n` needs a rank count") };
                ranks = match value.parse() {
                    Ok(n) if n > 0 => n,
                    _ => bail!("`-n` needs a positive rank count, not {value:?}"),
                };
            }
            Ok(Task::Demo { ranks, rest })
        }
        "c-test" => {
            let mut aarch64 = false;
            for arg in args {
                match arg.as_str() {
                    "--aarch64" => aarch64 = true,
                    _ => bail!("`c-test` does not take {arg:?}"),
                }
            }
            Ok(Task::CTest { aarch64 })
        }
        "install" => {
            let mut prefix = std::path::PathBuf::from(crate::install::DEFAULT_PREFIX);
            while let Some(arg) = args.next() {
                match (arg.as_str(), arg.strip_prefix("--prefix=")) {
                    ("--prefix", _) => match args.next() {
                        Some(dir) => prefix = dir.into(),
                        None => bail!("`--prefix` needs a directory"),
                    },
                    (_, Some(dir)) if !dir.is_empty() => prefix = dir.into(),
                    _ => bail!("`install` does not take {arg:?}"),
                }
            }
            Ok(Task::Install { prefix })
        }
        "header" => {
            let mut check = false;
            for arg in args {
                match arg.as_str() {
                    "--check" => check = true,
                    _ => bail!("`header` does not take {arg:?}"),
                }
            }
            Ok(Task::Header { check })
        }
        _ => bail!("unknown task {task:?}"),
    }
}

fn no_more(mut args: impl Iterator<Item = String>, task: Task) -> Result<Task> {
    match args.next() {
        Some(arg) => bail!("unexpected argument {arg:?}"),
        None => Ok(task),
    }
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
    }
}
