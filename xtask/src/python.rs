//! The Python package step of `cargo xtask test`: installs `./python` into
//! the test venv (built fresh from this tree) and runs its pytest suite,
//! whose ranks run under `kpccl-run` and `mpirun`.
//!
//! The venv is `KPCCL_PY_VENV`, else `target/py-venv`; `.ci/run` creates it
//! with numpy, mpi4py and pytest. Without one, the step is skipped and says
//! how to make it.

use std::env;
use std::path::{Path, PathBuf};

use crate::cmd::{Cmd, Result, bail};
use crate::report::{Counts, Done};
use crate::staticlib::target_dir;

/// The variable naming the venv.
const VENV_VAR: &str = "KPCCL_PY_VENV";

/// The venv the suite runs in.
pub(crate) fn venv() -> PathBuf {
    env::var_os(VENV_VAR).map_or_else(|| PathBuf::from("target/py-venv"), PathBuf::from)
}

pub(crate) fn step() -> Result<Done> {
    let venv = venv();
    let python = venv.join("bin/python");
    if !python.exists() {
        return Ok(Done::Skipped(format!(
            "no venv at {} (bash .ci/run makes it; or: python3 -m venv {0} && {0}/bin/pip install numpy mpi4py pytest)",
            venv.display()
        )));
    }
    // The launcher the suite's multi-process tests use, from this tree.
    Cmd::cargo().args(["build", "-p", "kpccl-run", "--bin", "kpccl-run"]).run()?;
    Cmd::new(&python).args(["-m", "pip", "install", "--quiet", "--force-reinstall", "--no-deps", "./python"]).run()?;
    let out = pytest_cmd(&python, &target_dir()).run_tee()?;
    let counts = pytest_counts(&out.stdout);
    if !out.success {
        bail!("pytest failed ({}): {}", out.status, counts.map_or_else(|| "no summary".to_owned(), |c| c.to_string()));
    }
    match counts {
        Some(c) if c.passed > 0 => Ok(Done::Ran(c.to_string())),
        _ => bail!("pytest ran no test"),
    }
}

/// The pytest suite, its ranks started by the `kpccl-run` just built under `target`.
fn pytest_cmd(python: &Path, target: &Path) -> Cmd {
    Cmd::new(python).env("KPCCL_RUN", target.join("debug").join("kpccl-run")).args([
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "python/tests",
    ])
}

/// The counts of pytest's summary line (`3 failed, 12 passed in 5.0s`);
/// errors count as failures.
fn pytest_counts(output: &str) -> Option<Counts> {
    let line = output.lines().rev().find(|l| l.contains(" passed") || l.contains(" failed") || l.contains(" error"))?;
    let mut counts = Counts::default();
    let words: Vec<&str> = line.split(|c: char| c == ',' || c.is_whitespace()).filter(|w| !w.is_empty()).collect();
    for pair in words.windows(2) {
        let Ok(n) = pair[0].parse::<u64>() else { continue };
        match pair[1] {
            "passed" => counts.passed += n,
            "failed" | "error" | "errors" => counts.failed += n,
            _ => {}
        }
    }
    Some(counts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pytest_uses_the_launcher_cargo_built() {
        // With CARGO_TARGET_DIR elsewhere, a stale target/debug/kpccl-run must not be used.
        let cmd = pytest_cmd(Path::new("/v/bin/python"), Path::new("/t/x")).to_string();
        assert!(cmd.starts_with("KPCCL_RUN=/t/x/debug/kpccl-run /v/bin/python -m pytest"), "{cmd}");
    }

    #[test]
    fn reads_pytest_summaries() {
        let c = pytest_counts("....\n15 passed in 5.02s\n").unwrap();
        assert_eq!((c.passed, c.failed), (15, 0));
        let c = pytest_counts("F.\n=== 1 failed, 14 passed, 2 errors in 3.1s ===\n").unwrap();
        assert_eq!((c.passed, c.failed), (14, 3));
        assert!(pytest_counts("no tests ran in 0.01s\n").is_none());
    }
}
