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
pub use runtime::{AclError, AclResult, AclRuntime, AclStream, IpcKey};
pub use window::{DeviceSegment, DeviceWindow, DeviceWindowBuilder, PutGet};

/// The memory kind of Ascend device windows: their host windows (fence
/// slots) carry it, so ranks mixing host and device windows fail together.
pub const MEMORY_KIND: kpccl_posix::MemoryKind = kpccl_posix::MemoryKind(1);
