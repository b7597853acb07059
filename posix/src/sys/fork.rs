//! Segment descriptors that a forked child closes. A process forked from a
//! rank without exec (a helper, Python's multiprocessing) inherits every
//! open descriptor, and a segment file lives as long as one: the child would
//! keep a window's memory after the window is freed. The mappings are
//! `MADV_DONTFORK`; descriptors have no such flag (`O_CLOEXEC` acts at exec
//! only), so a `pthread_atfork` handler closes them in the child. It also
//! counts the forks ([`generation`]): a mapping made before a fork is not
//! there in the child, which must neither touch nor unmap it. So that a use
//! of the parent's window in the child faults at once, rather than reach
//! whatever the child maps at that address later, the handler reserves each
//! mapping's range there, inaccessible.

use std::sync::Once;

use kpccl_core::sync::Ordering::{Relaxed, SeqCst};
use kpccl_core::sync::{AtomicU32, AtomicU64};

/// Segment files a process holds open at once, at most, that a child closes
/// (past that, a child keeps the rest until it exits or execs).
const SLOTS: usize = 1024;
const EMPTY: u32 = u32::MAX;

/// The open segment descriptors, one per slot.
static OPEN: [AtomicU32; SLOTS] = [const { AtomicU32::new(EMPTY) }; SLOTS];

/// The window mappings, one per slot: address and length (0 while free, or
/// while the slot is being filled or emptied).
static MAPPED: [(AtomicU64, AtomicU64); SLOTS] = [const { (AtomicU64::new(0), AtomicU64::new(0)) }; SLOTS];

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

/// Registers the mapping `addr..addr + len`, just made `MADV_DONTFORK`
/// (after its segment's descriptor, so the handler is in place).
pub(super) fn track_mapping(addr: usize, len: usize) {
    // SeqCst, here and in `untrack_mapping`: a fork sees a slot's length only
    // while the range is mapped here (set after the mapping, cleared before
    // the unmapping), and a slot is claimed once.
    if let Some((_, length)) = MAPPED.iter().find(|(a, _)| a.compare_exchange(0, addr as u64, SeqCst, SeqCst).is_ok()) {
        length.store(len as u64, SeqCst);
    }
}

/// Unregisters the mapping at `addr`, about to be unmapped.
pub(super) fn untrack_mapping(addr: usize) {
    if let Some((a, length)) = MAPPED.iter().find(|(a, _)| a.load(SeqCst) == addr as u64) {
        // SeqCst: see `track_mapping`.
        length.store(0, SeqCst);
        a.store(0, SeqCst);
    }
}

/// The child's side: counts the fork, closes every tracked descriptor,
/// reserves every tracked mapping's range inaccessible.
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
    for (addr, len) in &MAPPED {
        // SeqCst: see `track_mapping`.
        let (Ok(addr), Ok(len)) = (usize::try_from(addr.load(SeqCst)), usize::try_from(len.load(SeqCst))) else {
            continue;
        };
        if len == 0 {
            continue;
        }
        // SAFETY: the range was the parent's window mapping, which the child
        // does not have (`MADV_DONTFORK`), and nothing has run in the child
        // to map anything there: MAP_FIXED fills the hole, replacing nothing.
        // An error leaves it a hole, as before.
        #[allow(unsafe_code)]
        unsafe {
            libc::mmap(
                core::ptr::without_provenance_mut(addr),
                len,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED | libc::MAP_NORESERVE,
                -1,
                0,
            );
        }
    }
}
