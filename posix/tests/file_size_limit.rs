//! A window larger than the process's file size limit (`ulimit -f`, which
//! batch systems set) is an error, not a death: the kernel answers a
//! `ftruncate` or `fallocate` past `RLIMIT_FSIZE` with `SIGXFSZ`, whose
//! default action kills the process (with a core dump).
#![allow(missing_docs)]

use kpccl_core::Platform;
use kpccl_core::error::PlatformOp;
use kpccl_posix::{ErrorKind, PosixPlatform};
use kpccl_testkit::{LoweredLimit, ScratchDir};
use rustix::process::Resource;

/// One test in this binary: the limit is the process's.
#[test]
fn a_window_past_the_file_size_limit_is_an_error_not_sigxfsz() {
    let dir = ScratchDir::new("fsize", "limit");
    let p = PosixPlatform::new(dir.path());
    // A segment within the limit, then one past it, under a 64 KiB limit.
    let lowered = LoweredLimit::new(Resource::Fsize, 64 << 10);
    let small = p.create("kpccl-small", 16 << 10).map(|s| kpccl_core::Segment::reserve(&s, 0, 16 << 10));
    let big = p.create("kpccl-big", 1 << 20).map(drop);
    let within = p.create("kpccl-within", 64 << 10).unwrap();
    // A peer with a lower limit may still reserve within the file's length
    // (the kernel does not look there), not past it.
    lowered.set(16 << 10);
    let inside = kpccl_core::Segment::reserve(&within, 0, 64 << 10);
    let reserved = kpccl_core::Segment::reserve(&within, 32 << 10, 64 << 10);
    drop(lowered);
    assert!(inside.is_ok(), "{inside:?}");
    assert!(matches!(small, Ok(Ok(()))), "{small:?}");
    let e = big.unwrap_err();
    assert_eq!((e.op, e.code), (PlatformOp::Resize, i64::from(libc::EFBIG)), "{e:?}");
    let e = reserved.unwrap_err();
    assert_eq!((e.op, e.code), (PlatformOp::Reserve, i64::from(libc::EFBIG)), "{e:?}");
    let text = kpccl_posix::Error::Platform { dir: dir.path().to_owned(), rank: None, error: e };
    assert_eq!(text.kind(), ErrorKind::NoSpace);
    assert!(text.to_string().contains("ulimit -f"), "says what to do: {text}");
    drop(within);
    assert_eq!(dir.entries(), Vec::<String>::new());
}
