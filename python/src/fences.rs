//! `kpccl._Fenced`: the base class of `Window` and `DeviceWindow`, with what
//! every window has whatever its memory: fences, signals, `free()`, and the
//! context manager.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyType;

use crate::handle::Fences;

/// What every kpccl window has: the fences (``peer_fence``, ``fence``), the
/// one-way signals (``signal``, ``wait``), ``free()`` and the context
/// manager. Every wait releases the GIL; Ctrl-C ends it with
/// ``KeyboardInterrupt`` and abandons the window (its peers' waits fail, as
/// after a timeout; ``free()`` still releases it). Anything but ``free()``
/// after ``free()`` raises ``ValueError``.
///
/// Threads: a rank's calls on a window run one at a time. A call waits for
/// another thread's quick one (a signal, a test, a copy) to end, but raises
/// :class:`Error` at once while another thread is in a fence or a wait on the
/// window, as the C API fails: that wait may be for the very call that would
/// queue behind it. Queries (sizes, views, addresses, ``poisoned``) answer
/// meanwhile. While another thread's :meth:`free` has not returned, every
/// call but ``poisoned`` raises :class:`Error` saying so (a second
/// ``free()`` too: that free may still fail); leaving a ``with`` block by
/// an exception abandons the window all the same, and that free fails.
#[pyclass(name = "_Fenced", module = "kpccl", subclass, frozen)]
pub(crate) struct PyFenced {
    h: Arc<dyn Fences>,
}

impl std::fmt::Debug for PyFenced {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PyFenced").field("rank", &self.h.rank()).finish_non_exhaustive()
    }
}

impl PyFenced {
    pub(crate) fn new(h: Arc<dyn Fences>) -> Self {
        Self { h }
    }
}

#[pymethods]
impl PyFenced {
    /// This rank.
    #[getter]
    fn rank(&self) -> u32 {
        self.h.rank()
    }

    /// Ranks in the communicator.
    #[getter]
    fn size(&self) -> u32 {
        self.h.size()
    }

    /// Whether the window was freed (or released by leaving a ``with`` block
    /// by an exception); ``False`` while another thread's :meth:`free` is in
    /// progress.
    #[getter]
    fn freed(&self) -> bool {
        self.h.freed()
    }

    /// The pairwise fence with ``peer`` (a rank of this node): what each did
    /// before it is seen by the other after it. Fences between a pair match
    /// one to one, in order.
    fn peer_fence(&self, py: Python<'_>, peer: &Bound<'_, PyAny>) -> PyResult<()> {
        self.h.peer_fence(py, peer)
    }

    /// The fence with every rank of this node (each of them calls it).
    fn fence(&self, py: Python<'_>) -> PyResult<()> {
        self.h.fence(py)
    }

    /// Signals ``peer`` once, without waiting: what this rank wrote before
    /// is seen by ``peer`` after the :meth:`wait` that consumes it.
    fn signal(&self, py: Python<'_>, peer: &Bound<'_, PyAny>) -> PyResult<()> {
        self.h.signal(py, peer)
    }

    /// Waits for and consumes one signal from ``peer``: what ``peer`` wrote
    /// before that signal is seen here after it. Signals count and are
    /// separate from fences.
    fn wait(&self, py: Python<'_>, peer: &Bound<'_, PyAny>) -> PyResult<()> {
        self.h.wait(py, peer)
    }

    /// Consumes one signal from ``peer`` if it has come and returns
    /// ``True`` (ordered as :meth:`wait`), else returns ``False`` at once:
    /// the wait that never waits, for overlapping work with it. A loop of
    /// tests raises if a rank dies (looked for at most every
    /// ``KPCCL_LIVENESS_MS``); ``KPCCL_TIMEOUT_MS`` bounds waits, not tests.
    fn try_wait(&self, py: Python<'_>, peer: &Bound<'_, PyAny>) -> PyResult<bool> {
        self.h.try_wait(py, peer)
    }

    /// Why the window was abandoned (a message), or ``None``. Answers at
    /// once from any thread, also while another waits on the window.
    #[getter]
    fn poisoned(&self, py: Python<'_>) -> PyResult<Option<String>> {
        self.h.poisoned(py)
    }

    /// Frees the window (collective): fences with every rank so that nobody
    /// still uses it, then releases it. Released even when a step fails (a
    /// dead peer): the error is raised then. A peer still waiting for this
    /// rank in a pairwise fence or a wait fails at once, told that this rank
    /// left the window (and so does this free). Calling it again does nothing;
    /// calling it while another thread's free is in progress raises
    /// :class:`Error`.
    fn free(&self, py: Python<'_>) -> PyResult<()> {
        self.h.free(py)
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Frees the window; when the block raised, abandons it instead (its
    /// peers' waits fail at once rather than wait for this rank) and
    /// releases it without a collective.
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: &Bound<'_, PyAny>,
        _exc: &Bound<'_, PyAny>,
        _tb: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        if exc_type.is_none() {
            return self.free(py).map(|()| false);
        }
        self.h.abandon_and_release(py);
        Ok(false)
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let class: Bound<'_, PyType> = slf.get_type();
        let me = slf.get();
        let state = if me.h.freed() { ", freed" } else { "" };
        Ok(format!("<kpccl.{} rank {} of {}{state}>", class.name()?, me.h.rank(), me.h.size()))
    }
}
