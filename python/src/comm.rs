//! `kpccl.Comm`: a communicator over the launcher, mpi4py or Python callables.

use std::fmt::Display;
use std::sync::{Arc, Mutex, PoisonError, RwLock, TryLockError};

use kpccl_ascend::DeviceWindow;
use kpccl_posix::Comm;
use kpccl_posix::launch::RunOob;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyList;
use pyo3::{PyTraverseError, PyVisit};

use crate::device::{Movable, PyDeviceWindow};
use crate::oob::{PyOob, Route};
use crate::options::{self, Alloc, Memory, Raw};
use crate::window::PyWindow;
use crate::{errors, wait};

/// A communicator: ``size`` processes (on one node or on many) that create
/// shared windows together. Build it with :meth:`Comm.from_env` (under
/// ``kpccl-run``), :meth:`Comm.from_mpi` (an mpi4py communicator), or
/// ``Comm(nranks, rank, local_rank, allgather, barrier)`` with your own
/// out-of-band collectives: ``allgather(data: bytes) -> bytes`` returns every
/// rank's ``data`` concatenated in rank order, ``barrier()`` returns once
/// every rank called it. Creation is collective: every rank calls it.
///
/// Windows span the ranks of one node (``node_ranks``); ranks keep their
/// communicator numbers in every call. Over several nodes (a multi-node
/// ``mpirun``), ranks are grouped by node as in the C library:
/// ``local_rank`` numbers a rank among its node's ranks (``None`` or ``-1``:
/// in rank order). A context manager: leaving the ``with`` block destroys it.
/// A child forked from a rank cannot use it for a collective (its
/// :meth:`alloc` raises :class:`Error`): it would take its parent's place.
///
/// Ctrl-C: while a creation (of the communicator, or of a window by
/// :meth:`alloc`) waits for a late rank in kpccl's own code (the launcher's
/// replies under ``kpccl-run``, the fence that ends a window's creation), it
/// raises ``KeyboardInterrupt`` within milliseconds and abandons the
/// creation: the other ranks' creation fails with :class:`Error` naming this
/// rank, and nothing is left in /dev/shm. Under ``kpccl-run`` the
/// communicator cannot be used for another creation afterwards (this rank
/// left the job). Waits in an mpi4py collective cannot be interrupted (MPI
/// waits on; Ctrl-C takes effect once it returns); a callable of
/// ``Comm(...)`` gets ``KeyboardInterrupt`` from Python itself, and the
/// creation raises it again.
#[pyclass(name = "Comm", module = "kpccl", frozen)]
#[derive(Debug)]
pub(crate) struct PyComm {
    inner: RwLock<Option<Arc<Comm<PyOob>>>>,
    rank: u32,
    size: u32,
    /// Held while a window is made on it: the ranks' collectives pair up in
    /// call order, so two threads of a rank making windows at once would
    /// pair with the wrong calls of the others (or mix their records).
    making: Mutex<()>,
}

/// The process that joined the launcher (`Comm.from_env()`) and as which
/// rank: the launcher takes one connection per rank, and refuses a second
/// as "another process is that rank", which is not so when it is this one.
static JOINED: Mutex<Option<(u32, u32)>> = Mutex::new(None);

/// Notes that this process joined the launcher as `rank`.
fn join(rank: u32) {
    *JOINED.lock().unwrap_or_else(PoisonError::into_inner) = Some((std::process::id(), rank));
}

/// The rank as which this process joined the launcher, if it did (a forked
/// child did not: its parent did).
fn joined() -> Option<u32> {
    let pid = std::process::id();
    JOINED.lock().unwrap_or_else(PoisonError::into_inner).filter(|&(p, _)| p == pid).map(|(_, rank)| rank)
}

/// `local_rank` as the Rust API takes it: `None` or `-1` numbers the node's ranks in rank order.
fn local_rank(v: Option<&Bound<'_, PyAny>>, nranks: u32) -> Result<Option<u32>, String> {
    match v {
        None => Ok(None),
        Some(v) if v.is_none() || v.extract::<i64>().is_ok_and(|l| l == -1) => Ok(None),
        Some(v) => options::index(v, "local_rank", nranks, "the communicator")
            .map(Some)
            .map_err(|e| format!("{e} (or -1/None: numbered in rank order)")),
    }
}

fn rank_of(v: &Bound<'_, PyAny>, nranks: u32) -> Result<u32, String> {
    options::index(v, "rank", nranks, "the communicator")
}

/// A failed collective's exception (`kind`, saying `e`), with what a Python
/// callback raised: its message, and the exception itself as the cause.
pub(crate) fn oob_error(py: Python<'_>, kind: errors::Kind, e: impl Display, oob: &PyOob) -> PyErr {
    match interrupt_or_raised(py, oob) {
        Err(interrupt) => interrupt,
        Ok(Some(raised)) => {
            let err = errors::raise(kind, format!("{e}; the out-of-band collective raised: {raised}"));
            err.set_cause(py, Some(raised));
            err
        }
        Ok(None) => errors::raise(kind, e.to_string()),
    }
}

/// What a Python callback of `oob` raised (taken): a `KeyboardInterrupt`,
/// `SystemExit` or other exception that is not an `Exception` as `Err`, to
/// be raised again as itself; any other as `Ok`, to be reported.
pub(crate) fn interrupt_or_raised(py: Python<'_>, oob: &PyOob) -> Result<Option<PyErr>, PyErr> {
    match oob.take_raised() {
        Some(raised) if !raised.is_instance_of::<PyException>(py) => Err(raised),
        raised => Ok(raised),
    }
}

/// What a collective this rank took part in refused (its own arguments were
/// bad) raises instead of the refusal: a Ctrl-C that ended its waits
/// (`caught`), or a `KeyboardInterrupt` or `SystemExit` a Python callback
/// raised. An `Exception` a callback raised is dropped: the refusal says why
/// this rank failed.
fn refusal_ended_by(py: Python<'_>, caught: Option<PyErr>, oob: &PyOob) -> Option<PyErr> {
    let interrupt = interrupt_or_raised(py, oob).err();
    caught.or(interrupt)
}

impl PyComm {
    /// Creates the communicator (collective); a rank whose arguments are bad
    /// (`Err`) takes part, refused, so that every rank fails rather than waits.
    /// Ctrl-C while it waits for the launcher abandons it (see [`wait::interruptible`]).
    fn create(
        py: Python<'_>,
        route: Route,
        rank: u32,
        nranks: u32,
        local: Result<Option<u32>, String>,
    ) -> PyResult<Self> {
        let oob = PyOob::new(route);
        let local = match local {
            Ok(l) => l,
            Err(msg) => {
                let ((), caught) = wait::interruptible(py, || Comm::fail(&oob, rank, nranks));
                return Err(refusal_ended_by(py, caught, &oob).unwrap_or_else(|| errors::value(msg)));
            }
        };
        let given = oob.clone();
        match wait::interruptible(py, || Comm::builder(given, rank, nranks).local_rank(local).build()) {
            // A communicator made all the same is dropped: under the launcher,
            // its connection closes, and the others' next collective fails.
            (_, Some(interrupted)) => Err(interrupted),
            (Ok(c), None) => {
                Ok(Self { inner: RwLock::new(Some(Arc::new(c))), rank, size: nranks, making: Mutex::new(()) })
            }
            (Err(e), None) => Err(oob_error(py, errors::host_kind(&e), e, &oob)),
        }
    }

    /// The communicator for a collective, refused in a forked child: the
    /// child shares its parent's connection to the launcher (or MPI's), so
    /// its collective would take the parent's place in the others' (they
    /// would then fail, confused, or wait for the parent's next one).
    fn for_collective(&self) -> PyResult<Arc<Comm<PyOob>>> {
        let c = self.comm()?;
        c.in_its_process().map_err(errors::host)?;
        Ok(c)
    }

    fn comm(&self) -> PyResult<Arc<Comm<PyOob>>> {
        self.inner
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .ok_or_else(|| errors::value("the communicator was destroyed"))
    }
}

#[pymethods]
impl PyComm {
    /// ``Comm(nranks, rank, local_rank, allgather, barrier)``: a communicator
    /// over two Python callables (collective), mirroring the C API's
    /// ``kpccl_shm_comm_create``. ``allgather(data: bytes) -> bytes`` must
    /// return ``nranks * len(data)`` bytes, rank r's at ``r * len(data)``.
    #[new]
    #[pyo3(signature = (nranks, rank, local_rank, allgather, barrier))]
    fn new(
        py: Python<'_>,
        nranks: &Bound<'_, PyAny>,
        rank: &Bound<'_, PyAny>,
        local_rank: Option<&Bound<'_, PyAny>>,
        allgather: Bound<'_, PyAny>,
        barrier: Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        let n: u32 = options::count(nranks, "nranks").map_err(errors::value)?;
        if !(1..=kpccl_core::MAX_RANKS).contains(&n) {
            return Err(errors::value(format!(
                "nranks {n} is out of range: a communicator has 1 to {} ranks",
                kpccl_core::MAX_RANKS
            )));
        }
        if !allgather.is_callable() || !barrier.is_callable() {
            return Err(errors::value("allgather and barrier must be callables"));
        }
        let route = Route::Callables { allgather: allgather.unbind(), barrier: barrier.unbind() };
        let (r, local) = match rank_of(rank, n) {
            Ok(r) => (r, self::local_rank(local_rank, n)),
            // Still take part, as a rank out of range, so that the others fail too.
            Err(msg) => (u32::MAX, Err(msg)),
        };
        Self::create(py, route, r, n, local)
    }

    /// The communicator of this process under ``kpccl-run -n N python prog.py``
    /// (collective). Raises ``kpccl.Error`` when not started by ``kpccl-run``,
    /// ``ValueError`` when a launcher variable (``KPCCL_RANK``, …) is malformed.
    /// Ctrl-C while it waits for the launcher or the other ranks abandons it
    /// (see :class:`Comm`). A process joins once: a second call raises
    /// :class:`Error` saying so.
    #[staticmethod]
    fn from_env(py: Python<'_>) -> PyResult<Self> {
        if let Some(rank) = joined() {
            return Err(errors::library(format!(
                "this process already joined kpccl-run as rank {rank}: a process joins once (the launcher refuses \
                 a second connection for a rank); use the communicator Comm.from_env() made then"
            )));
        }
        // Interruptible too: a stopped launcher holds the welcome for up to
        // the out-of-band timeout (60 s by default).
        let (joining, interrupted) = wait::interruptible(py, RunOob::from_env);
        if let Some(interrupted) = interrupted {
            return Err(interrupted);
        }
        let run = match joining {
            Ok(Some(run)) => {
                join(run.rank());
                run
            }
            Ok(None) => {
                return Err(errors::library(
                    "not started by kpccl-run (KPCCL_RUN_SOCKET is not set): run `kpccl-run -n N python prog.py`",
                ));
            }
            // A malformed launcher variable is this rank's setting, as any
            // refused `KPCCL_*` one is (C: `KPCCL_ERR_INVALID_ARGUMENT`).
            Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => {
                return Err(errors::value(format!("cannot join kpccl-run: {e}")));
            }
            Err(e) => return Err(errors::library(format!("cannot join kpccl-run: {e}"))),
        };
        let (rank, n) = (run.rank(), run.nranks());
        Self::create(py, Route::Launcher(run), rank, n, Ok(None))
    }

    /// A communicator over an mpi4py communicator ``comm`` (collective over
    /// it): the library's out-of-band collectives are ``comm.Allgather`` and
    /// ``comm.Barrier``. ``local_rank`` as for ``Comm(...)``; ranks on other
    /// nodes are grouped by node (windows span one node). Ctrl-C does not end
    /// a wait inside those MPI calls (it is raised once they return).
    #[staticmethod]
    #[pyo3(signature = (comm, local_rank = None))]
    fn from_mpi(py: Python<'_>, comm: Bound<'_, PyAny>, local_rank: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        // MPI.COMM_NULL fails here too, with mpi4py's bare MPI_ERR_COMM.
        let query = |method: &str| -> PyResult<u32> {
            comm.call_method0(method).and_then(|v| v.extract()).map_err(|e| {
                errors::value(format!(
                    "`comm` must be an mpi4py communicator other than MPI.COMM_NULL: comm.{method}() failed: {e}"
                ))
            })
        };
        let (rank, n) = (query("Get_rank")?, query("Get_size")?);
        let local = self::local_rank(local_rank, n);
        Self::create(py, Route::Mpi(comm.unbind()), rank, n, local)
    }

    /// This process's rank.
    #[getter]
    fn rank(&self) -> u32 {
        self.rank
    }

    /// Ranks in the communicator.
    #[getter]
    fn size(&self) -> u32 {
        self.size
    }

    /// Nodes the communicator spans.
    #[getter]
    fn nnodes(&self) -> PyResult<u32> {
        Ok(self.comm()?.nnodes())
    }

    /// This rank's node, ``0..nnodes`` (nodes are numbered by their lowest rank).
    #[getter]
    fn node(&self) -> PyResult<u32> {
        Ok(self.comm()?.node())
    }

    /// This rank's number among its node's ranks.
    #[getter]
    fn local_rank(&self) -> PyResult<u32> {
        Ok(self.comm()?.local_rank())
    }

    /// Ranks on this node: the ranks a window's memory is shared by.
    #[getter]
    fn local_size(&self) -> PyResult<u32> {
        Ok(self.comm()?.local_size())
    }

    /// The CPU count this node's rank count is compared with, taken at
    /// creation: the CPUs the ranks' affinities cover, fewer where some ranks
    /// are confined to fewer CPUs than they number, at most the CPU quota
    /// (rounded up). Compare with it, not with ``os.cpu_count()``, to tell
    /// whether ranks outnumber CPUs.
    #[getter]
    fn node_cpus(&self) -> PyResult<u32> {
        Ok(self.comm()?.node_cpus())
    }

    /// This node's ranks, by local rank.
    #[getter]
    fn node_ranks<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, self.comm()?.node_ranks())
    }

    /// ``alloc(nbytes, *, layout=None, align=None, reserve=None,
    /// barrier=None, timeout=None, memory="host", device=None,
    /// pid_validation=None)``: creates a window in which this rank owns
    /// ``nbytes`` bytes (collective; sizes may differ per rank). If any
    /// rank's request is bad or any rank fails, every rank raises.
    ///
    /// Host windows (:class:`Window`): ``layout`` ``"contiguous"`` (default,
    /// like ``MPI_Win_allocate_shared``) or ``"aligned"`` (a page per rank);
    /// ``align`` a power of two; ``reserve`` ``"eager"`` (memory allocated
    /// now: a full /dev/shm is an error here, never a crash later) or
    /// ``"lazy"``; ``barrier`` ``"dissemination"`` or ``"flat"``.
    ///
    /// ``memory="ascend"``: a :class:`DeviceWindow` in Ascend device memory
    /// (the runtime ``KPCCL_ASCEND`` picks: ``sim``, ``acl`` or ``auto``),
    /// on ``device`` (default: the local rank), its keys exported with a PID
    /// whitelist of the ranks unless ``pid_validation=False`` (default:
    /// ``KPCCL_ASCEND_PID_VALIDATION``, else on).
    ///
    /// ``timeout``: seconds after which a fence gives up (``0``: never;
    /// default ``KPCCL_TIMEOUT_MS``).
    ///
    /// Ctrl-C while it waits for a late rank raises ``KeyboardInterrupt`` and
    /// abandons the creation, so that the other ranks fail rather than wait
    /// (see :class:`Comm` for the waits it cannot end).
    #[pyo3(signature = (nbytes, *, layout = None, align = None, reserve = None, barrier = None, timeout = None,
        memory = None, device = None, pid_validation = None))]
    #[allow(clippy::too_many_arguments)]
    fn alloc<'py>(
        &self,
        py: Python<'py>,
        nbytes: Bound<'py, PyAny>,
        layout: Option<Bound<'py, PyAny>>,
        align: Option<Bound<'py, PyAny>>,
        reserve: Option<Bound<'py, PyAny>>,
        barrier: Option<Bound<'py, PyAny>>,
        timeout: Option<Bound<'py, PyAny>>,
        memory: Option<Bound<'py, PyAny>>,
        device: Option<Bound<'py, PyAny>>,
        pid_validation: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let c = self.for_collective()?;
        // Refused rather than queued, as the C API refuses it: queued, the
        // order in which the threads get it would decide the pairing.
        let _making = match self.making.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => {
                return Err(errors::library(
                    "the communicator is in use by another thread of this rank, making a window: make a \
                     communicator's windows one at a time, in the same order on every rank",
                ));
            }
        };
        let raw = Raw { nbytes, layout, align, reserve, barrier, timeout, memory, device, pid_validation };
        let opts = match raw.check() {
            Ok(o) => o,
            Err(msg) => return Err(refuse(py, &c, raw.memory_is_ascend()).unwrap_or_else(|| errors::value(msg))),
        };
        match opts.memory {
            Some(Memory::Ascend) => alloc_device(py, &c, &opts),
            _ => alloc_host(py, &c, &opts),
        }
    }

    /// Destroys the communicator (local). Windows made from it stay valid;
    /// calling it again does nothing.
    fn destroy(&self) {
        self.inner.write().unwrap_or_else(PoisonError::into_inner).take();
    }

    /// What the communicator holds of Python (its callables, or the mpi4py
    /// communicator), for the cycle collector: an object whose bound methods
    /// are the collectives holds the communicator, which holds them.
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        // Never waits (the collector must not block): a lock busy now, or
        // a communicator shared with a creation in progress, is skipped;
        // the next collection sees it.
        let Ok(inner) = self.inner.try_read() else { return Ok(()) };
        match inner.as_ref() {
            Some(c) if Arc::strong_count(c) == 1 => c.oob().traverse(&visit),
            _ => Ok(()),
        }
    }

    /// Destroys it, letting go of its callables (the cycle collector's call).
    fn __clear__(&self) {
        self.destroy();
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.destroy();
        false
    }

    fn __repr__(&self) -> String {
        let state =
            if self.inner.read().unwrap_or_else(PoisonError::into_inner).is_some() { "" } else { ", destroyed" };
        format!("<kpccl.Comm rank {} of {}{state}>", self.rank, self.size)
    }
}

/// Takes part in window creation as a rank whose options were refused, so
/// that every rank fails together; a Ctrl-C that ended it, to raise instead
/// of the refusal. Device windows over several nodes are refused by every
/// rank without a collective: nothing to take part in.
fn refuse(py: Python<'_>, c: &Comm<PyOob>, ascend: bool) -> Option<PyErr> {
    if ascend && c.nnodes() > 1 {
        return None;
    }
    let kind = if ascend { kpccl_ascend::MEMORY_KIND } else { kpccl_posix::MemoryKind::HOST };
    let (_, caught) = wait::interruptible(py, || c.window(0).memory_kind(kind).fail());
    refusal_ended_by(py, caught, c.oob())
}

fn alloc_host<'py>(py: Python<'py>, c: &Comm<PyOob>, o: &Alloc) -> PyResult<Bound<'py, PyAny>> {
    let b = c.window(o.size).options(&o.window);
    match wait::window_creation(py, || b.alloc())? {
        Ok(w) => PyWindow::create(py, w),
        Err(e) => Err(oob_error(py, errors::creation_kind(&e, c.rank()), e, c.oob())),
    }
}

fn alloc_device<'py>(py: Python<'py>, c: &Comm<PyOob>, o: &Alloc) -> PyResult<Bound<'py, PyAny>> {
    let device = o.device.unwrap_or_else(|| i32::try_from(c.local_rank()).unwrap_or(i32::MAX));
    let mut b = DeviceWindow::builder(c, o.size).device(device).backend(crate::acl::runtime());
    if let Some(v) = o.pid_validation {
        b = b.disable_pid_validation(!v);
    }
    if let Some(t) = o.window.timeout {
        b = b.timeout(t);
    }
    match wait::window_creation(py, || b.alloc().map(Movable))? {
        Ok(w) => PyDeviceWindow::create(py, w),
        Err(e) => Err(oob_error(py, errors::device_kind(&e), e, c.oob())),
    }
}
