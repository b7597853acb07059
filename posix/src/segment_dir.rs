//! What is wrong with a segment directory, in words a user can act on.
//!
//! A simulated node's directory (`kpccl-node-<uid>-<digest>`, see
//! `KPCCL_NODE_ID`) sits in a directory every user may write (`/dev/shm`):
//! another user can create it first, and every later job would fail with a
//! bare "permission denied". Creation checks it (see `sys::private_dir`) and
//! a failed creation names the directory, the problem and the fix.

use std::fmt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::sys;

/// Why segments cannot be created in a directory.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DirProblem {
    /// It is a link, a file or something else than a directory.
    NotADirectory,
    /// A private directory that belongs to another user.
    Owner {
        /// Its owner.
        uid: u32,
        /// Its permission bits.
        mode: u32,
    },
    /// A private directory whose mode is not 0700 (others may enter it, or
    /// this user may not write it).
    Mode {
        /// Its permission bits.
        mode: u32,
    },
    /// This user may not create files in it.
    NotWritable {
        /// Its owner.
        uid: u32,
        /// Its permission bits.
        mode: u32,
    },
}

/// A segment directory that cannot be used, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirError {
    /// The directory.
    pub path: PathBuf,
    /// What is wrong with it.
    pub problem: DirProblem,
}

/// What is wrong with `dir`, if anything: any directory this user may
/// write, or with `private`, one of this user's own that nobody else may
/// enter. `None` also when it does not exist (creating it will tell).
pub(crate) fn problem(dir: &Path, private: bool) -> Option<DirProblem> {
    let meta = std::fs::symlink_metadata(dir).ok()?;
    let (uid, mode) = (meta.uid(), meta.mode() & 0o7777);
    if !meta.file_type().is_dir() {
        Some(DirProblem::NotADirectory)
    } else if private && uid != sys::euid() {
        Some(DirProblem::Owner { uid, mode })
    } else if private && mode & 0o777 != 0o700 {
        Some(DirProblem::Mode { mode })
    } else if !private && !sys::can_write(dir) && dir.exists() {
        // (Gone meanwhile: creating in it will tell.)
        Some(DirProblem::NotWritable { uid, mode })
    } else {
        None
    }
}

impl fmt::Display for DirError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = self.path.display();
        let me = sys::euid();
        match self.problem {
            DirProblem::NotADirectory => write!(
                f,
                "the segment directory {path} is not a directory (a link or a file?): remove it, or set \
                 KPCCL_SHM_DIR to a directory on a tmpfs"
            ),
            DirProblem::Owner { uid, mode } => write!(
                f,
                "the node's private segment directory {path} belongs to uid {uid} (mode {mode:04o}), not to this \
                 user (uid {me}): another user created it first. Have it removed (by uid {uid} or root), or set \
                 KPCCL_SHM_DIR to a directory of your own"
            ),
            DirProblem::Mode { mode } => write!(
                f,
                "the node's private segment directory {path} has mode {mode:04o}, not 0700 (only its owner may \
                 enter and write it). Remove it (kpccl makes it again) or `chmod 700` it"
            ),
            DirProblem::NotWritable { uid, mode } => write!(
                f,
                "this user (uid {me}) cannot create files in the segment directory {path} (owner uid {uid}, mode \
                 {mode:04o}): set KPCCL_SHM_DIR to a writable directory on a tmpfs"
            ),
        }
    }
}

impl std::error::Error for DirError {}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn names_each_problem() {
        let base = std::env::temp_dir().join(format!("kpccl-dirproblem-{}", std::process::id()));
        std::fs::create_dir_all(&base).unwrap();
        let open = base.join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(problem(&open, true), Some(DirProblem::Mode { mode: 0o755 }));
        assert_eq!(problem(&open, false), None);
        let file = base.join("file");
        std::fs::write(&file, b"").unwrap();
        assert_eq!(problem(&file, false), Some(DirProblem::NotADirectory));
        assert_eq!(problem(&base.join("missing"), true), None);
        let e = DirError { path: open.clone(), problem: DirProblem::Owner { uid: 4242, mode: 0o700 } };
        let text = e.to_string();
        assert!(
            text.contains(&open.display().to_string()) && text.contains("uid 4242") && text.contains("0700"),
            "{text}"
        );
        std::fs::remove_dir_all(&base).unwrap();
    }
}
