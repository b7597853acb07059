//! Exclusive use of an object that one thread, its *owner*, uses almost
//! always (a C window handle: the thread that made it fences through it).
//!
//! Any thread can take an object with one compare-and-swap on a lock word
//! (the caller's). On x86 that is a locked instruction, which drains the
//! store buffer on every call; in a two-rank fence exchange it costs about
//! 10–15 ns of a 80 ns round trip. The owner skips it: it enters with plain
//! stores ([`Bias::try_enter`]), and a thread that takes the lock revokes the
//! bias first ([`Bias::revoke`]), paying a process-wide barrier
//! (`membarrier`) once, after which the owner takes the lock like everyone
//! (the bias is given once in the life of the memory: see [`Bias::owned_by`]).
//!
//! This is an asymmetric Dekker handshake, as in biased locking:
//!
//! ```text
//! owner:  inside = 1; light fence; read owner   (still me? enter)
//! taker:  owner = 0;  heavy fence; read inside  (1? the owner is in: refuse)
//! ```
//!
//! The heavy fence runs a full barrier on every thread of the process, so
//! the owner's compiler-only fence acts as a full one whenever it matters:
//! one of the two reads sees the other side's write, never neither. loom has
//! no heavy fence; its models (`tests/loom_bias.rs`) give both sides a
//! sequentially consistent fence, which is what the pair guarantees.

use crate::sync::Ordering::{Acquire, Relaxed, Release};
use crate::sync::{AtomicU32, AtomicU64, asymmetric_light_fence};

/// The owner of an object and whether it is inside, for [`Bias::try_enter`].
#[derive(Debug, Default)]
pub struct Bias {
    /// The owner's token (`0`: no owner): nonzero and unique among the
    /// process's live threads (a thread pointer does).
    owner: AtomicU64,
    /// `1` while the owner is inside; written by the owner only.
    inside: AtomicU32,
}

impl Bias {
    /// No owner: every user takes the lock.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Owned by thread `me` (nonzero) until revoked. Give a bias only where
    /// the heavy fence that revokes it works.
    ///
    /// Memory is owned once in its life: a revoked bias is never given
    /// again, to this thread or another. That is what keeps `inside` the
    /// owner's own word: a thread that took the bias later could find the
    /// former owner's speculative write there (`try_enter` writes before it
    /// knows), and a revoker could then read a 0 that hides it (loom finds
    /// that interleaving).
    #[must_use]
    pub fn owned_by(me: u64) -> Self {
        Self { owner: AtomicU64::new(me), inside: AtomicU32::new(0) }
    }

    /// Enters if thread `me` owns the object and the bias is not being
    /// revoked. Then the caller checks, with an Acquire load, that its lock
    /// word shows the object idle (a revoker takes the lock before it
    /// revokes): if so it may use the object until [`Bias::leave`], else it
    /// leaves at once. Otherwise the caller takes the lock.
    #[inline]
    pub fn try_enter(&self, me: u64) -> bool {
        // Relaxed: `owner` is a hint here, the decisive read is the one after
        // the fence; `inside` is the owner's own word. A call nested in the
        // owner's own (from a callback) takes the lock and is refused as busy.
        if self.owner.load(Relaxed) != me || self.inside.load(Relaxed) != 0 {
            return false;
        }
        // Relaxed: the heavy fence of a revoker orders it (see the module).
        self.inside.store(1, Relaxed);
        asymmetric_light_fence();
        // Relaxed: ordered after the store above by the fence pair.
        if self.owner.load(Relaxed) == me {
            return true;
        }
        // Release: a revoker that reads 0 also sees what the owner did before.
        self.inside.store(0, Release);
        false
    }

    /// Gives a bias that was never given (a zeroed `Bias`, in memory
    /// that never held an object) to thread `me`. Never for memory reused
    /// after an object with a bias: a former owner's stale call can still be
    /// between its two reads of `owner`, and its speculative write of
    /// `inside` would then hide the new owner's (the rule of
    /// [`Bias::owned_by`]; loom finds it across a reuse too).
    #[inline]
    pub fn give_first(&self, me: u64) {
        // Relaxed: the new object is published to other threads with Release
        // afterwards (the C handle's state), which orders this store.
        self.owner.store(me, Relaxed);
    }

    /// Leaves after a successful [`Bias::try_enter`].
    #[inline]
    pub fn leave(&self) {
        // Release: the next lock holder, which reads `inside` with Acquire in
        // `revoke`, sees what the owner did to the object.
        self.inside.store(0, Release);
    }

    /// Revokes the bias for thread `me`, with `heavy_fence` (a process-wide
    /// barrier; whether it ran) if another thread owned it; call it holding
    /// the caller's lock, before using the object. Returns whether the
    /// object is free of its owner: `false` while an owner's call that began
    /// before the revocation runs, or if the barrier failed (the bias then
    /// stays); for the owner itself, `false` if this call is nested in one of
    /// its own (the bias stays too). The caller then releases its lock and
    /// refuses, as for a busy object.
    #[inline]
    pub fn revoke(&self, me: u64, heavy_fence: impl FnOnce() -> bool) -> bool {
        // Relaxed: only lock holders write `owner` (or a new object's maker,
        // before publishing it), so this reads the last one's value.
        let owner = self.owner.load(Relaxed);
        if owner == me {
            // Relaxed: `inside` is our own word. Set, this call is nested in
            // our own (a callback, a signal handler): refused, bias kept.
            if self.inside.load(Relaxed) != 0 {
                return false;
            }
            // Relaxed: our own later reads follow it in program order.
            self.owner.store(0, Relaxed);
            return true;
        }
        if owner != 0 {
            // Relaxed: the heavy fence orders it before the read below, and
            // before the owner's next read of it.
            self.owner.store(0, Relaxed);
            if !heavy_fence() {
                // Relaxed: as above; without the barrier the owner may still
                // enter, so it stays the owner and nobody else gets in.
                self.owner.store(owner, Relaxed);
                return false;
            }
        }
        // Acquire: pairs with `leave`'s Release, so the owner's writes to the
        // object are seen by the caller.
        self.inside.load(Acquire) == 0
    }

    /// Whether thread `me` is the owner (a hint, for tests).
    #[must_use]
    pub fn is_owner(&self, me: u64) -> bool {
        // Relaxed: a hint.
        self.owner.load(Relaxed) == me
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_owner_enters_until_revoked_and_a_nested_entry_is_refused() {
        let b = Bias::owned_by(7);
        assert!(!b.try_enter(8), "not the owner");
        assert!(b.try_enter(7));
        assert!(!b.try_enter(7), "nested in its own call");
        assert!(!b.revoke(8, || true), "the owner is inside");
        b.leave();
        assert!(!b.try_enter(7), "revoked for good");
        assert!(b.revoke(8, || unreachable!("no owner left to fence")));
    }

    #[test]
    fn a_failed_heavy_fence_keeps_the_bias() {
        let b = Bias::owned_by(7);
        assert!(!b.revoke(8, || false));
        assert!(b.is_owner(7));
    }

    #[test]
    fn the_owner_revokes_its_own_bias_without_the_heavy_fence() {
        let b = Bias::owned_by(7);
        assert!(b.revoke(7, || unreachable!("its own reads follow its store")));
        assert!(!b.is_owner(7));
        let b = Bias::new();
        b.give_first(7);
        assert!(b.try_enter(7));
        assert!(!b.revoke(7, || unreachable!()), "nested in its own call");
        assert!(b.is_owner(7), "a nested call leaves the bias");
    }
}
