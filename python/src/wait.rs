//! Waits that release the GIL and end on Ctrl-C: while a wait sleeps, the
//! waiting thread takes the GIL every few milliseconds to run Python's signal
//! handlers; one that raises (`KeyboardInterrupt`) abandons the window
//! (poisons it, as a timeout does: its partners' waits fail, `free()` still
//! releases it) and the wait raises that exception.

use std::cell::RefCell;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use kpccl_posix::Window;
use kpccl_posix::interrupt;
use pyo3::prelude::*;

use crate::handle::{Fenced, abandon};

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

/// Runs `op` on the window in `w` without the GIL, with every sleep of its
/// waits interruptible; a signal handler's exception wins over the error
/// the abandoned wait returns. Calls on one window take turns (a rank's
/// fences never run on two threads at once).
pub(crate) fn run<T: Fenced, R: Send>(py: Python<'_>, w: &Mutex<T>, op: impl FnOnce(&T) -> R + Send) -> PyResult<R> {
    let out = py.detach(|| {
        let t = w.lock().unwrap_or_else(PoisonError::into_inner);
        let host: *const Window = t.host();
        interrupt::while_sleeping(CHECK_EVERY, check, host as usize, || op(&t))
    });
    match CAUGHT.with(|c| c.borrow_mut().take()) {
        Some(e) => Err(e),
        None => Ok(out),
    }
}
