//! Waits that release the GIL and end on Ctrl-C: while a wait sleeps, the
//! waiting thread takes the GIL every few milliseconds to run Python's signal
//! handlers; one that raises (`KeyboardInterrupt`) abandons the window
//! (poisons it, as a timeout does: its partners' waits fail, `free()` still
//! releases it) and the wait raises that exception.

use std::cell::RefCell;
use std::time::Duration;

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

/// The check between sleeps; `window` is the address of the host window
/// that [`run`] waits on.
fn check(window: usize) {
    Python::attach(|py| {
        if let Err(e) = py.check_signals() {
            CAUGHT.with(|c| {
                c.borrow_mut().get_or_insert(e);
            });
            // SAFETY: `run` installs this check with the address of a window
            // it borrows (through a held lock) for the whole of the call in
            // which the check runs, on this same thread: the window is alive
            // and only this thread uses it.
            #[allow(unsafe_code)]
            let w = unsafe { &*(window as *const Window) };
            abandon(w);
        }
    });
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
        let host: *const Window = t.host();
        Ok(interrupt::while_sleeping(CHECK_EVERY, check, host as usize, || op(&t)))
    });
    let caught = CAUGHT.with(|c| c.borrow_mut().take());
    out.map(|out| caught.map_or(Ok(out), Err))
}
