//! A child forked from a rank does not have the rank's window mappings
//! (`MADV_DONTFORK`); their ranges stay reserved there, inaccessible, so a
//! use of the parent's window in the child faults at once instead of
//! reaching whatever the child would map at that address later.
#![allow(missing_docs, clippy::std_instead_of_core)]

use kpccl_posix::{Comm, Config};
use kpccl_testkit::{ScratchDir, Solo};

#[test]
fn a_forked_childs_copy_of_a_window_range_stays_reserved() {
    let dir = ScratchDir::new("forked-window", "reserved");
    let config = Config { shm_dir: dir.path().to_owned(), ..Config::default() };
    let comm = Comm::builder(Solo, 0, 1).config(config).build().unwrap();
    let win = comm.window(1 << 16).alloc().unwrap();
    let addr = win.local_segment().ptr.as_ptr().cast::<libc::c_void>();
    let code = kpccl_testkit::in_forked_child(|| {
        // SAFETY: asks for a fresh mapping that must not replace anything
        // (MAP_FIXED_NOREPLACE): it is not made there if the range is taken.
        let p = unsafe {
            libc::mmap(
                addr,
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE,
                -1,
                0,
            )
        };
        // The kernel refuses (EEXIST); qemu-user takes the flag as a hint and
        // maps elsewhere. Either way, nothing of the child's lands there.
        i32::from(p == addr)
    });
    assert_eq!(code, 0, "the child could map over its copy of the window's range");
    win.free().unwrap();
    assert_eq!(dir.entries(), Vec::<String>::new());
}
