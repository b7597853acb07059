//! A scratch directory of one test, removed on drop.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// A fresh directory `kpccl-<what>-<pid>-<nanos>-<case>` (under `/dev/shm`
/// unless told otherwise), removed with what it holds when dropped: a
/// segment directory of its own for each test, so that tests running at
/// once never see (or sweep) each other's segments.
#[derive(Debug)]
pub struct ScratchDir(PathBuf);

impl ScratchDir {
    /// A fresh directory under `/dev/shm` (tmpfs, where segments live).
    pub fn new(what: &str, case: &str) -> Self {
        Self::under(Path::new("/dev/shm"), what, case)
    }

    /// A fresh directory under `parent`.
    ///
    /// # Panics
    /// If it cannot be made: the test cannot run.
    pub fn under(parent: &Path, what: &str, case: &str) -> Self {
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let dir = parent.join(format!("kpccl-{what}-{}-{nanos}-{case}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot make {}: {e}", dir.display()));
        Self(dir)
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// The names of its entries, sorted (none if it is gone).
    pub fn entries(&self) -> Vec<String> {
        entries(&self.0)
    }
}

/// The names of the entries of `dir`, sorted (none if it is not there).
pub fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(Result::ok).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    names.sort();
    names
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_fresh_listed_and_removed_with_its_contents() {
        let parent = std::env::temp_dir();
        let (a, b) = (ScratchDir::under(&parent, "testkit", "x"), ScratchDir::under(&parent, "testkit", "y"));
        assert_ne!(a.path(), b.path());
        assert!(a.entries().is_empty());
        std::fs::write(a.path().join("z"), b"1").unwrap();
        std::fs::write(a.path().join("k"), b"1").unwrap();
        assert_eq!(a.entries(), ["k", "z"]);
        let path = a.path().to_owned();
        drop(a);
        assert!(!path.exists(), "{} is still there", path.display());
    }
}
