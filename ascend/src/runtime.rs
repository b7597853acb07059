//! The device-runtime trait: the IPC-relevant ACL calls, each returning the ACL code
//! on failure.

use core::ffi::c_void;
use core::fmt;

use crate::codes::{self, ACL_IPC_KEY_LEN};

/// An IPC key: 65 opaque bytes, NUL-terminated, compared up to the first NUL.
///
/// On the v2 driver it is 64 lowercase hex characters and a NUL; newer chips use
/// binary keys, so nothing here assumes UTF-8.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct IpcKey(pub [u8; ACL_IPC_KEY_LEN]);

impl IpcKey {
    /// The 65 raw bytes, to send to another process byte for byte.
    pub fn as_bytes(&self) -> &[u8; ACL_IPC_KEY_LEN] {
        &self.0
    }

    /// A key from 65 received bytes.
    pub fn from_bytes(bytes: [u8; ACL_IPC_KEY_LEN]) -> Self {
        Self(bytes)
    }

    /// The bytes before the first NUL (all 65 if there is none).
    pub fn significant(&self) -> &[u8] {
        let end = self.0.iter().position(|&b| b == 0).unwrap_or(ACL_IPC_KEY_LEN);
        &self.0[..end]
    }
}

impl fmt::Debug for IpcKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "IpcKey({})", String::from_utf8_lossy(self.significant()))
    }
}

/// A failed ACL call: the `aclError` code it returned.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct AclError {
    code: i32,
}

impl AclError {
    /// An error carrying `code` (which should not be 0).
    pub const fn new(code: i32) -> Self {
        Self { code }
    }

    /// The `aclError` code, e.g. 507899.
    pub const fn code(&self) -> i32 {
        self.code
    }
}

impl fmt::Debug for AclError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AclError({} {})", self.code, codes::name(self.code))
    }
}

impl fmt::Display for AclError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ACL error {} ({})", self.code, codes::name(self.code))
    }
}

impl std::error::Error for AclError {}

/// An `aclrtContext`: the opaque handle of a device context (the windows use
/// a device's default context, which `aclrtSetDevice` makes), held as an
/// integer like [`AclStream`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AclContext(pub usize);

/// An `aclrtStream`: an opaque handle the runtime returns from `aclrtCreateStream`.
///
/// It holds the handle's address as an integer, so it is `Send` and a binding can
/// pass it as a plain int; [`AclStream::DEFAULT`] (NULL) names the default stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AclStream(pub usize);

impl AclStream {
    /// The NULL stream: the runtime's default stream of the current device.
    pub const DEFAULT: Self = Self(0);

    /// The stream whose `aclrtStream` handle is `ptr`.
    pub fn from_ptr(ptr: *mut c_void) -> Self {
        Self(ptr as usize)
    }

    /// The `aclrtStream` handle, to pass to C.
    pub fn as_ptr(self) -> *mut c_void {
        self.0 as *mut c_void
    }

    /// The handle as an integer.
    pub fn as_raw(self) -> usize {
        self.0
    }

    /// The stream whose handle is the integer `raw`.
    pub fn from_raw(raw: usize) -> Self {
        Self(raw)
    }
}

impl From<usize> for AclStream {
    fn from(raw: usize) -> Self {
        Self(raw)
    }
}

impl From<AclStream> for usize {
    fn from(s: AclStream) -> Self {
        s.0
    }
}

/// The arguments of one copy, as `aclrtMemcpy` and `aclrtMemcpyAsync` both take
/// them: `count` bytes from `src` to `dst`, which has room for `dst_max`, in the
/// memory spaces `kind` names (`ACL_MEMCPY_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Memcpy {
    /// Where the bytes go.
    pub dst: *mut c_void,
    /// The room at `dst`; a `count` above it is refused.
    pub dst_max: usize,
    /// Where the bytes come from.
    pub src: *const c_void,
    /// How many bytes.
    pub count: usize,
    /// The direction, an `ACL_MEMCPY_*` code.
    pub kind: u32,
}

impl Memcpy {
    /// `n` bytes from `src` to `dst`, the destination room exactly `n`.
    pub fn exact(dst: *mut c_void, src: *const c_void, n: usize, kind: u32) -> Self {
        Self { dst, dst_max: n, src, count: n, kind }
    }
}

/// The result of an ACL call.
pub type AclResult<T> = Result<T, AclError>;

/// `Ok(())` for 0, else the code as an error.
pub fn check(code: i32) -> AclResult<()> {
    if code == codes::ACL_SUCCESS { Ok(()) } else { Err(AclError::new(code)) }
}

/// The IPC-relevant calls of the ACL runtime (`acl_rt.h`), with its return codes.
///
/// Pointers are device virtual addresses; they are passed through, never
/// dereferenced by callers of this trait except through [`AclRuntime::memcpy`].
pub trait AclRuntime {
    /// `aclInit(NULL)`.
    fn init(&self) -> AclResult<()>;
    /// `aclFinalize()`.
    fn finalize(&self) -> AclResult<()>;
    /// `aclrtSetDevice(device)`: the calling thread's current device.
    fn set_device(&self, device: i32) -> AclResult<()>;
    /// `aclrtResetDevice(device)`.
    fn reset_device(&self, device: i32) -> AclResult<()>;
    /// `aclrtGetCurrentContext(&context)`: the calling thread's context
    /// (`ACL_ERROR_RT_CONTEXT_NULL` when it has none).
    fn get_current_context(&self) -> AclResult<AclContext>;
    /// `aclrtSetCurrentContext(context)`: makes `context`, and so its device,
    /// current on the calling thread. Unlike `aclrtSetDevice` it counts
    /// nothing: switching back and forth needs no `aclrtResetDevice`.
    fn set_current_context(&self, context: AclContext) -> AclResult<()>;
    /// `aclrtMalloc(&ptr, size, policy)` on the current device.
    fn malloc(&self, size: usize, policy: u32) -> AclResult<*mut c_void>;
    /// `aclrtFree(ptr)`.
    fn free(&self, ptr: *mut c_void) -> AclResult<()>;
    /// `aclrtMemcpy(dst, dst_max, src, count, kind)`.
    ///
    /// # Safety
    /// `copy.dst` must be valid for `dst_max` bytes and `copy.src` for `count`
    /// bytes, in the memory space `kind` names.
    unsafe fn memcpy(&self, copy: Memcpy) -> AclResult<()>;
    /// `aclrtMallocHost(&ptr, size)`: page-locked host memory, 64-byte aligned.
    fn malloc_host(&self, size: usize) -> AclResult<*mut c_void>;
    /// `aclrtFreeHost(ptr)`: only memory from [`AclRuntime::malloc_host`].
    fn free_host(&self, ptr: *mut c_void) -> AclResult<()>;
    /// `aclrtCreateStream(&stream)` on the current device.
    fn create_stream(&self) -> AclResult<AclStream>;
    /// `aclrtDestroyStream(stream)`: waits for the stream's pending work first.
    fn destroy_stream(&self, stream: AclStream) -> AclResult<()>;
    /// `aclrtSynchronizeStream(stream)`: returns once every task queued on it is done.
    fn synchronize_stream(&self, stream: AclStream) -> AclResult<()>;
    /// `aclrtMemcpyAsync(dst, dst_max, src, count, kind, stream)`: queues the copy
    /// on `stream`; it is done only after [`AclRuntime::synchronize_stream`].
    ///
    /// # Safety
    /// `copy.dst` must stay valid for `dst_max` bytes and `copy.src` for `count`
    /// bytes, in the memory space `kind` names, until the stream is synchronised.
    unsafe fn memcpy_async(&self, copy: Memcpy, stream: AclStream) -> AclResult<()>;
    /// `aclrtSynchronizeDevice()`.
    fn synchronize_device(&self) -> AclResult<()>;
    /// `aclrtDeviceCanAccessPeer(&can, device, peer)`.
    fn device_can_access_peer(&self, device: i32, peer: i32) -> AclResult<bool>;
    /// `aclrtDeviceEnablePeerAccess(peer, flags)`: current device to `peer`.
    fn device_enable_peer_access(&self, peer: i32, flags: u32) -> AclResult<()>;
    /// `aclrtDeviceGetBareTgid(&pid)`: this process as the host sees it.
    fn device_get_bare_tgid(&self) -> AclResult<i32>;
    /// `aclrtIpcMemGetExportKey(ptr, size, key, 65, flags)`.
    fn ipc_mem_get_export_key(&self, ptr: *mut c_void, size: usize, flags: u64) -> AclResult<IpcKey>;
    /// `aclrtIpcMemSetImportPid(key, pids, pids.len())`: at most 31 pids.
    fn ipc_mem_set_import_pid(&self, key: &IpcKey, pids: &[i32]) -> AclResult<()>;
    /// `aclrtIpcMemImportByKey(&ptr, key, flags)`.
    fn ipc_mem_import_by_key(&self, key: &IpcKey, flags: u64) -> AclResult<*mut c_void>;
    /// `aclrtIpcMemClose(key)`: unmaps one import, or destroys the exporter's key.
    fn ipc_mem_close(&self, key: &IpcKey) -> AclResult<()>;
}
