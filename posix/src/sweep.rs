//! Removing segments whose creator died between creating and unlinking them:
//! microseconds today (see `way_in.rs`), but any version or crash that left a
//! name must not hold its memory for ever. Every window creation sweeps its
//! node's directory first ([`reap`]); `kpccl-run` sweeps when a rank dies of
//! a signal, and `kpccl-run --sweep` on demand.
//!
//! A segment's name is `kpccl-<uid>-<pid>-<start time, hex>-<random>`: the
//! sweep removes it only when it belongs to this user (by name and by owner)
//! and that creator — the same pid *and* start time — no longer runs, so it
//! never touches a live job's segment or another user's. The directories of
//! simulated nodes (`kpccl-node-<uid>-<digest>`, see `KPCCL_NODE_ID`) are
//! swept too, and removed once empty.

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use kpccl_core::ProcessIdentity;

use crate::{liveness, sys};

/// The creator a segment name records, if it is a kpccl segment name.
pub(crate) fn creator(name: &str) -> Option<ProcessIdentity> {
    let mut parts = name.strip_prefix("kpccl-")?.split('-');
    let uid = parts.next()?.parse().ok()?;
    let pid = parts.next()?.parse().ok()?;
    let start_time = u64::from_str_radix(parts.next()?, 16).ok()?;
    let random = parts.next()?;
    (random.len() == 16 && parts.next().is_none()).then_some(ProcessIdentity { pid, start_time, uid })
}

/// Removes this user's segments in `dir` (and in its simulated nodes'
/// directories) whose creator is dead; returns their names (`node-dir/name`
/// inside a node's directory).
pub fn sweep(dir: &Path) -> io::Result<Vec<String>> {
    let me = sys::euid();
    let mut removed = Vec::new();
    // Only the directory itself failing fails the sweep: one entry that
    // cannot be read (or a node's directory, removed meanwhile by its job)
    // keeps none of the others.
    for entry in std::fs::read_dir(dir)?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(&format!("kpccl-node-{me}-")) {
            let Ok(meta) = entry.path().symlink_metadata() else { continue };
            if meta.is_dir() && meta.uid() == me {
                match sweep(&entry.path()) {
                    Ok(inside) => removed.extend(inside.into_iter().map(|n| format!("{name}/{n}"))),
                    Err(e) => debug_cannot("sweep", &entry.path(), &e),
                }
                // Fails while a live job's segment is in it.
                let _ = std::fs::remove_dir(entry.path());
            }
            continue;
        }
        let Some(who) = creator(&name) else { continue };
        // Not followed: a link (another user's, in a sticky directory) is never a segment.
        let Ok(meta) = entry.path().symlink_metadata() else { continue };
        if who.uid != me || meta.uid() != me || !meta.is_file() || liveness::is_alive(&who) {
            continue;
        }
        match std::fs::remove_file(entry.path()) {
            Ok(()) => removed.push(name),
            // Someone else (another sweep, the creator itself) got there first.
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            // One entry that cannot go keeps none of the others.
            Err(e) => debug_cannot("remove", &entry.path(), &e),
        }
    }
    Ok(removed)
}

fn debug_cannot(what: &str, path: &Path, e: &io::Error) {
    crate::log::log(crate::log::Level::Debug, format_args!("cannot {what} {}: {e}", path.display()));
}

/// The sweep every window creation makes of its node's segment directory
/// before creating (see `sweep`): a creator killed at the wrong moment (or
/// an older version's) leaves nothing for longer than the next creation on
/// its node. Best effort: a directory that cannot be read is not this
/// creation's failure.
pub(crate) fn reap(dir: &Path) {
    match sweep(dir) {
        Ok(removed) if !removed.is_empty() => crate::log::log(
            crate::log::Level::Info,
            format_args!("removed {} segment(s) of dead creators from {}: {removed:?}", removed.len(), dir.display()),
        ),
        Ok(_) => {}
        Err(e) => crate::log::log(crate::log::Level::Debug, format_args!("cannot sweep {}: {e}", dir.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_only_kpccl_segment_names() {
        let who = creator("kpccl-1000-4242-1f-0123456789abcdef").unwrap();
        assert_eq!((who.uid, who.pid, who.start_time), (1000, 4242, 0x1f));
        for bad in
            ["kpccl-test-1-2", "kpccl-1000-4242-1f", "other-1-2-3-0123456789abcdef", "kpccl-1-2-zz-0123456789abcdef"]
        {
            assert!(creator(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn removes_dead_creators_segments_and_keeps_live_ones() {
        let dir = std::env::temp_dir().join(format!("kpccl-sweep-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let me = liveness::current();
        let live = format!("kpccl-{}-{}-{:x}-{:016x}", me.uid, me.pid, me.start_time, 1);
        // pid 2^22 + 1 is above Linux's pid_max: never a live process.
        let dead = format!("kpccl-{}-{}-{:x}-{:016x}", me.uid, (1 << 22) + 1, 5, 2);
        let reused = format!("kpccl-{}-{}-{:x}-{:016x}", me.uid, me.pid, me.start_time + 1, 3);
        let foreign = format!("kpccl-{}-{}-{:x}-{:016x}", me.uid + 1, (1 << 22) + 1, 5, 4);
        for n in [&live, &dead, &reused, &foreign] {
            std::fs::write(dir.join(n), b"x").unwrap();
        }
        // A link named as a dead creator's segment, to a file of this user: no segment.
        let link = format!("kpccl-{}-{}-{:x}-{:016x}", me.uid, (1 << 22) + 1, 5, 5);
        std::os::unix::fs::symlink(dir.join(&live), dir.join(&link)).unwrap();
        let node = dir.join(format!("kpccl-node-{}-{:016x}", me.uid, 7));
        std::fs::create_dir(&node).unwrap();
        std::fs::write(node.join(&dead), b"x").unwrap();
        let mut removed = sweep(&dir).unwrap();
        removed.sort();
        assert!(!node.exists(), "an emptied node directory goes");
        let node_dead = format!("kpccl-node-{}-{:016x}/{dead}", me.uid, 7);
        let mut expected = vec![dead.clone(), reused.clone(), node_dead];
        expected.sort();
        assert_eq!(removed, expected);
        assert!(dir.join(&live).exists() && dir.join(&foreign).exists());
        assert!(dir.join(&link).symlink_metadata().is_ok(), "a link is left alone");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
