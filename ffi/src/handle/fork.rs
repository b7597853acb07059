//! Handles across `fork`. A forked child gets a copy of the handle table
//! (a private mapping) but not the windows' memory (`MADV_DONTFORK`), nor
//! the parent's other threads: a parent's handle used there would reach
//! unmapped memory (a free crashed). So a `pthread_atfork` handler, given
//! before the first handle is made, marks every handle of the parent in the
//! child's table as the parent's ([`super::forked`]): every call there
//! refuses it, naming the parent, and nothing behind it is touched (its
//! objects are left as they are, never freed, in the child). The check costs
//! the calls nothing: the marked state is simply not a live one.
//!
//! So that the child finds the table consistent and its lock free, the
//! handler takes the table's lock before the fork (no thread is then halfway
//! through making or freeing a handle) and releases it on both sides. The
//! lock is held only for short sections that call no user code, so waiting
//! for it before a fork is brief; a fork from a signal handler that
//! interrupted one of them would wait for ever (as `fork` from a signal
//! handler may, with any `pthread_atfork` handler). Children made without
//! the handlers (`vfork`, `posix_spawn`, `clone`) exec at once.

use core::cell::RefCell;
use std::sync::{MutexGuard, Once};

use kpccl_core::sync::AtomicU32;
use kpccl_core::sync::Ordering::Relaxed;

use super::arena::{Arena, Cursor};

thread_local! {
    /// The table's lock, held by the forking thread from `prepare` to
    /// `parent` (in the parent) or `child` (in the child).
    static HELD: RefCell<Option<MutexGuard<'static, Cursor>>> = const { RefCell::new(None) };
}

/// The pid of the process that is forking (read by the child).
static FORKING: AtomicU32 = AtomicU32::new(0);

/// Registers the handlers, once per process.
pub(super) fn register() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: three handlers that never unwind (they cannot panic: see
        // each) and, in the child, call only what a child of a threaded
        // process may (atomics, plain memory, unlocking a lock it holds).
        let rc = unsafe { libc::pthread_atfork(Some(prepare), Some(parent), Some(child)) };
        // ENOMEM only: then children keep accepting the parent's handles, as
        // before this handler existed.
        debug_assert_eq!(rc, 0, "pthread_atfork");
    });
}

/// Before the fork, in the parent: takes the table's lock.
extern "C" fn prepare() {
    let Some(arena) = Arena::global() else { return };
    // Relaxed: read by this same thread in the child, after the fork.
    FORKING.store(std::process::id(), Relaxed);
    let guard = arena.lock();
    // Not possible in a thread past its thread-locals' destruction: the lock
    // is then released at once (and the child keeps the parent's handles
    // usable, as without this handler).
    let _ = HELD.try_with(|held| {
        if let Ok(mut held) = held.try_borrow_mut() {
            *held = Some(guard);
        }
    });
}

/// After the fork, in the parent: releases the lock.
extern "C" fn parent() {
    let _ = HELD.try_with(|held| held.try_borrow_mut().map(|mut held| held.take()));
}

/// After the fork, in the child (one thread): marks every handle of the
/// parent, then releases the lock.
extern "C" fn child() {
    let Ok(Ok(Some(cursor))) = HELD.try_with(|held| held.try_borrow_mut().map(|mut held| held.take())) else {
        return;
    };
    let Some(arena) = Arena::global() else { return };
    // Relaxed: written by this thread before the fork.
    let pid = FORKING.load(Relaxed);
    arena.restate_live(&cursor, |state| super::forked(state, pid));
    drop(cursor);
}
