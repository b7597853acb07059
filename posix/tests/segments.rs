//! The Linux platform's segment rules: exclusive creation, mode 0600, and an
//! attach that refuses another user's segment, a wrong size or a symlink.
#![allow(missing_docs, clippy::std_instead_of_core)]

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::PathBuf;

use kpccl_core::Platform;
use kpccl_core::error::PlatformOp;
use kpccl_posix::PosixPlatform;

struct Dir(PathBuf);

impl Dir {
    fn new(case: &str) -> Self {
        let d = PathBuf::from(format!("/dev/shm/kpccl-segtest-{}-{case}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        Self(d)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn created_exclusively_and_private() {
    let dir = Dir::new("excl");
    let p = PosixPlatform::new(&dir.0);
    let seg = p.create("kpccl-x", 8192).unwrap();
    let meta = std::fs::metadata(dir.0.join("kpccl-x")).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!(meta.len(), 8192);
    let again = p.create("kpccl-x", 8192).unwrap_err();
    assert_eq!((again.op, again.code), (PlatformOp::Create, i64::from(libc::EEXIST)));
    drop(seg);
    p.unlink("kpccl-x").unwrap();
}

#[test]
fn attach_refuses_wrong_size_symlinks_and_missing_names() {
    let dir = Dir::new("refuse");
    let p = PosixPlatform::new(&dir.0);
    let _seg = p.create("kpccl-y", 8192).unwrap();
    assert_eq!(p.open("kpccl-y", 4096).unwrap_err().op, PlatformOp::Size);
    std::os::unix::fs::symlink(dir.0.join("kpccl-y"), dir.0.join("kpccl-link")).unwrap();
    let e = p.open("kpccl-link", 8192).unwrap_err();
    assert_eq!((e.op, e.code), (PlatformOp::Open, i64::from(libc::ELOOP)));
    assert_eq!(p.open("kpccl-none", 8192).unwrap_err().op, PlatformOp::Open);
    assert!(p.open("kpccl-y", 8192).is_ok());
}

#[test]
fn attach_refuses_another_users_segment() {
    let dir = Dir::new("owner");
    let p = PosixPlatform::new(&dir.0);
    let _seg = p.create("kpccl-z", 4096).unwrap();
    let path = dir.0.join("kpccl-z");
    // Hand the file to another user; only root can.
    if std::os::unix::fs::chown(&path, Some(65534), None).is_err() {
        eprintln!("SKIPPED attach_refuses_another_users_segment: chown needs root");
        return;
    }
    assert_eq!(std::fs::metadata(&path).unwrap().uid(), 65534);
    let e = p.open("kpccl-z", 4096).unwrap_err();
    assert_eq!((e.op, e.code), (PlatformOp::Owner, 65534));
}
