//! Copies into and out of any rank's segment, and fences that also wait for a
//! device stream: one call for host and device windows alike, so a C program
//! never needs raw ACL calls to reach a peer's device segment.

use core::ffi::{c_int, c_void};

use crate::device::AnyWindow;
use crate::error::{Error, RangeOf};
use crate::handle;
use crate::win::{get, kpccl_shm_win_h};

/// The window, the rank (checked against `0..nranks`) and the caller's buffer
/// `[ptr, ptr + len)` (checked: `ptr` may be `NULL` only when `len` is 0) of a
/// put or a get.
fn target<'a>(
    win: kpccl_shm_win_h,
    rank: c_int,
    ptr: *const c_void,
    len: usize,
    arg: &'static str,
) -> Result<(handle::Exclusive<'a, AnyWindow>, u32), Error> {
    // SAFETY: none needed (see `get`).
    let w = unsafe { get(win) }?;
    let rank = handle::rank(rank, "rank", w.nranks(), RangeOf::WindowRanks)?;
    if ptr.is_null() && len > 0 {
        return Err(Error::Null(arg));
    }
    if isize::try_from(len).is_err() {
        return Err(Error::Invalid { arg: "len", why: "larger than the address space allows" });
    }
    Ok((w, rank))
}

/// Where the bytes `[offset, offset + len)` of `rank`'s segment of a host
/// window are in this process, if they are in the segment and overlap the
/// caller's buffer `[ptr, ptr + len)`. Such a copy is a `memmove`, made
/// here: the window's own copies take the caller's buffer as a slice, which
/// must not overlap what they write or read (and copy without overlap).
fn overlapping(w: &AnyWindow, rank: u32, offset: usize, ptr: usize, len: usize) -> Option<*mut u8> {
    #[cfg_attr(not(feature = "ascend"), allow(irrefutable_let_patterns))]
    let AnyWindow::Host(host) = w else {
        // A device window's segments are device memory: not the caller's buffer.
        return None;
    };
    let seg = host.segment(rank).ok()?;
    offset.checked_add(len).filter(|end| *end <= seg.len && len > 0)?;
    let at = seg.ptr.as_ptr().wrapping_add(offset);
    let overlap = ptr < at.addr().saturating_add(len) && at.addr() < ptr.saturating_add(len);
    overlap.then_some(at)
}

/// Copies `len` bytes from `src` to byte `offset` of rank `rank`'s segment
/// (this rank's or a peer's on this node); complete when the call returns.
/// Peers see the bytes after a fence (`kpccl_shm_peer_fence`,
/// `kpccl_shm_win_fence`, or a signal and wait). Works on host and device
/// windows: on a device window `src` is host memory and the copy takes the
/// route the hardware allows (`aclrtMemcpyAsync` on the window's stream, then
/// `aclrtSynchronizeStream`; a peer's segment on another device through a
/// device staging buffer). A range outside the segment is an error, and
/// nothing is copied. `src` may lie in a segment of the window, and may even
/// overlap the bytes it is copied to (shifting data within a segment): the
/// copy is then a `memmove`.
///
/// # Safety
/// `win` is any value (checked: see `kpccl_shm_win_h`); `src` is readable for
/// `len` bytes (it may be `NULL` when `len` is 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kpccl_shm_win_put(
    win: kpccl_shm_win_h,
    rank: c_int,
    offset: usize,
    src: *const c_void,
    len: usize,
) -> c_int {
    ffi_boundary!("kpccl_shm_win_put", {
        let (w, rank) = target(win, rank, src, len, "src")?;
        if let Some(dst) = overlapping(&w, rank, offset, src.addr(), len) {
            // SAFETY: `dst` starts `len` bytes inside the segment (checked),
            // `src` is readable for `len` bytes (the caller's contract), and
            // `copy` allows the two to overlap.
            unsafe { core::ptr::copy(src.cast::<u8>(), dst, len) };
            return Ok(());
        }
        let bytes: &[u8] = if len == 0 {
            &[]
        } else {
            // SAFETY: non-NULL and readable for `len` bytes (the caller's contract).
            unsafe { core::slice::from_raw_parts(src.cast::<u8>(), len) }
        };
        w.put(rank, offset, bytes)
    })
}

/// Copies `len` bytes from byte `offset` of rank `rank`'s segment into
/// `dst`; complete when the call returns. What the owner wrote is seen after
/// a fence with it. Host and device windows alike, as `kpccl_shm_win_put`
/// (`dst` is host memory). `dst` may lie in a segment of the window, and may
/// even overlap the bytes copied: the copy is then a `memmove`.
///
/// # Safety
/// `win` is any value (checked: see `kpccl_shm_win_h`); `dst` is writable for
/// `len` bytes (it may be `NULL` when `len` is 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kpccl_shm_win_get(
    win: kpccl_shm_win_h,
    rank: c_int,
    offset: usize,
    dst: *mut c_void,
    len: usize,
) -> c_int {
    ffi_boundary!("kpccl_shm_win_get", {
        let (w, rank) = target(win, rank, dst, len, "dst")?;
        if let Some(src) = overlapping(&w, rank, offset, dst.addr(), len) {
            // SAFETY: `src` starts `len` bytes inside the segment (checked),
            // `dst` is writable for `len` bytes (the caller's contract), and
            // `copy` allows the two to overlap.
            unsafe { core::ptr::copy(src, dst.cast::<u8>(), len) };
            return Ok(());
        }
        let bytes: &mut [u8] = if len == 0 {
            &mut []
        } else {
            // SAFETY: non-NULL and writable for `len` bytes (the caller's
            // contract), and overlapping none of the bytes read (checked
            // above; the window holds no reference to its memory).
            unsafe { core::slice::from_raw_parts_mut(dst.cast::<u8>(), len) }
        };
        w.get(rank, offset, bytes)
    })
}

/// `kpccl_shm_win_fence` ordered after device work: first waits until the
/// work queued on the window's stream and on `stream` (an `aclrtStream` of
/// this rank's device, or `NULL` for none) is done, so that what it wrote
/// (kernels, `aclrtMemcpyAsync` into a peer's segment) is seen by every rank
/// after the fence. On a host window `stream` must be `NULL` (then it is
/// `kpccl_shm_win_fence`).
///
/// # Safety
/// `win` is any value (checked: see `kpccl_shm_win_h`); `stream` is `NULL` or
/// a live stream of this rank's device.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kpccl_shm_win_fence_stream(win: kpccl_shm_win_h, stream: *mut c_void) -> c_int {
    ffi_boundary!("kpccl_shm_win_fence_stream", {
        // SAFETY: none needed (see `get`).
        let w = unsafe { get(win) }?;
        w.fence_on(stream)
    })
}

/// `kpccl_shm_peer_fence` ordered after device work, as
/// `kpccl_shm_win_fence_stream`: the work queued on the window's stream and on
/// `stream` (or `NULL`) is done first, so `remote_rank` sees it after its
/// matching fence.
///
/// # Safety
/// As `kpccl_shm_win_fence_stream`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kpccl_shm_peer_fence_stream(
    win: kpccl_shm_win_h,
    remote_rank: c_int,
    stream: *mut c_void,
) -> c_int {
    ffi_boundary!("kpccl_shm_peer_fence_stream", {
        // SAFETY: none needed (see `get`).
        let w = unsafe { get(win) }?;
        let peer = handle::rank(remote_rank, "remote_rank", w.nranks(), RangeOf::WindowRanks)?;
        w.peer_fence_on(peer, stream)
    })
}
