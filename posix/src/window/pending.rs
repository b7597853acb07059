//! Fences started without blocking, for event loops and async executors.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use kpccl_core::FenceError;

use super::Window;
use crate::Error;
use crate::comm::Nodes;
use crate::platform::PosixPlatform;

/// A fence started by [`Window::start_peer_fence`], [`Window::start_wait`]
/// or [`Window::start_fence`]: its Release stores and wake-ups are done;
/// [`PendingFence::poll`] it (or `.await` it) until it is ready.
///
/// A poll never blocks: it tests the slot the blocking form would wait on
/// and checks what a sleeping waiter checks (the window's poison, the
/// timeout, the awaited rank's liveness every 50 ms), so it ends with the
/// same errors. It borrows the window exclusively until it is dropped, and
/// may move to another thread meanwhile (as the window may), so a task of a
/// multi-threaded executor can await it.
/// Dropping it unfinished abandons it: a pairwise fence or a wait harmlessly
/// (the peer's side still completes; a wait consumes nothing), a window
/// fence by poisoning the window if that would break it (ranks left
/// waiting for this one, or this rank counted twice at the flat barrier).
///
/// As a [`Future`] it asks to be polled again at once while pending (there
/// is no wake-up source to register with), so an executor keeps it on its
/// run queue: it suits executors that interleave many tasks, not ones that
/// park the thread until a task is woken.
#[must_use = "a started fence does nothing until it is polled to completion"]
#[derive(Debug)]
pub struct PendingFence<'w> {
    inner: kpccl_core::Pending<'w, PosixPlatform>,
    nodes: &'w Nodes,
}

impl<'w> PendingFence<'w> {
    /// The fence the core started (or its error, with the communicator's ranks).
    pub(super) fn started(
        nodes: &'w Nodes,
        inner: Result<kpccl_core::Pending<'w, PosixPlatform>, FenceError>,
    ) -> Result<Self, Error> {
        match inner {
            Ok(inner) => Ok(Self { inner, nodes }),
            Err(e) => Err(Window::global_with(nodes, e)),
        }
    }

    /// Takes every step that is ready: `Ready(Ok(()))` once the fence is
    /// complete, `Ready(Err(_))` when it failed, `Pending` otherwise.
    pub fn poll(&mut self) -> Poll<Result<(), Error>> {
        self.inner.poll().map_err(|e| Window::global_with(self.nodes, e))
    }

    /// Whether the fence is complete.
    #[must_use]
    pub fn is_done(&self) -> bool {
        self.inner.is_done()
    }
}

// Sent to another thread with the window's only access (see
// `kpccl_core::Pending`): awaited in a task of a multi-threaded executor.
const _: () = {
    const fn send<T: Send>() {}
    send::<PendingFence<'static>>();
};

impl Future for PendingFence<'_> {
    type Output = Result<(), Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let result = PendingFence::poll(self.get_mut());
        if result.is_pending() {
            cx.waker().wake_by_ref();
        }
        result
    }
}
