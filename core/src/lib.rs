//! # kpccl-core
//!
//! The operating-system-free heart of kpccl: the window layout, the lock-free
//! peer and window fences, the wait strategy, and the collective protocol
//! that creates windows — all generic over a [`Platform`] (shared segments,
//! futex-like waits, clocks, liveness) and an [`Oob`] (the user's
//! out-of-band allgather and barrier).
//!
//! `#![no_std]`, no allocator, no libc: a custom runtime embeds it by
//! implementing [`Platform`]; `kpccl-posix` is the Linux implementation.
//!
//! Memory ordering is the crate's central obligation. Every atomic goes
//! through [`sync`], which swaps in loom's types under `cfg(loom)` so that the
//! fence algorithms are model-checked as compiled.
#![no_std]
#![deny(unsafe_code)]

// The fences are 64-bit counters in shared memory: say so, rather than fail
// to find `AtomicU64` (Cortex-M, riscv32imac).
#[cfg(not(target_has_atomic = "64"))]
compile_error!(
    "kpccl-core needs 64-bit atomics (target_has_atomic = \"64\"): its fences are AtomicU64 counters in shared memory"
);

#[cfg(any(test, feature = "std"))]
extern crate std;

pub mod bias;
mod codes;
pub mod error;
pub mod fence;
pub mod layout;
pub mod oob;
pub mod platform;
pub mod sync;

#[cfg(not(loom))]
pub mod protocol;
#[cfg(not(loom))]
mod raw;
#[cfg(all(feature = "threads", not(loom)))]
pub mod threads;
#[cfg(not(loom))]
pub mod window;

pub use error::{CollectiveError, Failure, FenceError, LayoutError, OobError, PlatformError, RankOutOfRange};
pub use fence::WaitPolicy;
pub use layout::{Layout, LayoutMode, MAX_RANKS};
pub use oob::Oob;
pub use platform::{CPU_WORDS, CpuMask, Platform, ProcessIdentity, Segment, Step, WaitOutcome};
#[cfg(not(loom))]
pub use protocol::{
    Collective, MemoryKind, NodeInfo, NodeRanks, Placement, Record, WindowRequest, create_comm, create_window,
};
#[cfg(not(loom))]
pub use window::{DataSegment, Pending, Window};
