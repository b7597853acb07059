//! The out-of-band collectives a Python communicator is built on: the
//! `kpccl-run` launcher's, an mpi4py communicator's, or two Python callables.

use std::sync::{Arc, Mutex};

use kpccl_core::{Oob, OobError};
use kpccl_posix::launch::RunOob;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyList};
use pyo3::{PyTraverseError, PyVisit};

use crate::options;

/// The `OobError` code of a collective whose Python side raised; the
/// exception is kept for [`PyOob::take_raised`].
pub(crate) const PYTHON_RAISED: i32 = -1000;

/// Where a communicator's collectives go.
#[derive(Debug)]
pub(crate) enum Route {
    /// The `kpccl-run` launcher.
    Launcher(RunOob),
    /// An mpi4py communicator (`Allgather`, `Barrier`).
    Mpi(Py<PyAny>),
    /// `allgather(data: bytes) -> bytes` and `barrier() -> None`.
    Callables {
        /// Gathers every rank's bytes, concatenated in rank order.
        allgather: Py<PyAny>,
        /// Returns once every rank has called it.
        barrier: Py<PyAny>,
    },
}

/// A [`Route`] as an [`Oob`], remembering the first Python exception raised
/// inside it (its message becomes part of the error the caller sees, or, for
/// `KeyboardInterrupt` and `SystemExit`, it is raised again as it was).
/// Clones share the route: the caller keeps one to read what was raised
/// after the communicator's creation consumed the other.
#[derive(Debug, Clone)]
pub(crate) struct PyOob(Arc<Shared>);

#[derive(Debug)]
struct Shared {
    route: Route,
    raised: Mutex<Option<PyErr>>,
}

impl PyOob {
    pub(crate) fn new(route: Route) -> Self {
        Self(Arc::new(Shared { route, raised: Mutex::new(None) }))
    }

    /// The Python exception a collective raised, if one did (taken).
    pub(crate) fn take_raised(&self) -> Option<PyErr> {
        self.0.raised.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take()
    }

    /// Visits the Python objects of the route for the cycle collector
    /// (`PyComm::__traverse__`), if this is their only holder: a clone held
    /// elsewhere (a creation in progress) is a reference from outside.
    pub(crate) fn traverse(&self, visit: &PyVisit<'_>) -> Result<(), PyTraverseError> {
        if Arc::strong_count(&self.0) > 1 {
            return Ok(());
        }
        match &self.0.route {
            Route::Launcher(_) => Ok(()),
            Route::Mpi(comm) => visit.call(comm),
            Route::Callables { allgather, barrier } => {
                visit.call(allgather)?;
                visit.call(barrier)
            }
        }
    }

    fn python(&self, call: impl FnOnce(Python<'_>) -> PyResult<()>) -> Result<(), OobError> {
        Python::attach(|py| {
            call(py).map_err(|e| {
                let mut slot = self.0.raised.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                slot.get_or_insert(e);
                OobError { code: PYTHON_RAISED }
            })
        })
    }
}

/// The bytes of an allgather's result (see [`options::bytes_like`]).
fn buffer_bytes(got: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    options::bytes_like(got, "allgather must return").map_err(|e| {
        if got.is_instance_of::<PyList>() {
            let hint = "mpi4py's lowercase allgather returns a list: join it (b\"\".join(...)) or use Allgather";
            PyTypeError::new_err(format!("{e} ({hint})"))
        } else {
            e
        }
    })
}

fn gathered(got: &Bound<'_, PyAny>, recv: &mut [u8]) -> PyResult<()> {
    let data = buffer_bytes(got)?;
    if data.len() != recv.len() {
        return Err(PyValueError::new_err(format!(
            "allgather returned {} bytes, expected {} (every rank's bytes, concatenated in rank order)",
            data.len(),
            recv.len()
        )));
    }
    recv.copy_from_slice(&data);
    Ok(())
}

impl Oob for PyOob {
    fn allgather(&self, send: &[u8], recv: &mut [u8]) -> Result<(), OobError> {
        match &self.0.route {
            Route::Launcher(run) => run.allgather(send, recv),
            Route::Mpi(comm) => self.python(|py| {
                let out = PyByteArray::new(py, &vec![0u8; recv.len()]);
                comm.bind(py).call_method1("Allgather", (PyBytes::new(py, send), &out))?;
                gathered(out.as_any(), recv)
            }),
            Route::Callables { allgather, .. } => self.python(|py| {
                let got = allgather.bind(py).call1((PyBytes::new(py, send),))?;
                gathered(&got, recv)
            }),
        }
    }

    fn barrier(&self) -> Result<(), OobError> {
        match &self.0.route {
            Route::Launcher(run) => run.barrier(),
            Route::Mpi(comm) => self.python(|py| comm.bind(py).call_method0("Barrier").map(drop)),
            Route::Callables { barrier, .. } => self.python(|py| barrier.bind(py).call0().map(drop)),
        }
    }
}
