//! `kpccl.Window`: a host window, its fences, and zero-copy views of its segments.

use std::sync::Arc;

use kpccl_posix::Window;
use pyo3::PyClassInitializer;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PySlice};

use crate::errors;
use crate::fences::PyFenced;
use crate::handle::{Handle, Shared};

/// A shared window in host memory, in which every rank of the node owns a
/// segment; made by :meth:`Comm.alloc`. Read and write segments through
/// :meth:`buffer` / :meth:`numpy` views (zero-copy), and order those
/// accesses with fences: what a rank wrote before ``peer_fence(j)`` (or
/// ``fence()``) is seen by rank ``j`` after its matching call; ``signal(j)``
/// / ``wait(i)`` are the one-way halves. Every wait releases the GIL;
/// Ctrl-C ends it with ``KeyboardInterrupt`` and abandons the window (its
/// peers' fences fail, as after a timeout; ``free()`` still releases it).
///
/// ``free()`` (collective) fences with every rank, then lets the memory go.
/// Views taken before stay valid: the mapping lives until the last view is
/// gone (nobody else sees writes to it any more). Anything else after
/// ``free()`` raises ``ValueError``. Dropping the window without ``free()``
/// while views live leaves it too: a peer's fence or wait on this rank
/// fails at once, as when no view is left. A
/// context manager: leaving the ``with`` block frees it; leaving it by an
/// exception abandons the window instead (peers' waits fail rather than
/// wait for this rank).
#[pyclass(name = "Window", module = "kpccl", extends = PyFenced, frozen)]
#[derive(Debug)]
pub(crate) struct PyWindow {
    h: Arc<Handle<Window>>,
    /// The node's ranks, by local rank.
    node_ranks: Vec<u32>,
    /// Every rank's segment, `(address, length)`, or why it has none here:
    /// the queries answer from these, alongside another thread's wait.
    segments: Vec<Result<(usize, usize), kpccl_posix::Error>>,
}

/// Keeps a window's mapping alive for the views of it (the owner of their memory).
#[pyclass(name = "_Mapping", module = "kpccl", frozen)]
#[derive(Debug)]
pub(crate) struct Mapping {
    _win: Shared<Window>,
}

impl PyWindow {
    /// The Python object of `w`.
    pub(crate) fn create(py: Python<'_>, w: Window) -> PyResult<Bound<'_, PyAny>> {
        let segments = (0..w.nranks()).map(|r| w.segment(r).map(|s| (s.ptr.as_ptr() as usize, s.len))).collect();
        let node_ranks = w.node_ranks().to_vec();
        let h = Arc::new(Handle::new(w));
        let init = PyClassInitializer::from(PyFenced::new(h.clone())).add_subclass(Self { h, node_ranks, segments });
        Ok(Bound::new(py, init)?.into_any())
    }

    /// `rank`'s segment (default: this rank's), unless the window was freed.
    fn segment(&self, rank: Option<&Bound<'_, PyAny>>) -> PyResult<(usize, usize)> {
        let r = self.h.rank_or_mine(rank)?;
        self.h.get()?;
        self.segments[r as usize].clone().map_err(errors::host)
    }
}

/// A writable memoryview of `len` bytes at `addr`, whose memory `owner` keeps alive.
fn view<'py>(py: Python<'py>, addr: usize, len: usize, owner: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let builtins = py.import("builtins")?;
    if len == 0 {
        return builtins.getattr("memoryview")?.call1((builtins.getattr("bytearray")?.call0()?,));
    }
    // A ctypes array over the memory: a buffer without copying, on every
    // Python >= 3.9 (the buffer protocol is in the stable ABI only from 3.11).
    let ctypes = py.import("ctypes")?;
    let array = ctypes.getattr("c_char")?.mul(len)?.call_method1("from_address", (addr,))?;
    array.setattr("_kpccl_mapping", owner)?;
    builtins.getattr("memoryview")?.call1((array,))?.call_method1("cast", ("B",))
}

#[pymethods]
impl PyWindow {
    /// The ranks whose segments this rank can reach (its node's), by local rank.
    #[getter]
    fn node_ranks(&self) -> PyResult<Vec<u32>> {
        self.h.get()?;
        Ok(self.node_ranks.clone())
    }

    /// The length in bytes of ``rank``'s segment (default: this rank's).
    #[pyo3(signature = (rank = None))]
    fn nbytes(&self, rank: Option<&Bound<'_, PyAny>>) -> PyResult<usize> {
        Ok(self.segment(rank)?.1)
    }

    /// A writable, zero-copy ``memoryview`` (format ``"B"``) of ``rank``'s
    /// segment (default: this rank's). It keeps the memory mapped while it
    /// lives, even after :meth:`free`.
    #[pyo3(signature = (rank = None))]
    fn buffer<'py>(&self, py: Python<'py>, rank: Option<&Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyAny>> {
        let (addr, len) = self.segment(rank)?;
        let w = self.h.get()?;
        let owner = Bound::new(py, Mapping { _win: w })?.into_any();
        view(py, addr, len, owner)
    }

    /// A zero-copy, writable 1-D numpy array of ``rank``'s segment (default:
    /// this rank's) with ``dtype`` (default ``uint8``): as many whole
    /// elements as fit. numpy is imported only here.
    #[pyo3(signature = (rank = None, dtype = None))]
    fn numpy<'py>(
        &self,
        py: Python<'py>,
        rank: Option<&Bound<'py, PyAny>>,
        dtype: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let np = py.import("numpy")?;
        let dtype = match dtype {
            Some(d) if !d.is_none() => np.getattr("dtype")?.call1((d,))?,
            _ => np.getattr("dtype")?.call1(("uint8",))?,
        };
        let mem = self.buffer(py, rank)?;
        let itemsize: usize = dtype.getattr("itemsize")?.extract()?;
        let whole = mem.len()? / itemsize.max(1) * itemsize;
        let mem = mem.get_item(PySlice::new(py, 0, isize::try_from(whole)?, 1))?;
        let kwargs = PyDict::new(py);
        kwargs.set_item("dtype", dtype)?;
        np.getattr("frombuffer")?.call((mem,), Some(&kwargs))
    }
}
