//! `kpccl.DeviceWindow`: a window in Ascend device memory (or the host
//! simulator's), with the same fences as host windows.

use std::sync::Arc;

use kpccl_ascend::DeviceWindow;
use kpccl_posix::Window;
use pyo3::PyClassInitializer;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::errors;
use crate::fences::PyFenced;
use crate::handle::{Busy, Call, Fenced, Guarded, Handle, Refused, Shared};
use crate::options;
use crate::wait;

/// A [`DeviceWindow`] that may move between threads.
#[derive(Debug)]
pub(crate) struct Movable(pub(crate) DeviceWindow);

// SAFETY: a DeviceWindow is !Send only for the raw device addresses it keeps.
// They are never dereferenced on the host: they are passed to the runtime,
// which is `Send + Sync`, and every call of the window that uses them first
// makes the window's device context current on the calling thread, and sets
// the thread's own back after (`DeviceState::on_device`). The rest is a
// host window (`Send`) and plain data. It is used by one thread at a time
// (behind the handle's lock).
#[allow(unsafe_code)]
unsafe impl Send for Movable {}

impl Fenced for Movable {
    type Error = kpccl_ascend::window::Error;

    fn host(&self) -> &Window {
        self.0.host()
    }

    /// Stream-ordered: the window's queued copies are done first.
    fn peer_fence(&self, peer: u32) -> Result<(), Self::Error> {
        self.0.peer_fence(peer)
    }

    /// Stream-ordered, as `peer_fence`.
    fn fence(&self) -> Result<(), Self::Error> {
        self.0.fence()
    }

    /// After the window's queued copies are done.
    fn signal(&self, peer: u32) -> Result<(), Self::Error> {
        self.0.signal(peer)
    }

    fn raise(e: Self::Error) -> PyErr {
        errors::device(e)
    }

    /// In the documented order: a fence, every importer closes, a fence,
    /// every exporter closes its key and frees its memory. Everything is
    /// released even when a step fails (the first error is raised). It waits
    /// for the other threads' quick calls, as a host window's free does, and
    /// is interrupted by Ctrl-C as a host wait is, or abandoned when another
    /// thread asks (leaving a `with` block by an exception): its fences then
    /// poison the window themselves (it has no turn of its own to abandon:
    /// it consumes the window), and the release goes on.
    fn free(w: Shared<Self>, py: Python<'_>) -> Result<PyResult<()>, Refused<Self>> {
        let asked = w.abandon_request();
        let op = move || Guarded::into_sole(w).map(|m| m.0.free());
        let (freed, interrupted) = wait::interruptible_unless_abandoned(py, &asked, op);
        match (freed, interrupted) {
            (Err((w, Busy)), interrupted) => Err((w, interrupted.unwrap_or_else(Busy::error))),
            (Ok(_), Some(interrupted)) => Ok(Err(interrupted)),
            (Ok(freed), None) => Ok(freed.map_err(errors::device)),
        }
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
#[pyclass(name = "DeviceWindow", module = "kpccl", extends = PyFenced, frozen)]
#[derive(Debug)]
pub(crate) struct PyDeviceWindow {
    h: Arc<Handle<Movable>>,
    /// This rank's device.
    device: i32,
    /// Every rank's segment, `(address, length)`, if it has one here: the
    /// queries answer from these, alongside another thread's wait.
    segments: Vec<Option<(usize, usize)>>,
}

impl PyDeviceWindow {
    /// The Python object of `w`.
    pub(crate) fn create(py: Python<'_>, w: Movable) -> PyResult<Bound<'_, PyAny>> {
        let segments = (0..w.0.nranks()).map(|r| w.0.segment(r).ok().map(|s| (s.ptr as usize, s.len))).collect();
        let device = w.0.device();
        let h = Arc::new(Handle::new(w));
        let init = PyClassInitializer::from(PyFenced::new(h.clone())).add_subclass(Self { h, device, segments });
        Ok(Bound::new(py, init)?.into_any())
    }
}

#[pymethods]
impl PyDeviceWindow {
    /// This rank's device.
    #[getter]
    fn device(&self) -> PyResult<i32> {
        self.h.get()?;
        Ok(self.device)
    }

    /// ``(dev_ptr, nbytes)`` of ``rank``'s segment (default: this rank's):
    /// its device address in this process (imported for peers), as an int.
    #[pyo3(signature = (rank = None))]
    fn segment(&self, py: Python<'_>, rank: Option<&Bound<'_, PyAny>>) -> PyResult<(usize, usize)> {
        let r = self.h.rank_or_mine(rank)?;
        self.h.get()?;
        match self.segments[r as usize] {
            Some(s) => Ok(s),
            // The error, from the window itself.
            None => self
                .h
                .run(py, Call::Quick, |w| w.0.segment(r).map(|s| (s.ptr as usize, s.len)))?
                .map_err(errors::device),
        }
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
        let bytes = options::bytes_like(data, "data must be")?;
        self.h.run(py, Call::Quick, |w| w.0.write(r, off, &bytes))?.map_err(errors::device)
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
        let buf = self.h.run(py, Call::Quick, |w| w.0.read_vec(r, off, n))?.map_err(errors::device)?;
        Ok(PyBytes::new(py, &buf))
    }
}
