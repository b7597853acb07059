//! Shared segments: files in a tmpfs directory (normally `/dev/shm`), opened
//! by path so that the directory can be chosen, and mapped `MAP_SHARED`.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::ptr::NonNull;

fn cstr(path: &Path) -> io::Result<CString> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(path.as_os_str().as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 { Err(io::Error::last_os_error()) } else { Ok(rc) }
}

/// What attaching checks of a segment file.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Stat {
    pub(crate) uid: u32,
    pub(crate) size: u64,
    pub(crate) regular: bool,
    pub(crate) inode: u64,
}

/// An open segment file.
#[derive(Debug)]
pub(crate) struct Fd(OwnedFd);

impl Fd {
    /// Creates `path` exclusively, mode 0600, never following a link.
    pub(crate) fn create(path: &Path) -> io::Result<Self> {
        let p = cstr(path)?;
        let flags = libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: `p` is a valid C string; the returned fd is owned below.
        let fd = check(unsafe { libc::open(p.as_ptr(), flags, 0o600 as libc::c_uint) })?;
        // SAFETY: `fd` was just returned by open and is owned by nothing else.
        Ok(Self(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Opens the existing `path` read-write, never following a link.
    pub(crate) fn open(path: &Path) -> io::Result<Self> {
        let p = cstr(path)?;
        let flags = libc::O_RDWR | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: as in `create`.
        let fd = check(unsafe { libc::open(p.as_ptr(), flags) })?;
        // SAFETY: as in `create`.
        Ok(Self(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Opens the file another process has open, through its
    /// `/proc/<pid>/fd/<fd>` link (which the kernel resolves to the open file
    /// even once its name is gone, and admits only processes that may
    /// inspect that process: the same user, and the process dumpable).
    pub(crate) fn open_descriptor(proc_link: &Path) -> io::Result<Self> {
        let p = cstr(proc_link)?;
        // No O_NOFOLLOW: the /proc entry is a link by design, made by the kernel.
        let flags = libc::O_RDWR | libc::O_CLOEXEC;
        // SAFETY: as in `create`.
        let fd = check(unsafe { libc::open(p.as_ptr(), flags) })?;
        // SAFETY: as in `create`.
        Ok(Self(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// The descriptor's number in this process.
    pub(crate) fn raw(&self) -> i32 {
        self.0.as_raw_fd()
    }

    /// The file's owner, size, type and inode.
    pub(crate) fn stat(&self) -> io::Result<Stat> {
        let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
        // SAFETY: `st` is a writable stat buffer; fstat fills it on success.
        check(unsafe { libc::fstat(self.0.as_raw_fd(), st.as_mut_ptr()) })?;
        // SAFETY: fstat succeeded, so `st` is initialised.
        let st = unsafe { st.assume_init() };
        #[allow(clippy::useless_conversion)] // the field widths differ between targets
        Ok(Stat {
            uid: st.st_uid,
            size: u64::try_from(st.st_size).unwrap_or(0),
            regular: st.st_mode & libc::S_IFMT == libc::S_IFREG,
            inode: u64::from(st.st_ino),
        })
    }

    /// Sets the file's length (sparse).
    pub(crate) fn set_len(&self, len: u64) -> io::Result<()> {
        let len = libc::off_t::try_from(len).map_err(|_| io::Error::from_raw_os_error(libc::EFBIG))?;
        // SAFETY: plain syscall on an fd we own.
        check(unsafe { libc::ftruncate(self.0.as_raw_fd(), len) }).map(drop)
    }

    /// Allocates backing memory for `offset..offset + len` now (ENOSPC here, not SIGBUS later).
    pub(crate) fn allocate(&self, offset: u64, len: u64) -> io::Result<()> {
        let off = libc::off_t::try_from(offset).map_err(|_| io::Error::from_raw_os_error(libc::EFBIG))?;
        let len = libc::off_t::try_from(len).map_err(|_| io::Error::from_raw_os_error(libc::EFBIG))?;
        loop {
            // SAFETY: plain syscall on an fd we own; it returns an errno value.
            match unsafe { libc::posix_fallocate(self.0.as_raw_fd(), off, len) } {
                0 => return Ok(()),
                libc::EINTR => continue,
                e => return Err(io::Error::from_raw_os_error(e)),
            }
        }
    }
}

/// Bytes an unprivileged process may still allocate in the file system of `dir`.
pub(crate) fn free_space(dir: &Path) -> io::Result<u64> {
    let p = cstr(dir)?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `p` is a valid C string and `st` a writable statvfs buffer.
    check(unsafe { libc::statvfs(p.as_ptr(), st.as_mut_ptr()) })?;
    // SAFETY: statvfs succeeded, so `st` is initialised.
    let st = unsafe { st.assume_init() };
    #[allow(clippy::useless_conversion)] // the field widths differ between targets
    Ok(u64::from(st.f_bavail).saturating_mul(u64::from(st.f_frsize)))
}

/// A `MAP_SHARED` mapping, unmapped on drop.
#[derive(Debug)]
pub(crate) struct Mapping {
    base: NonNull<u8>,
    len: usize,
}

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
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `base..base+len` was mapped by `map_shared` and is unmapped once, here.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

/// Maps all `len` bytes of `fd` read-write and shared.
pub(crate) fn map_shared(fd: &Fd, len: usize) -> io::Result<Mapping> {
    if len == 0 {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    let prot = libc::PROT_READ | libc::PROT_WRITE;
    // SAFETY: a fresh mapping chosen by the kernel; no existing memory is affected.
    let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_SHARED, fd.0.as_raw_fd(), 0) };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    let base = NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::from_raw_os_error(libc::ENOMEM))?;
    let mapping = Mapping { base, len };
    // A child forked from a rank must not write the window behind its parent's
    // back (it would share the parent's fence slots): it does not inherit the mapping.
    // SAFETY: advice on a range we just mapped; MADV_DONTFORK changes no contents.
    if unsafe { libc::madvise(p, len, libc::MADV_DONTFORK) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(mapping)
}
