//! loom models of the owner-biased entry (`kpccl_core::bias`), as compiled,
//! used the way the C handles use it (`ffi/src/handle.rs`):
//!
//! ```text
//! RUSTFLAGS="--cfg loom" cargo test -p kpccl-core --release --test loom_bias
//! ```
//!
//! A handle's block is modelled with its state word (idle, busy, freed) and
//! its object, a loom `UnsafeCell` that every use and the free write: loom
//! fails a model if two of them ever overlap, or if one's write is not
//! ordered before the next one's. The heavy fence (`membarrier`) is a
//! sequentially consistent fence, as is the owner's light one under loom.
#![cfg(loom)]

use kpccl_core::bias::Bias;
use kpccl_core::sync::Ordering::{Acquire, Relaxed, Release, SeqCst};
use kpccl_core::sync::{AtomicU32, fence};
use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;

const OWNER: u64 = 1;
const OTHER: u64 = 2;
const THIRD: u64 = 3;

/// The state of a live, idle handle; `BUSY` is or-ed in by a lock holder;
/// 0 is a freed block.
const IDLE: u32 = 1;
const BUSY: u32 = 4;

struct Block {
    bias: Bias,
    state: AtomicU32,
    /// How many uses and frees the object saw.
    data: UnsafeCell<u32>,
}

fn heavy() -> bool {
    fence(SeqCst);
    true
}

impl Block {
    /// A live handle made by `maker` (0: a block in a later life, no bias).
    fn new(maker: u64) -> Arc<Self> {
        let block = Block { bias: Bias::new(), state: AtomicU32::new(IDLE), data: UnsafeCell::new(0) };
        if maker != 0 {
            block.bias.give_first(maker);
        }
        Arc::new(block)
    }

    /// As `handle::exclusive` and the guard's drop: the fast path, else the
    /// busy bit and a revocation. Whether it got in.
    fn use_once(&self, me: u64) -> bool {
        if self.bias.try_enter(me) {
            if self.state.load(Acquire) == IDLE {
                self.touch();
                self.bias.leave();
                return true;
            }
            self.bias.leave();
        }
        if self.state.compare_exchange(IDLE, IDLE | BUSY, Acquire, Relaxed).is_err() {
            return false;
        }
        let free = self.bias.revoke(me, heavy);
        if free {
            self.touch();
        }
        self.state.store(IDLE, Release);
        free
    }

    /// As `handle::take`: the block freed (and its object dropped), unless
    /// busy or its owner is inside. Whether it freed it.
    fn free(&self, me: u64) -> bool {
        if self.state.compare_exchange(IDLE, 0, Acquire, Relaxed).is_err() {
            return false;
        }
        if !self.bias.revoke(me, heavy) {
            self.state.store(IDLE, Release);
            return false;
        }
        self.touch();
        true
    }

    /// As `handle::make` on a freed block, in a later life: no bias.
    fn remake(&self) {
        self.state.store(IDLE, Release);
    }

    fn touch(&self) {
        self.data.with_mut(|d| {
            // SAFETY: loom checks that no other access overlaps this one.
            unsafe { *d += 1 };
        });
    }

    fn uses(&self) -> u32 {
        // SAFETY: read after every user joined.
        self.data.with(|d| unsafe { *d })
    }
}

/// Runs `f` on `b` in a new thread.
fn spawn<T: Send + 'static>(b: &Arc<Block>, f: impl FnOnce(&Block) -> T + Send + 'static) -> thread::JoinHandle<T> {
    let b = Arc::clone(b);
    thread::spawn(move || f(&b))
}

/// `owner_uses` uses by the owner against one by a thread that takes the
/// busy bit and revokes the bias: they never overlap (both may be refused,
/// as two concurrent calls on one handle may), and every use not refused
/// happened.
fn race(owner_uses: u32) {
    let b = Block::new(OWNER);
    let t = spawn(&b, |b| b.use_once(OTHER));
    let a: u32 = (0..owner_uses).map(|_| u32::from(b.use_once(OWNER))).sum();
    let other = u32::from(t.join().unwrap());
    assert_eq!(b.uses(), a + other);
}

#[test]
fn owner_and_taker_exclude_each_other() {
    loom::model(|| race(1));
}

/// The owner's second use, after a revocation, takes the busy bit.
#[test]
fn a_revoked_owner_takes_the_lock() {
    loom::model(|| race(2));
}

/// Sequential uses always get in, and the first use by another thread
/// revokes the bias for good.
#[test]
fn a_lone_user_is_never_refused() {
    loom::model(|| {
        let b = Block::new(OWNER);
        assert!(b.use_once(OWNER));
        assert!(b.bias.is_owner(OWNER));
        assert!(b.use_once(OTHER));
        assert!(!b.bias.is_owner(OWNER));
        assert!(b.use_once(OWNER));
        assert!(b.free(OTHER));
        assert_eq!(b.uses(), 4);
    });
}

/// The owner uses then frees its handle (revoking its own bias, without the
/// heavy fence) against another thread's use and a third one's free: the
/// object is freed at most once, and never while in use.
#[test]
fn the_owners_free_against_other_threads_use_and_free() {
    loom::model(|| {
        let b = Block::new(OWNER);
        let user = spawn(&b, |b| u32::from(b.use_once(OTHER)));
        let freer = spawn(&b, |b| b.free(THIRD));
        let mut n = u32::from(b.use_once(OWNER));
        let owner_freed = b.free(OWNER);
        n += user.join().unwrap();
        let third_freed = freer.join().unwrap();
        assert!(!(owner_freed && third_freed), "freed twice");
        assert_eq!(b.uses(), n + u32::from(owner_freed) + u32::from(third_freed));
    });
}

/// The former owner's stale call races a free of its handle by another
/// thread and the block's reuse for a new handle, which a third thread
/// uses: with no bias in the block's later life, nothing overlaps. (With
/// the bias given to the new maker, loom finds the overlap: the stale
/// call's write of `inside` hides the new owner's.)
#[test]
fn a_stale_owner_call_across_a_reuse() {
    loom::model(|| {
        let b = Block::new(OWNER);
        let stale = spawn(&b, |b| b.use_once(OWNER));
        let remaker = spawn(&b, |b| {
            let freed = b.free(OTHER);
            if freed {
                b.remake();
            }
            (freed, freed && b.use_once(OTHER))
        });
        let third = b.use_once(THIRD);
        let owner_used = stale.join().unwrap();
        let (freed, used) = remaker.join().unwrap();
        let n = [owner_used, freed, used, third].iter().filter(|x| **x).count();
        assert_eq!(b.uses() as usize, n);
    });
}
