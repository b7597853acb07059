//! The window's poison word: once any rank gives up on the window (a dead
//! peer, a timeout, a failed creation), every rank's waits fail fast with the
//! same reason instead of waiting for a partner that will never come.

use super::SyncArea;
use crate::error::FenceError;
use crate::sync::AtomicU32;
use crate::sync::Ordering::{AcqRel, Acquire, Release};

/// Why the window was poisoned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoisonKind {
    /// A rank's process died.
    Dead,
    /// A rank left the window (freed or dropped it) while `waiter` waited for it.
    Left {
        /// The rank whose wait it left unanswered.
        waiter: u32,
    },
    /// A rank gave up on the window: a wait of its failed or was interrupted
    /// (a binding's Ctrl-C), or its program left the window on an error.
    Aborted,
    /// A rank's deadline passed while it waited for `waited_for`, which
    /// is the rank to look at (stopped, or stuck behind another).
    TimedOut {
        /// The rank it waited for.
        waited_for: u32,
    },
    /// A rank's last out-of-band call during creation failed; every rank must
    /// make one more out-of-band call to match its flush.
    Flush,
}

/// The poison word, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Poison {
    /// Why.
    pub kind: PoisonKind,
    /// The rank it is about.
    pub rank: u32,
}

impl Poison {
    /// The error a wait on a window poisoned this way returns.
    #[must_use]
    pub fn error(&self) -> FenceError {
        match self.kind {
            PoisonKind::Dead => FenceError::PeerDead { rank: self.rank },
            PoisonKind::Left { waiter } => FenceError::PeerLeft { rank: self.rank, waiter },
            PoisonKind::TimedOut { waited_for } => FenceError::GaveUp { rank: self.rank, waited_for },
            PoisonKind::Aborted | PoisonKind::Flush => FenceError::Aborted { rank: self.rank },
        }
    }
}

/// The word: the kind in the top 8 bits, then two 12-bit ranks (the one it
/// is about, and for a timeout the one it waited for).
const RANK_BITS: u32 = 12;
const RANK_MASK: u32 = (1 << RANK_BITS) - 1;
/// The most ranks the poison word can name (the layout's rank limit stays within it).
pub(crate) const NAMEABLE_RANKS: u32 = RANK_MASK + 1;

fn encode(p: Poison) -> u32 {
    let (kind, other) = match p.kind {
        PoisonKind::Dead => (1, 0),
        PoisonKind::Aborted => (2, 0),
        PoisonKind::Flush => (3, 0),
        PoisonKind::TimedOut { waited_for } => (4, waited_for & RANK_MASK),
        PoisonKind::Left { waiter } => (5, waiter & RANK_MASK),
    };
    kind << 24 | other << RANK_BITS | (p.rank & RANK_MASK)
}

fn decode(word: u32) -> Option<Poison> {
    let other = (word >> RANK_BITS) & RANK_MASK;
    let kind = match word >> 24 {
        0 => return None,
        1 => PoisonKind::Dead,
        2 => PoisonKind::Aborted,
        4 => PoisonKind::TimedOut { waited_for: other },
        5 => PoisonKind::Left { waiter: other },
        _ => PoisonKind::Flush,
    };
    Some(Poison { kind, rank: word & RANK_MASK })
}

/// The window's poison, if any.
pub fn poison_state<A: SyncArea + ?Sized>(area: &A) -> Option<Poison> {
    PoisonWord(area.poison_word()).get()
}

/// A window's poison word, to read only. Any thread may read it while
/// another uses the window: the word is atomic, written only by atomic
/// read-modify-writes (of any rank, in any process), and reading it touches
/// none of the window's per-thread state. See [`crate::Window::poison_word`].
#[derive(Clone, Copy, Debug)]
pub struct PoisonWord<'w>(pub(crate) &'w AtomicU32);

impl PoisonWord<'_> {
    /// The window's poison, if any.
    #[must_use]
    #[inline]
    pub fn get(&self) -> Option<Poison> {
        // Acquire: pairs with the AcqRel swap in `poison`; the reason is all it carries.
        decode(self.0.load(Acquire))
    }
}

/// Poisons the window (the first reason wins) and wakes every rank so that
/// sleepers see it. Returns the poison now in force.
pub fn poison<A: SyncArea + ?Sized, E: super::WaitEnv + ?Sized>(area: &A, env: &E, p: Poison) -> Poison {
    // AcqRel on success / Acquire on failure: the word only carries the reason,
    // and a loser must read the winner's reason.
    let now = match area.poison_word().compare_exchange(0, encode(p), AcqRel, Acquire) {
        Ok(_) => p,
        Err(old) => decode(old).unwrap_or(p),
    };
    for r in 0..area.nranks() {
        // Release: a sleeper whose Acquire doorbell read sees this bump also sees the poison.
        area.doorbell(r).fetch_add(1, Release);
        env.wake(area.doorbell(r));
    }
    now
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_poison_survives_the_word() {
        let last = NAMEABLE_RANKS - 1;
        for kind in [
            PoisonKind::Dead,
            PoisonKind::Left { waiter: 0 },
            PoisonKind::Left { waiter: last },
            PoisonKind::Aborted,
            PoisonKind::Flush,
            PoisonKind::TimedOut { waited_for: 0 },
            PoisonKind::TimedOut { waited_for: last },
        ] {
            for rank in [0, 1, last] {
                let p = Poison { kind, rank };
                assert_eq!(decode(encode(p)), Some(p), "{p:?}");
            }
        }
        assert_eq!(decode(0), None, "0 is no poison");
    }
}
