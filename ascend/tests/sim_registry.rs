//! The simulator's registry directory after a crash at any moment: what a
//! process killed while it rewrote the registry left is swept like the rest.
#![allow(missing_docs, clippy::std_instead_of_core, clippy::alloc_instead_of_core)]

use std::process::Command;

use kpccl_testkit::{ScratchDir, entries};

/// Set in the child process this test starts with its own `ASCEND_SIM_DIR`.
const CHILD_ENV: &str = "KPCCL_SIM_REGISTRY_CHILD";

/// A process killed between writing `registry.tmp` and renaming it over
/// `registry` leaves the temporary file; once no record is left, the next
/// simulator call must remove the directory all the same.
#[test]
fn a_registry_rewrite_cut_short_leaves_no_directory_behind() {
    if std::env::var_os(CHILD_ENV).is_some() {
        kpccl_ascend::sim::sweep().expect("sweep");
        return;
    }
    let scratch = ScratchDir::new("sim-registry", "tmp");
    let sim = scratch.path().join("sim");
    std::fs::create_dir(&sim).unwrap();
    // What the crash left: the lock file, and the rewrite that never got renamed.
    std::fs::write(sim.join("registry.lock"), b"").unwrap();
    std::fs::write(sim.join("registry.tmp"), b"C 7\n").unwrap();
    // Through the target runner (qemu, for aarch64), as the launcher starts ranks.
    let mut words = kpccl_posix::launch::runner::from_env();
    words.push(std::env::current_exe().unwrap().into());
    let status = Command::new(&words[0])
        .args(&words[1..])
        .args(["--exact", "a_registry_rewrite_cut_short_leaves_no_directory_behind", "--test-threads=1"])
        .env(CHILD_ENV, "1")
        .env("ASCEND_SIM_DIR", &sim)
        .status()
        .expect("run the child");
    assert!(status.success(), "the child failed: {status}");
    assert!(!sim.exists(), "simulator state left in {}: {:?}", sim.display(), entries(&sim));
}
