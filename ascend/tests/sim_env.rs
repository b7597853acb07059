//! The simulator's own variables: a value it cannot read fails the calls that
//! depend on it (100000) and says why on stderr in the library's words, rather
//! than run with the default.
#![allow(missing_docs, clippy::std_instead_of_core, clippy::alloc_instead_of_core)]

use kpccl_ascend::AclRuntime;
use kpccl_ascend::codes::*;
use kpccl_ascend::sim::{DEVICES_ENV, HostSim, LOCK_TIMEOUT_ENV};
use kpccl_posix::launch::runner::test_alone;
use kpccl_testkit::ScratchDir;
use kpccl_testkit::acl::ipc::code;

/// Set in the child: the variable under test, set to a value it refuses.
const CHILD_ENV: &str = "KPCCL_SIM_ENV_CHILD";

/// What the child checks: every call that reads `var` is refused.
fn child(var: &str) {
    let rt = HostSim::faithful();
    if var == DEVICES_ENV {
        assert_eq!(code(rt.set_device(0)), ACL_ERROR_INVALID_PARAM, "set_device");
        assert_eq!(code(rt.device_can_access_peer(0, 1)), ACL_ERROR_INVALID_PARAM, "can_access_peer");
        return;
    }
    rt.set_device(0).unwrap();
    let p = rt.malloc(4096, ACL_MEM_MALLOC_NORMAL_ONLY).unwrap();
    assert_eq!(code(rt.ipc_mem_get_export_key(p, 4096, 1)), ACL_ERROR_INVALID_PARAM, "export");
    // The free asks the registry about the block's keys too.
    assert_eq!(code(rt.free(p)), ACL_ERROR_INVALID_PARAM, "free");
}

/// Runs the child with `var=value`; its stderr.
fn refused(var: &str, value: &str) -> String {
    let scratch = ScratchDir::new("sim-env", "refused");
    let sim = scratch.path().join("sim");
    // Through the target runner (qemu, for aarch64), as the launcher starts ranks.
    let out = test_alone("bad_values_of_the_simulators_variables_are_refused_naming_them")
        .arg("--nocapture")
        .env(CHILD_ENV, var)
        .env(var, value)
        .env("ASCEND_SIM_DIR", &sim)
        .output()
        .expect("run the child");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "the child failed ({var}={value}): {}\n{stderr}", out.status);
    assert!(!sim.exists(), "simulator state left in {}", sim.display());
    stderr
}

#[test]
fn bad_values_of_the_simulators_variables_are_refused_naming_them() {
    if let Ok(var) = std::env::var(CHILD_ENV) {
        child(&var);
        return;
    }
    let cases = [
        (LOCK_TIMEOUT_ENV, "5s", "milliseconds (a whole number from 0)"),
        (LOCK_TIMEOUT_ENV, "-1", "milliseconds (a whole number from 0)"),
        (DEVICES_ENV, "5s", "a device count (a whole number from 0 to 65536)"),
        // More than a context handle tells apart.
        (DEVICES_ENV, "70000", "a device count (a whole number from 0 to 65536)"),
    ];
    for (var, value, expected) in cases {
        let stderr = refused(var, value);
        let said = format!("ascend simulator: {var}={value:?} is invalid: expected {expected}");
        assert!(stderr.contains(&said), "{var}={value}: stderr lacks {said:?}:\n{stderr}");
    }
}
