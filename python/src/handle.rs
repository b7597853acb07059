//! What host and device windows share in Python: the window behind locks
//! (gone after `free()`; a rank's threads take turns on it, see
//! [`Guarded::turn`]), rank checks, and the fences and signals, which live in
//! the host window of either kind.

use std::ops::Deref;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock, TryLockError};

use kpccl_core::fence::{Poison, PoisonKind};
use kpccl_core::sync::{AtomicU32, Ordering, fence};
use kpccl_posix::{PoisonProbe, Window};
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
    fn free(h: &Handle<Self>, w: Shared<Self>, py: Python<'_>) -> PyResult<()> {
        let fenced = wait::run_in_turn(py, &w, Call::Waits, |w| match w.poisoned() {
            Some(p) => Err(kpccl_posix::Error::Fence(p.error())),
            None => w.fence(),
        });
        let Ok(fenced) = fenced else {
            h.put_back(w);
            return Err(Busy::error());
        };
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
pub(crate) type Shared<T> = Arc<Guarded<T>>;

/// Whether a call on a window may wait for its peers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Call {
    /// A fence, a wait, `free()`: returns when peers come.
    Waits,
    /// A signal, a test, a copy, a query: returns without waiting for anyone.
    Quick,
}

/// A window behind the lock through which a rank's threads take turns.
#[derive(Debug)]
pub(crate) struct Guarded<T> {
    /// The window's poison word, read without a turn (declared before
    /// `win`, so dropped before the window it borrows).
    poison: PoisonProbe<'static>,
    win: Mutex<T>,
    /// 1 while the thread holding the turn is in a call that may wait for peers.
    waiting: AtomicU32,
    /// Set by [`Guarded::abandon`] when another thread held the turn: that
    /// thread abandons the window (its sleeping waits look every few
    /// milliseconds, and it looks again as it gives the turn back).
    abandon_asked: AtomicU32,
}

/// The call in another thread that a call would have waited behind.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Busy;

impl Busy {
    /// As the exception the call raises.
    pub(crate) fn error() -> PyErr {
        errors::library(
            "the window is in use by another thread of this rank, in a fence or wait: a call does not \
             queue behind a wait, which may be waiting for that very call",
        )
    }
}

/// This thread's turn on a window.
#[derive(Debug)]
pub(crate) struct Turn<'a, T> {
    guarded: &'a Guarded<T>,
    win: MutexGuard<'a, T>,
}

impl<T> Deref for Turn<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.win
    }
}

impl<T> Drop for Turn<'_, T> {
    fn drop(&mut self) {
        // Relaxed: a hint to the threads asking for a turn; the lock, dropped
        // after this, orders the window's use.
        self.guarded.waiting.store(0, Ordering::Relaxed);
    }
}

impl<T: Fenced> Guarded<T> {
    fn new(w: T) -> Self {
        let probe = w.host().poison_probe();
        // SAFETY: the probe points into the window's mapping and at its rank
        // map (behind an `Arc`): neither moves when `w` moves into the mutex,
        // and both live as long as the window, which lives as long as `self`
        // (`into_inner` consumes `self`, probe included; the probe field is
        // dropped first). So the probe never outlives what it borrows.
        #[allow(unsafe_code)]
        let poison = unsafe { std::mem::transmute::<PoisonProbe<'_>, PoisonProbe<'static>>(probe) };
        Self { poison, win: Mutex::new(w), waiting: AtomicU32::new(0), abandon_asked: AtomicU32::new(0) }
    }

    /// Why the window was abandoned, if it was: at once, from any thread,
    /// without a turn. Sound while another thread holds the turn and waits:
    /// the poison word is an atomic in the shared mapping, which every rank
    /// (this one's threads included) writes only with atomic read-modify-
    /// writes, and the load touches none of the window's per-thread state
    /// (what makes it `!Sync`).
    pub(crate) fn poisoned(&self) -> Option<Poison> {
        self.poison.get()
    }
}

impl<T> Guarded<T> {
    /// Whether a thread asked for the window to be abandoned.
    pub(crate) fn abandon_asked(&self) -> bool {
        // SeqCst: see `abandon`.
        self.abandon_asked.load(Ordering::SeqCst) != 0
    }

    /// This thread's turn for `call`. A rank's calls on a window never run
    /// on two threads at once: a turn waits while another thread's quick
    /// call ends (microseconds), but fails at once with [`Busy`] while
    /// another thread is in a call that waits, as the C API does: that wait
    /// may be for the very call that would queue behind it (a signal from
    /// this rank that the peer needs first), a deadlock no liveness check
    /// would end.
    pub(crate) fn turn(&self, call: Call) -> Result<Turn<'_, T>, Busy> {
        loop {
            let win = match self.win.try_lock() {
                Ok(win) => win,
                Err(TryLockError::Poisoned(e)) => e.into_inner(),
                Err(TryLockError::WouldBlock) => {
                    // Relaxed: a hint; a stale 0 only means one more try.
                    if self.waiting.load(Ordering::Relaxed) != 0 {
                        return Err(Busy);
                    }
                    std::thread::yield_now();
                    continue;
                }
            };
            if call == Call::Waits {
                // Relaxed: read only as a hint (above), under no ordering.
                self.waiting.store(1, Ordering::Relaxed);
            }
            return Ok(Turn { guarded: self, win });
        }
    }

    /// The window, once nobody else holds it.
    pub(crate) fn into_inner(self) -> T {
        self.win.into_inner().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<T: Fenced> Guarded<T> {
    /// Abandons the window ([`abandon`]): now if no other thread holds the
    /// turn, else through the thread that does, which must not wait for it
    /// (its wait may be the one to end).
    pub(crate) fn abandon(&self) {
        // SeqCst, with the fence below and the one `wait::run_in_turn` runs
        // after giving the turn back before it calls `abandon_if_asked`: of
        // this thread finding the turn taken and the holder giving it back,
        // one sees the other (the turn free, or the request).
        self.abandon_asked.store(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        self.abandon_if_asked();
    }

    /// Abandons the window if a thread asked to and the turn is free.
    pub(crate) fn abandon_if_asked(&self) {
        if self.abandon_asked() {
            match self.win.try_lock() {
                Ok(w) => abandon(w.host()),
                Err(TryLockError::Poisoned(e)) => abandon(e.into_inner().host()),
                Err(TryLockError::WouldBlock) => {}
            }
        }
    }
}

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
        Self { win: RwLock::new(Some(Arc::new(Guarded::new(w)))), rank, size }
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

    /// Runs `op` on the window without the GIL, in this thread's turn
    /// ([`Guarded::turn`]), its waits interruptible by Ctrl-C.
    pub(crate) fn run<R: Send>(&self, py: Python<'_>, call: Call, op: impl FnOnce(&T) -> R + Send) -> PyResult<R> {
        wait::run(py, &*self.get()?, call, op)
    }

    /// `op` on the host window, its error raised.
    fn host_call<R: Send>(
        &self,
        py: Python<'_>,
        call: Call,
        op: impl FnOnce(&Window) -> Result<R, kpccl_posix::Error> + Send,
    ) -> PyResult<R> {
        self.run(py, call, |w| op(w.host()))?.map_err(errors::host)
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
        self.host_call(py, Call::Waits, |w| w.peer_fence(p))
    }

    fn fence(&self, py: Python<'_>) -> PyResult<()> {
        self.host_call(py, Call::Waits, Window::fence)
    }

    fn signal(&self, py: Python<'_>, peer: &Bound<'_, PyAny>) -> PyResult<()> {
        let p = self.peer(peer)?;
        self.host_call(py, Call::Quick, |w| w.signal(p))
    }

    fn wait(&self, py: Python<'_>, peer: &Bound<'_, PyAny>) -> PyResult<()> {
        let p = self.peer(peer)?;
        self.host_call(py, Call::Waits, |w| w.wait(p))
    }

    fn try_wait(&self, py: Python<'_>, peer: &Bound<'_, PyAny>) -> PyResult<bool> {
        let p = self.peer(peer)?;
        self.host_call(py, Call::Quick, |w| w.try_wait(p))
    }

    fn poisoned(&self, _py: Python<'_>) -> PyResult<Option<String>> {
        Ok(self.get()?.poisoned().map(|p| p.error().to_string()))
    }

    fn abandon_and_release(&self, _py: Python<'_>) {
        // With another thread of this rank in a call on it, that thread
        // abandons it (a wait within milliseconds, then failing).
        if let Some(w) = self.take() {
            w.abandon();
        }
    }

    fn free(&self, py: Python<'_>) -> PyResult<()> {
        match self.take() {
            Some(w) => T::free(self, w, py),
            None => Ok(()),
        }
    }
}
