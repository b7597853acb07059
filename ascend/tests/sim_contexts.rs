//! The simulator against the documented contract (docs/ascend-ipc.md §1.2,
//! "aclrtSetCurrentContext"): a handle it never gave is 100000, a context of a
//! device released since 107002.
#![allow(missing_docs)]

use kpccl_ascend::codes::{ACL_ERROR_INVALID_PARAM, ACL_ERROR_RT_CONTEXT_NULL};
use kpccl_ascend::sim::HostSim;
use kpccl_ascend::{AclContext, AclRuntime};

fn code(r: kpccl_ascend::AclResult<()>) -> i32 {
    r.err().map_or(0, |e| e.code())
}

/// The handle of the context device `dev` would get after `releases`
/// releases: the simulator's own numbering, read off a context it gave.
fn later_context(given: AclContext, dev_given: i32, dev: i32, releases: usize) -> AclContext {
    AclContext(given.0 - dev_given as usize + dev as usize + releases * (1 << 16))
}

#[test]
fn a_context_never_given_is_an_invalid_parameter_and_a_released_one_is_gone() {
    let rt = HostSim::faithful();
    rt.set_device(1).unwrap();
    let first = rt.get_current_context().unwrap();
    rt.reset_device(1).unwrap();
    // Given, then released with the device: gone.
    assert_eq!(code(rt.set_current_context(first)), ACL_ERROR_RT_CONTEXT_NULL);
    // Never given: the context device 1 would get after 1000 more releases,
    // and that of a device this process never set.
    let future = later_context(first, 1, 1, 1000);
    assert_eq!(code(rt.set_current_context(future)), ACL_ERROR_INVALID_PARAM, "a context of a later epoch");
    let never_set = later_context(first, 1, 6, 0);
    assert_eq!(code(rt.set_current_context(never_set)), ACL_ERROR_INVALID_PARAM, "a device never set");
}
