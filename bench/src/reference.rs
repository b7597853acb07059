//! The reference: a bare pairwise flag exchange between two processes in
//! shared memory — two u64 words on their own 128-byte lines of a memfd
//! mapping shared by `fork`, a Release store of the next epoch, an Acquire
//! spin until the partner's word reaches it, nothing else. It is the same
//! pattern as a peer fence without any of the library around it: the
//! hardware's limit on this machine.
#![allow(unsafe_code)]

use std::io;
use std::ptr::NonNull;

use kpccl_core::sync::Ordering::{Acquire, Relaxed, Release};
use kpccl_core::sync::{AtomicU64, spin_loop};

use crate::measure::Budget;

/// How the reference waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spin {
    /// Reloads at once: the pure limit.
    Bare,
    /// A spin hint (`pause`) between loads, as the library's wait loop does.
    Hint,
    /// Both processes on one CPU, `sched_yield` between loads: the cost of
    /// handing a CPU from one process to another, the floor of every
    /// synchronisation when ranks outnumber CPUs.
    Yield,
}

impl Spin {
    /// Waits a moment before the next load.
    #[inline(always)]
    fn pause(self) {
        match self {
            Spin::Bare => {}
            Spin::Hint => spin_loop(),
            Spin::Yield => std::thread::yield_now(),
        }
    }
}

/// A shared anonymous page: the two flags at 0 and 128, the control words at 256, 384 and 512.
struct Page(NonNull<u8>);

impl Page {
    fn new() -> io::Result<Page> {
        // SAFETY: a valid NUL-terminated name; the flags are valid for memfd_create.
        let fd = unsafe { libc::memfd_create(c"kpccl-bench-ref".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is ours; ftruncate only reads its scalar arguments.
        if unsafe { libc::ftruncate(fd, 4096) } != 0 {
            let e = io::Error::last_os_error();
            // SAFETY: closes our own descriptor once.
            unsafe { libc::close(fd) };
            return Err(e);
        }
        // SAFETY: a fresh shared mapping of our own descriptor; no existing memory is affected.
        let p = unsafe {
            libc::mmap(std::ptr::null_mut(), 4096, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0)
        };
        // SAFETY: closes our own descriptor once (the mapping keeps the memory).
        unsafe { libc::close(fd) };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        NonNull::new(p.cast::<u8>()).map(Page).ok_or_else(|| io::Error::other("mmap returned NULL"))
    }

    fn word(&self, offset: usize) -> &AtomicU64 {
        assert!(offset + 8 <= 4096 && offset.is_multiple_of(8));
        // The mapping is page-aligned and `offset` a multiple of 8 (checked).
        #[allow(clippy::cast_ptr_alignment)]
        let p = self.0.as_ptr().wrapping_add(offset).cast::<u64>();
        // SAFETY: in bounds and aligned (checked); the page is mapped while
        // `self` lives and is only accessed atomically.
        unsafe { AtomicU64::from_ptr(p) }
    }
}

impl Drop for Page {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once.
        unsafe { libc::munmap(self.0.as_ptr().cast(), 4096) };
    }
}

#[inline(always)]
pub(crate) fn exchange(mine: &AtomicU64, theirs: &AtomicU64, spin: Spin) {
    // Relaxed: only this side writes `mine`. Release / Acquire: the flag
    // exchange under test, ordered as kpccl's fences are.
    let e = mine.load(Relaxed) + 1;
    mine.store(e, Release);
    while theirs.load(Acquire) < e {
        spin.pause();
    }
}

/// Puts this process (and the children it forks) on the CPU it runs on.
#[allow(unsafe_code)]
fn pin_here() -> io::Result<()> {
    // SAFETY: no arguments; returns the CPU or -1.
    let cpu = unsafe { libc::sched_getcpu() };
    let cpu = usize::try_from(cpu).map_err(|_| io::Error::last_os_error())?;
    // SAFETY: an all-zero cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` is below CPU_SETSIZE (it is a CPU the kernel runs us on).
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: a valid set of the size given, for this process.
    if unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &raw const set) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Runs the exchange between this process and a forked child; returns the
/// parent's samples in nanoseconds per exchange.
///
/// The parent decides (see [`Budget::sample`]) and hands its decisions to
/// the child through control words: the value, then a sequence number,
/// which the child acknowledges before the next decision.
///
/// Call from a single-threaded process (it forks).
pub fn run(budget: &Budget, spin: Spin) -> io::Result<Vec<f64>> {
    let page = Page::new()?;
    if spin == Spin::Yield {
        pin_here()?;
    }
    // SAFETY: the caller runs single-threaded; the child only touches the
    // shared page and its own memory, then `_exit`s.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    let me = usize::from(pid != 0); // parent 1, child 0
    let (mine, theirs) = (page.word(me * 128), page.word((1 - me) * 128));
    let (value, seq, ack) = (page.word(256), page.word(384), page.word(512));
    let mut round = 0u64;
    let op = || {
        exchange(mine, theirs, spin);
        Ok::<(), io::Error>(())
    };
    if pid == 0 {
        // The child must not outlive a parent killed at a timeout.
        // SAFETY: prctl with scalar arguments.
        unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
        let follow = |_: u64| {
            round += 1;
            // Acquire: pairs with the parent's Release of the sequence number.
            while seq.load(Acquire) != round {
                spin.pause();
            }
            // Relaxed: ordered by the Acquire above.
            let v = value.load(Relaxed);
            // Release: the parent may overwrite the value once it sees this.
            ack.store(round, Release);
            Ok(v)
        };
        let _ = budget.sample(follow, op);
        // SAFETY: ends the child without running the parent's destructors.
        unsafe { libc::_exit(0) };
    }
    let lead = |v: u64| {
        round += 1;
        // Relaxed: published by the Release store of the sequence number below.
        value.store(v, Relaxed);
        // Release: the child's Acquire load of the sequence number brings the value.
        seq.store(round, Release);
        // Acquire: the child has read the value before the next decision overwrites it.
        while ack.load(Acquire) != round {
            spin.pause();
        }
        Ok(v)
    };
    let samples = budget.sample(lead, op)?;
    let mut status = 0;
    // SAFETY: waits for our own child.
    if unsafe { libc::waitpid(pid, &raw mut status, 0) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(samples)
}
