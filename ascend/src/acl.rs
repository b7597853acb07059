//! The real ACL runtime, `libascendcl.so`, bound at run time (the cudarc pattern):
//! each symbol resolved on its own into a struct of typed function pointers, loaded
//! once per process into a `OnceLock`. A missing library or symbol is an error that
//! names it.

use core::ffi::{c_char, c_void};
use core::fmt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use libloading::Library;

use crate::codes::ACL_IPC_KEY_LEN;
use crate::runtime::{AclContext, AclResult, AclRuntime, AclStream, IpcKey, Memcpy, check};

/// The library's file name.
pub const LIBRARY: &str = "libascendcl.so";

/// The symbol by which the simulator library identifies itself.
const SIM_MARKER: &[u8] = b"kpcclAscendSimulator\0";

/// Why the runtime could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadError {
    /// No candidate could be opened: each path tried, with the loader's message.
    Library(Vec<(String, String)>),
    /// `$ASCEND_HOME_PATH`'s library exists but does not load (the loader's
    /// paths are then not searched).
    Home {
        /// The library's path.
        library: String,
        /// The loader's message.
        why: String,
    },
    /// The library lacks these symbols.
    Symbols {
        /// The library that was opened.
        library: String,
        /// The missing symbol names.
        missing: Vec<&'static str>,
    },
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Library(tried) => {
                write!(f, "cannot load {LIBRARY}; tried")?;
                for (path, why) in tried {
                    write!(f, " [{path}: {why}]")?;
                }
                write!(f, " (set ASCEND_HOME_PATH, or use the simulator)")
            }
            Self::Home { library, why } => write!(
                f,
                "cannot load {library}, the runtime ASCEND_HOME_PATH names: {why} (no other {LIBRARY} is tried while it is there: repair it, or unset ASCEND_HOME_PATH)"
            ),
            Self::Symbols { library, missing } => {
                write!(f, "{library} lacks {}", missing.join(", "))
            }
        }
    }
}

impl std::error::Error for LoadError {}

type FnI = unsafe extern "C" fn(i32) -> i32;
type FnV = unsafe extern "C" fn() -> i32;
type FnP = unsafe extern "C" fn(*mut c_void) -> i32;

/// The resolved entry points of one loaded `libascendcl.so`.
#[derive(Debug)]
pub struct AclApi {
    library: String,
    init: unsafe extern "C" fn(*const c_char) -> i32,
    finalize: FnV,
    set_device: FnI,
    reset_device: FnI,
    get_current_context: unsafe extern "C" fn(*mut *mut c_void) -> i32,
    set_current_context: FnP,
    malloc: unsafe extern "C" fn(*mut *mut c_void, usize, u32) -> i32,
    free: unsafe extern "C" fn(*mut c_void) -> i32,
    memcpy: unsafe extern "C" fn(*mut c_void, usize, *const c_void, usize, u32) -> i32,
    synchronize_device: FnV,
    can_access_peer: unsafe extern "C" fn(*mut i32, i32, i32) -> i32,
    enable_peer_access: unsafe extern "C" fn(i32, u32) -> i32,
    get_bare_tgid: unsafe extern "C" fn(*mut i32) -> i32,
    get_export_key: unsafe extern "C" fn(*mut c_void, usize, *mut c_char, usize, u64) -> i32,
    set_import_pid: unsafe extern "C" fn(*const c_char, *mut i32, usize) -> i32,
    import_by_key: unsafe extern "C" fn(*mut *mut c_void, *const c_char, u64) -> i32,
    close: unsafe extern "C" fn(*const c_char) -> i32,
    malloc_host: unsafe extern "C" fn(*mut *mut c_void, usize) -> i32,
    free_host: unsafe extern "C" fn(*mut c_void) -> i32,
    create_stream: unsafe extern "C" fn(*mut *mut c_void) -> i32,
    destroy_stream: FnP,
    synchronize_stream: FnP,
    memcpy_async: unsafe extern "C" fn(*mut c_void, usize, *const c_void, usize, u32, *mut c_void) -> i32,
    simulator: bool,
    _lib: Library,
}

/// The loader's message with its causes (libloading keeps `dlerror()` text in `source`).
fn describe(e: &libloading::Error) -> String {
    let mut text = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        text = format!("{text}: {c}");
        cause = c.source();
    }
    text
}

/// Resolves `name` in `lib` as a `T`, or records it as missing.
///
/// # Safety
/// `T` must be the function-pointer type of the symbol's C prototype.
unsafe fn sym<T: Copy>(lib: &Library, name: &'static str, missing: &mut Vec<&'static str>) -> Option<T> {
    let cname = format!("{name}\0");
    // SAFETY: the caller guarantees `T` matches the symbol's prototype.
    match unsafe { lib.get::<T>(cname.as_bytes()) } {
        Ok(s) => Some(*s),
        Err(_) => {
            missing.push(name);
            None
        }
    }
}

impl AclApi {
    /// Opens the library at `path` (a bare name goes through the loader's search).
    pub fn open(path: &Path) -> Result<Self, LoadError> {
        let shown = path.display().to_string();
        // Every symbol bound now (`RTLD_NOW`), not at its first call: a runtime
        // whose dependencies lack a function (another CANN version's) is refused
        // here, naming it, instead of killing the process mid-call.
        let flags = libloading::os::unix::RTLD_NOW | libloading::os::unix::RTLD_LOCAL;
        // SAFETY: loading runs the library's initialisers; libascendcl (or the
        // simulator) has no initialiser with preconditions on the caller.
        let lib = unsafe { libloading::os::unix::Library::open(Some(path), flags) }
            .map(Library::from)
            .map_err(|e| LoadError::Library(vec![(shown.clone(), describe(&e))]))?;
        // SAFETY: only the presence of the marker is tested; it is never called.
        let simulator = unsafe { lib.get::<unsafe extern "C" fn() -> i32>(SIM_MARKER) }.is_ok();
        let mut m = Vec::new();
        macro_rules! get {
            ($name:literal) => {
                // SAFETY: each field's type is the prototype of `$name` in acl_rt.h /
                // acl_base.h (docs/ascend-ipc.md §1.2).
                unsafe { sym(&lib, $name, &mut m) }
            };
        }
        let api = (
            get!("aclInit"),
            get!("aclFinalize"),
            get!("aclrtSetDevice"),
            get!("aclrtResetDevice"),
            get!("aclrtGetCurrentContext"),
            get!("aclrtSetCurrentContext"),
            get!("aclrtMalloc"),
            get!("aclrtFree"),
            get!("aclrtMemcpy"),
            get!("aclrtSynchronizeDevice"),
            get!("aclrtDeviceCanAccessPeer"),
            get!("aclrtDeviceEnablePeerAccess"),
            get!("aclrtDeviceGetBareTgid"),
            get!("aclrtIpcMemGetExportKey"),
            get!("aclrtIpcMemSetImportPid"),
            get!("aclrtIpcMemImportByKey"),
            get!("aclrtIpcMemClose"),
            get!("aclrtMallocHost"),
            get!("aclrtFreeHost"),
            get!("aclrtCreateStream"),
            get!("aclrtDestroyStream"),
            get!("aclrtSynchronizeStream"),
            get!("aclrtMemcpyAsync"),
        );
        let (
            Some(init),
            Some(finalize),
            Some(set_device),
            Some(reset_device),
            Some(get_current_context),
            Some(set_current_context),
            Some(malloc),
            Some(free),
            Some(memcpy),
            Some(synchronize_device),
            Some(can_access_peer),
            Some(enable_peer_access),
            Some(get_bare_tgid),
            Some(get_export_key),
            Some(set_import_pid),
            Some(import_by_key),
            Some(close),
            Some(malloc_host),
            Some(free_host),
            Some(create_stream),
            Some(destroy_stream),
            Some(synchronize_stream),
            Some(memcpy_async),
        ) = api
        else {
            return Err(LoadError::Symbols { library: shown, missing: m });
        };
        Ok(Self {
            library: shown,
            init,
            finalize,
            set_device,
            reset_device,
            get_current_context,
            set_current_context,
            malloc,
            free,
            memcpy,
            synchronize_device,
            can_access_peer,
            enable_peer_access,
            get_bare_tgid,
            get_export_key,
            set_import_pid,
            import_by_key,
            close,
            malloc_host,
            free_host,
            create_stream,
            destroy_stream,
            synchronize_stream,
            memcpy_async,
            simulator,
            _lib: lib,
        })
    }

    /// Searches `$ASCEND_HOME_PATH/lib64`, then the loader's default paths.
    /// A library in `$ASCEND_HOME_PATH/lib64` that fails to load is an error
    /// naming it: the user chose that runtime, and another one found on the
    /// loader's path (an older CANN, the simulator library) would run unasked.
    pub fn search() -> Result<Self, LoadError> {
        let home = std::env::var_os("ASCEND_HOME_PATH").map(|h| PathBuf::from(h).join("lib64").join(LIBRARY));
        Self::search_in(home.as_deref(), Path::new(LIBRARY))
    }

    /// [`search`](Self::search) of `home`'s library, then of `fallback`, only
    /// if `home` holds none.
    fn search_in(home: Option<&Path>, fallback: &Path) -> Result<Self, LoadError> {
        let mut tried = Vec::new();
        if let Some(home) = home {
            match Self::open(home) {
                Err(LoadError::Library(mut t)) if !home.exists() => tried.append(&mut t),
                Err(LoadError::Library(t)) => {
                    let why = t.into_iter().map(|(_, why)| why).collect::<Vec<_>>().join("; ");
                    return Err(LoadError::Home { library: home.display().to_string(), why });
                }
                found => return found,
            }
        }
        match Self::open(fallback) {
            Err(LoadError::Library(mut t)) => {
                tried.append(&mut t);
                Err(LoadError::Library(tried))
            }
            found => found,
        }
    }

    /// Whether the library is the kpccl simulator (`ascend/simlib`), which exports
    /// `kpcclAscendSimulator`, rather than CANN's runtime.
    pub fn is_simulator(&self) -> bool {
        self.simulator
    }

    /// The path the library was opened by.
    pub fn library(&self) -> &str {
        &self.library
    }
}

/// [`AclRuntime`] over a loaded `libascendcl.so`.
#[derive(Debug, Clone, Copy)]
pub struct AclBackend {
    api: &'static AclApi,
}

static DEFAULT: OnceLock<Result<AclApi, LoadError>> = OnceLock::new();

impl AclBackend {
    /// The runtime found by [`AclApi::search`], loaded once per process.
    pub fn load() -> Result<Self, LoadError> {
        match DEFAULT.get_or_init(AclApi::search) {
            Ok(api) => Ok(Self { api }),
            Err(e) => Err(e.clone()),
        }
    }

    /// The runtime at `path`. It stays loaded for the life of the process
    /// (unloading a device runtime is never safe).
    pub fn load_from(path: &Path) -> Result<Self, LoadError> {
        Ok(Self { api: Box::leak(Box::new(AclApi::open(path)?)) })
    }

    /// Whether a real runtime loads on this machine.
    pub fn is_available() -> bool {
        Self::load().is_ok()
    }

    /// The loaded entry points.
    pub fn api(&self) -> &'static AclApi {
        self.api
    }
}

impl AclRuntime for AclBackend {
    fn init(&self) -> AclResult<()> {
        // SAFETY: aclInit(NULL) is allowed; the pointer is the ACL prototype's.
        check(unsafe { (self.api.init)(core::ptr::null()) })
    }

    fn finalize(&self) -> AclResult<()> {
        // SAFETY: no arguments.
        check(unsafe { (self.api.finalize)() })
    }

    fn set_device(&self, device: i32) -> AclResult<()> {
        // SAFETY: plain integer argument.
        check(unsafe { (self.api.set_device)(device) })
    }

    fn reset_device(&self, device: i32) -> AclResult<()> {
        // SAFETY: plain integer argument.
        check(unsafe { (self.api.reset_device)(device) })
    }

    fn get_current_context(&self) -> AclResult<AclContext> {
        let mut c = core::ptr::null_mut();
        // SAFETY: `c` is a valid out pointer.
        check(unsafe { (self.api.get_current_context)(&raw mut c) })?;
        Ok(AclContext(c as usize))
    }

    fn set_current_context(&self, context: AclContext) -> AclResult<()> {
        // SAFETY: an opaque handle the runtime gave; it checks it.
        check(unsafe { (self.api.set_current_context)(context.0 as *mut c_void) })
    }

    fn malloc(&self, size: usize, policy: u32) -> AclResult<*mut c_void> {
        let mut p = core::ptr::null_mut();
        // SAFETY: `p` is a valid out pointer.
        check(unsafe { (self.api.malloc)(&raw mut p, size, policy) })?;
        Ok(p)
    }

    #[allow(clippy::not_unsafe_ptr_arg_deref)] // a device address, validated by the runtime's tables
    fn free(&self, ptr: *mut c_void) -> AclResult<()> {
        // SAFETY: the runtime looks the pointer up in its own tables and refuses
        // unknown ones.
        check(unsafe { (self.api.free)(ptr) })
    }

    unsafe fn memcpy(&self, c: Memcpy) -> AclResult<()> {
        // SAFETY: the caller guarantees the ranges, as the trait requires.
        check(unsafe { (self.api.memcpy)(c.dst, c.dst_max, c.src, c.count, c.kind) })
    }

    fn malloc_host(&self, size: usize) -> AclResult<*mut c_void> {
        let mut p = core::ptr::null_mut();
        // SAFETY: `p` is a valid out pointer.
        check(unsafe { (self.api.malloc_host)(&raw mut p, size) })?;
        Ok(p)
    }

    #[allow(clippy::not_unsafe_ptr_arg_deref)] // looked up in the runtime's tables, never dereferenced here
    fn free_host(&self, ptr: *mut c_void) -> AclResult<()> {
        // SAFETY: the runtime refuses pointers it did not hand out.
        check(unsafe { (self.api.free_host)(ptr) })
    }

    fn create_stream(&self) -> AclResult<AclStream> {
        let mut s = core::ptr::null_mut();
        // SAFETY: `s` is a valid out pointer.
        check(unsafe { (self.api.create_stream)(&raw mut s) })?;
        Ok(AclStream::from_ptr(s))
    }

    fn destroy_stream(&self, stream: AclStream) -> AclResult<()> {
        // SAFETY: an opaque handle the runtime validates.
        check(unsafe { (self.api.destroy_stream)(stream.as_ptr()) })
    }

    fn synchronize_stream(&self, stream: AclStream) -> AclResult<()> {
        // SAFETY: an opaque handle the runtime validates.
        check(unsafe { (self.api.synchronize_stream)(stream.as_ptr()) })
    }

    unsafe fn memcpy_async(&self, c: Memcpy, stream: AclStream) -> AclResult<()> {
        // SAFETY: the caller guarantees the ranges until the stream is synchronised.
        check(unsafe { (self.api.memcpy_async)(c.dst, c.dst_max, c.src, c.count, c.kind, stream.as_ptr()) })
    }

    fn synchronize_device(&self) -> AclResult<()> {
        // SAFETY: no arguments.
        check(unsafe { (self.api.synchronize_device)() })
    }

    fn device_can_access_peer(&self, device: i32, peer: i32) -> AclResult<bool> {
        let mut can = 0;
        // SAFETY: `can` is a valid out pointer.
        check(unsafe { (self.api.can_access_peer)(&raw mut can, device, peer) })?;
        Ok(can != 0)
    }

    fn device_enable_peer_access(&self, peer: i32, flags: u32) -> AclResult<()> {
        // SAFETY: plain integer arguments.
        check(unsafe { (self.api.enable_peer_access)(peer, flags) })
    }

    fn device_get_bare_tgid(&self) -> AclResult<i32> {
        let mut pid = 0;
        // SAFETY: `pid` is a valid out pointer.
        check(unsafe { (self.api.get_bare_tgid)(&raw mut pid) })?;
        Ok(pid)
    }

    #[allow(clippy::not_unsafe_ptr_arg_deref)] // a device address, validated by the runtime's tables
    fn ipc_mem_get_export_key(&self, ptr: *mut c_void, size: usize, flags: u64) -> AclResult<IpcKey> {
        let mut key = [0u8; ACL_IPC_KEY_LEN];
        // SAFETY: `key` has the 65 bytes `len` announces; the runtime validates `ptr`.
        check(unsafe { (self.api.get_export_key)(ptr, size, key.as_mut_ptr().cast(), ACL_IPC_KEY_LEN, flags) })?;
        Ok(IpcKey(key))
    }

    fn ipc_mem_set_import_pid(&self, key: &IpcKey, pids: &[i32]) -> AclResult<()> {
        let mut pids = pids.to_vec();
        // SAFETY: `key` is 65 bytes; `pids` holds `len` values (the C prototype takes a
        // non-const pointer but only reads it).
        check(unsafe { (self.api.set_import_pid)(key.0.as_ptr().cast(), pids.as_mut_ptr(), pids.len()) })
    }

    fn ipc_mem_import_by_key(&self, key: &IpcKey, flags: u64) -> AclResult<*mut c_void> {
        let mut p = core::ptr::null_mut();
        // SAFETY: `p` is a valid out pointer; `key` is 65 bytes.
        check(unsafe { (self.api.import_by_key)(&raw mut p, key.0.as_ptr().cast(), flags) })?;
        Ok(p)
    }

    fn ipc_mem_close(&self, key: &IpcKey) -> AclResult<()> {
        // SAFETY: `key` is 65 bytes.
        check(unsafe { (self.api.close)(key.0.as_ptr().cast()) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A library in `$ASCEND_HOME_PATH/lib64` that does not load is an error
    /// naming it, not a reason to load whatever the loader finds instead.
    #[test]
    fn a_home_library_that_fails_to_load_is_an_error_naming_it() {
        let scratch = kpccl_testkit::ScratchDir::new("acl-home", "broken");
        let broken = scratch.path().join(LIBRARY);
        std::fs::write(&broken, b"not a shared object").unwrap();
        // The loader's candidate loads (and lacks the symbols): never reached.
        let err = AclApi::search_in(Some(&broken), Path::new("libc.so.6")).unwrap_err();
        let LoadError::Home { library, .. } = &err else { panic!("{err}") };
        assert_eq!(library, &broken.display().to_string());
        let text = err.to_string();
        assert!(text.contains("ASCEND_HOME_PATH") && !text.contains("libc"), "{text}");
        // No library there at all: the loader's paths are searched.
        let absent = scratch.path().join("lib64").join(LIBRARY);
        let err = AclApi::search_in(Some(&absent), Path::new("libc.so.6")).unwrap_err();
        assert!(matches!(&err, LoadError::Symbols { library, .. } if library == "libc.so.6"), "{err}");
    }
}
