//! Threads of this process as ranks, for the fences of a [`HeapArea`](crate::heap::HeapArea):
//! a private futex, a monotonic clock, everyone alive. Not under loom, whose
//! models bring their own wait environments.
#![allow(unsafe_code)] // the futex calls

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use kpccl_core::WaitOutcome;
use kpccl_core::fence::WaitEnv;
use kpccl_core::sync::AtomicU32;

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
    use crate::heap::HeapArea;

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
