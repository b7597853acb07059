//! The simulator's registry directory after a crash at any moment: what a
//! process killed while it rewrote the registry left is swept like the rest.
#![allow(missing_docs, clippy::std_instead_of_core, clippy::alloc_instead_of_core)]

use kpccl_posix::launch::runner::test_alone;
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
    let status = test_alone("a_registry_rewrite_cut_short_leaves_no_directory_behind")
        .env(CHILD_ENV, "1")
        .env("ASCEND_SIM_DIR", &sim)
        .status()
        .expect("run the child");
    assert!(status.success(), "the child failed: {status}");
    assert!(!sim.exists(), "simulator state left in {}: {:?}", sim.display(), entries(&sim));
}

/// Set in the child of the lock test: the pid holding the registry lock.
const HOLDER_ENV: &str = "KPCCL_SIM_LOCK_HOLDER";

/// A process stopped or stuck while it holds the registry lock fails the
/// other processes' simulator calls after the lock timeout, naming it,
/// instead of hanging them.
#[test]
fn a_held_registry_lock_fails_calls_naming_the_holder() {
    if let Some(holder) = std::env::var_os(HOLDER_ENV) {
        let started = std::time::Instant::now();
        let e = kpccl_ascend::sim::sweep().expect_err("the lock is held by the parent");
        let waited = started.elapsed();
        assert_eq!(e.kind(), std::io::ErrorKind::TimedOut, "{e}");
        let holder = holder.into_string().unwrap();
        assert!(e.to_string().contains(&format!("process {holder} has held the registry lock")), "{e}");
        assert!(waited >= std::time::Duration::from_millis(200), "gave up after {waited:?}");
        return;
    }
    let scratch = ScratchDir::new("sim-lock", "tmp");
    let sim = scratch.path().join("sim");
    std::fs::create_dir(&sim).unwrap();
    let lock = std::fs::File::create(sim.join("registry.lock")).unwrap();
    // SAFETY: flock on a descriptor this test owns; no memory is passed.
    assert_eq!(unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&lock), libc::LOCK_EX) }, 0);
    let mut child = test_alone("a_held_registry_lock_fails_calls_naming_the_holder")
        .env(HOLDER_ENV, std::process::id().to_string())
        .env(kpccl_ascend::sim::LOCK_TIMEOUT_ENV, "200")
        .env("ASCEND_SIM_DIR", &sim)
        .spawn()
        .expect("run the child");
    // A hang is the failure this test is about: bounded, then killed.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("the child still waited for the lock after 30 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(status.success(), "the child failed: {status}");
}

/// Set in the child of the unusable-registry test.
const UNUSABLE_ENV: &str = "KPCCL_SIM_REGISTRY_UNUSABLE";

/// A registry the simulator cannot read or write (here its directory would
/// lie under a regular file) fails the calls that need it with the driver's
/// internal error, saying why on stderr; a refused variable is the other
/// case (100000, `sim_env.rs`).
#[test]
fn an_unusable_registry_fails_calls_with_the_internal_error() {
    use kpccl_ascend::AclRuntime;
    use kpccl_ascend::codes::{ACL_ERROR_RT_INTERNAL_ERROR, ACL_MEM_MALLOC_NORMAL_ONLY};
    if std::env::var_os(UNUSABLE_ENV).is_some() {
        let rt = kpccl_ascend::sim::HostSim::faithful();
        rt.set_device(0).unwrap();
        let p = rt.malloc(4096, ACL_MEM_MALLOC_NORMAL_ONLY).unwrap();
        let export = kpccl_testkit::acl::ipc::code(rt.ipc_mem_get_export_key(p, 4096, 1));
        assert_eq!(export, ACL_ERROR_RT_INTERNAL_ERROR, "export");
        return;
    }
    let scratch = ScratchDir::new("sim-registry", "unusable");
    let file = scratch.path().join("file");
    std::fs::write(&file, b"").unwrap();
    let out = test_alone("an_unusable_registry_fails_calls_with_the_internal_error")
        .arg("--nocapture")
        .env(UNUSABLE_ENV, "1")
        .env("ASCEND_SIM_DIR", file.join("sim"))
        .output()
        .expect("run the child");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the child failed: {}\n{stderr}", out.status);
    let said = format!("ascend simulator: {}", std::io::Error::from_raw_os_error(libc::ENOTDIR));
    assert!(stderr.contains(&said), "stderr lacks {said:?}:\n{stderr}");
}
