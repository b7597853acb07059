//! The rank side of `kpccl-run`: [`RunOob`], the [`Oob`](kpccl_core::Oob)
//! a rank reaches the launcher's hub with, the [`wire`] protocol they speak,
//! and what a rank learns when the job breaks ([`code`], [`Departure`]).
//!
//! The launcher itself (its hub, `Launch`, the `kpccl-run` binary) is the
//! `kpccl-run` crate, which depends on this one: every binding of the library
//! (C, Python) can run under it without linking the launcher.
//!
//! `kpccl-run -n 4 -- ./program args` starts a hub on a Unix stream socket in
//! the Linux abstract namespace (nothing on disk, nothing to clean up), then
//! the ranks with these variables set:
//!
//! | variable               | meaning                                               |
//! |------------------------|-------------------------------------------------------|
//! | `KPCCL_RANK`           | this process's rank, `0..KPCCL_NRANKS`                |
//! | `KPCCL_NRANKS`         | the number of ranks                                   |
//! | `KPCCL_RUN_SOCKET`     | the hub: `@name` (abstract) or a path                 |
//!
//! and these read by the ranks and the launcher:
//!
//! | variable               | meaning                                               |
//! |------------------------|-------------------------------------------------------|
//! | `KPCCL_OOB_TIMEOUT_MS` | how long a collective waits for the other ranks, in ms (default 60000; `KPCCL_TIMEOUT_MS` if set and shorter); then it fails on every rank, naming the late rank |
//! | `KPCCL_RUNNER`         | words put in front of the program, e.g. `qemu-aarch64 -L /usr/aarch64-linux-gnu`; on aarch64 `CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER` is the default |
//!
//! A rank calls [`RunOob::from_env`] and passes the result to
//! [`Comm::new`](crate::Comm::new). Each collective is a request to the hub,
//! answered once every rank has made the same one; if the ranks disagree,
//! all get [`code::MISMATCH`], and once a rank has left the job (exited,
//! crashed) every collective still waiting or yet to come fails with
//! [`code::RANK_LOST`]: no rank waits for one that is gone. A rank that does
//! not reach a collective within the timeout counts as lost
//! ([`code::UNRESPONSIVE`]). Survivors learn which rank was lost and how
//! ([`last_departure`]). Only processes of the launcher's own user may connect.
//!
//! ```no_run
//! use kpccl_posix::launch::RunOob;
//! use kpccl_posix::Oob;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let oob = RunOob::from_env()?.expect("run me under kpccl-run");
//! let mut all = vec![0u8; 4 * oob.nranks() as usize];
//! oob.allgather(&oob.rank().to_le_bytes(), &mut all)?;
//! oob.barrier()?;
//! # Ok(()) }
//! ```

pub mod addr;
mod client;
pub mod code;
mod deadline;
mod departure;
pub mod runner;
pub mod wire;

pub(crate) use client::in_use;
pub use client::{DEFAULT_TIMEOUT, RunOob};
pub use deadline::Deadline;
pub use departure::{Departure, Ending, last_departure};

/// The variable holding a rank's rank.
pub const RANK_ENV: &str = "KPCCL_RANK";
/// The variable holding the number of ranks.
pub const NRANKS_ENV: &str = "KPCCL_NRANKS";
/// The variable naming the hub's socket (`@name` for an abstract name).
pub const SOCKET_ENV: &str = "KPCCL_RUN_SOCKET";
/// The variable setting a rank's timeout on the hub, in milliseconds.
pub const TIMEOUT_ENV: &str = "KPCCL_OOB_TIMEOUT_MS";
/// The variable naming a runner to put in front of the program.
pub const RUNNER_ENV: &str = "KPCCL_RUNNER";
