//! The conformance suite against the acl backend loading this crate's
//! `libascendcl.so` end to end (dlopen, symbol lookup, C ABI, simulator).
#![allow(clippy::std_instead_of_core, clippy::alloc_instead_of_core)]

use std::path::PathBuf;

use kpccl_ascend::acl::AclBackend;

/// The simulator library cargo built next to this test (`target/<profile>/deps`, or
/// its parent).
fn simlib() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let deps = exe.parent().expect("deps directory");
    [deps.join("libascendcl.so"), deps.join("../libascendcl.so")]
        .into_iter()
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("libascendcl.so not built next to {}", exe.display()))
}

fn backend() -> Option<AclBackend> {
    let b = AclBackend::load_from(&simlib()).expect("load the simulator library");
    assert!(b.api().is_simulator());
    Some(b)
}

kpccl_testkit::conformance_tests!(backend());
