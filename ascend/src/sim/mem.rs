//! Simulated device memory: one `memfd` per allocation, mapped shared, so another
//! process of the same user maps the same pages through `/proc/<pid>/fd/<fd>`.
//! Nothing is named in `/dev/shm`, so a crash leaves nothing behind.

use core::ffi::c_void;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::codes::*;

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

/// The size of a huge page.
pub(crate) const HUGE_PAGE: usize = 2 << 20;

/// The page size of an `aclrtMalloc` of `size` bytes with `policy` (its low byte:
/// bandwidth bits may be or-ed in): 2 MiB for the HUGE_ONLY policies, for
/// HUGE_FIRST above 1 MiB, and for an out-of-range policy from 2 MiB on; 1 GiB for
/// HUGE1G_ONLY; else 4 KiB (docs/ascend-ipc.md §1.2).
pub(crate) fn page_size(policy: u32, size: usize) -> usize {
    match policy & 0xff {
        ACL_MEM_MALLOC_HUGE_ONLY | ACL_MEM_MALLOC_HUGE_ONLY_P2P => HUGE_PAGE,
        ACL_MEM_MALLOC_HUGE_FIRST | ACL_MEM_MALLOC_HUGE_FIRST_P2P if size > HUGE_PAGE / 2 => HUGE_PAGE,
        ACL_MEM_MALLOC_HUGE1G_ONLY | ACL_MEM_MALLOC_HUGE1G_ONLY_P2P => 1 << 30,
        p if p > ACL_MEM_MALLOC_HUGE1G_ONLY_P2P && size >= HUGE_PAGE => HUGE_PAGE,
        _ => PAGE,
    }
}

/// `len` rounded up to whole pages; an error past `usize`, where no mapping fits.
pub(crate) fn page_round(len: usize) -> io::Result<usize> {
    len.checked_next_multiple_of(PAGE).ok_or_else(|| io::ErrorKind::InvalidInput.into())
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
    let len = page_round(len)?;
    let off = libc::off_t::try_from(offset).map_err(|_| io::ErrorKind::InvalidInput)?;
    // SAFETY: a fresh shared mapping chosen by the kernel; it aliases no Rust object.
    let addr = unsafe { map_shared(file, core::ptr::null_mut(), 0, off, len) }?;
    Ok(Mapping { addr, len })
}

/// Maps the first `len` bytes of `file` at an address that is a multiple of `align`
/// (a power of two): a span `align` larger is reserved, the file mapped over its
/// aligned part, and the rest given back.
pub(crate) fn map_aligned(file: &File, len: usize, align: usize) -> io::Result<Mapping> {
    if align <= PAGE {
        return map(file, 0, len);
    }
    let len = page_round(len)?;
    let span = len.checked_add(align).ok_or(io::ErrorKind::InvalidInput)?;
    // SAFETY: a fresh private reservation chosen by the kernel, never accessed.
    let base = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            span,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    let base = base as usize;
    let start = base.next_multiple_of(align);
    // SAFETY: `[start, start+len)` lies inside the reservation just made, which
    // nothing else uses: MAP_FIXED replaces that part of it.
    let mapped = unsafe { map_shared(file, start as *mut c_void, libc::MAP_FIXED, 0, len) };
    if mapped.is_err() {
        give_back(base, span);
    } else {
        give_back(base, start - base);
        give_back(start + len, base + span - (start + len));
    }
    Ok(Mapping { addr: mapped?, len })
}

/// `mmap` of `len` bytes of `file` from `off`, shared and writable, at `at` as
/// `flags` (0 or `MAP_FIXED`) say; the address.
///
/// # Safety
/// With `MAP_FIXED`, `[at, at+len)` must be memory of the caller that nothing uses.
unsafe fn map_shared(file: &File, at: *mut c_void, flags: i32, off: libc::off_t, len: usize) -> io::Result<usize> {
    let prot = libc::PROT_READ | libc::PROT_WRITE;
    // SAFETY: the caller guarantees a fixed range is free for this mapping; a
    // kernel-chosen one aliases nothing.
    let ptr = unsafe { libc::mmap(at, len, prot, libc::MAP_SHARED | flags, file.as_raw_fd(), off) };
    if ptr == libc::MAP_FAILED { Err(io::Error::last_os_error()) } else { Ok(ptr as usize) }
}

/// Unmaps `n` bytes at `addr`, an unused part of a reservation of [`map_aligned`].
fn give_back(addr: usize, n: usize) {
    if n > 0 {
        // SAFETY: the range is ours and holds nothing in use.
        unsafe { libc::munmap(addr as *mut c_void, n) };
    }
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
