//! Shared segments: files in a tmpfs directory (normally `/dev/shm`), opened
//! by path so that the directory can be chosen, and mapped `MAP_SHARED`.

use std::io;
use std::mem::ManuallyDrop;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::ptr::NonNull;

use rustix::fs::{FallocateFlags, FileType, Mode, OFlags};
use rustix::io::Errno;
use rustix::mm::{Advice, MapFlags, ProtFlags};

/// Flags that keep an open from acting on what it opens should it not be a
/// segment after all (a file put in its place, a descriptor reused
/// meanwhile): no terminal becomes the controlling one, no FIFO or serial
/// line blocks. Neither changes anything for a regular file.
const INERT: OFlags = OFlags::NOCTTY.union(OFlags::NONBLOCK);

/// What attaching checks of a segment file.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Stat {
    pub(crate) uid: u32,
    pub(crate) size: u64,
    pub(crate) regular: bool,
    pub(crate) inode: u64,
}

/// An open segment file, closed in forked children (`fork.rs`).
#[derive(Debug)]
pub(crate) struct Fd {
    fd: ManuallyDrop<OwnedFd>,
    /// The fork generation it was opened in.
    generation: u32,
}

impl Drop for Fd {
    fn drop(&mut self) {
        if self.generation != super::fork::generation() {
            // A forked child's copy: the fork handler closed the number, which
            // may name another file of the child's by now.
            return;
        }
        super::fork::untrack(self.fd.as_raw_fd());
        // SAFETY: dropped once, here; `fd` is not used after.
        #[allow(unsafe_code)]
        unsafe {
            ManuallyDrop::drop(&mut self.fd);
        }
    }
}

impl Fd {
    fn tracked(fd: OwnedFd) -> Self {
        super::fork::track(fd.as_raw_fd());
        Self { fd: ManuallyDrop::new(fd), generation: super::fork::generation() }
    }

    /// A file just created: mode 0600 whatever the umask says (one without
    /// the owner's bits would leave a segment its peers cannot open).
    fn created(fd: OwnedFd) -> io::Result<Self> {
        let fd = Self::tracked(fd);
        rustix::fs::fchmod(&*fd.fd, Mode::RUSR | Mode::WUSR)?;
        Ok(fd)
    }

    /// Creates `path` exclusively, mode 0600, never following a link.
    pub(crate) fn create(path: &Path) -> io::Result<Self> {
        let flags = OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let made = Self::created(rustix::fs::open(path, flags, Mode::RUSR | Mode::WUSR)?);
        if made.is_err() {
            // Made here: nobody else would remove the name.
            let _ = std::fs::remove_file(path);
        }
        made
    }

    /// Creates a file in the directory `dir` that has no name and never can
    /// have one (`O_TMPFILE` with `O_EXCL`), mode 0600: it lives exactly as
    /// long as a descriptor or mapping of it, so no crash can leave it
    /// behind. `Ok(None)` where the kernel or the file system cannot make
    /// one (kernels before 3.11; file systems without it, e.g. hugetlbfs).
    pub(crate) fn create_unnamed(dir: &Path) -> io::Result<Option<Self>> {
        let flags = OFlags::RDWR | OFlags::TMPFILE | OFlags::EXCL | OFlags::CLOEXEC;
        match rustix::fs::open(dir, flags, Mode::RUSR | Mode::WUSR) {
            Ok(fd) => Self::created(fd).map(Some),
            // EISDIR: a kernel that reads O_TMPFILE as O_DIRECTORY alone.
            Err(Errno::OPNOTSUPP | Errno::ISDIR | Errno::INVAL) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Opens the existing `path` read-write, never following a link.
    pub(crate) fn open(path: &Path) -> io::Result<Self> {
        let flags = OFlags::RDWR | OFlags::NOFOLLOW | OFlags::CLOEXEC | INERT;
        Ok(Self::tracked(rustix::fs::open(path, flags, Mode::empty())?))
    }

    /// Opens the file another process has open, through its
    /// `/proc/<pid>/fd/<fd>` link (which the kernel resolves to the open file
    /// even once its name is gone, and admits only processes that may
    /// inspect that process: the same user, and the process dumpable), if
    /// it still is the regular file `inode`: else `ENOENT`, without opening
    /// it (the number may name a terminal or a device by now, which an open
    /// acts on). The caller checks the inode of what it opened again.
    pub(crate) fn open_descriptor(proc_link: &Path, inode: u64) -> io::Result<Self> {
        // Follows the link, as the open does.
        let st = rustix::fs::stat(proc_link)?;
        #[allow(clippy::useless_conversion)] // the field widths differ between targets
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile || u64::from(st.st_ino) != inode {
            return Err(Errno::NOENT.into());
        }
        // No O_NOFOLLOW: the /proc entry is a link by design, made by the kernel.
        let flags = OFlags::RDWR | OFlags::CLOEXEC | INERT;
        Ok(Self::tracked(rustix::fs::open(proc_link, flags, Mode::empty())?))
    }

    /// The descriptor's number in this process.
    pub(crate) fn raw(&self) -> i32 {
        self.fd.as_raw_fd()
    }

    /// The file's owner, size, type and inode.
    pub(crate) fn stat(&self) -> io::Result<Stat> {
        let st = rustix::fs::fstat(&*self.fd)?;
        #[allow(clippy::useless_conversion)] // the field widths differ between targets
        Ok(Stat {
            uid: st.st_uid,
            size: u64::try_from(st.st_size).unwrap_or(0),
            regular: FileType::from_raw_mode(st.st_mode) == FileType::RegularFile,
            inode: u64::from(st.st_ino),
        })
    }

    /// Sets the file's length (sparse).
    pub(crate) fn set_len(&self, len: u64) -> io::Result<()> {
        // The kernel takes a signed length; rustix passes larger values on,
        // so refuse them here with the errno libc's `off_t` check gave.
        i64::try_from(len).map_err(|_| Errno::FBIG)?;
        within_file_size_limit(len)?;
        Ok(rustix::fs::ftruncate(&*self.fd, len)?)
    }

    /// Allocates backing memory for `offset..offset + len` now (ENOSPC here, not SIGBUS later).
    pub(crate) fn allocate(&self, offset: u64, len: u64) -> io::Result<()> {
        i64::try_from(offset).and(i64::try_from(len)).map_err(|_| Errno::FBIG)?;
        let end = offset.checked_add(len).ok_or(Errno::FBIG)?;
        // Within the file's length the kernel does not look at the limit.
        if end > self.stat()?.size {
            within_file_size_limit(end)?;
        }
        match in_pieces(offset, len, |at, n| rustix::fs::fallocate(&*self.fd, FallocateFlags::empty(), at, n)) {
            // A file system without fallocate (some FUSE or network mounts):
            // libc's posix_fallocate writes each block instead, which rustix
            // does not offer.
            Err(Errno::OPNOTSUPP) => self.allocate_by_writing(offset, len),
            done => Ok(done?),
        }
    }

    /// `posix_fallocate`'s fallback: touches every block of the range.
    #[allow(unsafe_code)]
    fn allocate_by_writing(&self, offset: u64, len: u64) -> io::Result<()> {
        // Writes look at the limit wherever they land (`SIGXFSZ` too).
        within_file_size_limit(offset.saturating_add(len))?;
        let fd = self.fd.as_raw_fd();
        Ok(in_pieces(offset, len, |at, n| {
            let at = libc::off_t::try_from(at).map_err(|_| Errno::FBIG)?;
            let n = libc::off_t::try_from(n).map_err(|_| Errno::FBIG)?;
            // SAFETY: plain call on an fd we own; it returns an errno value.
            match unsafe { libc::posix_fallocate(fd, at, n) } {
                0 => Ok(()),
                e => Err(Errno::from_raw_os_error(e)),
            }
        })?)
    }
}

/// The smallest piece [`in_pieces`] retries after `EINTR`.
const MIN_PIECE: u64 = 1 << 16;

/// Runs `allocate` over `offset..offset + len`, retrying after `EINTR`. On
/// kernels whose tmpfs stops a `fallocate` at any pending signal, the call
/// gives back all it had allocated, so retrying the whole range never ends
/// under a signal that comes more often than the range takes (a profiler's
/// timer): each retry takes half the piece, down to [`MIN_PIECE`] (signals
/// that come even more often than that takes are retried at that size), and
/// what succeeded stays done.
fn in_pieces(offset: u64, len: u64, mut allocate: impl FnMut(u64, u64) -> Result<(), Errno>) -> Result<(), Errno> {
    let end = offset.saturating_add(len);
    let (mut at, mut piece) = (offset, len.max(1));
    while at < end {
        let n = piece.min(end - at);
        match allocate(at, n) {
            Ok(()) => at += n,
            Err(Errno::INTR) => piece = (piece / 2).max(MIN_PIECE),
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// `EFBIG` if a file of `end` bytes exceeds this process's file size limit
/// (`ulimit -f`): the kernel would answer `ftruncate` or `fallocate` with
/// `SIGXFSZ` as well, whose default action kills the process, where the
/// window's ranks need an error they can all fail with.
fn within_file_size_limit(end: u64) -> io::Result<()> {
    match rustix::process::getrlimit(rustix::process::Resource::Fsize).current {
        Some(limit) if end > limit => Err(Errno::FBIG.into()),
        _ => Ok(()),
    }
}

/// Bytes an unprivileged process may still allocate in the file system of `dir`.
pub(crate) fn free_space(dir: &Path) -> io::Result<u64> {
    let st = rustix::fs::statvfs(dir)?;
    Ok(st.f_bavail.saturating_mul(st.f_frsize))
}

/// A `MAP_SHARED` mapping, unmapped on drop.
#[derive(Debug)]
pub(crate) struct Mapping {
    base: NonNull<u8>,
    len: usize,
    /// The fork generation it was made in (see `fork.rs`).
    generation: u32,
}

#[allow(unsafe_code)]
// SAFETY: the mapping is plain memory owned by this value; moving it between
// threads moves ownership of the address range.
unsafe impl Send for Mapping {}

impl Mapping {
    pub(crate) fn base(&self) -> NonNull<u8> {
        self.base
    }
    pub(crate) fn len(&self) -> usize {
        self.len
    }
    /// Whether this process is a child forked after the mapping was made,
    /// which does not have it (`MADV_DONTFORK`).
    pub(crate) fn inherited(&self) -> bool {
        self.generation != super::fork::generation()
    }
}

impl Drop for Mapping {
    #[allow(unsafe_code)]
    fn drop(&mut self) {
        if self.inherited() {
            // Not mapped here (`MADV_DONTFORK`): the fork handler reserved
            // the range, inaccessible, and it stays so (past the handler's
            // slots, the range may hold another mapping of this child's).
            return;
        }
        super::fork::untrack_mapping(self.base.as_ptr().addr());
        // SAFETY: `base..base+len` was mapped by `map_shared` and is unmapped once,
        // here; nothing borrows it any more (borrows of the window end first).
        // An error could only mean a range we never mapped: nothing to report.
        let _ = unsafe { rustix::mm::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

/// Maps all `len` bytes of `fd` read-write and shared.
pub(crate) fn map_shared(fd: &Fd, len: usize) -> io::Result<Mapping> {
    if len == 0 {
        return Err(Errno::INVAL.into());
    }
    let prot = ProtFlags::READ | ProtFlags::WRITE;
    #[allow(unsafe_code)]
    // SAFETY: a fresh mapping at an address the kernel chooses (null hint, no
    // MAP_FIXED): no existing memory is affected.
    let p = unsafe { rustix::mm::mmap(std::ptr::null_mut(), len, prot, MapFlags::SHARED, &*fd.fd, 0) }?;
    let base = NonNull::new(p.cast::<u8>()).ok_or(Errno::NOMEM)?;
    let mapping = Mapping { base, len, generation: super::fork::generation() };
    // A child forked from a rank must not write the window behind its parent's
    // back (it would share the parent's fence slots): it does not inherit the mapping.
    #[allow(unsafe_code)]
    // SAFETY: advice on the range we just mapped; MADV_DONTFORK changes no contents.
    unsafe { rustix::mm::madvise(p, len, Advice::LinuxDontFork) }?;
    super::fork::track_mapping(p.addr(), len);
    Ok(mapping)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Interrupted like an older kernel's tmpfs under a frequent timer signal:
    /// every call of more than `most` bytes; `calls` bounds the attempts.
    fn interrupted_above(most: u64, calls: usize) -> impl FnMut(u64, u64) -> Result<(), Errno> {
        let mut left = calls;
        move |_, n| {
            left = left.checked_sub(1).expect("allocation retried without end");
            if n > most { Err(Errno::INTR) } else { Ok(()) }
        }
    }

    #[test]
    fn a_frequent_signal_does_not_restart_the_whole_range_for_ever() {
        let mut done = Vec::new();
        let mut calls = interrupted_above(1 << 20, 1000);
        in_pieces(4096, 256 << 20, |at, n| calls(at, n).inspect(|()| done.push((at, n)))).unwrap();
        let covered: u64 = done.iter().map(|&(_, n)| n).sum();
        assert_eq!(covered, 256 << 20);
        assert!(done.windows(2).all(|w| w[0].0 + w[0].1 == w[1].0), "pieces in order, without gaps");
        assert_eq!(done[0].0, 4096);
    }

    #[test]
    fn other_errors_and_empty_ranges() {
        assert_eq!(in_pieces(0, 1 << 20, |_, _| Err(Errno::NOSPC)), Err(Errno::NOSPC));
        assert_eq!(in_pieces(0, 0, |_, _| panic!("nothing to allocate")), Ok(()));
        // A signal at every call above the smallest piece: retried at that size.
        let mut calls = interrupted_above(MIN_PIECE, 100);
        assert_eq!(in_pieces(0, 4 * MIN_PIECE, &mut calls), Ok(()));
    }
}
