//! `kpccl-core` embedded in a runtime that has no operating system and no
//! allocator: segments are carved out of a `static` arena, waits spin, the
//! clock is the runtime's, and the out-of-band collectives are a barrier and
//! a buffer in static memory. Ranks are whatever the runtime runs in
//! parallel (cores, harts, threads), all in one address space.
//!
//! The walk-through is `docs/EMBEDDING.md`. The same code builds for
//! `aarch64-unknown-none` (`src/bin/bare.rs` is a bare-metal entry point)
//! and runs on the host, ranks as threads (`tests/ranks.rs`).
#![no_std]
#![deny(unsafe_code)]
// An embedder's own code, never built under loom: the plain `core` atomics.
#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

mod arena;
mod oob;
mod platform;
mod word;

pub use arena::{Arena, PAGE, Page};
pub use oob::{Group, StaticOob};
pub use platform::{StaticPlatform, StaticSegment};

use kpccl_core::fence::{Barrier, ring_order};
use kpccl_core::{
    Collective, CollectiveError, FenceError, NodeRanks, Placement, Record, WaitPolicy, WindowRequest, create_comm,
    create_window,
};

/// The most ranks the example's out-of-band buffer holds.
pub const MAX_RANKS: usize = 16;

/// Why a rank's run failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunError {
    /// More ranks than [`MAX_RANKS`].
    TooManyRanks,
    /// Creating the communicator or the window failed.
    Collective(CollectiveError),
    /// A fence failed.
    Fence(FenceError),
    /// A rank saw a word its neighbour did not write in this round.
    WrongData {
        /// The round.
        round: u64,
        /// What was read.
        seen: u64,
    },
}

/// What every rank runs: a communicator, a window of one 64-byte segment
/// per rank, and `rounds` rounds in which each rank writes its round number
/// and fences with its ring neighbours, then checks its left neighbour's
/// word. Returns the sum of the words it checked.
pub fn rank_main(
    platform: StaticPlatform,
    oob: &StaticOob,
    rank: u32,
    nranks: u32,
    rounds: u64,
) -> Result<u64, RunError> {
    if nranks as usize > MAX_RANKS {
        return Err(RunError::TooManyRanks);
    }
    // The communicator's table, on the stack: no allocator.
    let mut table = [Record::default(); MAX_RANKS];
    let table = &mut table[..nranks as usize];
    let info = create_comm(Collective::new(&platform, oob, rank, nranks, table), Placement::alone(rank))
        .map_err(RunError::Collective)?;
    // Spin while every rank has a core; otherwise relax at once (the
    // platform's hook), and fence windows with the flat barrier.
    let (policy, barrier) = (WaitPolicy::for_load(nranks, info.cpus), Barrier::for_load(nranks, info.cpus));
    let request = WindowRequest { size: 64, policy, barrier, ..WindowRequest::default() };
    let window = create_window(Collective::new(&platform, oob, rank, nranks, table), NodeRanks::All, &request)
        .map_err(RunError::Collective)?;
    let prev = (rank + nranks - 1) % nranks;
    let order = ring_order(rank, nranks);
    let mine = word::word(&window, rank).map_err(RunError::Fence)?;
    let theirs = word::word(&window, prev).map_err(RunError::Fence)?;
    let mut sum = 0;
    for round in 1..=rounds {
        mine.store(round);
        for peer in order {
            window.peer_fence(peer).map_err(RunError::Fence)?;
        }
        let seen = theirs.load();
        if seen != round {
            return Err(RunError::WrongData { round, seen });
        }
        sum += seen;
        // The left neighbour overwrites its word only after we have read it.
        for peer in order {
            window.peer_fence(peer).map_err(RunError::Fence)?;
        }
    }
    window.fence().map_err(RunError::Fence)?;
    window.free().map_err(RunError::Fence)?;
    Ok(sum)
}
