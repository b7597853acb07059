//! Waits that release the GIL and end on Ctrl-C: while a wait sleeps, the
//! waiting thread takes the GIL every few milliseconds to run Python's signal
//! handlers; one that raises (`KeyboardInterrupt`) abandons the window
//! (poisons it, as a timeout does: its partners' waits fail, `free()` still
//! releases it) and the wait raises that exception. Creations (of windows
//! and communicators) are abandoned the same way while they wait in kpccl's
//! own code ([`creation`]).

use std::cell::RefCell;
use std::time::Duration;

use kpccl_core::sync::{Ordering, fence};
use kpccl_posix::Window;
use kpccl_posix::interrupt;
use pyo3::prelude::*;

use crate::handle::{Busy, Call, Fenced, Guarded, abandon};

/// How often a sleeping wait checks for signals.
const CHECK_EVERY: Duration = Duration::from_millis(5);

thread_local! {
    /// What a signal handler raised during this thread's current wait.
    static CAUGHT: RefCell<Option<PyErr>> = const { RefCell::new(None) };
}

/// What the check between sleeps looks at.
struct Watched<'a> {
    /// The host window the wait is on, borrowed through the held turn.
    host: &'a Window,
    /// Whether another thread asked for it to be abandoned.
    abandon_asked: &'a dyn Fn() -> bool,
}

/// The check between sleeps; `watched` is the address of the [`Watched`]
/// of the wait [`run_in_turn`] runs: the window is abandoned when a signal
/// handler raises, or when another thread asked for it.
fn check(watched: usize) -> bool {
    // SAFETY: `run_in_turn` installs this check with the address of a
    // `Watched` on its stack, alive for the whole of the call in which the
    // check runs, on this same thread; the window it borrows is used by this
    // thread alone (the turn is held).
    #[allow(unsafe_code)]
    let watched = unsafe { &*(watched as *const Watched<'_>) };
    let give_up = (watched.abandon_asked)() || signal_raised(0);
    if give_up {
        abandon(watched.host);
    }
    give_up
}

/// Runs Python's signal handlers; whether one raised (its exception is kept
/// for the wait to raise). The check of a creation, which has no window of
/// its own yet to abandon: the waits it ends abandon what they wait on.
fn signal_raised(_: usize) -> bool {
    Python::attach(|py| match py.check_signals() {
        Ok(()) => false,
        Err(e) => {
            CAUGHT.with(|c| {
                c.borrow_mut().get_or_insert(e);
            });
            true
        }
    })
}

/// Runs a creation `op` (collective) without the GIL, every sleep of its
/// waits in kpccl's code interruptible: the launcher's replies and the
/// shared-memory fences. A signal handler's exception ends those waits (the
/// creation fails on every rank: a fence's window is poisoned, the launcher
/// connection closed) and comes back with what `op` returned, for the caller
/// to raise instead (and to abandon what `op` made, if the wait ended in
/// time for it to finish). Waits in a Python callback or in MPI are not ours:
/// Python raises there by itself, MPI waits on.
pub(crate) fn creation<R: Send>(py: Python<'_>, op: impl FnOnce() -> R + Send) -> (R, Option<PyErr>) {
    let out = py.detach(|| interrupt::while_sleeping(CHECK_EVERY, signal_raised, 0, op));
    (out, CAUGHT.with(|c| c.borrow_mut().take()))
}

/// [`creation`] of a window: `Err` with the signal handler's exception when
/// one ended the waits, after abandoning the window if it was made all the
/// same (the signal came as the last wait ended), so that the others' first
/// wait on it fails instead of waiting for this rank; dropping it then
/// releases it without a collective.
pub(crate) fn window_creation<W: Fenced, E: Send>(
    py: Python<'_>,
    op: impl FnOnce() -> Result<W, E> + Send,
) -> PyResult<Result<W, E>> {
    match creation(py, op) {
        (made, Some(interrupted)) => {
            if let Ok(w) = &made {
                abandon(w.host());
            }
            Err(interrupted)
        }
        (made, None) => Ok(made),
    }
}

/// Runs `op` on the window in `w` without the GIL, in this thread's turn
/// for `call` ([`Guarded::turn`]), with every sleep of its waits
/// interruptible; a signal handler's exception wins over the error the
/// abandoned wait returns.
pub(crate) fn run<T: Fenced, R: Send>(
    py: Python<'_>,
    w: &Guarded<T>,
    call: Call,
    op: impl FnOnce(&T) -> R + Send,
) -> PyResult<R> {
    run_in_turn(py, w, call, op).unwrap_or_else(|Busy| Err(Busy::error()))
}

/// [`run`], with a refused turn (nothing done) told apart.
pub(crate) fn run_in_turn<T: Fenced, R: Send>(
    py: Python<'_>,
    w: &Guarded<T>,
    call: Call,
    op: impl FnOnce(&T) -> R + Send,
) -> Result<PyResult<R>, Busy> {
    let out = py.detach(|| {
        let t = w.turn(call)?;
        let asked = || w.abandon_asked();
        let watched = Watched { host: t.host(), abandon_asked: &asked };
        let out = interrupt::while_sleeping(CHECK_EVERY, check, core::ptr::from_ref(&watched) as usize, || op(&t));
        // Asked while this thread held the turn, or as it gives it back.
        if w.abandon_asked() {
            abandon(t.host());
        }
        drop(t);
        // SeqCst: see `Guarded::abandon`.
        fence(Ordering::SeqCst);
        w.abandon_if_asked();
        Ok(out)
    });
    let caught = CAUGHT.with(|c| c.borrow_mut().take());
    out.map(|out| caught.map_or(Ok(out), Err))
}
