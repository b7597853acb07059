//! This process's node: the identity that groups ranks into nodes, and the
//! segment directory of a node simulated with `KPCCL_NODE_ID`.

use std::path::PathBuf;

use kpccl_core::layout::Digest;

use crate::{Config, sys};

fn first_line(path: &str) -> String {
    std::fs::read_to_string(path).map(|s| s.lines().next().unwrap_or_default().to_owned()).unwrap_or_default()
}

/// A digest of this node's identity: `KPCCL_NODE_ID` when set, else the
/// boot id and the hostname (two machines cloned from one image differ by
/// hostname; two boots of one machine, by boot id).
pub(crate) fn digest(config: &Config) -> u64 {
    let d = Digest::default();
    match &config.node_id {
        Some(id) => d.bytes(b"KPCCL_NODE_ID\0").bytes(id.as_bytes()),
        None => d
            .bytes(first_line("/proc/sys/kernel/random/boot_id").as_bytes())
            .bytes(b"\0")
            .bytes(first_line("/proc/sys/kernel/hostname").as_bytes()),
    }
    .finish()
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
