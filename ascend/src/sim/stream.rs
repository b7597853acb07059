//! Simulated streams: `aclrtMemcpyAsync` queues a copy on its stream and the copy
//! runs, in queue order, when the stream is synchronised (`aclrtSynchronizeStream`,
//! `aclrtDestroyStream`, `aclrtSynchronizeDevice`). Deferring the work, rather than
//! copying at once, makes a missing synchronisation visible in tests: the bytes
//! are simply not there yet, as on a real device that has not run the task.

use super::state::{Proc, Stream, Task};
use crate::codes::{ACL_ERROR_RT_INTERNAL_ERROR, ACL_ERROR_RT_PARAM_INVALID, ACL_ERROR_RT_STREAM_CONTEXT};
use crate::runtime::{AclError, AclResult};

/// The first handle given out: an arbitrary non-NULL tag, so a stray integer is
/// unlikely to name a stream.
const FIRST_HANDLE: usize = 0x5_7e00_0000;

/// A new stream on `dev`; its handle.
pub(crate) fn create(p: &mut Proc, dev: i32) -> usize {
    p.streams_made += 1;
    let handle = FIRST_HANDLE + p.streams_made * 0x10;
    p.streams.push(Stream { handle, dev, queue: Vec::new() });
    handle
}

/// The index of stream `handle` for work on device `cur`: NULL is `cur`'s default
/// stream (made on first use); an unknown handle is 107000, a stream of another
/// device 107003 (`ACL_ERROR_RT_STREAM_CONTEXT`).
pub(crate) fn find(p: &mut Proc, handle: usize, cur: i32) -> AclResult<usize> {
    if handle == 0 {
        if let Some(i) = p.streams.iter().position(|s| s.handle == 0 && s.dev == cur) {
            return Ok(i);
        }
        p.streams.push(Stream { handle: 0, dev: cur, queue: Vec::new() });
        return Ok(p.streams.len() - 1);
    }
    let i = p.streams.iter().position(|s| s.handle == handle).ok_or(AclError::new(ACL_ERROR_RT_PARAM_INVALID))?;
    if p.streams[i].dev != cur {
        return Err(AclError::new(ACL_ERROR_RT_STREAM_CONTEXT));
    }
    Ok(i)
}

/// Runs the queued copies of stream `i` in order. A copy whose device memory was
/// freed, closed or revoked since it was queued is dropped and reported (507000),
/// as the device reports a faulting task when the stream is synchronised; the
/// copies after it still run, as they would on the device.
pub(crate) fn drain(p: &mut Proc, i: usize) -> AclResult<()> {
    let tasks = core::mem::take(&mut p.streams[i].queue);
    let mut result = Ok(());
    for t in tasks {
        if !still_mapped(p, t.dst, t.dst_device, t.count) || !still_mapped(p, t.src, t.src_device, t.count) {
            result = Err(AclError::new(ACL_ERROR_RT_INTERNAL_ERROR));
            continue;
        }
        if t.dst != t.src {
            // SAFETY: each device side is `count` bytes of a live allocation or
            // import (checked just above; queueing checked no range); host ranges
            // are the caller's promise until synchronisation.
            unsafe { core::ptr::copy(t.src as *const u8, t.dst as *mut u8, t.count) };
        }
    }
    result
}

/// Whether `[addr, addr+count)` is still usable: host memory always is (the caller's
/// promise); device memory must still be a live allocation or a live import.
fn still_mapped(p: &Proc, addr: usize, device: bool, count: usize) -> bool {
    !device || p.device_range(addr, count)
}

/// Queues a copy on stream `i`.
pub(crate) fn push(p: &mut Proc, i: usize, task: Task) {
    p.streams[i].queue.push(task);
}

/// Releases the streams of device `dev` (its resources were released): each runs
/// what it still holds first, as the runtime waits for their tasks; the first
/// faulting copy's error is the result.
pub(crate) fn release_device(p: &mut Proc, dev: i32) -> AclResult<()> {
    let mut result = Ok(());
    while let Some(i) = p.streams.iter().position(|s| s.dev == dev) {
        result = result.and(drain(p, i));
        p.streams.swap_remove(i);
    }
    result
}
