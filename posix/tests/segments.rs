//! The Linux platform's segment rules: created without a name, mode 0600, and
//! an attach that refuses another user's segment, a wrong size or a symlink.
#![allow(missing_docs, clippy::std_instead_of_core)]

use std::os::unix::fs::{MetadataExt, PermissionsExt};

use kpccl_core::error::PlatformOp;
use kpccl_core::{Platform, Segment as _};
use kpccl_posix::PosixPlatform;
use kpccl_testkit::ScratchDir;

#[test]
fn created_without_a_name_and_private() {
    let dir = ScratchDir::new("segtest", "excl");
    let p = PosixPlatform::new(dir.path());
    let seg = p.create("kpccl-x", 8192).unwrap();
    // tmpfs makes files without names (O_TMPFILE): nothing for a crash to leave.
    assert_eq!(dir.entries(), Vec::<String>::new(), "a name was made");
    let mut way_in = String::new();
    p.publish(&seg, "kpccl-x", &mut way_in).unwrap();
    let fd = way_in.split(':').nth(2).unwrap();
    let meta = std::fs::metadata(format!("/proc/self/fd/{fd}")).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!(meta.len(), 8192);
    assert_eq!(meta.nlink(), 0, "the file never has a name");
}

#[test]
fn attach_refuses_wrong_size_symlinks_and_missing_names() {
    let dir = ScratchDir::new("segtest", "refuse");
    let p = PosixPlatform::new(dir.path());
    // A named segment, as an older version (or a file system without
    // nameless files) made it.
    std::fs::write(dir.path().join("kpccl-y"), vec![0u8; 8192]).unwrap();
    assert_eq!(p.open("kpccl-y", 4096).unwrap_err().op, PlatformOp::Size);
    std::os::unix::fs::symlink(dir.path().join("kpccl-y"), dir.path().join("kpccl-link")).unwrap();
    let e = p.open("kpccl-link", 8192).unwrap_err();
    assert_eq!((e.op, e.code), (PlatformOp::Open, i64::from(libc::ELOOP)));
    assert_eq!(p.open("kpccl-none", 8192).unwrap_err().op, PlatformOp::Open);
    assert!(p.open("kpccl-y", 8192).is_ok());
}

#[test]
fn attach_refuses_another_users_segment() {
    let dir = ScratchDir::new("segtest", "owner");
    let p = PosixPlatform::new(dir.path());
    let path = dir.path().join("kpccl-z");
    std::fs::write(&path, vec![0u8; 4096]).unwrap();
    // Hand the file to another user; only root can.
    if std::os::unix::fs::chown(&path, Some(65534), None).is_err() {
        eprintln!("SKIPPED attach_refuses_another_users_segment: chown needs root");
        return;
    }
    assert_eq!(std::fs::metadata(&path).unwrap().uid(), 65534);
    let e = p.open("kpccl-z", 4096).unwrap_err();
    assert_eq!((e.op, e.code), (PlatformOp::Owner, 65534));
}

#[test]
fn a_published_segment_has_no_name_and_is_reached_by_its_descriptor() {
    let dir = ScratchDir::new("segtest", "publish");
    let p = PosixPlatform::new(dir.path());
    let seg = p.create("kpccl-w", 8192).unwrap();
    let mut way_in = String::new();
    p.publish(&seg, "kpccl-w", &mut way_in).unwrap();
    assert!(!dir.path().join("kpccl-w").exists(), "the name is gone at once");
    assert!(way_in.starts_with("fd:"), "{way_in}");
    let peer = p.open(&way_in, 8192).unwrap();
    // SAFETY: both map the same 8192-byte file; the test is its only user.
    unsafe { seg.base().as_ptr().write(42) };
    // SAFETY: as above; the write is ordered before the read by this thread.
    assert_eq!(unsafe { peer.base().as_ptr().read() }, 42);
    assert_eq!(p.open(&way_in, 4096).unwrap_err().op, PlatformOp::Size);
    // The creator closes it: its descriptor number may now name another file.
    drop(seg);
    let e = p.open(&way_in, 8192).unwrap_err();
    assert_eq!(e.op, PlatformOp::Open, "{e}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn creation_removes_what_a_dead_creator_left_and_nothing_else() {
    let dir = ScratchDir::new("segtest", "reap");
    let p = PosixPlatform::new(dir.path());
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    // pid 2^22 + 1 is above Linux's pid_max: never a live process.
    let dead = format!("kpccl-{uid}-{}-5-{:016x}", (1 << 22) + 1, 1);
    let foreign = format!("kpccl-{}-{}-5-{:016x}", uid + 1, (1 << 22) + 1, 2);
    let unrelated = "kpccl-notours".to_owned();
    for n in [&dead, &foreign, &unrelated] {
        std::fs::write(dir.path().join(n), b"x").unwrap();
    }
    let live = p.create("kpccl-v", 4096).unwrap();
    let left = dir.entries();
    // The dead creator's name is gone; the new segment has none.
    let mut expected = vec![foreign, unrelated];
    expected.sort();
    assert_eq!(left, expected);
    drop(live);
}

/// A simulated node's directory must go once empty: a nameless creation
/// that fails after making it (here the mapping: 4 EiB cannot be mapped)
/// removes it itself, since the core calls no `unlink` after a failed
/// `create`.
#[test]
fn a_failed_nameless_creation_leaves_no_node_directory() {
    let dir = ScratchDir::new("segtest", "nodedir-fail");
    let node = dir.path().join("kpccl-node-review-0");
    let p = PosixPlatform::with_node_dir(&node);
    let e = p.create("kpccl-big", 1 << 62).unwrap_err();
    assert_eq!(e.op, PlatformOp::Map, "{e:?}");
    assert!(!node.exists(), "the failed creation left the node directory {}", node.display());
}

/// A one-rank communicator whose segments go to a fresh directory for `case`.
fn solo_comm(case: &str) -> (ScratchDir, kpccl_posix::Comm<kpccl_testkit::Solo>) {
    let dir = ScratchDir::new("segtest", case);
    let config = kpccl_posix::Config { shm_dir: dir.path().to_owned(), ..kpccl_posix::Config::default() };
    let comm = kpccl_posix::Comm::builder(kpccl_testkit::Solo, 0, 1).config(config).build().unwrap();
    (dir, comm)
}

/// A process forked from a rank (a helper, Python's multiprocessing) holds
/// no descriptor of a segment: it would keep the window's memory after the
/// window is freed.
#[test]
fn a_forked_child_holds_no_segment_file() {
    let (_dir, comm) = solo_comm("fork");
    let win = comm.window(1 << 20).alloc().unwrap();
    let prefix = comm.segment_dir().as_os_str().as_encoded_bytes().to_vec();
    let links: Vec<std::ffi::CString> =
        (0..1024).map(|fd| std::ffi::CString::new(format!("/proc/self/fd/{fd}")).unwrap()).collect();
    let code = kpccl_testkit::in_forked_child(|| {
        let mut target = [0u8; 4096];
        let mut held = 0;
        for link in &links {
            // SAFETY: a NUL-terminated path and a buffer of its stated length.
            let n = unsafe { libc::readlink(link.as_ptr(), target.as_mut_ptr().cast(), target.len()) };
            if usize::try_from(n).is_ok_and(|n| target[..n].starts_with(&prefix)) {
                held += 1;
            }
        }
        held
    });
    assert_eq!(code, 0, "the child holds descriptors of the segment");
    win.fence().unwrap();
    win.free().unwrap();
}

/// A child forked from a rank may drop its parent's window: the window's
/// memory is not mapped there (`MADV_DONTFORK`), so the drop writes no
/// leaving mark, unmaps nothing and closes no descriptor (the numbers may
/// name the child's own files by then); the parent's window is untouched.
#[test]
fn a_forked_child_drops_the_parents_window_touching_nothing() {
    let (_dir, comm) = solo_comm("forkdrop");
    let win = comm.window(1 << 16).alloc().unwrap();
    assert!(!win.inherited());
    let null = c"/dev/null";
    // Taken and dropped in the child only.
    let mut both = Some((win, comm));
    let code = kpccl_testkit::in_forked_child(|| {
        // The child's own files, on the numbers the fork handler freed.
        // SAFETY: a NUL-terminated path.
        let mine: Vec<i32> = (0..8).map(|_| unsafe { libc::open(null.as_ptr(), libc::O_RDONLY) }).collect();
        let (win, comm) = both.take().expect("the parent's window");
        if !win.inherited() {
            return 1;
        }
        drop(win);
        drop(comm);
        // SAFETY: F_GETFD reads a descriptor's flags; -1 if it was closed.
        if mine.iter().all(|&fd| fd >= 0 && unsafe { libc::fcntl(fd, libc::F_GETFD) } >= 0) { 0 } else { 2 }
    });
    assert_eq!(code, 0, "1: not inherited, 2: the drop closed the child's files");
    let (win, _comm) = both.expect("the parent's window");
    win.write(0, 0, &[7u8]).unwrap();
    win.fence().unwrap();
    win.free().unwrap();
}

/// A way in whose descriptor number the creator has reused for something
/// else than a segment (here a terminal) is refused without opening it:
/// opening a terminal would make it the controlling terminal of a rank that
/// leads its session and has none (a serial line's open may even block),
/// and other devices act on open.
#[test]
fn a_way_in_to_a_reused_descriptor_opens_no_terminal() {
    let dir = ScratchDir::new("segtest", "reused-fd");
    let p = PosixPlatform::new(dir.path());
    let code = kpccl_testkit::in_forked_child(|| {
        match new_session_and_terminal() {
            None => 3,
            Some(tty) => {
                // SAFETY: getpid has no preconditions and cannot fail.
                let way_in = format!("fd:{}:{tty}:1", unsafe { libc::getpid() });
                let refused = p.open(&way_in, 4096).is_err_and(|e| e.op == PlatformOp::Open);
                // Without a controlling terminal, /dev/tty cannot be opened.
                // SAFETY: a NUL-terminated path.
                let ctty = unsafe { libc::open(c"/dev/tty".as_ptr(), libc::O_RDWR | libc::O_NOCTTY) };
                match (refused, ctty < 0) {
                    (false, _) => 1,
                    (true, false) => 2,
                    (true, true) => 0,
                }
            }
        }
    });
    assert_eq!(code, 0, "1: not refused, 2: the terminal became the child's, 3: no terminal to test with");
    assert_eq!(dir.entries(), Vec::<String>::new());
}

/// In a forked child: a session of its own (no controlling terminal) and
/// the descriptor of a new terminal (a pty), opened without making it the
/// controlling one.
fn new_session_and_terminal() -> Option<i32> {
    // SAFETY: setsid has no preconditions (a forked child leads no group).
    if unsafe { libc::setsid() } < 0 {
        return None;
    }
    // SAFETY: opens a new pty master; no memory is passed.
    let master = unsafe { libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY) };
    // SAFETY: `master` is a pty master this child owns.
    if master < 0 || unsafe { libc::grantpt(master) } != 0 || unsafe { libc::unlockpt(master) } != 0 {
        return None;
    }
    let mut name = [0 as libc::c_char; 128];
    // SAFETY: a buffer of the stated length, for the NUL-terminated name.
    if unsafe { libc::ptsname_r(master, name.as_mut_ptr(), name.len()) } != 0 {
        return None;
    }
    // SAFETY: `name` is NUL-terminated (ptsname_r succeeded).
    let tty = unsafe { libc::open(name.as_ptr(), libc::O_RDWR | libc::O_NOCTTY) };
    (tty >= 0).then_some(tty)
}

/// A umask that takes the owner's own bits (0277) leaves the segment and a
/// simulated node's directory usable: made 0600 and 0700 whatever it says.
/// Before, kpccl refused the node directory it had just made (mode 0500:
/// "not 0700, remove it, kpccl makes it again", and it did, alike), and
/// peers could not open a segment of mode 0400.
#[test]
fn a_umask_without_owner_bits_still_makes_usable_segments() {
    let dir = ScratchDir::new("segtest", "umask");
    let node = dir.path().join("kpccl-node-umask-0");
    let p = PosixPlatform::with_node_dir(&node);
    let code = kpccl_testkit::in_forked_child(|| {
        // SAFETY: umask has no preconditions; the child is the process it changes.
        unsafe { libc::umask(0o277) };
        match p.create("kpccl-u", 4096) {
            Err(_) => 1,
            Ok(seg) => {
                let node_mode = std::fs::metadata(&node).map_or(0, |m| m.permissions().mode() & 0o777);
                let mut way_in = String::new();
                p.publish(&seg, "kpccl-u", &mut way_in).unwrap();
                let fd = way_in.split(':').nth(2).unwrap();
                let meta = std::fs::metadata(format!("/proc/self/fd/{fd}")).unwrap();
                if (node_mode, meta.permissions().mode() & 0o777) == (0o700, 0o600) { 0 } else { 2 }
            }
        }
    });
    assert_eq!(code, 0, "1: creation failed, 2: wrong modes");
    assert_eq!(dir.entries(), Vec::<String>::new());
}
