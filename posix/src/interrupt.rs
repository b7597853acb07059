//! A hook that keeps a sleeping wait interruptible: a language binding runs a
//! fence under [`while_sleeping`], and its check runs on the waiting thread
//! at least every `every` while the wait sleeps, and after every wake-up (a
//! signal's included). Python checks for Ctrl-C there. To end the wait, the
//! check poisons the window (`Window::raw().poison(..)`): the wait then
//! fails like any abandoned one. Without a hook, sleeping costs nothing more.

use std::cell::Cell;
use std::time::Duration;

/// What runs between sleeps, with the word given to [`while_sleeping`] (for
/// the binding to find its state, e.g. the window's address).
pub type Check = fn(usize);

thread_local! {
    static HOOK: Cell<Option<(Duration, Check, usize)>> = const { Cell::new(None) };
}

/// Restores the hook that was in force before, also when `f` unwinds.
struct Restore(Option<(Duration, Check, usize)>);

impl Drop for Restore {
    fn drop(&mut self) {
        HOOK.with(|h| h.set(self.0));
    }
}

/// Runs `f` on this thread with `check(context)` called at least every
/// `every` while one of its waits sleeps.
pub fn while_sleeping<R>(every: Duration, check: Check, context: usize, f: impl FnOnce() -> R) -> R {
    let _restore = Restore(HOOK.with(|h| h.replace(Some((every, check, context)))));
    f()
}

/// The hook in force on this thread, if any.
pub(crate) fn current() -> Option<(Duration, Check, usize)> {
    HOOK.with(Cell::get)
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use kpccl_core::sync::AtomicU32;
    use kpccl_core::{Platform, WaitOutcome};

    use super::*;
    use crate::PosixPlatform;

    thread_local! {
        // The check runs on the waiting thread: a plain counter.
        static CHECKS: Cell<usize> = const { Cell::new(0) };
    }

    fn count(context: usize) {
        assert_eq!(context, 7);
        CHECKS.with(|c| c.set(c.get() + 1));
    }

    #[test]
    fn a_sleeping_wait_runs_the_check_every_slice_and_keeps_its_deadline() {
        let p = PosixPlatform::new(crate::DEFAULT_SHM_DIR);
        let word = AtomicU32::new(0);
        let start = Instant::now();
        let deadline = p.now_ns() + 60_000_000;
        let outcome = while_sleeping(Duration::from_millis(5), count, 7, || {
            loop {
                match p.wait(&word, 0, deadline) {
                    WaitOutcome::TimedOut => break WaitOutcome::TimedOut,
                    WaitOutcome::Woken => {}
                }
            }
        });
        assert_eq!(outcome, WaitOutcome::TimedOut);
        assert!(start.elapsed() >= Duration::from_millis(60));
        // 60 ms in slices of 5 ms asked for: a check after each, 12 on an
        // idle machine. A loaded one oversleeps some slices (the test failed
        // once while a CI run shared the machine), so ask for half: an
        // unsliced wait checks once.
        let checks = CHECKS.with(Cell::get);
        assert!(checks >= 6, "{checks} checks");
        assert!(current().is_none(), "the hook outlived its call");
    }
}
