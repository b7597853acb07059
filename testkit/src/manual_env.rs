//! A wait environment for one thread that polls fences itself: a clock the
//! test sets, waits that return at once, everyone alive.

use core::cell::Cell;

use kpccl_core::WaitOutcome;
use kpccl_core::fence::WaitEnv;
use kpccl_core::sync::AtomicU32;

/// A clock the test sets ([`ManualEnv::set_now`], 0 at first); waits return
/// at once, wakes do nothing, every rank is alive.
#[derive(Debug, Default)]
pub struct ManualEnv {
    now: Cell<u64>,
}

impl ManualEnv {
    /// Moves the clock to `ns`.
    pub fn set_now(&self, ns: u64) {
        self.now.set(ns);
    }
}

impl WaitEnv for ManualEnv {
    fn now_ns(&self) -> u64 {
        self.now.get()
    }
    fn yield_now(&self) {}
    fn wait(&self, _word: &AtomicU32, _expected: u32, _deadline_ns: u64) -> WaitOutcome {
        WaitOutcome::Woken
    }
    fn wake(&self, _word: &AtomicU32) {}
    fn is_alive(&self, _rank: u32) -> bool {
        true
    }
}
