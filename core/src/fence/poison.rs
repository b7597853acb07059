//! The window's poison word: once any rank gives up on the window (a dead
//! peer, a timeout, a failed creation), every rank's waits fail fast with the
//! same reason instead of waiting for a partner that will never come.

use super::SyncArea;
use crate::error::FenceError;
use crate::sync::Ordering::{AcqRel, Acquire, Release};

/// Why the window was poisoned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoisonKind {
    /// A rank's process died.
    Dead,
    /// A rank stopped waiting (its deadline passed, or its wait failed).
    Aborted,
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
            PoisonKind::Aborted | PoisonKind::Flush => FenceError::Aborted { rank: self.rank },
        }
    }
}

const RANK_MASK: u32 = 0x00ff_ffff;

fn encode(p: Poison) -> u32 {
    let kind = match p.kind {
        PoisonKind::Dead => 1,
        PoisonKind::Aborted => 2,
        PoisonKind::Flush => 3,
    };
    kind << 24 | (p.rank & RANK_MASK)
}

fn decode(word: u32) -> Option<Poison> {
    let kind = match word >> 24 {
        0 => return None,
        1 => PoisonKind::Dead,
        2 => PoisonKind::Aborted,
        _ => PoisonKind::Flush,
    };
    Some(Poison { kind, rank: word & RANK_MASK })
}

/// The window's poison, if any.
pub fn poison_state<A: SyncArea + ?Sized>(area: &A) -> Option<Poison> {
    // Acquire: pairs with the AcqRel swap in `poison`; the reason is all it carries.
    decode(area.poison_word().load(Acquire))
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
