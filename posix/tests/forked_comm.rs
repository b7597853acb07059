//! A child forked from a rank has the rank's identity and out-of-band
//! connection: its collectives on the parent's communicator are refused
//! (a window it made would publish the parent's pid, and its allgathers
//! would take the parent's place), and the parent's go on.
#![allow(missing_docs, clippy::std_instead_of_core)]

use kpccl_posix::{Comm, Config, Error, ErrorKind};
use kpccl_testkit::{ScratchDir, Solo};

#[test]
fn a_forked_child_cannot_take_part_in_its_parents_collectives() {
    let dir = ScratchDir::new("forked-comm", "refused");
    let config = Config { shm_dir: dir.path().to_owned(), ..Config::default() };
    let comm = Comm::builder(Solo, 0, 1).config(config).build().unwrap();
    let parent = u64::from(std::process::id());
    let code = kpccl_testkit::in_forked_child(|| {
        let refused = |r: Result<(), Error>| {
            matches!(&r, Err(e @ Error::ForkedChild { parent: p, .. })
                if *p == parent && e.kind() == ErrorKind::InvalidArgument
                && e.to_string().starts_with("the communicator was made before this process was forked from it"))
        };
        let window = comm.window(4096).alloc().map(|w| drop(w.free()));
        i32::from(!refused(window)) + 2 * i32::from(!refused(comm.barrier()))
    });
    assert_eq!(code, 0, "the child's window creation (1) or barrier (2) was not refused");
    assert_eq!(dir.entries(), Vec::<String>::new());
    comm.barrier().unwrap();
    comm.window(4096).alloc().unwrap().free().unwrap();
}
