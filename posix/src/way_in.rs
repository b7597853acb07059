//! How the other ranks reach a window's segment once its name is gone: the
//! creator's open file descriptor, through `/proc/<pid>/fd/<fd>`.
//!
//! Why not a name: a name lives until someone removes it, and the creator is
//! the only one that can while the others have not attached — across two
//! out-of-band allgathers and every rank's `fallocate`, tens of milliseconds
//! to seconds for a large window. A crash of the creator in that span left
//! the segment (its memory) behind. Published as a descriptor, the segment
//! needs no name at all: the creator makes it with `O_TMPFILE` (tmpfs has
//! it). Where the file system cannot, the name exists only from
//! `open(O_CREAT | O_EXCL)` to the `unlink` four system calls later
//! (`ftruncate`, `mmap`, `madvise`, `fstat`: 14 µs measured on x86_64, for
//! 1 MiB as for 1 GiB), and the creation sweep removes what a crash in
//! between leaves. The file itself lives exactly as long as some rank holds
//! it open or mapped, whoever crashes. The cost is one
//! `/proc` lookup per attaching rank, and the kernel's rule for it: the
//! attaching process must be allowed to inspect the creator (the same user,
//! creator dumpable) — which the window's own privacy rules ask anyway.
//! The inode is part of the way in, so a descriptor number the creator has
//! since reused (or a reused pid) is refused, not attached to.

use std::fmt;

/// The creator's descriptor of a published segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WayIn {
    pub(crate) pid: u64,
    pub(crate) fd: i32,
    pub(crate) inode: u64,
}

/// Marks a way in, as opposed to a segment name (which starts with `kpccl-`).
const PREFIX: &str = "fd:";

impl WayIn {
    /// Parses `fd:<pid>:<fd>:<inode, hex>`; `None` for anything else (a name).
    pub(crate) fn parse(s: &str) -> Option<Self> {
        let mut parts = s.strip_prefix(PREFIX)?.split(':');
        let pid = parts.next()?.parse().ok()?;
        let fd = parts.next()?.parse().ok().filter(|&fd: &i32| fd >= 0)?;
        let inode = u64::from_str_radix(parts.next()?, 16).ok()?;
        parts.next().is_none().then_some(Self { pid, fd, inode })
    }

    /// The `/proc` path of the descriptor.
    pub(crate) fn path(&self) -> String {
        format!("/proc/{}/fd/{}", self.pid, self.fd)
    }
}

/// `fd:<pid>:<fd>:<inode, hex>`: at most 3 + 20 + 1 + 10 + 1 + 16 = 51 bytes.
impl fmt::Display for WayIn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{PREFIX}{}:{}:{:x}", self.pid, self.fd, self.inode)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_names() {
        let w = WayIn { pid: u64::MAX, fd: i32::MAX, inode: u64::MAX };
        let s = w.to_string();
        assert!(s.len() < kpccl_core::protocol::NAME_LEN, "{s}");
        assert_eq!(WayIn::parse(&s), Some(w));
        assert_eq!(WayIn { pid: 12, fd: 3, inode: 0 }.path(), "/proc/12/fd/3");
        for bad in ["kpccl-1000-1-2-0123456789abcdef", "fd:1:2", "fd:1:-2:3", "fd:1:2:3:4", "fd:x:2:3", "fd:1:2:zz"] {
            assert_eq!(WayIn::parse(bad), None, "{bad}");
        }
    }
}
