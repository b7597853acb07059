//! This process's node: the identity that groups ranks into nodes, and the
//! segment directory of a node simulated with `KPCCL_NODE_ID`.

use std::path::PathBuf;

use kpccl_core::layout::Digest;

use crate::{Config, Error, sys};

/// What `read` finds at `path`; empty where the machine has no such file,
/// or lets nobody read it (the same for every rank there). A failure of
/// this process's own (no descriptor or memory left) is an error: read as
/// empty, it made this rank a node of its own, apart from its neighbours.
fn fact(path: &'static str, read: impl FnOnce(&str) -> std::io::Result<String>) -> Result<String, Error> {
    match read(path) {
        Ok(found) => Ok(found),
        Err(e) if matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied) => {
            Ok(String::new())
        }
        Err(e) => Err(Error::NodeIdentity { path, code: e.raw_os_error().unwrap_or(-1) }),
    }
}

/// The first line of `path` (see [`fact`]).
fn first_line(path: &'static str) -> Result<String, Error> {
    fact(path, |p| std::fs::read_to_string(p).map(|s| s.lines().next().unwrap_or_default().to_owned()))
}

/// This process's pid namespace, `pid:[<inode>]` (see [`fact`]).
fn pid_namespace() -> Result<String, Error> {
    fact("/proc/self/ns/pid", |p| std::fs::read_link(p).map(|link| link.to_string_lossy().into_owned()))
}

/// A digest of this node's identity: `KPCCL_NODE_ID` when set, else the
/// boot id, the hostname and the pid namespace (two machines cloned from
/// one image differ by hostname; two boots of one machine, by boot id; two
/// containers with the host's hostname, by pid namespace: a rank names its
/// process, and peers reach its segment, by a pid that means another
/// process, or none, in another namespace).
pub(crate) fn digest(config: &Config) -> Result<u64, Error> {
    let d = Digest::default();
    Ok(match &config.node_id {
        Some(id) => d.bytes(b"KPCCL_NODE_ID\0").bytes(id.as_bytes()),
        None => d
            .bytes(first_line("/proc/sys/kernel/random/boot_id")?.as_bytes())
            .bytes(b"\0")
            .bytes(first_line("/proc/sys/kernel/hostname")?.as_bytes())
            .bytes(b"\0")
            .bytes(pid_namespace()?.as_bytes()),
    }
    .finish())
}

/// Where the node's segments live: the configured directory, or under
/// `KPCCL_NODE_ID` a directory of the simulated node's own inside it
/// (`kpccl-node-<uid>-<digest>`, made on demand and removed when empty).
pub(crate) fn segment_dir(config: &Config, digest: u64) -> (PathBuf, bool) {
    match config.node_id {
        Some(_) => (config.shm_dir.join(format!("kpccl-node-{}-{digest:016x}", sys::euid())), true),
        None => (config.shm_dir.clone(), false),
    }
}
