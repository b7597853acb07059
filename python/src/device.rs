//! `kpccl.DeviceWindow`: a window in Ascend device memory (or the host
//! simulator's), with the same fences as host windows.

use std::sync::Arc;

use kpccl_ascend::DeviceWindow;
use kpccl_posix::Window;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::errors;
use crate::handle::{Fenced, Handle};
use crate::options;

/// A [`DeviceWindow`] that may move between threads.
#[derive(Debug)]
pub(crate) struct Movable(pub(crate) DeviceWindow);

// SAFETY: a DeviceWindow is !Send only for the raw device addresses it keeps.
// They are never dereferenced on the host: they are passed to the runtime,
// which is `Send + Sync`, and every call of the window that uses them first
// makes its device current on the calling thread (`on_this_thread`). The
// rest is a host window (`Send`) and plain data. It is used by one thread at
// a time (behind the handle's lock).
#[allow(unsafe_code)]
unsafe impl Send for Movable {}

impl Movable {
    /// [`DeviceWindow::free`] (a method, so that a closure moves the whole `Movable`).
    fn free(self) -> Result<(), kpccl_ascend::window::Error> {
        self.0.free()
    }
}

impl Fenced for Movable {
    fn host(&self) -> &Window {
        self.0.host()
    }
}

/// A shared window in Ascend device memory, made by
/// ``Comm.alloc(nbytes, memory="ascend")``: every rank's segment is its own
/// device allocation, exported by ACL IPC (a PID whitelist of the ranks) and
/// imported by its peers; the fences are the host windows' (same calls,
/// same rules). :meth:`segment` gives device addresses for ``kpccl.acl``
/// copies or kernels; :meth:`write` and :meth:`read` copy from and to host
/// bytes. ``free()`` (collective) closes and frees in the documented order.
/// A context manager, like :class:`Window`.
#[pyclass(name = "DeviceWindow", module = "kpccl", frozen)]
#[derive(Debug)]
pub(crate) struct PyDeviceWindow {
    h: Handle<Movable>,
}

impl PyDeviceWindow {
    pub(crate) fn new(w: Movable) -> Self {
        Self { h: Handle::new(w) }
    }
}

#[pymethods]
impl PyDeviceWindow {
    /// This rank.
    #[getter]
    fn rank(&self) -> u32 {
        self.h.rank
    }

    /// Ranks in the window.
    #[getter]
    fn size(&self) -> u32 {
        self.h.size
    }

    /// This rank's device.
    #[getter]
    fn device(&self, py: Python<'_>) -> PyResult<i32> {
        self.h.run(py, |w| w.0.device())
    }

    /// Whether :meth:`free` was called.
    #[getter]
    fn freed(&self) -> bool {
        self.h.freed()
    }

    /// ``(dev_ptr, nbytes)`` of ``rank``'s segment (default: this rank's):
    /// its device address in this process (imported for peers), as an int.
    #[pyo3(signature = (rank = None))]
    fn segment(&self, py: Python<'_>, rank: Option<&Bound<'_, PyAny>>) -> PyResult<(usize, usize)> {
        let r = self.h.rank_or_mine(rank)?;
        self.h.run(py, |w| w.0.segment(r).map(|s| (s.ptr as usize, s.len)))?.map_err(errors::device)
    }

    /// Copies the bytes of ``data`` (any bytes-like object) to ``offset`` in
    /// ``rank``'s device segment.
    fn write(
        &self,
        py: Python<'_>,
        rank: &Bound<'_, PyAny>,
        offset: &Bound<'_, PyAny>,
        data: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let r = self.h.peer(rank)?;
        let off: usize = options::count(offset, "offset").map_err(errors::value)?;
        let bytes: Vec<u8> = py.import("builtins")?.getattr("bytes")?.call1((data,))?.extract()?;
        self.h.run(py, |w| w.0.write(r, off, &bytes))?.map_err(errors::device)
    }

    /// ``nbytes`` bytes from ``offset`` in ``rank``'s device segment.
    fn read<'py>(
        &self,
        py: Python<'py>,
        rank: &Bound<'py, PyAny>,
        offset: &Bound<'py, PyAny>,
        nbytes: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let r = self.h.peer(rank)?;
        let off: usize = options::count(offset, "offset").map_err(errors::value)?;
        let n: usize = options::count(nbytes, "nbytes").map_err(errors::value)?;
        let mut buf = vec![0u8; n];
        self.h.run(py, |w| w.0.read(r, off, &mut buf))?.map_err(errors::device)?;
        Ok(PyBytes::new(py, &buf))
    }

    /// The pairwise fence with ``peer`` (device copies through this window
    /// are synchronous, so they are complete before it).
    fn peer_fence(&self, py: Python<'_>, peer: &Bound<'_, PyAny>) -> PyResult<()> {
        self.h.peer_fence(py, peer)
    }

    /// The fence with every rank of the window.
    fn fence(&self, py: Python<'_>) -> PyResult<()> {
        self.h.fence(py)
    }

    /// Signals ``peer`` once, without waiting.
    fn signal(&self, py: Python<'_>, peer: &Bound<'_, PyAny>) -> PyResult<()> {
        self.h.signal(py, peer)
    }

    /// Waits for and consumes one signal from ``peer``.
    fn wait(&self, py: Python<'_>, peer: &Bound<'_, PyAny>) -> PyResult<()> {
        self.h.wait(py, peer)
    }

    /// Why the window was abandoned (a message), or ``None``.
    #[getter]
    fn poisoned(&self, py: Python<'_>) -> PyResult<Option<String>> {
        self.h.poisoned(py)
    }

    /// Frees the window (collective), in the documented order: a fence,
    /// every importer closes, a fence, every exporter closes its key and
    /// frees its memory. Everything is released even when a step fails (the
    /// first error is raised). Calling it again does nothing.
    fn free(&self, py: Python<'_>) -> PyResult<()> {
        let Some(w) = self.h.take() else {
            return Ok(());
        };
        match Arc::try_unwrap(w) {
            Ok(m) => {
                let m = m.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
                // Each step's waits end on a dead peer or the timeout; Ctrl-C
                // is handled once it is done (nothing would be left to abandon).
                py.detach(move || m.free()).map_err(errors::device)
            }
            Err(w) => {
                self.h.put_back(w);
                Err(errors::library("the window is in use by another thread: cannot free it now"))
            }
        }
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Frees the window, or abandons it when the block raised.
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

    fn __repr__(&self) -> String {
        self.h.repr("DeviceWindow")
    }
}
