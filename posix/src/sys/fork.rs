//! Segment descriptors that a forked child closes. A process forked from a
//! rank without exec (a helper, Python's multiprocessing) inherits every
//! open descriptor, and a segment file lives as long as one: the child would
//! keep a window's memory after the window is freed. The mappings are
//! `MADV_DONTFORK`; descriptors have no such flag (`O_CLOEXEC` acts at exec
//! only), so a `pthread_atfork` handler closes them in the child. It also
//! counts the forks ([`generation`]): a mapping made before a fork is not
//! there in the child, which must neither touch nor unmap it.

use std::sync::Once;

use kpccl_core::sync::AtomicU32;
use kpccl_core::sync::Ordering::{Relaxed, SeqCst};

/// Segment files a process holds open at once, at most, that a child closes
/// (past that, a child keeps the rest until it exits or execs).
const SLOTS: usize = 1024;
const EMPTY: u32 = u32::MAX;

/// The open segment descriptors, one per slot.
static OPEN: [AtomicU32; SLOTS] = [const { AtomicU32::new(EMPTY) }; SLOTS];

/// How many forks made this process, counted by each child's handler (from
/// the first segment a process opened, so before any mapping it made).
static GENERATION: AtomicU32 = AtomicU32::new(0);

/// This process's fork generation: a value taken before a fork differs
/// from the child's.
pub(crate) fn generation() -> u32 {
    // Relaxed: only a child's handler changes it, before the child's code runs.
    GENERATION.load(Relaxed)
}

/// Registers `fd`, just opened, to be closed in forked children.
pub(super) fn track(fd: i32) {
    static HANDLER: Once = Once::new();
    HANDLER.call_once(|| {
        // SAFETY: `close_in_child` is async-signal-safe (it reads atomics and
        // calls close), as a handler run in a child of a threaded process must be.
        #[allow(unsafe_code)]
        unsafe {
            libc::pthread_atfork(None, None, Some(close_in_child));
        }
    });
    let Ok(fd) = u32::try_from(fd) else { return };
    // SeqCst, here and in `untrack`: a slot holds a number only while it
    // names the segment here; a fork sees it set only once it is open (after
    // the open), and cleared before the number can name another file (before
    // the close).
    let _ = OPEN.iter().find(|slot| slot.compare_exchange(EMPTY, fd, SeqCst, SeqCst).is_ok());
}

/// Unregisters `fd`, about to be closed.
pub(super) fn untrack(fd: i32) {
    let Ok(fd) = u32::try_from(fd) else { return };
    // SeqCst: see `track`.
    let _ = OPEN.iter().find(|slot| slot.compare_exchange(fd, EMPTY, SeqCst, SeqCst).is_ok());
}

/// The child's side: counts the fork, closes every tracked descriptor.
extern "C" fn close_in_child() {
    // Relaxed: the child has one thread, this one.
    GENERATION.fetch_add(1, Relaxed);
    for slot in &OPEN {
        // SeqCst: see `track`.
        let fd = slot.load(SeqCst);
        if let Ok(fd) = i32::try_from(fd) {
            // SAFETY: in the child, the number names the segment file the
            // parent had open at the fork (see `track`); nothing here uses it.
            #[allow(unsafe_code)]
            unsafe {
                libc::close(fd);
            }
            slot.store(EMPTY, SeqCst);
        }
    }
}
