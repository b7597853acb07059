//! What host and device windows share in Python: the window behind locks
//! (gone after `free()`; a rank's threads take turns on it, see
//! [`Guarded::turn`]), rank checks, and the fences and signals, which live in
//! the host window of either kind.

use std::ops::Deref;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, RwLock, Weak};
use std::time::Duration;

use kpccl_core::fence::Poison;
use kpccl_core::sync::{AtomicU32, Ordering};
use kpccl_posix::{PoisonProbe, Window};
use pyo3::prelude::*;

use crate::errors;
use crate::options;
use crate::wait;

/// A window of either kind: its fence slots are a host window; its fences
/// are the host window's, or its own where they do more (a device window
/// waits for its stream first).
pub(crate) trait Fenced: Send + Sized + 'static {
    /// What its fences and signals fail with.
    type Error: Send;
    /// The host window holding the fence slots.
    fn host(&self) -> &Window;
    /// The pairwise fence with `peer`.
    fn peer_fence(&self, peer: u32) -> Result<(), Self::Error>;
    /// The fence with every rank of the node.
    fn fence(&self) -> Result<(), Self::Error>;
    /// Signals `peer` once.
    fn signal(&self, peer: u32) -> Result<(), Self::Error>;
    /// `e` as its Python exception.
    fn raise(e: Self::Error) -> PyErr;
    /// Frees the window `w` taken out of its handle (collective): its
    /// outcome, or `Err` with `w` back and why, if the free was refused
    /// before it began (another thread's wait holds the turn).
    fn free(w: Shared<Self>, py: Python<'_>) -> Result<PyResult<()>, Refused<Self>>;
}

impl Fenced for Window {
    type Error = kpccl_posix::Error;

    fn host(&self) -> &Window {
        self
    }

    fn peer_fence(&self, peer: u32) -> Result<(), Self::Error> {
        Window::peer_fence(self, peer)
    }

    fn fence(&self) -> Result<(), Self::Error> {
        Window::fence(self)
    }

    fn signal(&self, peer: u32) -> Result<(), Self::Error> {
        Window::signal(self, peer)
    }

    fn raise(e: Self::Error) -> PyErr {
        errors::host(e)
    }

    /// `Window::free`, except that views may still hold the mapping: the
    /// teardown fence (`free_in_place`: failing at once on an abandoned
    /// window; peers' pairwise waits on this rank fail rather than hang),
    /// after which this rank counts as gone for its peers; the mapping goes
    /// with the last view.
    fn free(w: Shared<Self>, py: Python<'_>) -> Result<PyResult<()>, Refused<Self>> {
        let Ok(freed) = wait::run_in_turn(py, &w, Call::Waits, Window::free_in_place) else {
            return Err((w, Busy::error()));
        };
        release(py, w);
        Ok(freed.and_then(|r| r.map_err(errors::host)))
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

/// A window shared by a Python object and the views of it.
pub(crate) type Shared<T> = Arc<Guarded<T>>;

/// A free refused before it began: the window, to put back, and why.
pub(crate) type Refused<T> = (Shared<T>, PyErr);

/// Lets go of `w`, without the GIL if it is the last reference: dropping a
/// device window waits for its streams and device, a host window unmaps.
/// Another reference (a view, another thread's call) lets go of it later,
/// the same way.
pub(crate) fn release<T: Send>(py: Python<'_>, w: Shared<T>) {
    if Arc::strong_count(&w) == 1 {
        py.detach(move || drop(w));
    } else {
        drop(w);
    }
}

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
    /// Who holds the turn.
    gate: Gate,
    /// The window, locked by the thread holding the turn (never contended:
    /// the gate lets one thread at a time in; a lock for `&T` across threads).
    win: Mutex<T>,
    /// Set by [`Guarded::abandon`] when another thread held the turn: that
    /// thread abandons the window (its sleeping waits look every few
    /// milliseconds, and it looks again as it gives the turn back). Shared
    /// with a free that consumes the window, which looks at it the same way.
    abandon_asked: AbandonAsked,
}

/// Whether a thread asked for a window to be abandoned: shared by the
/// window and the free in progress that may have consumed it.
#[derive(Clone, Debug, Default)]
pub(crate) struct AbandonAsked(Arc<AtomicU32>);

impl AbandonAsked {
    /// Whether it was asked.
    pub(crate) fn get(&self) -> bool {
        // Relaxed: a hint between sleeps, seen a sleep later at worst; the
        // last look of a call in a turn, after the turn is given back, is
        // ordered by the gate's lock (see `Guarded::abandon`); a consuming
        // free past its last wait has nothing left to abandon.
        self.0.load(Ordering::Relaxed) != 0
    }

    fn set(&self) {
        // Relaxed: nothing else is published with it; see `get`.
        self.0.store(1, Ordering::Relaxed);
    }
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

/// Who holds a window's turn: the call it is in, if any. Threads that would
/// queue behind a quick call sleep until the turn is given back.
#[derive(Debug, Default)]
struct Gate {
    state: Mutex<GateState>,
    /// Notified when the turn is given back to sleepers.
    given_back: Condvar,
}

#[derive(Debug, Default)]
struct GateState {
    holder: Option<Call>,
    /// Threads asleep in [`Gate::enter`]: giving the turn back wakes them
    /// (a system call) only if there are any.
    sleepers: u32,
}

impl Gate {
    fn state(&self) -> MutexGuard<'_, GateState> {
        // Nothing panics while holding it: the state is always whole.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes the turn for `call`: sleeping while another thread's quick call
    /// holds it if `queue`, failing at once with [`Busy`] otherwise, and
    /// while a call that waits holds it.
    fn enter(&self, call: Call, queue: bool) -> Result<(), Busy> {
        let mut state = self.state();
        loop {
            match state.holder {
                None => {
                    state.holder = Some(call);
                    return Ok(());
                }
                Some(Call::Quick) if queue => {
                    state.sleepers += 1;
                    state = self.given_back.wait(state).unwrap_or_else(PoisonError::into_inner);
                    state.sleepers -= 1;
                }
                Some(_) => return Err(Busy),
            }
        }
    }

    /// Gives the turn back. Every sleeper wakes: the one that takes the turn
    /// may be in a call that waits, and the others must then fail at once.
    fn leave(&self) {
        let mut state = self.state();
        state.holder = None;
        if state.sleepers > 0 {
            self.given_back.notify_all();
        }
    }
}

/// Gives the turn back when dropped (a panic in the call included).
#[derive(Debug)]
struct Entered<'a>(&'a Gate);

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        self.0.leave();
    }
}

/// This thread's turn on a window.
#[derive(Debug)]
pub(crate) struct Turn<'a, T> {
    /// Unlocked first, then the turn given back (fields drop in order).
    win: MutexGuard<'a, T>,
    _entered: Entered<'a>,
}

impl<T> Deref for Turn<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.win
    }
}

/// How often a free that consumes the window looks whether the other
/// threads' references to it are gone (their calls are over by then).
const OTHERS_GONE_EVERY: Duration = Duration::from_micros(100);

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
        Self { poison, gate: Gate::default(), win: Mutex::new(w), abandon_asked: AbandonAsked::default() }
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
        self.abandon_asked.get()
    }

    /// The request to abandon it, for a free that consumes it to look at.
    pub(crate) fn abandon_request(&self) -> AbandonAsked {
        self.abandon_asked.clone()
    }

    /// This thread's turn for `call`. A rank's calls on a window never run
    /// on two threads at once: a turn waits (asleep) while another thread's
    /// quick call ends, but fails at once with [`Busy`] while another thread
    /// is in a call that waits, as the C API does: that wait may be for the
    /// very call that would queue behind it (a signal from this rank that
    /// the peer needs first), a deadlock no liveness check would end.
    pub(crate) fn turn(&self, call: Call) -> Result<Turn<'_, T>, Busy> {
        self.gate.enter(call, true)?;
        Ok(self.entered())
    }

    /// The turn if nobody holds it; never waits.
    fn try_turn(&self) -> Option<Turn<'_, T>> {
        self.gate.enter(Call::Quick, false).ok().map(|()| self.entered())
    }

    /// The turn, once the gate let this thread in.
    fn entered(&self) -> Turn<'_, T> {
        let entered = Entered(&self.gate);
        // A call that panicked left the window as whole as a failed one.
        Turn { win: self.win.lock().unwrap_or_else(PoisonError::into_inner), _entered: entered }
    }

    /// The window, once nobody else holds it.
    pub(crate) fn into_inner(self) -> T {
        self.win.into_inner().unwrap_or_else(PoisonError::into_inner)
    }

    /// The window out of `w` (taken out of its handle) for a free that
    /// consumes it, or `w` back with [`Busy`] while another thread of this
    /// rank is in a call that waits: in this thread's turn for such a call
    /// (so that the others' calls fail meanwhile), once the other threads'
    /// references are gone. They came before `w` left its handle, and their
    /// calls are over or refused: they only have to return (polled).
    pub(crate) fn into_sole(mut w: Shared<T>) -> Result<T, (Shared<T>, Busy)> {
        loop {
            if let Err(busy) = Self::outlive_others(&w) {
                return Err((w, busy));
            }
            match Arc::try_unwrap(w) {
                Ok(g) => return Ok(g.into_inner()),
                // Nobody can clone it any more (the handle let go of it): not
                // expected, but look again rather than fail.
                Err(back) => w = back,
            }
        }
    }

    /// Holds the turn for a call that waits until `w` is the only reference.
    fn outlive_others(w: &Shared<T>) -> Result<(), Busy> {
        let _turn = w.turn(Call::Waits)?;
        while Arc::strong_count(w) > 1 {
            std::thread::sleep(OTHERS_GONE_EVERY);
        }
        Ok(())
    }
}

impl<T: Fenced> Guarded<T> {
    /// Abandons the window ([`abandon`]): now if no other thread holds the
    /// turn, else through the thread that does, which must not wait for it
    /// (its wait may be the one to end).
    pub(crate) fn abandon(&self) {
        // The gate's lock orders the store. It comes before this thread's
        // look at the gate (`abandon_if_asked`), the holder's last look at
        // the flag after it gave the turn back: of the two critical sections
        // on the gate, the first happens before the second, so either this
        // thread finds the turn free, or the holder the request.
        self.abandon_asked.set();
        self.abandon_if_asked();
    }

    /// Abandons the window if a thread asked to and the turn is free.
    pub(crate) fn abandon_if_asked(&self) {
        if self.abandon_asked()
            && let Some(t) = self.try_turn()
        {
            t.host().abandon();
        }
    }
}

/// Where a window's Python object is in the window's life.
#[derive(Debug)]
enum Slot<T> {
    /// In use.
    Live(Shared<T>),
    /// A thread's `free()` took the window out and has not returned: the
    /// others' calls are refused (the free may still be refused and put it
    /// back, or fail), not told that it was freed. Weak: a device window's
    /// free waits for the last other reference to go, then consumes it (and
    /// looks at `asked` between sleeps).
    Freeing { win: Weak<Guarded<T>>, asked: AbandonAsked },
    /// Freed, or released by an abandon.
    Gone,
}

/// What a call finding the window in another thread's `free()` raises.
fn being_freed() -> PyErr {
    errors::library(
        "the window is being freed by another thread of this rank: its free() has not returned yet (and \
         may still fail or be refused); a window is freed once, by one thread",
    )
}

/// Marks a handle's window gone if the free in progress unwinds.
struct EndsFree<'a, T: Fenced>(&'a Handle<T>);

impl<T: Fenced> Drop for EndsFree<'_, T> {
    fn drop(&mut self) {
        *self.0.slot_mut() = Slot::Gone;
    }
}

/// A window as a Python object holds it.
#[derive(Debug)]
pub(crate) struct Handle<T: Fenced> {
    win: RwLock<Slot<T>>,
    /// This rank.
    pub(crate) rank: u32,
    /// Ranks in the communicator.
    pub(crate) size: u32,
    /// The fork generation the window was made in ([`kpccl_posix::fork_generation`]).
    generation: u32,
}

impl<T: Fenced> Drop for Handle<T> {
    /// The Python object is gone: the window goes without the GIL
    /// ([`release`]), unless Python is shutting down (then here and now).
    /// In a forked child it is left alone: its memory is not mapped there,
    /// and a device window's runtime is the parent's.
    fn drop(&mut self) {
        // Never `Freeing`: a free in progress holds the Python object.
        let slot = std::mem::replace(self.win.get_mut().unwrap_or_else(PoisonError::into_inner), Slot::Gone);
        if let Slot::Live(w) = slot {
            if self.forked_off() {
                std::mem::forget(w);
            } else {
                leave_under_views(&w);
                Python::try_attach(|py| release(py, w));
            }
        }
    }
}

/// Leaves `w`, whose Python object is gone, if views still keep it (it is
/// dropped with the last of them): a peer's wait on this rank then fails at
/// once, told that it left, as when no view is left, rather than waits for
/// as long as a view lives. Nobody else holds its turn: a call on it would
/// hold the Python object.
fn leave_under_views<T: Fenced>(w: &Shared<T>) {
    if Arc::strong_count(w) > 1
        && let Some(t) = w.try_turn()
    {
        t.host().leave_in_place();
    }
}

impl<T: Fenced> Handle<T> {
    pub(crate) fn new(w: T) -> Self {
        let (rank, size) = (w.host().rank(), w.host().nranks());
        let generation = kpccl_posix::fork_generation();
        Self { win: RwLock::new(Slot::Live(Arc::new(Guarded::new(w)))), rank, size, generation }
    }

    /// Whether this process is a child forked after the window was made.
    fn forked_off(&self) -> bool {
        kpccl_posix::fork_generation() != self.generation
    }

    /// Refuses every call in a forked child (the window's memory is not
    /// mapped there: a fence would crash the child).
    fn in_its_process(&self) -> PyResult<()> {
        if self.forked_off() {
            return Err(errors::library(
                "the window was made before this process was forked from it: a forked child cannot use it (its \
                 memory is not mapped here)",
            ));
        }
        Ok(())
    }

    fn slot(&self) -> std::sync::RwLockReadGuard<'_, Slot<T>> {
        self.win.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn slot_mut(&self) -> std::sync::RwLockWriteGuard<'_, Slot<T>> {
        self.win.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// The window, unless it was freed or another thread is freeing it.
    pub(crate) fn get(&self) -> PyResult<Shared<T>> {
        self.in_its_process()?;
        match &*self.slot() {
            Slot::Live(w) => Ok(w.clone()),
            Slot::Freeing { .. } => Err(being_freed()),
            Slot::Gone => Err(errors::value("the window was freed")),
        }
    }

    /// The window for a query that answers during another thread's free
    /// too, while the window is still there.
    fn get_even_freeing(&self) -> PyResult<Shared<T>> {
        self.in_its_process()?;
        let freeing = match &*self.slot() {
            Slot::Freeing { win, .. } => win.upgrade(),
            _ => None,
        };
        freeing.map_or_else(|| self.get(), Ok)
    }

    /// Whether it was freed (a free in progress has not freed it yet).
    pub(crate) fn freed(&self) -> bool {
        matches!(*self.slot(), Slot::Gone)
    }

    /// Takes the window out for this thread's free: `None` if it was freed,
    /// refused while another thread frees it (that free may still fail, or
    /// be refused and put the window back: this one cannot say it freed it).
    fn start_free(&self) -> PyResult<Option<Shared<T>>> {
        let mut slot = self.slot_mut();
        match std::mem::replace(&mut *slot, Slot::Gone) {
            Slot::Live(w) => {
                *slot = Slot::Freeing { win: Arc::downgrade(&w), asked: w.abandon_request() };
                Ok(Some(w))
            }
            freeing @ Slot::Freeing { .. } => {
                *slot = freeing;
                Err(being_freed())
            }
            Slot::Gone => Ok(None),
        }
    }

    /// Ends this thread's free: the window is gone, or put back (`Some`: a
    /// free that could not begin), unless another thread abandoned it
    /// meanwhile: then it is released, gone as an abandoned window is.
    fn end_free(&self, py: Python<'_>, back: Option<Shared<T>>) {
        let back = match back {
            Some(w) if w.abandon_asked() => {
                release(py, w);
                None
            }
            back => back,
        };
        *self.slot_mut() = back.map_or(Slot::Gone, Slot::Live);
    }

    /// Runs `op` on the window without the GIL, in this thread's turn
    /// ([`Guarded::turn`]), its waits interruptible by Ctrl-C.
    pub(crate) fn run<R: Send>(&self, py: Python<'_>, call: Call, op: impl FnOnce(&T) -> R + Send) -> PyResult<R> {
        let w = self.get()?;
        let out = wait::run(py, &w, call, op);
        // The last reference if another thread freed or abandoned it meanwhile.
        release(py, w);
        out
    }

    /// `op` on the window, its error raised as the window's kind raises it.
    fn fenced_call<R: Send>(
        &self,
        py: Python<'_>,
        call: Call,
        op: impl FnOnce(&T) -> Result<R, T::Error> + Send,
    ) -> PyResult<R> {
        self.run(py, call, op)?.map_err(T::raise)
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
        self.fenced_call(py, Call::Waits, |w| w.peer_fence(p))
    }

    fn fence(&self, py: Python<'_>) -> PyResult<()> {
        self.fenced_call(py, Call::Waits, T::fence)
    }

    fn signal(&self, py: Python<'_>, peer: &Bound<'_, PyAny>) -> PyResult<()> {
        let p = self.peer(peer)?;
        self.fenced_call(py, Call::Quick, |w| w.signal(p))
    }

    fn wait(&self, py: Python<'_>, peer: &Bound<'_, PyAny>) -> PyResult<()> {
        let p = self.peer(peer)?;
        self.host_call(py, Call::Waits, |w| w.wait(p))
    }

    fn try_wait(&self, py: Python<'_>, peer: &Bound<'_, PyAny>) -> PyResult<bool> {
        let p = self.peer(peer)?;
        self.host_call(py, Call::Quick, |w| w.try_wait(p))
    }

    fn poisoned(&self, py: Python<'_>) -> PyResult<Option<String>> {
        let w = self.get_even_freeing()?;
        let poisoned = w.poisoned().map(|p| p.error().to_string());
        release(py, w);
        Ok(poisoned)
    }

    fn abandon_and_release(&self, py: Python<'_>) {
        if self.forked_off() {
            // Nothing of it to touch here: dropping the handle forgets it.
            return;
        }
        // With another thread of this rank in a call on it, that thread
        // abandons it (a wait within milliseconds, then failing), and lets
        // go of it last. A thread in its free abandons it the same way (the
        // free fails, and releases it), also once a device window's free
        // has consumed it.
        let w = {
            let mut slot = self.slot_mut();
            match std::mem::replace(&mut *slot, Slot::Gone) {
                Slot::Live(w) => Some(w),
                Slot::Freeing { win, asked } => {
                    let w = win.upgrade();
                    if w.is_none() {
                        asked.set();
                    }
                    *slot = Slot::Freeing { win, asked };
                    w
                }
                Slot::Gone => None,
            }
        };
        if let Some(w) = w {
            w.abandon();
            release(py, w);
        }
    }

    fn free(&self, py: Python<'_>) -> PyResult<()> {
        self.in_its_process()?;
        let Some(w) = self.start_free()? else { return Ok(()) };
        // A panic in the free leaves the window gone, not for ever being freed.
        let freeing = EndsFree(self);
        let outcome = T::free(w, py);
        std::mem::forget(freeing);
        match outcome {
            Ok(freed) => {
                self.end_free(py, None);
                freed
            }
            Err((w, refused)) => {
                self.end_free(py, Some(w));
                Err(refused)
            }
        }
    }
}
