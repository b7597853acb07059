//! `libascendcl.so` for machines without NPUs: the ACL calls of the IPC contract with
//! the C prototypes of `acl_rt.h` (see `ascend/include/acl_ipc.h`), implemented by the
//! kpccl host simulator. `ASCEND_SIM_STRICT=1` selects its strict mode.
#![deny(unsafe_code)]
#![allow(clippy::std_instead_of_core, clippy::alloc_instead_of_core)]

#[allow(unsafe_code)] // the C ABI: exported symbols and raw pointers from C
mod exports;

pub use exports::*;
