//! The window's poison, read from any thread.

use kpccl_core::fence::{Poison, PoisonKind, PoisonWord};

use crate::comm::Nodes;

/// What [`Window::poison_probe`](super::Window::poison_probe) gives: the
/// window's poison word, which any thread may read while another uses the
/// window (a binding's "is it abandoned?" that answers during a wait). It
/// borrows the window's mapping and rank map, neither of which moves when
/// the window does.
#[derive(Clone, Copy, Debug)]
pub struct PoisonProbe<'w> {
    pub(super) word: PoisonWord<'w>,
    pub(super) nodes: &'w Nodes,
}

impl PoisonProbe<'_> {
    /// Why the window was abandoned (a dead peer, a timeout), if it was; the
    /// ranks named are the communicator's.
    #[must_use]
    pub fn get(&self) -> Option<Poison> {
        let g = |r| self.nodes.global(r);
        self.word.get().map(|p| {
            let kind = match p.kind {
                PoisonKind::TimedOut { waited_for } => PoisonKind::TimedOut { waited_for: g(waited_for) },
                PoisonKind::Left { waiter } => PoisonKind::Left { waiter: g(waiter) },
                kind @ (PoisonKind::Dead | PoisonKind::Aborted | PoisonKind::Flush) => kind,
            };
            Poison { kind, rank: g(p.rank) }
        })
    }
}
