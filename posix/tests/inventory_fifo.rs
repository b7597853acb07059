//! `kpccl-run --list` reads a live window through a descriptor of a process
//! that maps it, found by what the descriptor links to. By the time it is
//! opened, that number may name something else of the same name (the
//! process closed the segment and opened another file): a FIFO must not
//! block the listing for good, nor a terminal become the lister's.
#![allow(missing_docs, clippy::std_instead_of_core)]

use std::ffi::CString;
use std::os::unix::fs::OpenOptionsExt;
use std::sync::mpsc;
use std::time::Duration;

use kpccl_testkit::ScratchDir;

#[test]
fn a_fifo_under_a_segments_name_does_not_block_the_listing() {
    let dir = ScratchDir::new("inventory", "fifo");
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    // A segment name (its creator, pid 2^22 + 1, above pid_max: never live).
    let path = dir.path().join(format!("kpccl-{uid}-{}-5-{:016x}", (1 << 22) + 1, 1));
    let c_path = CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0, "mkfifo");
    // Held for reading only: a later open for reading waits for a writer.
    let fifo = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    // A mapped file of the same name, its descriptor closed: the FIFO's is
    // the only descriptor that links to the mapping's path.
    let file = std::fs::OpenOptions::new().read(true).write(true).create_new(true).open(&path).unwrap();
    file.set_len(4096).unwrap();
    // SAFETY: a fresh shared mapping of a file this test owns, at an address
    // the kernel chooses; unmapped below.
    let map = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ,
            libc::MAP_SHARED,
            std::os::fd::AsRawFd::as_raw_fd(&file),
            0,
        )
    };
    assert_ne!(map, libc::MAP_FAILED, "mmap");
    drop(file);
    std::fs::remove_file(&path).unwrap();

    let (tx, rx) = mpsc::channel();
    let listed = dir.path().to_owned();
    std::thread::spawn(move || tx.send(kpccl_posix::inventory::list(&listed).map(|s| s.len())));
    let outcome = rx.recv_timeout(Duration::from_secs(10));
    if outcome.is_err() {
        // Let the blocked open through (a writer comes), so the thread ends.
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&fifo)));
    }
    // SAFETY: the mapping made above, unmapped once.
    unsafe { libc::munmap(map, 4096) };
    drop(fifo);
    let listed = outcome.expect("the listing blocked on a FIFO").expect("the directory lists");
    assert!(listed <= 1, "{listed} segments for one mapping");
}
