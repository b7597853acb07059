//! Ascend device memory shared between processes, after the ACL runtime's IPC calls
//! (`aclrtIpcMemGetExportKey`, `aclrtIpcMemSetImportPid`, `aclrtIpcMemImportByKey`,
//! `aclrtIpcMemClose`).
//!
//! [`runtime::AclRuntime`] is the one trait for the device runtime. [`sim::HostSim`]
//! implements it on the host: "device" memory is shared memory and the export keys,
//! whitelists and import counts live in a per-user registry, so two real processes
//! share memory with the same rules and return codes as the hardware
//! (`docs/ascend-ipc.md` in the repository).
//!
//! [`DeviceWindow`] is a kpccl window whose segments are device memory, shared
//! by those calls, with its fence slots in host shared memory; [`backend`]
//! picks its runtime (`KPCCL_ASCEND=acl|sim|auto`).
#![deny(unsafe_code)]
#![allow(clippy::std_instead_of_core, clippy::alloc_instead_of_core)]

#[allow(unsafe_code)] // calls into the loaded library
pub mod acl;
pub mod backend;
pub mod codes;
#[allow(unsafe_code)] // declares the unsafe `memcpy` of the trait
pub mod runtime;
pub mod sim;
pub mod window;

pub use backend::{BackendError, Runtime};
pub use runtime::{AclContext, AclError, AclResult, AclRuntime, AclStream, IpcKey, Memcpy};
pub use window::{DeviceSegment, DeviceWindow, DeviceWindowBuilder, PutGet};

/// The environment variables of device windows and of the simulator.
pub const ENVIRONMENT: &[kpccl_posix::EnvVar] = &[
    kpccl_posix::EnvVar {
        name: "KPCCL_ASCEND",
        meaning: "device windows' runtime: `acl`, `sim` (host simulator) or `auto` (CANN's, else an error)",
        default: "`auto`",
    },
    kpccl_posix::EnvVar {
        name: "ASCEND_HOME_PATH",
        meaning: "where CANN is installed (`KPCCL_ASCEND=acl` or `auto`): `libascendcl.so` is loaded from its `lib64`, and only if none is there from the loader's paths; one there that fails to load is an error naming it",
        default: "unset: the loader's paths",
    },
    kpccl_posix::EnvVar {
        name: "ASCEND_SIM_DIR",
        meaning: "the directory of the Ascend simulator's per-user registry (export keys, whitelists, import counts), removed when it empties",
        default: "`/dev/shm/ascend-sim2-<uid>`",
    },
    kpccl_posix::EnvVar {
        name: "ASCEND_SIM_STRICT",
        meaning: "`1`: the Ascend simulator refuses (507022) an exporter's close or free while importers still map the memory, which the hardware accepts and punishes later",
        default: "unset: accepted, as on the hardware",
    },
    kpccl_posix::EnvVar {
        name: "ASCEND_SIM_CHIP",
        meaning: "the chip the Ascend simulator plays: `inference` (another device imports only memory allocated with a P2P policy), `A2`, `A3`, `200I/500 A2` (no IPC: 207000); another value fails `aclInit`",
        default: "`A2`",
    },
    kpccl_posix::EnvVar {
        name: "ASCEND_SIM_COPY_LOG",
        meaning: "a file the Ascend simulator appends a line to for each synchronous copy (`aclrtMemcpy`) that touches imported memory",
        default: "unset: no log",
    },
    kpccl_posix::EnvVar {
        name: sim::LOCK_TIMEOUT_ENV,
        meaning: "how long an Ascend simulator call waits for the lock of the simulator's shared registry (held for microseconds by each call); past it the call fails, naming the process that holds it (stopped or stuck); a value that is not a whole number fails the calls that take the lock (100000, said on stderr)",
        default: "`10000`",
    },
    kpccl_posix::EnvVar {
        name: sim::DEVICES_ENV,
        meaning: "the number of devices the Ascend simulator has (0 to 65536); another value fails the calls that name a device (100000, said on stderr)",
        default: "`8`",
    },
    kpccl_posix::EnvVar {
        name: "KPCCL_ASCEND_PID_VALIDATION",
        meaning: "`0`: device windows export keys without a PID whitelist, unless the call says otherwise (C `attr.pid_validation`, Rust `.disable_pid_validation(..)`, Python `pid_validation=`); `1`: keys carry the whitelist; the same on every rank; another value fails the window's creation on every rank",
        default: "`1`",
    },
];

/// The memory kind of Ascend device windows: their host windows (fence
/// slots) carry it, so ranks mixing host and device windows fail together.
pub const MEMORY_KIND: kpccl_posix::MemoryKind = kpccl_posix::MemoryKind(1);
