//! A wait environment for one thread that polls fences itself: a clock the
//! test sets (or one that moves at every look), waits that return at once,
//! every rank alive but one the test names.

use core::cell::Cell;

use kpccl_core::WaitOutcome;
use kpccl_core::fence::WaitEnv;
use kpccl_core::sync::AtomicU32;

/// A clock the test sets ([`ManualEnv::set_now`], 0 at first) or that moves
/// at every look ([`ManualEnv::ticking`]); waits return at once, wakes do
/// nothing, every rank is alive but [`ManualEnv::with_dead`]'s.
#[derive(Debug, Default)]
pub struct ManualEnv {
    now: Cell<u64>,
    tick_ns: u64,
    dead: Option<u32>,
}

impl ManualEnv {
    /// A clock that moves `tick_ns` every time the wait reads it.
    pub fn ticking(tick_ns: u64) -> Self {
        Self { tick_ns, ..Self::default() }
    }

    /// Rank `rank` is not alive.
    #[must_use]
    pub fn with_dead(self, rank: u32) -> Self {
        Self { dead: Some(rank), ..self }
    }

    /// Moves the clock to `ns`.
    pub fn set_now(&self, ns: u64) {
        self.now.set(ns);
    }
}

impl WaitEnv for ManualEnv {
    fn now_ns(&self) -> u64 {
        self.now.set(self.now.get() + self.tick_ns);
        self.now.get()
    }
    fn yield_now(&self) {}
    fn wait(&self, _word: &AtomicU32, _expected: u32, _deadline_ns: u64) -> WaitOutcome {
        WaitOutcome::Woken
    }
    fn wake(&self, _word: &AtomicU32) {}
    fn is_alive(&self, rank: u32) -> bool {
        self.dead != Some(rank)
    }
}
