//! loom models of the owner-biased entry (`kpccl_core::bias`), as compiled:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" cargo test -p kpccl-core --release --test loom_bias
//! ```
//!
//! The object is a loom `UnsafeCell` that every user writes: loom fails a
//! model if two users ever overlap, or if one's write is not ordered before
//! the next one's. The lock is a compare-and-swap word, as the C handles'
//! busy bit; the heavy fence (`membarrier`) is a sequentially consistent
//! fence, as is the owner's light one under loom.
#![cfg(loom)]

use kpccl_core::bias::Bias;
use kpccl_core::sync::Ordering::{Acquire, Relaxed, Release, SeqCst};
use kpccl_core::sync::{AtomicU32, fence};
use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;

const OWNER: u64 = 1;
const OTHER: u64 = 2;

struct Object {
    bias: Bias,
    /// 0: idle; 1: a lock holder (never the owner on its fast path) has it.
    lock: AtomicU32,
    /// Who used it last, and how many uses.
    data: UnsafeCell<(u64, u32)>,
}

impl Object {
    fn new(owner: u64) -> Self {
        Object { bias: Bias::owned_by(owner), lock: AtomicU32::new(0), data: UnsafeCell::new((0, 0)) }
    }

    /// One exclusive use by thread `me`, as `ffi::handle::exclusive` does it:
    /// the fast path, else the lock and a revocation. Whether it got in.
    fn use_once(&self, me: u64) -> bool {
        if self.bias.try_enter(me) {
            if self.lock.load(Acquire) == 0 {
                self.touch(me);
                self.bias.leave();
                return true;
            }
            self.bias.leave();
        }
        if self.lock.compare_exchange(0, 1, Acquire, Relaxed).is_err() {
            return false;
        }
        let free = self.bias.revoke(me, || {
            fence(SeqCst);
            true
        });
        if free {
            self.touch(me);
        }
        self.lock.store(0, Release);
        free
    }

    fn touch(&self, me: u64) {
        self.data.with_mut(|d| {
            // SAFETY: loom checks that no other access overlaps this one.
            let d = unsafe { &mut *d };
            *d = (me, d.1 + 1);
        });
    }

    fn uses(&self) -> u32 {
        // SAFETY: read after every user joined.
        self.data.with(|d| unsafe { (*d).1 })
    }
}

/// `owner_uses` uses by the owner against one by a thread that takes the
/// lock and revokes the bias: they never overlap (both may be refused, as
/// two concurrent calls on one handle may), and every use not refused
/// happened.
fn race(owner_uses: u32) {
    let o = Arc::new(Object::new(OWNER));
    let t = {
        let o = Arc::clone(&o);
        thread::spawn(move || o.use_once(OTHER))
    };
    let a: u32 = (0..owner_uses).map(|_| u32::from(o.use_once(OWNER))).sum();
    let b = u32::from(t.join().unwrap());
    assert_eq!(o.uses(), a + b);
}

#[test]
fn owner_and_taker_exclude_each_other() {
    loom::model(|| race(1));
}

/// The owner's second use, after a revocation, takes the lock.
#[test]
fn a_revoked_owner_takes_the_lock() {
    loom::model(|| race(2));
}

/// Sequential uses always get in, and the first use by another thread
/// revokes the bias for good.
#[test]
fn a_lone_user_is_never_refused() {
    loom::model(|| {
        let o = Object::new(OWNER);
        assert!(o.use_once(OWNER));
        assert!(o.bias.is_owner(OWNER));
        assert!(o.use_once(OTHER));
        assert!(!o.bias.is_owner(OWNER));
        assert!(o.use_once(OWNER));
        assert!(o.use_once(OTHER));
        assert_eq!(o.uses(), 4);
    });
}
