//! The two halves an owner-biased entry (`kpccl_core::bias`) needs from the
//! system: a cheap token per thread, and the heavy fence (`membarrier`).

use kpccl_core::sync::AtomicU32;
use kpccl_core::sync::Ordering::Relaxed;
use rustix::thread::{MembarrierCommand, membarrier, membarrier_query};

/// A token of the calling thread: nonzero, and unique among the process's
/// live threads (a thread that has exited may pass its token on). It is the
/// thread pointer, which the ABI keeps in a register: one instruction, where
/// a thread-local variable costs a call in a shared library.
#[inline]
#[must_use]
pub fn thread_token() -> u64 {
    cfg_if::cfg_if! {
        if #[cfg(target_arch = "x86_64")] {
            let tp: u64;
            // SAFETY: reads the first word of the thread control block, which
            // the x86-64 TLS ABI defines as the block's own address (glibc and
            // musl alike); no memory is written.
            #[allow(unsafe_code)]
            unsafe {
                core::arch::asm!("mov {}, qword ptr fs:[0]", out(reg) tp, options(pure, nostack, readonly, preserves_flags));
            }
            tp
        } else if #[cfg(target_arch = "aarch64")] {
            let tp: u64;
            // SAFETY: reads the EL0 thread pointer register; no memory is touched.
            #[allow(unsafe_code)]
            unsafe {
                core::arch::asm!("mrs {}, tpidr_el0", out(reg) tp, options(pure, nomem, nostack, preserves_flags));
            }
            tp
        } else {
            thread_local!(static TOKEN: u8 = const { 0 });
            TOKEN.with(|t| core::ptr::from_ref(t).addr() as u64)
        }
    }
}

/// What this process knows of `membarrier`'s private expedited barriers:
/// plain atomics, not a `OnceLock`, so that a signal handler's call cannot
/// deadlock on an initialisation it interrupted (doing one twice is harmless).
static BARRIER: AtomicU32 = AtomicU32::new(UNKNOWN);
const UNKNOWN: u32 = 0;
const UNSUPPORTED: u32 = 1;
const SUPPORTED: u32 = 2;
const REGISTERED: u32 = 3;
const REFUSED: u32 = 4;

/// Whether [`heavy_fence`] can use private expedited barriers here
/// (`membarrier` answers its query with them, and registering has not
/// failed; an old kernel, a sandbox or an emulator may refuse): where it
/// cannot, no bias may be given. Only asks: registering is left to
/// [`prepare_heavy_fence`], since in a process that already runs several
/// threads (an MPI library's progress threads) the kernel waits for a grace
/// period to register, about 9 ms here, which every first
/// `kpccl_shm_comm_create` would otherwise pay.
#[must_use]
pub fn heavy_fence_works() -> bool {
    matches!(barrier_state(), SUPPORTED | REGISTERED)
}

/// [`BARRIER`], asking the kernel the first time.
fn barrier_state() -> u32 {
    // Relaxed: the state orders nothing; each value is a fact about the kernel.
    let state = BARRIER.load(Relaxed);
    if state != UNKNOWN {
        return state;
    }
    let q = membarrier_query();
    let ok = q.contains_command(MembarrierCommand::PrivateExpedited)
        && q.contains_command(MembarrierCommand::RegisterPrivateExpedited);
    let found = if ok { SUPPORTED } else { UNSUPPORTED };
    // Relaxed: as above; a registration that won the race is kept.
    BARRIER.compare_exchange(UNKNOWN, found, Relaxed, Relaxed).map_or_else(|now| now, |_| found)
}

/// Registers the process for private expedited barriers, once (the kernel
/// requires it before their first use). Call it outside locks: it may take
/// milliseconds. Once it has failed, [`heavy_fence_works`] says no.
pub fn prepare_heavy_fence() {
    if barrier_state() == SUPPORTED {
        let state = if membarrier(MembarrierCommand::RegisterPrivateExpedited).is_ok() { REGISTERED } else { REFUSED };
        // Relaxed: as in `barrier_state`.
        BARRIER.store(state, Relaxed);
    }
}

/// Runs a full memory barrier on every running thread of the process, which
/// makes their compiler-only fences (`asymmetric_light_fence`) full ones
/// against the caller's. Registers first if nobody has (what threads did
/// before the registration is covered all the same: a thread that is not
/// running has passed through the scheduler's barrier). Where private
/// expedited barriers fail, or in a forked child whose registration did not
/// carry over, the slow global barrier serves. Whether a barrier ran.
#[must_use]
pub fn heavy_fence() -> bool {
    prepare_heavy_fence();
    (barrier_state() == REGISTERED && membarrier(MembarrierCommand::PrivateExpedited).is_ok())
        || membarrier(MembarrierCommand::Global).is_ok()
}

/// Whether the kernel offers `membarrier`'s global expedited barriers
/// (as [`BARRIER`] for the private ones; only the kernel's answer is kept).
static GLOBAL: AtomicU32 = AtomicU32::new(UNKNOWN);

/// Registers the process for global expedited barriers; whether
/// [`global_heavy_fence`] works, which it tries once: a filter (seccomp)
/// that admits the registration but not the barrier then keeps a window's
/// full fences, rather than leaving its sleepers to yield in a loop. Asked
/// at every window's creation, not remembered: the kernel answers a
/// registered process at once, and a process made by `fork` then need not
/// rely on its parent's registration. (It waits for a grace period to
/// register a process that already runs several threads: milliseconds,
/// once per process.)
pub(crate) fn register_global_heavy_fence() -> bool {
    // Relaxed: the state orders nothing; each value is a fact about the kernel.
    let mut state = GLOBAL.load(Relaxed);
    if state == UNKNOWN {
        let q = membarrier_query();
        let ok = q.contains_command(MembarrierCommand::GlobalExpedited)
            && q.contains_command(MembarrierCommand::RegisterGlobalExpedited);
        state = if ok { SUPPORTED } else { UNSUPPORTED };
        // Relaxed: as above.
        GLOBAL.store(state, Relaxed);
    }
    state == SUPPORTED && membarrier(MembarrierCommand::RegisterGlobalExpedited).is_ok() && global_heavy_fence()
}

/// Runs a full memory barrier on every CPU that runs a thread of a process
/// registered by [`register_global_heavy_fence`], which makes their
/// compiler-only fences full ones against the caller's. Whether it ran.
#[must_use]
pub(crate) fn global_heavy_fence() -> bool {
    membarrier(MembarrierCommand::GlobalExpedited).is_ok()
}
