//! The exported `acl*` symbols. NULL pointers give 100000 (ACL_ERROR_INVALID_PARAM),
//! everything else is the simulator's answer.

use core::ffi::{c_char, c_void};

use kpccl_ascend::codes::*;
use kpccl_ascend::sim::HostSim;
use kpccl_ascend::{AclContext, AclResult, AclRuntime, AclStream, IpcKey, Memcpy};

fn rt() -> HostSim {
    HostSim::new()
}

fn code(r: AclResult<()>) -> i32 {
    r.err().map_or(ACL_SUCCESS, |e| e.code())
}

/// The answer of a call with an out parameter: `out` NULL is refused before
/// `call` runs; a success writes its value through `out`.
///
/// # Safety
/// `out` is NULL or writable.
unsafe fn answer<T>(out: *mut T, call: impl FnOnce() -> AclResult<T>) -> i32 {
    if out.is_null() {
        return ACL_ERROR_INVALID_PARAM;
    }
    match call() {
        Ok(v) => {
            // SAFETY: checked non-NULL; the caller guarantees it is writable.
            unsafe { out.write(v) };
            ACL_SUCCESS
        }
        Err(e) => e.code(),
    }
}

/// Reads a C key: up to the first NUL, at most 65 bytes.
///
/// # Safety
/// `key` must be readable up to its NUL or 65 bytes, whichever comes first.
unsafe fn read_key(key: *const c_char) -> IpcKey {
    let mut k = [0u8; ACL_IPC_KEY_LEN];
    for (i, slot) in k.iter_mut().enumerate() {
        // SAFETY: the caller guarantees bytes up to the NUL (or 65) are readable, so
        // byte `i` (after non-NUL bytes 0..i) is inside the string.
        let at = unsafe { key.cast::<u8>().add(i) };
        // SAFETY: as above, `at` is readable.
        let b = unsafe { at.read() };
        *slot = b;
        if b == 0 {
            break;
        }
    }
    IpcKey(k)
}

/// Not an ACL call: marks this library as the kpccl simulator (returns 1), so loaders
/// can tell it from CANN's runtime.
#[unsafe(no_mangle)]
pub extern "C" fn kpcclAscendSimulator() -> i32 {
    1
}

/// `aclError aclInit(const char *configPath)`.
///
/// # Safety
/// `config` is NULL or a C string (it is not read).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclInit(config: *const c_char) -> i32 {
    let _ = config;
    code(rt().init())
}

/// `aclError aclFinalize(void)`.
#[unsafe(no_mangle)]
pub extern "C" fn aclFinalize() -> i32 {
    code(rt().finalize())
}

/// `aclError aclrtSetDevice(int32_t deviceId)`.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSetDevice(device_id: i32) -> i32 {
    code(rt().set_device(device_id))
}

/// `aclError aclrtResetDevice(int32_t deviceId)`.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtResetDevice(device_id: i32) -> i32 {
    code(rt().reset_device(device_id))
}

/// `aclError aclrtGetCurrentContext(aclrtContext *context)`.
///
/// # Safety
/// `context` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetCurrentContext(context: *mut *mut c_void) -> i32 {
    // SAFETY: NULL or writable per the caller.
    unsafe { answer(context, || rt().get_current_context().map(|c| c.0 as *mut c_void)) }
}

/// `aclError aclrtSetCurrentContext(aclrtContext context)`.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSetCurrentContext(context: *mut c_void) -> i32 {
    code(rt().set_current_context(AclContext(context as usize)))
}

/// `aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy)`.
///
/// # Safety
/// `dev_ptr` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMalloc(dev_ptr: *mut *mut c_void, size: usize, policy: u32) -> i32 {
    // SAFETY: NULL or writable per the caller.
    unsafe { answer(dev_ptr, || rt().malloc(size, policy)) }
}

/// `aclError aclrtFree(void *devPtr)`.
///
/// # Safety
/// `dev_ptr` is NULL or any value (unknown pointers are refused, not dereferenced).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtFree(dev_ptr: *mut c_void) -> i32 {
    code(rt().free(dev_ptr))
}

/// `aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count,
/// aclrtMemcpyKind kind)`.
///
/// # Safety
/// `dst` is valid for `dest_max` bytes and `src` for `count` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMemcpy(
    dst: *mut c_void,
    dest_max: usize,
    src: *const c_void,
    count: usize,
    kind: u32,
) -> i32 {
    // SAFETY: forwarded from the caller.
    code(unsafe { rt().memcpy(Memcpy { dst, dst_max: dest_max, src, count, kind }) })
}

/// `aclError aclrtSynchronizeDevice(void)`.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSynchronizeDevice() -> i32 {
    code(rt().synchronize_device())
}

/// `aclError aclrtDeviceCanAccessPeer(int32_t *canAccessPeer, int32_t deviceId,
/// int32_t peerDeviceId)`.
///
/// # Safety
/// `can_access_peer` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtDeviceCanAccessPeer(
    can_access_peer: *mut i32,
    device_id: i32,
    peer_device_id: i32,
) -> i32 {
    // SAFETY: NULL or writable per the caller.
    unsafe { answer(can_access_peer, || rt().device_can_access_peer(device_id, peer_device_id).map(i32::from)) }
}

/// `aclError aclrtDeviceEnablePeerAccess(int32_t peerDeviceId, uint32_t flags)`.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtDeviceEnablePeerAccess(peer_device_id: i32, flags: u32) -> i32 {
    code(rt().device_enable_peer_access(peer_device_id, flags))
}

/// `aclError aclrtDeviceGetBareTgid(int32_t *pid)`.
///
/// # Safety
/// `pid` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtDeviceGetBareTgid(pid: *mut i32) -> i32 {
    // SAFETY: NULL or writable per the caller.
    unsafe { answer(pid, || rt().device_get_bare_tgid()) }
}

/// `aclError aclrtIpcMemGetExportKey(void *devPtr, size_t size, char *key, size_t len,
/// uint64_t flags)`.
///
/// # Safety
/// `key` is NULL or writable for `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtIpcMemGetExportKey(
    dev_ptr: *mut c_void,
    size: usize,
    key: *mut c_char,
    len: usize,
    flags: u64,
) -> i32 {
    let key = key.cast::<[u8; ACL_IPC_KEY_LEN]>();
    // SAFETY: NULL or writable for `len` bytes per the caller, and the key is
    // written only once the simulator has checked `len >= 65`.
    unsafe { answer(key, || rt().export_key_with_len(dev_ptr, size, len, flags).map(|k| k.0)) }
}

/// `aclError aclrtIpcMemSetImportPid(const char *key, int32_t *pid, size_t num)`.
///
/// # Safety
/// `key` is NULL or a key string; `pid` is NULL or readable for `num` values.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtIpcMemSetImportPid(key: *const c_char, pid: *mut i32, num: usize) -> i32 {
    if key.is_null() || pid.is_null() {
        return ACL_ERROR_INVALID_PARAM;
    }
    if num == 0 || num > ACL_IPC_MAX_PIDS_PER_CALL {
        return ACL_ERROR_RT_PARAM_INVALID;
    }
    // SAFETY: non-NULL; readable for `num` (≤ 31) values per the caller.
    let pids = unsafe { core::slice::from_raw_parts(pid, num) };
    // SAFETY: non-NULL key string per the caller.
    let k = unsafe { read_key(key) };
    code(rt().ipc_mem_set_import_pid(&k, pids))
}

/// `aclError aclrtIpcMemImportByKey(void **devPtr, const char *key, uint64_t flags)`.
///
/// # Safety
/// `dev_ptr` is NULL or writable; `key` is NULL or a key string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtIpcMemImportByKey(dev_ptr: *mut *mut c_void, key: *const c_char, flags: u64) -> i32 {
    if key.is_null() {
        return ACL_ERROR_INVALID_PARAM;
    }
    // SAFETY: non-NULL key string per the caller.
    let k = unsafe { read_key(key) };
    // SAFETY: NULL or writable per the caller.
    unsafe { answer(dev_ptr, || rt().ipc_mem_import_by_key(&k, flags)) }
}

/// `aclError aclrtIpcMemClose(const char *key)`.
///
/// # Safety
/// `key` is NULL or a key string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtIpcMemClose(key: *const c_char) -> i32 {
    if key.is_null() {
        return ACL_ERROR_INVALID_PARAM;
    }
    // SAFETY: non-NULL key string per the caller.
    let k = unsafe { read_key(key) };
    code(rt().ipc_mem_close(&k))
}

/// `aclError aclrtMallocHost(void **hostPtr, size_t size)`.
///
/// # Safety
/// `host_ptr` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMallocHost(host_ptr: *mut *mut c_void, size: usize) -> i32 {
    // SAFETY: NULL or writable per the caller.
    unsafe { answer(host_ptr, || rt().malloc_host(size)) }
}

/// `aclError aclrtFreeHost(void *hostPtr)`.
///
/// # Safety
/// `host_ptr` is NULL or any value (unknown pointers are refused, not freed).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtFreeHost(host_ptr: *mut c_void) -> i32 {
    code(rt().free_host(host_ptr))
}

/// `aclError aclrtCreateStream(aclrtStream *stream)`.
///
/// # Safety
/// `stream` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtCreateStream(stream: *mut *mut c_void) -> i32 {
    // SAFETY: NULL or writable per the caller.
    unsafe { answer(stream, || rt().create_stream().map(|s| s.as_ptr())) }
}

/// `aclError aclrtDestroyStream(aclrtStream stream)`.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtDestroyStream(stream: *mut c_void) -> i32 {
    code(rt().destroy_stream(AclStream::from_ptr(stream)))
}

/// `aclError aclrtSynchronizeStream(aclrtStream stream)`.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSynchronizeStream(stream: *mut c_void) -> i32 {
    code(rt().synchronize_stream(AclStream::from_ptr(stream)))
}

/// `aclError aclrtMemcpyAsync(void *dst, size_t destMax, const void *src, size_t count,
/// aclrtMemcpyKind kind, aclrtStream stream)`.
///
/// # Safety
/// `dst` is valid for `dest_max` bytes and `src` for `count` bytes until `stream`
/// is synchronised.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMemcpyAsync(
    dst: *mut c_void,
    dest_max: usize,
    src: *const c_void,
    count: usize,
    kind: u32,
    stream: *mut c_void,
) -> i32 {
    // SAFETY: forwarded from the caller.
    code(unsafe { rt().memcpy_async(Memcpy { dst, dst_max: dest_max, src, count, kind }, AclStream::from_ptr(stream)) })
}

#[cfg(test)]
mod tests {
    use kpccl_ascend::AclError;

    use super::*;

    #[test]
    fn answer_refuses_null_before_the_call_and_writes_only_successes() {
        let never = || -> AclResult<i32> { panic!("called with a NULL out pointer") };
        // SAFETY: NULL is allowed.
        assert_eq!(unsafe { answer(core::ptr::null_mut(), never) }, ACL_ERROR_INVALID_PARAM);
        let mut out = 0;
        // SAFETY: `out` is writable.
        assert_eq!(unsafe { answer(&raw mut out, || Ok(7)) }, ACL_SUCCESS);
        assert_eq!(out, 7);
        // SAFETY: `out` is writable.
        let code = unsafe { answer(&raw mut out, || Err(AclError::new(ACL_ERROR_RT_PARAM_INVALID))) };
        assert_eq!((code, out), (ACL_ERROR_RT_PARAM_INVALID, 7), "a failure writes nothing");
    }
}
