//! The Python extension `kpccl._kpccl`, over the Rust API (`kpccl-posix`,
//! `kpccl-ascend`): communicators, host and device windows, their fences,
//! and the pyACL IPC calls. The pure-Python package `kpccl` (beside this
//! crate) re-exports it and defines the exceptions.
#![deny(unsafe_code)]
// A std crate: the `*_instead_of_core` lints guard the no_std core, not this.
#![allow(clippy::std_instead_of_core, clippy::alloc_instead_of_core)]

mod acl;
mod comm;
mod device;
mod errors;
mod fences;
mod handle;
mod oob;
mod options;
mod wait;
mod window;

use pyo3::prelude::*;

/// The compiled part of the `kpccl` package.
#[pymodule]
fn _kpccl(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<comm::PyComm>()?;
    m.add_class::<fences::PyFenced>()?;
    m.add_class::<window::PyWindow>()?;
    m.add_class::<window::Mapping>()?;
    m.add_class::<device::PyDeviceWindow>()?;
    acl::register(m)
}
