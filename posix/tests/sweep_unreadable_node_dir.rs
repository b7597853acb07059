//! A sweep goes on past a simulated node's directory it cannot read (one
//! whose job removed it meanwhile, or, as here, no descriptor left to read
//! it): every other leftover is still removed, and the sweep succeeds.
#![allow(missing_docs)]

use kpccl_testkit::{LoweredLimit, ScratchDir, lowest_free_descriptor};
use rustix::process::Resource;

/// One test in this binary: the limit is the process's.
#[test]
fn a_node_directory_that_cannot_be_read_keeps_no_other_leftover() {
    let dir = ScratchDir::new("sweep", "unreadable-node");
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    // pid 2^22 + 1 is above Linux's pid_max: never a live process.
    let dead = format!("kpccl-{uid}-{}-5-{:016x}", (1 << 22) + 1, 1);
    std::fs::write(dir.path().join(&dead), b"x").unwrap();
    let node = dir.path().join(format!("kpccl-node-{uid}-{:016x}", 7));
    std::fs::create_dir(&node).unwrap();
    std::fs::write(node.join(&dead), b"x").unwrap();
    // One descriptor left: the sweep reads the directory, but not the node's inside it.
    let lowered = LoweredLimit::new(Resource::Nofile, lowest_free_descriptor() + 1);
    let swept = kpccl_posix::sweep(dir.path());
    drop(lowered);
    assert_eq!(swept.expect("the sweep of the rest"), vec![dead.clone()]);
    assert!(node.join(&dead).exists(), "the node's leftover waits for the next sweep");
    // With descriptors again, the next sweep takes the node's.
    let node_dead = format!("kpccl-node-{uid}-{:016x}/{dead}", 7);
    assert_eq!(kpccl_posix::sweep(dir.path()).unwrap(), vec![node_dead]);
    assert_eq!(dir.entries(), Vec::<String>::new());
}
