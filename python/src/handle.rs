//! What host and device windows share in Python: the window behind locks
//! (gone after `free()`; a rank's calls on it take turns), rank checks, and
//! the fences and signals, which live in the host window of either kind.

use std::sync::{Arc, Mutex, PoisonError, RwLock, TryLockError};

use kpccl_core::fence::{Poison, PoisonKind};
use kpccl_posix::Window;
use pyo3::prelude::*;

use crate::errors;
use crate::options;
use crate::wait;

/// A window of either kind: its fence slots are a host window.
pub(crate) trait Fenced: Send + Sized + 'static {
    /// The host window holding the fence slots.
    fn host(&self) -> &Window;
    /// Frees the window `w` taken out of `h` (collective).
    fn free(h: &Handle<Self>, w: Shared<Self>, py: Python<'_>) -> PyResult<()>;
}

impl Fenced for Window {
    fn host(&self) -> &Window {
        self
    }

    /// `Window::free`, except that views may still hold the mapping: fence
    /// (unless the window is abandoned: nobody would come), then let go.
    fn free(_: &Handle<Self>, w: Shared<Self>, py: Python<'_>) -> PyResult<()> {
        let fenced = wait::run(py, &*w, |w| match w.poisoned() {
            Some(p) => Err(kpccl_posix::Error::Fence(p.error())),
            None => w.fence(),
        });
        drop(w);
        fenced?.map_err(errors::host)
    }
}

/// What every window does, whatever its kind: the methods of the Python
/// base class of `Window` and `DeviceWindow`.
pub(crate) trait Fences: Send + Sync {
    /// This rank.
    fn rank(&self) -> u32;
    /// Ranks in the communicator.
    fn size(&self) -> u32;
    /// Whether it was freed.
    fn freed(&self) -> bool;
    /// The pairwise fence with `peer`.
    fn peer_fence(&self, py: Python<'_>, peer: &Bound<'_, PyAny>) -> PyResult<()>;
    /// The fence with every rank of the node.
    fn fence(&self, py: Python<'_>) -> PyResult<()>;
    /// Signals `peer` once.
    fn signal(&self, py: Python<'_>, peer: &Bound<'_, PyAny>) -> PyResult<()>;
    /// Waits for and consumes a signal from `peer`.
    fn wait(&self, py: Python<'_>, peer: &Bound<'_, PyAny>) -> PyResult<()>;
    /// Consumes a signal from `peer` if one has come; never waits.
    fn try_wait(&self, py: Python<'_>, peer: &Bound<'_, PyAny>) -> PyResult<bool>;
    /// Why the window was abandoned, if it was.
    fn poisoned(&self, py: Python<'_>) -> PyResult<Option<String>>;
    /// Frees it (collective); nothing if it was freed.
    fn free(&self, py: Python<'_>) -> PyResult<()>;
    /// Abandons it (peers' waits fail at once rather than wait for this
    /// rank) and releases it without a collective.
    fn abandon_and_release(&self, py: Python<'_>);
}

/// Gives up on `w`: every rank's waits on it fail (as after a timeout of this rank's).
pub(crate) fn abandon(w: &Window) {
    let raw = w.raw();
    raw.poison(Poison { kind: PoisonKind::Aborted, rank: raw.rank() });
}

/// A window shared by a Python object and the views of it.
pub(crate) type Shared<T> = Arc<Mutex<T>>;

/// A window as a Python object holds it.
#[derive(Debug)]
pub(crate) struct Handle<T> {
    win: RwLock<Option<Shared<T>>>,
    /// This rank.
    pub(crate) rank: u32,
    /// Ranks in the communicator.
    pub(crate) size: u32,
}

impl<T: Fenced> Handle<T> {
    pub(crate) fn new(w: T) -> Self {
        let (rank, size) = (w.host().rank(), w.host().nranks());
        Self { win: RwLock::new(Some(Arc::new(Mutex::new(w)))), rank, size }
    }

    /// The window, unless it was freed.
    pub(crate) fn get(&self) -> PyResult<Shared<T>> {
        self.win
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .ok_or_else(|| errors::value("the window was freed"))
    }

    /// Whether it was freed.
    pub(crate) fn freed(&self) -> bool {
        self.win.read().unwrap_or_else(PoisonError::into_inner).is_none()
    }

    /// Takes the window out (freeing starts); `None` if it was freed.
    pub(crate) fn take(&self) -> Option<Shared<T>> {
        self.win.write().unwrap_or_else(PoisonError::into_inner).take()
    }

    /// Puts a window taken out back (a free that could not go on).
    pub(crate) fn put_back(&self, w: Shared<T>) {
        *self.win.write().unwrap_or_else(PoisonError::into_inner) = Some(w);
    }

    /// Runs `op` on the window without the GIL, its waits interruptible by Ctrl-C.
    pub(crate) fn run<R: Send>(&self, py: Python<'_>, op: impl FnOnce(&T) -> R + Send) -> PyResult<R> {
        wait::run(py, &*self.get()?, op)
    }

    fn wait_on(
        &self,
        py: Python<'_>,
        op: impl FnOnce(&Window) -> Result<(), kpccl_posix::Error> + Send,
    ) -> PyResult<()> {
        self.run(py, |w| op(w.host()))?.map_err(errors::host)
    }

    /// A rank argument, checked: an int from 0 to `size - 1`.
    pub(crate) fn peer(&self, v: &Bound<'_, PyAny>) -> PyResult<u32> {
        options::index(v, "rank", self.size, "this window").map_err(errors::value)
    }

    /// An optional rank argument: `None` is this rank.
    pub(crate) fn rank_or_mine(&self, v: Option<&Bound<'_, PyAny>>) -> PyResult<u32> {
        match v {
            Some(r) if !r.is_none() => self.peer(r),
            _ => Ok(self.rank),
        }
    }
}

impl<T: Fenced> Fences for Handle<T> {
    fn rank(&self) -> u32 {
        self.rank
    }

    fn size(&self) -> u32 {
        self.size
    }

    fn freed(&self) -> bool {
        Handle::freed(self)
    }

    fn peer_fence(&self, py: Python<'_>, peer: &Bound<'_, PyAny>) -> PyResult<()> {
        let p = self.peer(peer)?;
        self.wait_on(py, |w| w.peer_fence(p))
    }

    fn fence(&self, py: Python<'_>) -> PyResult<()> {
        self.wait_on(py, Window::fence)
    }

    fn signal(&self, py: Python<'_>, peer: &Bound<'_, PyAny>) -> PyResult<()> {
        let p = self.peer(peer)?;
        // Never waits, but another thread may hold the window in a wait.
        self.wait_on(py, |w| w.signal(p))
    }

    fn wait(&self, py: Python<'_>, peer: &Bound<'_, PyAny>) -> PyResult<()> {
        let p = self.peer(peer)?;
        self.wait_on(py, |w| w.wait(p))
    }

    fn try_wait(&self, _py: Python<'_>, peer: &Bound<'_, PyAny>) -> PyResult<bool> {
        let p = self.peer(peer)?;
        let w = self.get()?;
        // Never waits, not even for its turn: with another thread of this
        // rank in a wait on the window, it fails as the C call does.
        let t = match w.try_lock() {
            Ok(t) => t,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            Err(TryLockError::WouldBlock) => {
                return Err(errors::library(
                    "try_wait: the window is in use by another thread (in a wait); a test does not wait for its turn",
                ));
            }
        };
        t.host().try_wait(p).map_err(errors::host)
    }

    fn poisoned(&self, py: Python<'_>) -> PyResult<Option<String>> {
        self.run(py, |w| w.host().poisoned().map(|p| p.error().to_string()))
    }

    fn abandon_and_release(&self, py: Python<'_>) {
        if let Some(w) = self.take() {
            let _ = wait::run(py, &*w, |w| abandon(w.host()));
        }
    }

    fn free(&self, py: Python<'_>) -> PyResult<()> {
        match self.take() {
            Some(w) => T::free(self, w, py),
            None => Ok(()),
        }
    }
}
