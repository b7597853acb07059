//! `kpccl.acl`: the pyACL calls of the ACL IPC flow, with pyACL's names,
//! argument order, types (pointers as `int`, keys as `str`) and return
//! conventions (`ret`, or `(value, ret)`; `ret == 0` on success), over the
//! runtime `KPCCL_ASCEND` picks (CANN's `libascendcl.so`, or the host
//! simulator shared between processes). The Python modules `kpccl.acl`,
//! `kpccl.acl.rt` and `kpccl.acl.util` arrange these functions as pyACL does.

use core::ffi::c_void;
use std::sync::OnceLock;

use kpccl_ascend::backend::{self, BackendError, Runtime};
use kpccl_ascend::codes::{ACL_ERROR_RT_PARAM_INVALID, ACL_IPC_KEY_LEN, ACL_SUCCESS};
use kpccl_ascend::{AclResult, AclStream, IpcKey, Memcpy};
use pyo3::prelude::*;

use crate::errors;
use crate::options;

/// The process's runtime (or why there is none), chosen once: the simulator
/// keeps per-process state, so `kpccl.acl` and device windows share it.
pub(crate) fn runtime() -> Result<Runtime, BackendError> {
    static RUNTIME: OnceLock<Result<Runtime, BackendError>> = OnceLock::new();
    RUNTIME.get_or_init(backend::from_env).clone()
}

fn rt() -> PyResult<Runtime> {
    runtime().map_err(|e| errors::library(e.to_string()))
}

/// `ret` of a call.
fn ret(r: AclResult<()>) -> i32 {
    r.err().map_or(ACL_SUCCESS, |e| e.code())
}

/// `ret` of a call that may block (on the device, or to set it up), run
/// without the GIL so that the process's other Python threads go on.
fn ret_detached(py: Python<'_>, call: impl FnOnce(&Runtime) -> AclResult<()> + Send) -> PyResult<i32> {
    let rt = rt()?;
    Ok(ret(py.detach(|| call(&rt))))
}

/// `(value, ret)` of a call; `none` stands in for the value on failure.
fn pair<T>(r: AclResult<T>, none: T) -> (T, i32) {
    match r {
        Ok(v) => (v, ACL_SUCCESS),
        Err(e) => (none, e.code()),
    }
}

fn int<T: TryFrom<u64>>(v: &Bound<'_, PyAny>, what: &str) -> PyResult<T> {
    options::count(v, what).map_err(errors::value)
}

fn signed(v: &Bound<'_, PyAny>, what: &str) -> PyResult<i32> {
    options::signed(v, what).map_err(errors::value)
}

fn ptr(v: &Bound<'_, PyAny>, what: &str) -> PyResult<*mut c_void> {
    Ok(int::<usize>(v, what)? as *mut c_void)
}

/// A key as pyACL gives it: the bytes before the NUL, one char per byte
/// (hex on the v2 driver; binary keys round-trip through latin-1).
fn key_str(k: &IpcKey) -> String {
    k.significant().iter().map(|&b| char::from(b)).collect()
}

/// The key the runtime reads for `s`, as pyACL hands a `str` to C: its bytes
/// (one per char when every char is latin-1, so binary keys round-trip; else
/// UTF-8), at most the 65 a key holds. The runtime judges it as it does a C
/// caller's: a string too long for a key has no NUL among them.
fn key_of(s: &str) -> IpcKey {
    let latin1: Option<Vec<u8>> = s.chars().map(|c| u8::try_from(u32::from(c)).ok()).collect();
    let bytes = latin1.unwrap_or_else(|| s.as_bytes().to_vec());
    let mut key = [0u8; ACL_IPC_KEY_LEN];
    for (slot, b) in key.iter_mut().zip(bytes) {
        *slot = b;
    }
    IpcKey::from_bytes(key)
}

/// `ret = acl.init()`: `aclInit` (a config file is not supported).
#[pyfunction]
#[pyo3(signature = (config_path = None))]
fn init(py: Python<'_>, config_path: Option<&str>) -> PyResult<i32> {
    if config_path.is_some_and(|p| !p.is_empty()) {
        return Err(errors::value("kpccl.acl.init takes no config file: call acl.init()"));
    }
    ret_detached(py, |rt| rt.init())
}

/// `ret = acl.finalize()`: `aclFinalize`.
#[pyfunction]
fn finalize(py: Python<'_>) -> PyResult<i32> {
    ret_detached(py, |rt| rt.finalize())
}

/// `ret = acl.rt.set_device(device_id)`: the calling thread's current device.
#[pyfunction]
fn set_device(py: Python<'_>, device_id: &Bound<'_, PyAny>) -> PyResult<i32> {
    // Run on this thread all the same: the current device is the thread's.
    let d = signed(device_id, "device_id")?;
    ret_detached(py, |rt| rt.set_device(d))
}

/// `ret = acl.rt.reset_device(device_id)`.
#[pyfunction]
fn reset_device(py: Python<'_>, device_id: &Bound<'_, PyAny>) -> PyResult<i32> {
    let d = signed(device_id, "device_id")?;
    ret_detached(py, |rt| rt.reset_device(d))
}

/// `ret = acl.rt.synchronize_device()`: returns once the device's work is
/// done (without the GIL meanwhile).
#[pyfunction]
fn synchronize_device(py: Python<'_>) -> PyResult<i32> {
    ret_detached(py, |rt| rt.synchronize_device())
}

/// `can_access_peer, ret = acl.rt.device_can_access_peer(device_id, peer_device_id)`:
/// `can_access_peer` is 1 or 0.
#[pyfunction]
fn device_can_access_peer(device_id: &Bound<'_, PyAny>, peer_device_id: &Bound<'_, PyAny>) -> PyResult<(i32, i32)> {
    let r = rt()?.device_can_access_peer(signed(device_id, "device_id")?, signed(peer_device_id, "peer_device_id")?);
    Ok(pair(r.map(i32::from), 0))
}

/// `ret = acl.rt.device_enable_peer_access(peer_device_id, flags)`: flags must be 0.
#[pyfunction]
fn device_enable_peer_access(peer_device_id: &Bound<'_, PyAny>, flags: &Bound<'_, PyAny>) -> PyResult<i32> {
    Ok(ret(rt()?.device_enable_peer_access(signed(peer_device_id, "peer_device_id")?, int(flags, "flags")?)))
}

/// `dev_ptr, ret = acl.rt.malloc(size, policy)`: device memory on the current device.
#[pyfunction]
fn malloc(size: &Bound<'_, PyAny>, policy: &Bound<'_, PyAny>) -> PyResult<(usize, i32)> {
    let r = rt()?.malloc(int(size, "size")?, int(policy, "policy")?);
    Ok(pair(r.map(|p| p as usize), 0))
}

/// `ret = acl.rt.free(dev_ptr)`.
#[pyfunction]
fn free(py: Python<'_>, dev_ptr: &Bound<'_, PyAny>) -> PyResult<i32> {
    // As an address (a pointer is not `Send`); `aclrtFree` waits for the device.
    let p = int::<usize>(dev_ptr, "dev_ptr")?;
    ret_detached(py, |rt| rt.free(p as *mut c_void))
}

/// A copy's arguments, checked (addresses as integers, so that they cross
/// into a call without the GIL).
struct CopyArgs {
    dst: usize,
    dst_max: usize,
    src: usize,
    count: usize,
    kind: u32,
}

impl CopyArgs {
    /// From the Python arguments `dst, dest_max, src, count, kind`, in that order.
    fn new([dst, dest_max, src, count, kind]: [&Bound<'_, PyAny>; 5]) -> PyResult<Self> {
        Ok(Self {
            dst: int(dst, "dst")?,
            dst_max: int(dest_max, "dest_max")?,
            src: int(src, "src")?,
            count: int(count, "count")?,
            kind: int(kind, "kind")?,
        })
    }

    /// The runtime's form of the copy (pointers again).
    fn memcpy(&self) -> Memcpy {
        Memcpy {
            dst: self.dst as *mut c_void,
            dst_max: self.dst_max,
            src: self.src as *const c_void,
            count: self.count,
            kind: self.kind,
        }
    }
}

/// `ret = acl.rt.memcpy(dst, dest_max, src, count, kind)`: a synchronous copy.
/// As with pyACL, the addresses must be valid for the sizes in the spaces
/// `kind` names (a wrong host address crashes the process).
#[pyfunction]
fn memcpy(
    py: Python<'_>,
    dst: &Bound<'_, PyAny>,
    dest_max: &Bound<'_, PyAny>,
    src: &Bound<'_, PyAny>,
    count: &Bound<'_, PyAny>,
    kind: &Bound<'_, PyAny>,
) -> PyResult<i32> {
    let c = CopyArgs::new([dst, dest_max, src, count, kind])?;
    let rt = rt()?;
    // SAFETY: the caller vouches for the addresses, as with pyACL's memcpy
    // (documented); the runtime checks what it can (its own allocations, sizes).
    #[allow(unsafe_code)]
    let r = py.detach(|| unsafe { rt.memcpy(c.memcpy()) });
    Ok(ret(r))
}

/// `host_ptr, ret = acl.rt.malloc_host(size)`: page-locked host memory.
#[pyfunction]
fn malloc_host(size: &Bound<'_, PyAny>) -> PyResult<(usize, i32)> {
    let r = rt()?.malloc_host(int(size, "size")?);
    Ok(pair(r.map(|p| p as usize), 0))
}

/// `ret = acl.rt.free_host(host_ptr)`: memory from `malloc_host` only.
#[pyfunction]
fn free_host(host_ptr: &Bound<'_, PyAny>) -> PyResult<i32> {
    Ok(ret(rt()?.free_host(ptr(host_ptr, "host_ptr")?)))
}

/// `stream, ret = acl.rt.create_stream()`: a stream on the current device, as an int.
#[pyfunction]
fn create_stream() -> PyResult<(usize, i32)> {
    Ok(pair(rt()?.create_stream().map(AclStream::as_raw), 0))
}

/// `ret = acl.rt.destroy_stream(stream)`: waits for its pending work first.
#[pyfunction]
fn destroy_stream(py: Python<'_>, stream: &Bound<'_, PyAny>) -> PyResult<i32> {
    let s = AclStream::from_raw(int(stream, "stream")?);
    ret_detached(py, |rt| rt.destroy_stream(s))
}

/// `ret = acl.rt.synchronize_stream(stream)`: returns once the stream's
/// queued work is done (without the GIL meanwhile).
#[pyfunction]
fn synchronize_stream(py: Python<'_>, stream: &Bound<'_, PyAny>) -> PyResult<i32> {
    let s = AclStream::from_raw(int(stream, "stream")?);
    ret_detached(py, |rt| rt.synchronize_stream(s))
}

/// `ret = acl.rt.memcpy_async(dst, dest_max, src, count, kind, stream)`:
/// queues the copy on `stream` (`0`: the default stream); it is done after
/// `synchronize_stream`. Both buffers must stay valid until then.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn memcpy_async(
    dst: &Bound<'_, PyAny>,
    dest_max: &Bound<'_, PyAny>,
    src: &Bound<'_, PyAny>,
    count: &Bound<'_, PyAny>,
    kind: &Bound<'_, PyAny>,
    stream: &Bound<'_, PyAny>,
) -> PyResult<i32> {
    let c = CopyArgs::new([dst, dest_max, src, count, kind])?;
    let st = AclStream::from_raw(int(stream, "stream")?);
    let rt = rt()?;
    // SAFETY: the caller vouches for the addresses until the stream is
    // synchronised, as with pyACL's memcpy_async (documented).
    #[allow(unsafe_code)]
    let r = unsafe { rt.memcpy_async(c.memcpy(), st) };
    Ok(ret(r))
}

/// `key, ret = acl.rt.ipc_mem_get_export_key(dev_ptr, size, len, flags)`: `len` is 65.
/// The IPC calls run without the GIL: they may wait (the driver, or the
/// simulator's registry lock, up to its timeout) while other threads go on.
#[pyfunction]
fn ipc_mem_get_export_key(
    py: Python<'_>,
    dev_ptr: &Bound<'_, PyAny>,
    size: &Bound<'_, PyAny>,
    len: &Bound<'_, PyAny>,
    flags: &Bound<'_, PyAny>,
) -> PyResult<(String, i32)> {
    // The address as an int: a pointer does not cross into a call without the GIL.
    let (p, n, l, f) =
        (int::<usize>(dev_ptr, "dev_ptr")?, int(size, "size")?, int::<usize>(len, "len")?, int(flags, "flags")?);
    let rt = rt()?;
    if l < ACL_IPC_KEY_LEN {
        // What the runtime answers for a key buffer shorter than a key.
        return Ok((String::new(), ACL_ERROR_RT_PARAM_INVALID));
    }
    let key = py.detach(|| rt.ipc_mem_get_export_key(p as *mut c_void, n, f).map(|k| key_str(&k)));
    Ok(pair(key, String::new()))
}

/// `ret = acl.rt.ipc_mem_set_import_pid(key, pids)`: `pids` a list (at most 31).
#[pyfunction]
fn ipc_mem_set_import_pid(py: Python<'_>, key: &str, pids: &Bound<'_, PyAny>) -> PyResult<i32> {
    let list: Vec<Bound<'_, PyAny>> = pids.try_iter()?.collect::<PyResult<_>>()?;
    let pids = list.iter().map(|p| signed(p, "pid")).collect::<PyResult<Vec<i32>>>()?;
    let key = key_of(key);
    ret_detached(py, |rt| rt.ipc_mem_set_import_pid(&key, &pids))
}

/// `dev_ptr, ret = acl.rt.ipc_mem_import_by_key(key, flags)`.
#[pyfunction]
fn ipc_mem_import_by_key(py: Python<'_>, key: &str, flags: &Bound<'_, PyAny>) -> PyResult<(usize, i32)> {
    let (key, f) = (key_of(key), int(flags, "flags")?);
    let rt = rt()?;
    Ok(pair(py.detach(|| rt.ipc_mem_import_by_key(&key, f).map(|p| p as usize)), 0))
}

/// `ret = acl.rt.ipc_mem_close(key)`.
#[pyfunction]
fn ipc_mem_close(py: Python<'_>, key: &str) -> PyResult<i32> {
    let key = key_of(key);
    ret_detached(py, |rt| rt.ipc_mem_close(&key))
}

/// `pid, ret = acl.rt.device_get_bare_tgid()`: this process as the host sees it.
#[pyfunction]
fn device_get_bare_tgid() -> PyResult<(i32, i32)> {
    Ok(pair(rt()?.device_get_bare_tgid(), 0))
}

/// The functions, in the extension submodule `_acl`.
pub(crate) fn register(parent: &Bound<'_, PyModule>) -> PyResult<()> {
    let m = PyModule::new(parent.py(), "_acl")?;
    m.add_function(wrap_pyfunction!(init, &m)?)?;
    m.add_function(wrap_pyfunction!(finalize, &m)?)?;
    m.add_function(wrap_pyfunction!(set_device, &m)?)?;
    m.add_function(wrap_pyfunction!(reset_device, &m)?)?;
    m.add_function(wrap_pyfunction!(synchronize_device, &m)?)?;
    m.add_function(wrap_pyfunction!(device_can_access_peer, &m)?)?;
    m.add_function(wrap_pyfunction!(device_enable_peer_access, &m)?)?;
    m.add_function(wrap_pyfunction!(malloc, &m)?)?;
    m.add_function(wrap_pyfunction!(free, &m)?)?;
    m.add_function(wrap_pyfunction!(memcpy, &m)?)?;
    m.add_function(wrap_pyfunction!(malloc_host, &m)?)?;
    m.add_function(wrap_pyfunction!(free_host, &m)?)?;
    m.add_function(wrap_pyfunction!(create_stream, &m)?)?;
    m.add_function(wrap_pyfunction!(destroy_stream, &m)?)?;
    m.add_function(wrap_pyfunction!(synchronize_stream, &m)?)?;
    m.add_function(wrap_pyfunction!(memcpy_async, &m)?)?;
    m.add_function(wrap_pyfunction!(ipc_mem_get_export_key, &m)?)?;
    m.add_function(wrap_pyfunction!(ipc_mem_set_import_pid, &m)?)?;
    m.add_function(wrap_pyfunction!(ipc_mem_import_by_key, &m)?)?;
    m.add_function(wrap_pyfunction!(ipc_mem_close, &m)?)?;
    m.add_function(wrap_pyfunction!(device_get_bare_tgid, &m)?)?;
    parent.add_submodule(&m)
}
