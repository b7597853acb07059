//! A window's sync area on the heap, for fences between threads of one
//! process (the criterion micro-benchmarks): the same `kpccl_core` fence
//! code as a mapped window, without processes or shared memory.
#![allow(unsafe_code)]

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use kpccl_core::WaitOutcome;
use kpccl_core::fence::{SyncArea, WaitEnv};
use kpccl_core::layout::rounds;
use kpccl_core::sync::{AtomicU32, AtomicU64};

/// One 128-byte line, as in the shared layout: a slot's word, and for peer
/// lines the signal counts that share the writer's line.
#[repr(C, align(128))]
#[derive(Debug, Default)]
struct Line {
    word: AtomicU64,
    signals: AtomicU64,
    taken: AtomicU64,
}

/// The sync area of an `n`-rank window on the heap: every slot on its own
/// 128-byte line, like the shared layout's padded slots.
#[derive(Debug)]
pub struct HeapArea {
    n: u32,
    rounds: u32,
    peer: Vec<Line>,
    round: Vec<Line>,
    doorbell: Vec<Line>,
    sleeping: Vec<Line>,
    poison: Line,
    arrivals: Line,
    flat_arrived: Vec<Line>,
}

/// The upper half of a line's word viewed as a u32 would alias the u64; the
/// 32-bit words get lines of their own and use the low half.
fn word32(line: &Line) -> &AtomicU32 {
    // SAFETY: the line is 128-byte aligned and holds 8 bytes, so its first 4
    // bytes are an aligned u32 that lives as long as `line`; a line used
    // through this view is never used as a u64.
    unsafe { AtomicU32::from_ptr(line.word.as_ptr().cast::<u32>()) }
}

impl HeapArea {
    /// A zeroed sync area for `n` ranks.
    #[must_use]
    pub fn new(n: u32) -> HeapArea {
        let lines = |k: usize| (0..k).map(|_| Line::default()).collect::<Vec<_>>();
        let r = rounds(n);
        let n_us = n as usize;
        HeapArea {
            n,
            rounds: r,
            peer: lines(n_us * n_us),
            round: lines(r as usize * n_us),
            doorbell: lines(n_us),
            sleeping: lines(n_us),
            poison: Line::default(),
            arrivals: Line::default(),
            flat_arrived: lines(n_us),
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
        word32(&self.doorbell[rank as usize])
    }
    fn sleeping(&self, rank: u32) -> &AtomicU32 {
        word32(&self.sleeping[rank as usize])
    }
    fn poison_word(&self) -> &AtomicU32 {
        word32(&self.poison)
    }
    fn arrivals(&self) -> &AtomicU64 {
        &self.arrivals.word
    }
    fn flat_arrived(&self, rank: u32) -> &AtomicU64 {
        &self.flat_arrived[rank as usize].word
    }
}

/// Threads of this process as ranks: a private futex, a monotonic clock,
/// everyone alive.
#[derive(Clone, Copy, Debug, Default)]
pub struct ThreadEnv;

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

impl WaitEnv for ThreadEnv {
    fn now_ns(&self) -> u64 {
        u64::try_from(epoch().elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
    fn yield_now(&self) {
        std::thread::yield_now();
    }
    fn wait(&self, word: &AtomicU32, expected: u32, deadline_ns: u64) -> WaitOutcome {
        let now = self.now_ns();
        if deadline_ns <= now {
            return WaitOutcome::TimedOut;
        }
        let left = Duration::from_nanos(deadline_ns - now).min(Duration::from_secs(1));
        let ts = libc::timespec {
            tv_sec: libc::time_t::try_from(left.as_secs()).unwrap_or(1),
            tv_nsec: libc::c_long::from(left.subsec_nanos().cast_signed()),
        };
        // SAFETY: `word` is a live, aligned u32; FUTEX_WAIT only reads it; `ts` outlives the call.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                word.as_ptr(),
                libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                expected,
                &raw const ts,
            );
        }
        WaitOutcome::Woken
    }
    fn wake(&self, word: &AtomicU32) {
        // SAFETY: `word` is a live, aligned u32; FUTEX_WAKE does not access memory.
        unsafe {
            libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, i32::MAX);
        }
    }
    fn is_alive(&self, _rank: u32) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use kpccl_core::WaitPolicy;
    use kpccl_core::fence::{peer_fence, window_fence};

    use super::*;

    #[test]
    fn threads_fence() {
        let area = Arc::new(HeapArea::new(3));
        let policy = WaitPolicy { spins: 10, ..WaitPolicy::DEFAULT };
        let handles: Vec<_> = (0..3)
            .map(|me| {
                let area = Arc::clone(&area);
                std::thread::spawn(move || {
                    for _ in 0..200 {
                        window_fence(&*area, &ThreadEnv, me, &policy).unwrap();
                        if me < 2 {
                            peer_fence(&*area, &ThreadEnv, me, 1 - me, &policy).unwrap();
                        }
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    }
}
