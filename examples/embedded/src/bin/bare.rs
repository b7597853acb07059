//! The example as a bare-metal program for `aarch64-unknown-none`: static
//! memory, no allocator, no operating system. One core runs one rank here;
//! a runtime that starts several cores gives each its rank and the same
//! `static`s. (A real boot sets up each core's stack before `_start`'s
//! Rust code runs; that is the runtime's, not kpccl's.)
//!
//! ```text
//! cargo build -p kpccl-embedded-example --target aarch64-unknown-none --bin bare
//! ```
//!
//! On a hosted target the same file is a program that runs the one rank.
#![cfg_attr(target_os = "none", no_std, no_main)]
#![allow(clippy::disallowed_methods)] // an embedder's code: `core`'s spin hint

// The entry point below reads aarch64's generic timer; other targets need their own clock.
#[cfg(all(target_os = "none", not(target_arch = "aarch64")))]
compile_error!("src/bin/bare.rs reads aarch64's generic timer: give `run` this target's clock");

use kpccl_embedded_example::{Arena, Group, Page, StaticOob, StaticPlatform, rank_main};

static PAGES: [Page; 16] = [const { Page::new() }; 16];
static ARENA: Arena = Arena::new(&PAGES);
static GROUP: Group = Group::new();

/// One rank's run, from the runtime's entry point.
fn run(clock_ns: fn() -> u64) -> bool {
    let platform = StaticPlatform::new(&ARENA, clock_ns, 1);
    rank_main(platform, &StaticOob::new(&GROUP, 0, 1), 0, 1, 100) == Ok(5050) && ARENA.in_use() == 0
}

#[cfg(all(target_os = "none", target_arch = "aarch64"))]
mod bare {
    /// The generic timer: the virtual counter scaled by its frequency.
    fn clock_ns() -> u64 {
        let (count, freq): (u64, u64);
        // SAFETY: reading CNTVCT_EL0 and CNTFRQ_EL0 has no side effects; both
        // are readable at EL1, and at EL0 when the kernel allows it.
        unsafe {
            core::arch::asm!("mrs {0}, cntvct_el0", "mrs {1}, cntfrq_el0", out(reg) count, out(reg) freq, options(nomem, nostack));
        }
        u64::try_from(u128::from(count) * 1_000_000_000 / u128::from(freq.max(1))).unwrap_or(u64::MAX)
    }

    /// The entry point: run the rank, then park the core (`wfe` in a real runtime).
    #[unsafe(no_mangle)]
    extern "C" fn _start() -> ! {
        let _passed = super::run(clock_ns);
        loop {
            core::hint::spin_loop();
        }
    }

    #[panic_handler]
    fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
        loop {
            core::hint::spin_loop();
        }
    }
}

#[cfg(not(target_os = "none"))]
fn main() {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    fn clock_ns() -> u64 {
        u64::try_from(START.get_or_init(std::time::Instant::now).elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
    assert!(run(clock_ns), "the rank's run failed");
    println!("one rank on static memory: 100 rounds verified, no segment left");
}
