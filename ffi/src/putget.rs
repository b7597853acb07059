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

/// Copies `len` bytes from `src` to byte `offset` of rank `rank`'s segment
/// (this rank's or a peer's on this node); complete when the call returns.
/// Peers see the bytes after a fence (`kpccl_shm_peer_fence`,
/// `kpccl_shm_win_fence`, or a signal and wait). Works on host and device
/// windows: on a device window `src` is host memory and the copy takes the
/// route the hardware allows (`aclrtMemcpyAsync` on the window's stream, then
/// `aclrtSynchronizeStream`; a peer's segment on another device through a
/// device staging buffer). A range outside the segment is an error, and
/// nothing is copied.
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
/// a fence with it. Host and device windows alike, as `kpccl_shm_win_put`.
///
/// # Safety
/// `win` is any value (checked: see `kpccl_shm_win_h`); `dst` is writable for
/// `len` bytes (it may be `NULL` when `len` is 0) and overlaps no segment.
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
        let bytes: &mut [u8] = if len == 0 {
            &mut []
        } else {
            // SAFETY: non-NULL and writable for `len` bytes, overlapping nothing
            // Rust holds (the caller's contract).
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
