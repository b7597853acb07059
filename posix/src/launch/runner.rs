//! The words put in front of a rank's program: a target runner such as
//! `qemu-aarch64 -L /usr/aarch64-linux-gnu`.
//!
//! An aarch64 binary on an x86 host without binfmt_misc cannot exec another
//! aarch64 binary (the exec fails with 127): it has to go through the same
//! runner cargo used for it.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::process::Command;

use super::RUNNER_ENV;

/// Cargo's runner for the aarch64 Linux target.
const CARGO_AARCH64_RUNNER: &str = "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER";

/// `KPCCL_RUNNER` if set (even empty: no runner), else on aarch64 cargo's
/// target runner if set, else nothing; split on whitespace.
pub fn from_env() -> Vec<OsString> {
    let explicit = std::env::var_os(RUNNER_ENV);
    let cargo = || if cfg!(target_arch = "aarch64") { std::env::var_os(CARGO_AARCH64_RUNNER) } else { None };
    explicit.or_else(cargo).map(|v| split(&v)).unwrap_or_default()
}

/// `program`, a binary of the target, run through the runner ([`from_env`]).
pub fn command(program: impl AsRef<OsStr>) -> Command {
    let mut words = from_env();
    words.push(program.as_ref().to_owned());
    let mut cmd = Command::new(&words[0]);
    cmd.args(&words[1..]);
    cmd
}

/// This test binary again, through the runner, running only the test
/// `name` (its full path, e.g. `module::tests::name`): for a test that needs
/// a process of its own (its environment, its signal dispositions).
pub fn test_alone(name: &str) -> Command {
    let mut cmd = command(std::env::current_exe().expect("the test binary's path"));
    cmd.args(["--exact", name, "--test-threads=1"]);
    cmd
}

/// Splits on ASCII whitespace (no quoting, as cargo does for a string runner).
pub fn split(s: &OsStr) -> Vec<OsString> {
    s.as_bytes()
        .split(u8::is_ascii_whitespace)
        .filter(|w| !w.is_empty())
        .map(|w| OsStr::from_bytes(w).to_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_on_runs_of_whitespace() {
        let words = split(OsStr::new("  qemu-aarch64 \t-L  /usr/aarch64-linux-gnu\n"));
        assert_eq!(words, ["qemu-aarch64", "-L", "/usr/aarch64-linux-gnu"]);
        assert!(split(OsStr::new(" \t ")).is_empty());
    }
}
