//! The two halves an owner-biased entry (`kpccl_core::bias`) needs from the
//! system: a cheap token per thread, and the heavy fence (`membarrier`).

use std::sync::OnceLock;

use rustix::thread::{MembarrierCommand, membarrier};

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

/// Whether [`heavy_fence`] works in this process (`membarrier` with private
/// expedited barriers, registered on the first call): where it does not (an
/// old kernel, a sandbox, an emulator), no bias may be given.
#[must_use]
pub fn heavy_fence_works() -> bool {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    *REGISTERED.get_or_init(|| membarrier(MembarrierCommand::RegisterPrivateExpedited).is_ok())
}

/// Runs a full memory barrier on every running thread of the process, which
/// makes their compiler-only fences (`asymmetric_light_fence`) full ones
/// against the caller's. Whether it ran: false only if `membarrier` stops
/// working after [`heavy_fence_works`] said it works (a forked child, whose
/// registration may not carry over, falls back to the slow global barrier).
#[must_use]
pub fn heavy_fence() -> bool {
    membarrier(MembarrierCommand::PrivateExpedited).is_ok() || membarrier(MembarrierCommand::Global).is_ok()
}
