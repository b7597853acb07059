//! `kpccl-run`: starts `n` ranks of a program without MPI, and hosts the
//! [`Hub`] their out-of-band collectives go through.
//!
//! `kpccl-run -n 4 -- ./program args` (this crate's binary), or [`Launch`]
//! from Rust, starts a [`Hub`] on a Unix stream socket in the Linux abstract
//! namespace (nothing on disk, nothing to clean up), then the ranks with
//! `KPCCL_RANK`, `KPCCL_NRANKS` and `KPCCL_RUN_SOCKET` set. A rank reaches the
//! hub with [`RunOob`] (the rank side, which lives in
//! [`kpccl_posix::launch`] so that every binding of the library can use it
//! without this crate; the table of variables is there). Only processes of
//! the launcher's own user may connect.
//!
//! ```no_run
//! use kpccl_run::Launch;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let report = Launch::new(4).run("./my-program", ["--size", "4096"])?;
//! assert!(report.success(), "{report}");
//! # Ok(()) }
//! ```

#![deny(unsafe_code)]
// A std crate: the `*_instead_of_core` lints guard the no_std core, not this.
#![allow(clippy::std_instead_of_core, clippy::alloc_instead_of_core)]

#[allow(unsafe_code)]
mod bind;
#[allow(unsafe_code)]
mod cred;
mod hub;
mod ranks;
#[allow(unsafe_code)]
mod signals;
mod spawn;
mod tree;
#[allow(unsafe_code)]
mod watchdog;

pub use bind::Binding;
pub use hub::Hub;
pub use kpccl_posix::launch::{
    DEFAULT_TIMEOUT, Departure, Ending, NRANKS_ENV, RANK_ENV, RUNNER_ENV, RunOob, SOCKET_ENV, TIMEOUT_ENV, code,
    last_departure,
};
pub use ranks::parse_rank_count;
pub use spawn::{DEFAULT_ABORT_AFTER, Interrupted, Launch, Report};

#[cfg(test)]
mod tests;
