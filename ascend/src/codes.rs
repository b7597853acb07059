//! `aclError` values and flag constants, with the numbers of the ACL headers
//! (`acl_base_rt.h`, `rt_error_codes.h`, `acl_rt.h`) as listed in `docs/ascend-ipc.md`.

/// Success.
pub const ACL_SUCCESS: i32 = 0;
/// NULL pointer, size 0 to `aclrtMalloc`, bad memcpy kind, peer == self.
pub const ACL_ERROR_INVALID_PARAM: i32 = 100_000;
/// A call before `aclInit`.
pub const ACL_ERROR_UNINITIALIZE: i32 = 100_001;
/// `aclInit` called twice.
pub const ACL_ERROR_REPEAT_INITIALIZE: i32 = 100_002;
/// `aclFinalize` without a matching `aclInit`.
pub const ACL_ERROR_REPEAT_FINALIZE: i32 = 100_037;
/// Allocation failure at the ACL layer.
pub const ACL_ERROR_BAD_ALLOC: i32 = 200_000;
/// The symbol is missing from the loaded runtime (CANN too old).
pub const ACL_ERROR_API_NOT_SUPPORT: i32 = 200_001;
/// Invalid device.
pub const ACL_ERROR_INVALID_DEVICE: i32 = 200_002;
/// A reserved parameter was not zero.
pub const ACL_ERROR_FEATURE_UNSUPPORTED: i32 = 200_006;
/// Runtime parameter check failed (size, len, flags, num).
pub const ACL_ERROR_RT_PARAM_INVALID: i32 = 107_000;
/// Bad device id.
pub const ACL_ERROR_RT_INVALID_DEVICEID: i32 = 107_001;
/// No current context (no `aclrtSetDevice` in this thread).
pub const ACL_ERROR_RT_CONTEXT_NULL: i32 = 107_002;
/// The stream belongs to another device's context.
pub const ACL_ERROR_RT_STREAM_CONTEXT: i32 = 107_003;
/// Operation on a destroyed key that an importer still references.
pub const ACL_ERROR_RT_INVALID_HANDLE: i32 = 107_017;
/// The chip or driver lacks IPC.
pub const ACL_ERROR_RT_FEATURE_NOT_SUPPORT: i32 = 207_000;
/// Out of device memory.
pub const ACL_ERROR_RT_MEMORY_ALLOCATION: i32 = 207_001;
/// Free failed.
pub const ACL_ERROR_RT_MEMORY_FREE: i32 = 207_002;
/// `SetImportPid` on a key exported with validation disabled.
pub const ACL_ERROR_RT_NO_PERMISSION: i32 = 207_006;
/// Unmapped runtime error.
pub const ACL_ERROR_RT_INTERNAL_ERROR: i32 = 507_000;
/// Context release error: `aclrtResetDevice` of a device this process no longer holds.
pub const ACL_ERROR_RT_CONTEXT_RELEASE_ERROR: i32 = 507_007;
/// "ipc error": the simulator's strict mode reports misuse with it.
pub const ACL_ERROR_RT_IPC_ERROR: i32 = 507_022;
/// Driver catch-all: unknown key, not whitelisted, not creator, unaligned.
pub const ACL_ERROR_RT_DRV_INTERNAL_ERROR: i32 = 507_899;

/// Export flag: the exporter must whitelist importers with `SetImportPid`.
pub const ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT: u64 = 0x0;
/// Export flag: any process may import the key.
pub const ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION: u64 = 0x1;
/// Import flag: the caller enabled peer access itself if needed.
pub const ACL_RT_IPC_MEM_IMPORT_FLAG_DEFAULT: u64 = 0x0;
/// Import flag: the runtime enables peer access to the exporter's device.
pub const ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS: u64 = 0x1;

/// Length of an IPC key buffer, NUL included.
pub const ACL_IPC_KEY_LEN: usize = 65;
/// Most pids one `aclrtIpcMemSetImportPid` call accepts.
pub const ACL_IPC_MAX_PIDS_PER_CALL: usize = 31;

/// `aclrtMemMallocPolicy::ACL_MEM_MALLOC_HUGE_FIRST`.
pub const ACL_MEM_MALLOC_HUGE_FIRST: u32 = 0;
/// `aclrtMemMallocPolicy::ACL_MEM_MALLOC_HUGE_ONLY`.
pub const ACL_MEM_MALLOC_HUGE_ONLY: u32 = 1;
/// `aclrtMemMallocPolicy::ACL_MEM_MALLOC_NORMAL_ONLY`.
pub const ACL_MEM_MALLOC_NORMAL_ONLY: u32 = 2;
/// `aclrtMemMallocPolicy::ACL_MEM_MALLOC_HUGE_FIRST_P2P`: memory another device may map.
pub const ACL_MEM_MALLOC_HUGE_FIRST_P2P: u32 = 3;
/// `aclrtMemMallocPolicy::ACL_MEM_MALLOC_HUGE_ONLY_P2P`.
pub const ACL_MEM_MALLOC_HUGE_ONLY_P2P: u32 = 4;
/// `aclrtMemMallocPolicy::ACL_MEM_MALLOC_NORMAL_ONLY_P2P`.
pub const ACL_MEM_MALLOC_NORMAL_ONLY_P2P: u32 = 5;
/// `aclrtMemMallocPolicy::ACL_MEM_MALLOC_HUGE1G_ONLY`: 1 GiB pages.
pub const ACL_MEM_MALLOC_HUGE1G_ONLY: u32 = 6;
/// `aclrtMemMallocPolicy::ACL_MEM_MALLOC_HUGE1G_ONLY_P2P`.
pub const ACL_MEM_MALLOC_HUGE1G_ONLY_P2P: u32 = 7;

/// `aclrtMemcpyKind`: host to host.
pub const ACL_MEMCPY_HOST_TO_HOST: u32 = 0;
/// `aclrtMemcpyKind`: host to device.
pub const ACL_MEMCPY_HOST_TO_DEVICE: u32 = 1;
/// `aclrtMemcpyKind`: device to host.
pub const ACL_MEMCPY_DEVICE_TO_HOST: u32 = 2;
/// `aclrtMemcpyKind`: device to device.
pub const ACL_MEMCPY_DEVICE_TO_DEVICE: u32 = 3;
/// `aclrtMemcpyKind`: direction inferred from the pointers.
pub const ACL_MEMCPY_DEFAULT: u32 = 4;

/// The name of a known code, for messages.
pub fn name(code: i32) -> &'static str {
    match code {
        ACL_SUCCESS => "ACL_SUCCESS",
        ACL_ERROR_INVALID_PARAM => "ACL_ERROR_INVALID_PARAM",
        ACL_ERROR_UNINITIALIZE => "ACL_ERROR_UNINITIALIZE",
        ACL_ERROR_REPEAT_INITIALIZE => "ACL_ERROR_REPEAT_INITIALIZE",
        ACL_ERROR_REPEAT_FINALIZE => "ACL_ERROR_REPEAT_FINALIZE",
        ACL_ERROR_BAD_ALLOC => "ACL_ERROR_BAD_ALLOC",
        ACL_ERROR_API_NOT_SUPPORT => "ACL_ERROR_API_NOT_SUPPORT",
        ACL_ERROR_INVALID_DEVICE => "ACL_ERROR_INVALID_DEVICE",
        ACL_ERROR_FEATURE_UNSUPPORTED => "ACL_ERROR_FEATURE_UNSUPPORTED",
        ACL_ERROR_RT_PARAM_INVALID => "ACL_ERROR_RT_PARAM_INVALID",
        ACL_ERROR_RT_INVALID_DEVICEID => "ACL_ERROR_RT_INVALID_DEVICEID",
        ACL_ERROR_RT_CONTEXT_NULL => "ACL_ERROR_RT_CONTEXT_NULL",
        ACL_ERROR_RT_STREAM_CONTEXT => "ACL_ERROR_RT_STREAM_CONTEXT",
        ACL_ERROR_RT_INVALID_HANDLE => "ACL_ERROR_RT_INVALID_HANDLE",
        ACL_ERROR_RT_FEATURE_NOT_SUPPORT => "ACL_ERROR_RT_FEATURE_NOT_SUPPORT",
        ACL_ERROR_RT_MEMORY_ALLOCATION => "ACL_ERROR_RT_MEMORY_ALLOCATION",
        ACL_ERROR_RT_MEMORY_FREE => "ACL_ERROR_RT_MEMORY_FREE",
        ACL_ERROR_RT_NO_PERMISSION => "ACL_ERROR_RT_NO_PERMISSION",
        ACL_ERROR_RT_INTERNAL_ERROR => "ACL_ERROR_RT_INTERNAL_ERROR",
        ACL_ERROR_RT_CONTEXT_RELEASE_ERROR => "ACL_ERROR_RT_CONTEXT_RELEASE_ERROR",
        ACL_ERROR_RT_IPC_ERROR => "ACL_ERROR_RT_IPC_ERROR",
        ACL_ERROR_RT_DRV_INTERNAL_ERROR => "ACL_ERROR_RT_DRV_INTERNAL_ERROR",
        _ => "unknown aclError",
    }
}
