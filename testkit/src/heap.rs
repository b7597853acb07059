//! A window's sync area on the heap, for fences between threads of one
//! process: the criterion micro-benchmarks of kpccl-bench and the loom
//! models of the core (under `cfg(loom)` its words are loom's atomics, as
//! `kpccl_core::sync` makes them) run the same `kpccl_core` fence code as a
//! mapped window, without processes or shared memory.

use kpccl_core::fence::SyncArea;
use kpccl_core::layout::rounds;
use kpccl_core::sync::{AtomicU32, AtomicU64};

/// One 128-byte line, as in the shared layout: a slot's word, and for peer
/// lines the signal counts that share the writer's line.
#[repr(C, align(128))]
#[derive(Debug)]
struct Line {
    word: AtomicU64,
    signals: AtomicU64,
    taken: AtomicU64,
}

impl Line {
    fn new() -> Self {
        Self { word: AtomicU64::new(0), signals: AtomicU64::new(0), taken: AtomicU64::new(0) }
    }
}

/// A 32-bit word on a 128-byte line of its own (a doorbell, a sleeping
/// count, the poison word).
#[repr(C, align(128))]
#[derive(Debug)]
struct Line32(AtomicU32);

impl Line32 {
    fn new() -> Self {
        Self(AtomicU32::new(0))
    }
}

/// The sync area of an `n`-rank window on the heap: every slot on its own
/// 128-byte line, like the shared layout's padded slots.
#[derive(Debug)]
pub struct HeapArea {
    n: u32,
    rounds: u32,
    peer: Vec<Line>,
    round: Vec<Line>,
    doorbell: Vec<Line32>,
    sleeping: Vec<Line32>,
    poison: Line32,
    arrivals: Line,
    flat_arrived: Vec<Line>,
    last_cpu: Vec<Line32>,
    blocked: Vec<Line32>,
    left: Vec<Line>,
}

impl HeapArea {
    /// A zeroed sync area for `n` ranks.
    #[must_use]
    pub fn new(n: u32) -> HeapArea {
        let lines = |k: usize| (0..k).map(|_| Line::new()).collect::<Vec<_>>();
        let words = |k: usize| (0..k).map(|_| Line32::new()).collect::<Vec<_>>();
        let r = rounds(n);
        let n_us = n as usize;
        HeapArea {
            n,
            rounds: r,
            peer: lines(n_us * n_us),
            round: lines(r as usize * n_us),
            doorbell: words(n_us),
            sleeping: words(n_us),
            poison: Line32::new(),
            arrivals: Line::new(),
            flat_arrived: lines(n_us),
            last_cpu: words(n_us),
            blocked: words(n_us),
            left: lines(n_us),
        }
    }
}

impl SyncArea for HeapArea {
    fn nranks(&self) -> u32 {
        self.n
    }
    fn peer_slot(&self, writer: u32, reader: u32) -> &AtomicU64 {
        &self.peer[(reader * self.n + writer) as usize].word
    }
    fn signal_slot(&self, writer: u32, reader: u32) -> &AtomicU64 {
        &self.peer[(reader * self.n + writer) as usize].signals
    }
    fn taken_slot(&self, taker: u32, signaller: u32) -> &AtomicU64 {
        &self.peer[(signaller * self.n + taker) as usize].taken
    }
    fn round_slot(&self, round: u32, reader: u32) -> &AtomicU64 {
        debug_assert!(round < self.rounds);
        &self.round[(reader * self.rounds + round) as usize].word
    }
    fn doorbell(&self, rank: u32) -> &AtomicU32 {
        &self.doorbell[rank as usize].0
    }
    fn sleeping(&self, rank: u32) -> &AtomicU32 {
        &self.sleeping[rank as usize].0
    }
    fn poison_word(&self) -> &AtomicU32 {
        &self.poison.0
    }
    fn arrivals(&self) -> &AtomicU64 {
        &self.arrivals.word
    }
    fn flat_arrived(&self, rank: u32) -> &AtomicU64 {
        &self.flat_arrived[rank as usize].word
    }
    fn last_cpu(&self, rank: u32) -> &AtomicU32 {
        &self.last_cpu[rank as usize].0
    }
    fn blocked(&self, rank: u32) -> &AtomicU32 {
        &self.blocked[rank as usize].0
    }
    fn left(&self, rank: u32) -> &AtomicU64 {
        &self.left[rank as usize].word
    }
}
