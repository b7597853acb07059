//! Simulated device memory: one `memfd` per allocation, mapped shared, so another
//! process of the same user maps the same pages through `/proc/<pid>/fd/<fd>`.
//! Nothing is named in `/dev/shm`, so a crash leaves nothing behind.

use core::ffi::c_void;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// A shared mapping of a file.
#[derive(Debug)]
pub(crate) struct Mapping {
    /// Start address.
    pub(crate) addr: usize,
    /// Mapped length (a multiple of the page size).
    pub(crate) len: usize,
}

/// The page size of the host.
pub(crate) const PAGE: usize = 4096;

/// `len` rounded up to whole pages.
pub(crate) fn page_round(len: usize) -> usize {
    len.div_ceil(PAGE) * PAGE
}

/// A new anonymous shared-memory file of `len` bytes.
pub(crate) fn create(len: usize) -> io::Result<File> {
    // SAFETY: the name is a NUL-terminated literal; flags are valid.
    let fd = unsafe { libc::memfd_create(c"ascend-sim".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by memfd_create and is owned by nobody else.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    let file = File::from(owned);
    file.set_len(u64::try_from(len).map_err(|_| io::ErrorKind::InvalidInput)?)?;
    Ok(file)
}

/// Opens the file that process `pid` holds as descriptor `fd`.
pub(crate) fn open_foreign(pid: i32, fd: i32) -> io::Result<File> {
    OpenOptions::new().read(true).write(true).open(format!("/proc/{pid}/fd/{fd}"))
}

/// Maps `len` bytes of `file` from `offset`, shared and writable.
pub(crate) fn map(file: &File, offset: usize, len: usize) -> io::Result<Mapping> {
    let len = page_round(len);
    let off = libc::off_t::try_from(offset).map_err(|_| io::ErrorKind::InvalidInput)?;
    // SAFETY: a fresh shared mapping chosen by the kernel; it aliases no Rust object.
    let ptr = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            off,
        )
    };
    if ptr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(Mapping { addr: ptr as usize, len })
}

/// Unmaps a mapping made by [`map`].
pub(crate) fn unmap(m: &Mapping) {
    let ptr = m.addr as *mut c_void;
    // SAFETY: `m` came from `map` and is unmapped once; callers stop using the range.
    unsafe { libc::munmap(ptr, m.len) };
}

/// Makes a mapping inaccessible: any later access faults, as an importer's access to
/// pages the driver freed.
pub(crate) fn revoke(m: &Mapping) {
    let ptr = m.addr as *mut c_void;
    // SAFETY: `m` is a live mapping of ours; only its protection changes.
    unsafe { libc::mprotect(ptr, m.len, libc::PROT_NONE) };
}

/// `len` bytes of host memory aligned to 64 bytes, as `aclrtMallocHost` returns.
pub(crate) fn host_alloc(len: usize) -> Option<usize> {
    let mut ptr = core::ptr::null_mut();
    // SAFETY: `ptr` is a valid out pointer; 64 is a power of two and a multiple of
    // the pointer size.
    let rc = unsafe { libc::posix_memalign(&raw mut ptr, 64, len) };
    (rc == 0).then_some(ptr as usize)
}

/// Frees a block from [`host_alloc`].
pub(crate) fn host_free(addr: usize) {
    // SAFETY: `addr` came from `host_alloc` and is freed once (the caller removes it
    // from its table first).
    unsafe { libc::free(addr as *mut c_void) };
}
