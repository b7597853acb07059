//! # kpccl-posix
//!
//! kpccl on Linux: windows in POSIX shared memory, futex waits, liveness by
//! pid and start time — and the idiomatic Rust API.
//!
//! ```no_run
//! use kpccl_posix::{Comm, launch::RunOob};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // Under `kpccl-run -n 4 -- ./program` (or bring any `kpccl_core::Oob`, e.g. over MPI).
//! let oob = RunOob::from_env()?.expect("run me under kpccl-run");
//! let (rank, n) = (oob.rank(), oob.nranks());
//! let comm = Comm::new(oob, rank, n)?;
//! let win = comm.window(4096).alloc()?;
//! let right = (rank + 1) % n;
//! win.write(right, rank as usize, &[u64::from(rank)])?; // into the right neighbour's segment
//! win.fence()?;                                          // everyone's writes are now visible
//! let mut got = [0u64];
//! win.read(rank, ((rank + n - 1) % n) as usize, &mut got)?;
//! win.free()?;
//! # Ok(()) }
//! ```
#![deny(unsafe_code)]
// A std crate: the `*_instead_of_core` lints guard the no_std core, not this.
#![allow(clippy::std_instead_of_core, clippy::alloc_instead_of_core)]

mod comm;
mod config;
mod environment;
mod error;
mod error_kind;
mod explain;
pub mod interrupt;
pub mod inventory;
pub mod launch;
mod liveness;
pub mod log;
#[cfg(feature = "mpi")]
pub mod mpi;
mod node;
mod platform;
mod segment_dir;
mod stats;
mod sweep;
mod sys;
mod way_in;
mod window;

pub use comm::{Comm, CommBuilder, WindowBuilder, WindowOptions};
pub use config::{Config, env_choice, env_flag, env_parsed};
pub use environment::{ENVIRONMENT, EnvVar, markdown_table};
pub use error::Error;
pub use error_kind::ErrorKind;
pub use kpccl_core::{DataSegment, LayoutMode, MemoryKind, NodeInfo, Oob, OobError};
pub use platform::{DEFAULT_SHM_DIR, PosixPlatform, PosixSegment, Reserve};
pub use segment_dir::{DirError, DirProblem};
pub use stats::WindowStats;
pub use sweep::sweep;

/// The system page size: the largest segment alignment a window accepts.
pub fn page_size() -> usize {
    usize::try_from(sys::page_size()).unwrap_or(4096)
}

/// How many `fork`s led to this process (counted from the first window it
/// made): an object that records it when made, and finds another value
/// later, is in a forked child, where the windows' memory is not mapped
/// (see [`Window::inherited`]). One relaxed load: cheap enough for every call.
pub fn fork_generation() -> u32 {
    sys::fork_generation()
}

/// The CPUs this thread may run on, as the kernel's CPU set (bit `c % 64`
/// of word `c / 64` for CPU `c`), sized to the machine: more than 1024
/// CPUs too, which rustix's fixed set cannot hold.
///
/// # Errors
/// The kernel's, or one naming the largest set it refused.
pub fn cpu_set() -> std::io::Result<Vec<u64>> {
    sys::cpu_set()
}
/// The element types `Window::read` and `Window::write` copy: every byte
/// pattern a valid value (bytemuck's derive checks it for your own types).
pub use bytemuck::Pod;
pub use window::{PendingFence, PoisonProbe, Window};
/// The system's halves of an owner-biased entry (`kpccl_core::bias`), for
/// the C handles.
pub mod bias {
    pub use crate::sys::{heavy_fence, heavy_fence_works, prepare_heavy_fence, thread_token};
}
