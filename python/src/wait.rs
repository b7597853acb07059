//! Waits that release the GIL and end on Ctrl-C: while a wait on Python's
//! main thread sleeps, the thread takes the GIL every few milliseconds to run
//! Python's signal handlers; one that raises (`KeyboardInterrupt`) abandons
//! the window (poisons it, as a timeout does: its partners' waits fail,
//! `free()` still releases it) and the wait raises that exception. Signal
//! handlers run on the main thread only, so a wait on another thread takes
//! the GIL once, to learn that, and never again. Calls that hold no turn on
//! a window (creations of windows and communicators, a device window's free,
//! which consumes it) are interrupted the same way while they wait in
//! kpccl's own code ([`interruptible`]).

use std::cell::{Cell, RefCell};
use std::time::Duration;

use kpccl_posix::Window;
use kpccl_posix::interrupt;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

use crate::handle::{AbandonAsked, Busy, Call, Fenced, Guarded};

/// How often a sleeping wait checks for signals.
const CHECK_EVERY: Duration = Duration::from_millis(5);

thread_local! {
    /// What a signal handler raised during this thread's current wait.
    static CAUGHT: RefCell<Option<PyErr>> = const { RefCell::new(None) };
}

/// Whether this is Python's main thread, the only one on which signal
/// handlers run. If Python cannot tell, it is taken as the main thread: a
/// wasted check, never a missed Ctrl-C.
fn on_main_thread(py: Python<'_>) -> bool {
    static MAIN_THREAD: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    static GET_IDENT: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let main = MAIN_THREAD.import(py, "threading", "main_thread").and_then(|f| f.call0()?.getattr("ident"));
    let me = GET_IDENT.import(py, "threading", "get_ident").and_then(|f| f.call0());
    match (main, me) {
        (Ok(main), Ok(me)) => main.eq(me).unwrap_or(true),
        _ => true,
    }
}

/// The signal checks of one call: Python's signal handlers run on its main
/// thread only (`PyErr_CheckSignals` does nothing on the others), so a call
/// on another thread takes the GIL for its first check only, to learn that.
/// Not asked before: most calls never sleep, and never check.
#[derive(Default)]
struct Signals {
    /// Whether the call runs on Python's main thread, once known.
    on_main: Cell<Option<bool>>,
}

impl Signals {
    /// Runs Python's signal handlers, on the main thread; whether one raised
    /// (its exception is kept for the call to raise).
    fn raised(&self) -> bool {
        if self.on_main.get() == Some(false) {
            return false;
        }
        Python::attach(|py| {
            let on_main = self.on_main.get().unwrap_or_else(|| on_main_thread(py));
            self.on_main.set(Some(on_main));
            if !on_main {
                return false;
            }
            match py.check_signals() {
                Ok(()) => false,
                Err(e) => {
                    CAUGHT.with(|c| {
                        c.borrow_mut().get_or_insert(e);
                    });
                    true
                }
            }
        })
    }
}

/// What the check between sleeps looks at.
struct Watched<'a> {
    /// The host window the wait is on, borrowed through the held turn.
    host: &'a Window,
    /// Whether another thread asked for it to be abandoned.
    abandon_asked: &'a dyn Fn() -> bool,
    /// The call's signal checks.
    signals: Signals,
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
    let give_up = (watched.abandon_asked)() || watched.signals.raised();
    if give_up {
        watched.host.abandon();
    }
    give_up
}

/// What the check of a call without a turn looks at.
struct Unturned<'a> {
    /// The call's signal checks.
    signals: Signals,
    /// Another thread's request to abandon what the call consumed, if any.
    asked: Option<&'a AbandonAsked>,
}

/// The check of a call without a turn to abandon (`unturned`: the address
/// of its [`Unturned`]): the waits it ends poison what they wait on themselves.
fn check_unturned(unturned: usize) -> bool {
    // SAFETY: `interruptible_unless` installs this check with the address of
    // an `Unturned` on its stack, alive for the whole of the call in which
    // the check runs, on this same thread.
    #[allow(unsafe_code)]
    let unturned = unsafe { &*(unturned as *const Unturned<'_>) };
    unturned.asked.is_some_and(AbandonAsked::get) || unturned.signals.raised()
}

/// What a signal handler raised during this thread's call, taken.
fn caught() -> Option<PyErr> {
    CAUGHT.with(|c| c.borrow_mut().take())
}

/// Runs `op` without the GIL, every sleep of its waits in kpccl's code
/// interruptible: the launcher's replies and the shared-memory fences. For
/// calls that hold no turn on a window: a creation (collective), or a device
/// window's free (which consumes it). A signal handler's exception ends
/// those waits (they fail on every rank: a fence's window is poisoned, the
/// launcher connection closed) and comes back with what `op` returned, for
/// the caller to raise instead (and to abandon what `op` made, if the wait
/// ended in time for it to finish). Waits in a Python callback or in MPI are
/// not ours: Python raises there by itself, MPI waits on.
pub(crate) fn interruptible<R: Send>(py: Python<'_>, op: impl FnOnce() -> R + Send) -> (R, Option<PyErr>) {
    interruptible_unless(py, None, op)
}

/// [`interruptible`], its waits ended too once `asked` is set: another
/// thread asked for the window `op` consumes (a device window's free) to be
/// abandoned.
pub(crate) fn interruptible_unless_abandoned<R: Send>(
    py: Python<'_>,
    asked: &AbandonAsked,
    op: impl FnOnce() -> R + Send,
) -> (R, Option<PyErr>) {
    interruptible_unless(py, Some(asked), op)
}

fn interruptible_unless<R: Send>(
    py: Python<'_>,
    asked: Option<&AbandonAsked>,
    op: impl FnOnce() -> R + Send,
) -> (R, Option<PyErr>) {
    let out = py.detach(|| {
        let unturned = Unturned { signals: Signals::default(), asked };
        interrupt::while_sleeping(CHECK_EVERY, check_unturned, core::ptr::from_ref(&unturned) as usize, op)
    });
    (out, caught())
}

/// [`interruptible`] creation of a window: `Err` with the signal handler's
/// exception when one ended the waits, after abandoning the window if it was
/// made all the same (the signal came as the last wait ended), so that the
/// others' first wait on it fails instead of waiting for this rank; it is
/// then released without a collective (and without the GIL: a device
/// window's drop waits for its device).
pub(crate) fn window_creation<W: Fenced, E: Send>(
    py: Python<'_>,
    op: impl FnOnce() -> Result<W, E> + Send,
) -> PyResult<Result<W, E>> {
    match interruptible(py, op) {
        (made, Some(interrupted)) => {
            py.detach(move || {
                if let Ok(w) = made {
                    w.host().abandon();
                }
            });
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
        let watched = Watched { host: t.host(), abandon_asked: &asked, signals: Signals::default() };
        let out = interrupt::while_sleeping(CHECK_EVERY, check, core::ptr::from_ref(&watched) as usize, || op(&t));
        // Asked while this thread held the turn, or as it gives it back
        // (ordered by the gate: see `Guarded::abandon`).
        if w.abandon_asked() {
            t.host().abandon();
        }
        drop(t);
        w.abandon_if_asked();
        Ok(out)
    });
    let caught = caught();
    out.map(|out| caught.map_or(Ok(out), Err))
}
