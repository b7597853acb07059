//! A hook that keeps a sleeping wait interruptible: a language binding runs a
//! fence, or a window's or communicator's creation, under [`while_sleeping`],
//! and its check runs on the waiting thread at least every `every` while a
//! wait sleeps, and after every wake-up (a signal's included). Python checks
//! for Ctrl-C there.
//!
//! A check that returns `true` ends the waits of the call: a fence wait fails
//! as abandoned by this rank (the window is poisoned, so its peers' waits
//! fail too; see `Platform::interrupted`), and a collective waiting for the
//! launcher's reply fails with [`code::INTERRUPTED`](crate::launch::code::INTERRUPTED),
//! closing the connection, which the other ranks see as this rank leaving
//! the job. Without a hook, sleeping costs nothing more.

use std::cell::Cell;
use std::time::Duration;

/// What runs between sleeps, with the word given to [`while_sleeping`] (for
/// the binding to find its state, e.g. the window's address); `true` ends
/// the call's waits.
pub type Check = fn(usize) -> bool;

/// The hook of the call in progress on this thread.
#[derive(Clone, Copy)]
struct Hook {
    every: Duration,
    check: Check,
    context: usize,
    /// A check returned `true`: every later wait of the call ends at once.
    ended: bool,
}

thread_local! {
    static HOOK: Cell<Option<Hook>> = const { Cell::new(None) };
}

/// Restores the hook that was in force before, also when `f` unwinds.
struct Restore(Option<Hook>);

impl Drop for Restore {
    fn drop(&mut self) {
        HOOK.with(|h| h.set(self.0));
    }
}

/// Runs `f` on this thread with `check(context)` called at least every
/// `every` while one of its waits sleeps.
pub fn while_sleeping<R>(every: Duration, check: Check, context: usize, f: impl FnOnce() -> R) -> R {
    let hook = Hook { every, check, context, ended: false };
    let _restore = Restore(HOOK.with(|h| h.replace(Some(hook))));
    f()
}

/// How long a wait on this thread may sleep before it checks, if a hook is in force.
pub(crate) fn slice() -> Option<Duration> {
    HOOK.with(Cell::get).map(|h| h.every)
}

/// Runs the check in force on this thread (once it has said to end, not
/// again): whether the waits of the call must end. `false` without a hook.
pub(crate) fn check() -> bool {
    let Some(hook) = HOOK.with(Cell::get) else { return false };
    if hook.ended {
        return true;
    }
    let ended = (hook.check)(hook.context);
    if ended {
        HOOK.with(|h| h.set(Some(Hook { ended, ..hook })));
    }
    ended
}

/// Whether a check of the call in progress on this thread said to end its waits.
pub(crate) fn ended() -> bool {
    HOOK.with(Cell::get).is_some_and(|h| h.ended)
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

    fn count(context: usize) -> bool {
        assert_eq!(context, 7);
        CHECKS.with(|c| c.set(c.get() + 1));
        false
    }

    /// Ends the waits at its third call.
    fn third_ends(_: usize) -> bool {
        CHECKS.with(|c| c.set(c.get() + 1));
        CHECKS.with(Cell::get) == 3
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
        assert!(slice().is_none(), "the hook outlived its call");
    }

    #[test]
    fn a_check_that_ends_the_waits_is_not_run_again_and_the_platform_says_so() {
        let p = PosixPlatform::new(crate::DEFAULT_SHM_DIR);
        let word = AtomicU32::new(0);
        let start = Instant::now();
        let woken = while_sleeping(Duration::from_millis(5), third_ends, 0, || {
            let mut woken = 0;
            while !p.interrupted() {
                assert_eq!(p.wait(&word, 0, u64::MAX), WaitOutcome::Woken);
                woken += 1;
            }
            // Ended: later waits of the call return at once, unchecked.
            assert_eq!(p.wait(&word, 0, u64::MAX), WaitOutcome::Woken);
            woken
        });
        assert_eq!((woken, CHECKS.with(Cell::get)), (3, 3));
        assert!(start.elapsed() < Duration::from_secs(5));
        assert!(!p.interrupted(), "the end outlived its call");
    }
}
