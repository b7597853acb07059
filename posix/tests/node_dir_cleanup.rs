//! A window whose segment cannot be made (here: no descriptor left) fails
//! and leaves nothing in the segment directory, not even the simulated
//! node's directory it made for the segment.
#![allow(missing_docs)]

use kpccl_posix::{Comm, Config};
use kpccl_testkit::{LoweredLimit, ScratchDir, Solo, lowest_free_descriptor};
use rustix::process::Resource;

#[test]
fn a_segment_that_cannot_be_made_leaves_no_node_directory() {
    let dir = ScratchDir::new("node-dir", "emfile");
    let config = Config { shm_dir: dir.path().to_owned(), node_id: Some("emfile".to_owned()), ..Config::default() };
    let comm = Comm::builder(Solo, 0, 1).config(config).build().expect("communicator");
    // One window first, so that whatever is set up once per process (an
    // emulator's look at its auxiliary vector, say) is done with descriptors.
    comm.window(64).alloc().expect("a first window").free().expect("its free");
    // Every descriptor from the lowest free one on refused: the segment's
    // open fails with EMFILE, after its node directory was made.
    // Restored before the asserts: the scratch directory's clean-up needs descriptors.
    let lowered = LoweredLimit::new(Resource::Nofile, lowest_free_descriptor());
    let made = comm.window(64).alloc();
    drop(lowered);
    let e = made.expect_err("no descriptor for the segment");
    assert!(e.to_string().contains("create the shared segment"), "{e}");
    assert_eq!(dir.entries(), Vec::<String>::new(), "left in the segment directory after: {e}");
}
