//! The simulator's registry directory after a crash at any moment: what a
//! process killed while it rewrote the registry left is swept like the rest.
#![allow(missing_docs, clippy::std_instead_of_core, clippy::alloc_instead_of_core)]

use kpccl_posix::launch::runner::test_alone;
use kpccl_testkit::{ScratchDir, entries};

mod support;
use support::{in_child_with_own_registry, own_registry};

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
    let status = kpccl_testkit::wait_or_kill(&mut child, std::time::Duration::from_secs(30))
        .expect("the child still waited for the lock after 30 s");
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

/// Set in the child of the close-retry test.
const CLOSE_RETRY_ENV: &str = "KPCCL_SIM_CLOSE_RETRY";

/// An importer's close that cannot update the registry (its lock held past
/// the timeout) fails and leaves the import as it was: closed again, it
/// succeeds, and the exporter (strict) then finds no importer left. Before,
/// the failed close had already unmapped and forgotten the import: the retry
/// gave 507899, and the registry counted the importer until it exited, so a
/// strict exporter's close was refused.
#[test]
fn an_importers_close_that_the_registry_refused_can_be_retried() {
    use kpccl_ascend::AclRuntime;
    use kpccl_ascend::codes::{ACL_ERROR_RT_INTERNAL_ERROR, ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION};
    use kpccl_testkit::acl::ipc::{Exported, code};
    if std::env::var_os(CLOSE_RETRY_ENV).is_none() {
        return in_child_with_own_registry(
            "an_importers_close_that_the_registry_refused_can_be_retried",
            CLOSE_RETRY_ENV,
            "200",
            &[],
        );
    }
    let rt = kpccl_ascend::sim::HostSim::strict();
    let exp = Exported::new(&rt, 0, 7, ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION);
    exp.run_importer(0, |_, k| {
        rt.ipc_mem_import_by_key(k, 0).unwrap();
        let lock = std::fs::File::open(own_registry().join("registry.lock")).unwrap();
        // SAFETY: flock on a descriptor this test owns; no memory is passed.
        assert_eq!(unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&lock), libc::LOCK_EX) }, 0);
        assert_eq!(code(rt.ipc_mem_close(k)), ACL_ERROR_RT_INTERNAL_ERROR, "a close while the lock is held");
        drop(lock);
        assert_eq!(code(rt.ipc_mem_close(k)), 0, "the close, retried");
        assert_eq!(kpccl_ascend::sim::held().imports, 0, "the import is gone once closed");
    });
    exp.release();
}

/// Set in the child of the failed-import test.
const FAILED_IMPORT_ENV: &str = "KPCCL_SIM_FAILED_IMPORT";

/// The mappings of simulated device memory in this process.
fn device_mappings() -> usize {
    std::fs::read_to_string("/proc/self/maps").unwrap().lines().filter(|l| l.contains("ascend-sim")).count()
}

/// An import whose registry rewrite fails (here `registry.tmp` cannot be
/// created) fails and maps nothing: before, the mapping made for it stayed in
/// the importer's address space for good, with nothing left to unmap it.
#[test]
fn an_import_the_registry_cannot_record_leaves_no_mapping() {
    use kpccl_ascend::AclRuntime;
    use kpccl_ascend::codes::{ACL_ERROR_RT_INTERNAL_ERROR, ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION};
    use kpccl_testkit::acl::ipc::{Exported, code};
    if std::env::var_os(FAILED_IMPORT_ENV).is_none() {
        return in_child_with_own_registry(
            "an_import_the_registry_cannot_record_leaves_no_mapping",
            FAILED_IMPORT_ENV,
            "200",
            &[],
        );
    }
    let rt = kpccl_ascend::sim::HostSim::faithful();
    let exp = Exported::new(&rt, 0, 7, ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION);
    let blocker = own_registry().join("registry.tmp");
    std::fs::create_dir(&blocker).unwrap();
    exp.run_importer(0, |_, k| {
        let before = device_mappings();
        assert_eq!(code(rt.ipc_mem_import_by_key(k, 0)), ACL_ERROR_RT_INTERNAL_ERROR, "an unrecorded import");
        assert_eq!(device_mappings(), before, "the failed import left a mapping");
        assert_eq!(kpccl_ascend::sim::held().imports, 0, "the failed import is held");
    });
    std::fs::remove_dir(&blocker).unwrap();
    exp.release();
}

/// Set in the child of the fork test.
const FORK_ENV: &str = "KPCCL_SIM_FORK_DURING_CALL";

/// A process forked while another of its threads is inside a simulator call
/// (here waiting for the registry lock) gets a simulator that works: the
/// fork waits for the call to leave the simulator's locks. Before, the
/// child inherited them locked by a thread it does not have, and its first
/// simulator call waited for ever.
#[test]
fn a_process_forked_during_another_threads_call_can_use_the_simulator() {
    use kpccl_ascend::AclRuntime;
    use kpccl_ascend::codes::{ACL_ERROR_RT_INTERNAL_ERROR, ACL_MEM_MALLOC_NORMAL_ONLY};
    use kpccl_testkit::acl::ipc::code;
    if std::env::var_os(FORK_ENV).is_none() {
        return in_child_with_own_registry(
            "a_process_forked_during_another_threads_call_can_use_the_simulator",
            FORK_ENV,
            "200",
            &[],
        );
    }
    let rt = kpccl_ascend::sim::HostSim::faithful();
    let sim = own_registry();
    std::fs::create_dir(&sim).unwrap();
    let lock = std::fs::File::create(sim.join("registry.lock")).unwrap();
    // SAFETY: flock on a descriptor this test owns; no memory is passed.
    assert_eq!(unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&lock), libc::LOCK_EX) }, 0);
    let caller = std::thread::spawn(move || {
        rt.set_device(0).unwrap();
        let p = rt.malloc(4096, ACL_MEM_MALLOC_NORMAL_ONLY).unwrap();
        // Waits for the lock (200 ms) inside the call, then fails.
        let export = code(rt.ipc_mem_get_export_key(p, 4096, 1));
        (export, p as usize)
    });
    std::thread::sleep(std::time::Duration::from_millis(50));
    // Bounded: the child is killed, and the test fails, after 20 s.
    kpccl_testkit::acl::proc::spawn(|_| {
        rt.set_device(1).unwrap();
        rt.malloc(4096, ACL_MEM_MALLOC_NORMAL_ONLY).unwrap();
        // (Not freed: a free reads the registry, whose lock the parent still holds.)
        assert_eq!(kpccl_ascend::sim::held().allocs, 1, "the child's own allocation");
    })
    .join();
    drop(lock);
    let (export, p) = caller.join().unwrap();
    assert_eq!(export, ACL_ERROR_RT_INTERNAL_ERROR, "the export waited for the held lock");
    rt.free(p as *mut core::ffi::c_void).unwrap();
    kpccl_ascend::sim::sweep().unwrap();
}

/// Set in the child of the unreadable-registry test.
const UNREAD_ENV: &str = "KPCCL_SIM_REGISTRY_UNREAD";

/// A process that cannot read the registry (here it has one descriptor left,
/// which the lock file takes) fails its call and leaves the other processes'
/// keys alone. Before, a failed read was an empty registry: the call went on,
/// found no record, and removed the registry, every live key of the user with
/// it (the exporter's close then gave 507899).
#[test]
fn a_registry_that_cannot_be_read_is_not_taken_for_an_empty_one() {
    use kpccl_ascend::AclRuntime;
    use kpccl_ascend::codes::ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION;
    use kpccl_testkit::acl::ipc::{Exported, read};
    use kpccl_testkit::{LoweredLimit, Resource, lowest_free_descriptor};
    if std::env::var_os(UNREAD_ENV).is_none() {
        return in_child_with_own_registry(
            "a_registry_that_cannot_be_read_is_not_taken_for_an_empty_one",
            UNREAD_ENV,
            "200",
            &[],
        );
    }
    let rt = kpccl_ascend::sim::HostSim::faithful();
    let exp = Exported::new(&rt, 0, 0x3c, ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION);
    // One descriptor left: the lock file's. Restored before the asserts.
    let lowered = LoweredLimit::new(Resource::Nofile, lowest_free_descriptor() + 1);
    let swept = kpccl_ascend::sim::sweep();
    drop(lowered);
    let e = swept.expect_err("the registry could not be read");
    assert_eq!(e.raw_os_error(), Some(libc::EMFILE), "{e}");
    exp.run_importer(0, |_, k| {
        let q = rt.ipc_mem_import_by_key(k, 0).expect("the key survives");
        assert!(read(&rt, q).iter().all(|&b| b == 0x3c));
        rt.ipc_mem_close(k).unwrap();
    });
    exp.release();
}
