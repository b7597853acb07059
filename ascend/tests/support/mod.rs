//! What the simulator's process tests share: a test of this binary run
//! again alone, in a child with a registry of its own.
#![allow(dead_code, unreachable_pub)]

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use kpccl_ascend::sim::LOCK_TIMEOUT_ENV;
use kpccl_posix::launch::runner::test_alone;
use kpccl_testkit::{ScratchDir, entries};

/// This binary's test `name`, alone, in the child's role: `flag` set, the
/// registry in `sim` (`ASCEND_SIM_DIR`), its lock waited for at most
/// `lock_timeout_ms`.
pub fn child_command(name: &str, flag: &str, sim: &std::path::Path, lock_timeout_ms: &str) -> Command {
    let mut cmd = test_alone(name);
    cmd.arg("--nocapture").env(flag, "1").env(LOCK_TIMEOUT_ENV, lock_timeout_ms).env("ASCEND_SIM_DIR", sim);
    cmd
}

/// Runs [`child_command`] with `env` too, bounded (60 s); asserts it
/// succeeds and leaves no registry behind.
pub fn in_child_with_own_registry(name: &str, flag: &str, lock_timeout_ms: &str, env: &[(&str, &str)]) {
    let scratch = ScratchDir::new("sim-child", name);
    let sim = scratch.path().join("sim");
    let mut cmd = child_command(name, flag, &sim, lock_timeout_ms);
    cmd.envs(env.iter().copied());
    let mut child = cmd.spawn().expect("run the child");
    let status = kpccl_testkit::wait_or_kill(&mut child, Duration::from_secs(60))
        .unwrap_or_else(|| panic!("{name}: the child did not finish in 60 s"));
    assert!(status.success(), "{name}: the child failed: {status}");
    assert!(!sim.exists(), "{name}: simulator state left in {}: {:?}", sim.display(), entries(&sim));
}

/// The registry directory the child of [`in_child_with_own_registry`] uses.
pub fn own_registry() -> PathBuf {
    std::env::var_os("ASCEND_SIM_DIR").expect("ASCEND_SIM_DIR set by the parent").into()
}
