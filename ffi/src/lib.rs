//! # kpccl-ffi
//!
//! The C ABI of kpccl: `libkpccl.so` / `libkpccl.a` and `include/kpccl.h`,
//! the KPCCL `kpccl_shm_*` API that C programs written for Kunpeng HPCKit
//! compile and run against unchanged.
//!
//! Every entry point
//! - returns [`KPCCL_OK`] or [`KPCCL_ERROR`], and on failure leaves the
//!   reason in a thread-local text ([`kpccl_last_error`]);
//! - checks every pointer, rank and handle: a freed, foreign or mistyped
//!   handle is refused before anything behind it is touched, even when new
//!   objects were made since (a freed handle's value is not handed out
//!   again), and a second thread in a fence or free on one handle is
//!   refused, not raced;
//! - catches panics (they never cross into C);
//! - leaves nothing half-made: a failed call releases what it took and
//!   writes `NULL` to its output handles;
//! - in a collective call, turns a bad local argument into a failure that
//!   every rank reports, so that no rank is left waiting for it.
//!
//! The header is generated from this crate by `cargo xtask header` (cbindgen)
//! and committed; `cargo xtask header --check` fails on drift.
// A std crate: the `*_instead_of_core` lints guard the no_std core, not this.
#![allow(clippy::std_instead_of_core, clippy::alloc_instead_of_core)]
// The C names are the contract (`kpccl_shm_win_t`, `KPCCL_SHM_DATATYPE_CHAR`).
#![allow(non_camel_case_types)]

#[macro_use]
mod panic;

mod attr;
mod comm;
mod comm_release;
mod device;
mod error;
mod error_code;
mod handle;
mod log;
mod oob;
mod putget;
#[cfg(test)]
mod ranks_as_threads;
mod run;
mod win;

use core::ffi::c_int;

pub use attr::{
    KPCCL_SHM_WIN_ATTR_VERSION, kpccl_shm_barrier_t, kpccl_shm_layout_t, kpccl_shm_memory_kind_t,
    kpccl_shm_pid_validation_t, kpccl_shm_reserve_t, kpccl_shm_win_attr_init, kpccl_shm_win_attr_t,
};
pub use comm::{
    KPCCL_LOCAL_RANK_AUTO, kpccl_shm_comm_create, kpccl_shm_comm_destroy, kpccl_shm_comm_h, kpccl_shm_comm_info_t,
    kpccl_shm_comm_node_cpus, kpccl_shm_comm_node_ranks, kpccl_shm_comm_query, kpccl_shm_comm_t,
};
pub use comm_release::kpccl_shm_comm_set_release;
pub use error::{kpccl_last_error, kpccl_log_error, kpccl_record_error};
pub use error_code::{kpccl_error_code_t, kpccl_last_error_code};
pub use oob::{kpccl_shm_datatype_t, kpccl_shm_oob_cb_h, kpccl_shm_oob_cb_t};
pub use putget::{kpccl_shm_peer_fence_stream, kpccl_shm_win_fence_stream, kpccl_shm_win_get, kpccl_shm_win_put};
pub use run::kpccl_run_oob;
pub use win::{
    kpccl_shm_peer_fence, kpccl_shm_peer_signal, kpccl_shm_peer_test, kpccl_shm_peer_wait, kpccl_shm_win_alloc,
    kpccl_shm_win_alloc_ex, kpccl_shm_win_fence, kpccl_shm_win_free, kpccl_shm_win_h, kpccl_shm_win_query,
    kpccl_shm_win_t,
};

/// Success.
pub const KPCCL_OK: c_int = 0;
/// Failure; [`kpccl_last_error`] says why.
pub const KPCCL_ERROR: c_int = -1;

/// The library's major version.
pub const KPCCL_VERSION_MAJOR: c_int = 0;
/// The library's minor version.
pub const KPCCL_VERSION_MINOR: c_int = 1;
/// The library's patch version.
pub const KPCCL_VERSION_PATCH: c_int = 0;
/// The version as one number, `MAJOR * 10000 + MINOR * 100 + PATCH`: what
/// [`kpccl_version`] returns, to compare with the header the program was
/// built against.
pub const KPCCL_VERSION: c_int = KPCCL_VERSION_MAJOR * 10000 + KPCCL_VERSION_MINOR * 100 + KPCCL_VERSION_PATCH;

/// The version of the library the program runs with, as [`KPCCL_VERSION`]
/// encodes it (compare it with the header's `KPCCL_VERSION`).
#[unsafe(no_mangle)]
pub extern "C" fn kpccl_version() -> c_int {
    KPCCL_VERSION
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_matches_the_package() {
        let v = |s: &str| s.parse::<c_int>().unwrap();
        assert_eq!(KPCCL_VERSION_MAJOR, v(env!("CARGO_PKG_VERSION_MAJOR")));
        assert_eq!(KPCCL_VERSION_MINOR, v(env!("CARGO_PKG_VERSION_MINOR")));
        assert_eq!(KPCCL_VERSION_PATCH, v(env!("CARGO_PKG_VERSION_PATCH")));
        assert_eq!(kpccl_version(), 100);
    }
}
