//! The platform: segments from the arena, the runtime's clock, spinning
//! waits, and one "process" that never dies.

use core::ptr::NonNull;
use core::sync::atomic::AtomicU64;
use core::sync::atomic::Ordering::Relaxed;

use kpccl_core::error::{PlatformError, PlatformOp};
use kpccl_core::sync::AtomicU32;
use kpccl_core::{Platform, ProcessIdentity, Segment, WaitOutcome};

use crate::arena::{Arena, PAGE};

/// A mapping of an arena segment; dropping it unmaps it.
#[derive(Debug)]
pub struct StaticSegment {
    arena: &'static Arena,
    slot: usize,
    base: NonNull<u8>,
    len: usize,
}

impl Segment for StaticSegment {
    fn base(&self) -> NonNull<u8> {
        self.base
    }
    fn len(&self) -> usize {
        self.len
    }
    fn reserve(&self, offset: u64, len: u64) -> Result<(), PlatformError> {
        // Static memory is always backed: only the bounds can be wrong.
        match offset.checked_add(len) {
            Some(end) if end <= self.len as u64 => Ok(()),
            _ => Err(PlatformError { op: PlatformOp::Reserve, code: 12 /* ENOMEM */ }),
        }
    }
}

impl Drop for StaticSegment {
    fn drop(&mut self) {
        self.arena.unmap(self.slot);
    }
}

/// The platform of ranks sharing one address space with no operating system.
#[derive(Clone, Copy, Debug)]
pub struct StaticPlatform {
    arena: &'static Arena,
    clock_ns: fn() -> u64,
    cpus: u32,
    relax: fn(),
}

/// Distinct segment names (the arena is private to the program, so unique
/// rather than unpredictable is enough).
static NEXT_NAME: AtomicU64 = AtomicU64::new(1);

impl StaticPlatform {
    /// Ranks on `cpus` processors taking segments from `arena`, with the
    /// runtime's monotonic clock in nanoseconds.
    #[must_use]
    pub const fn new(arena: &'static Arena, clock_ns: fn() -> u64, cpus: u32) -> Self {
        Self { arena, clock_ns, cpus, relax: core::hint::spin_loop }
    }

    /// What a waiting rank does between polls, instead of a spin hint: a
    /// runtime that multiplexes ranks on fewer cores passes its yield here
    /// (the host test passes `std::thread::yield_now`).
    #[must_use]
    pub const fn with_relax(self, relax: fn()) -> Self {
        Self { relax, ..self }
    }

    fn segment(&self, (slot, base, len): (usize, NonNull<u8>, usize)) -> StaticSegment {
        StaticSegment { arena: self.arena, slot, base, len }
    }
}

impl Platform for StaticPlatform {
    type Segment = StaticSegment;

    fn create(&self, name: &str, len: u64) -> Result<StaticSegment, PlatformError> {
        self.arena.create(name, len).map(|s| self.segment(s))
    }
    fn open(&self, name: &str, len: u64) -> Result<StaticSegment, PlatformError> {
        self.arena.open(name, len).map(|s| self.segment(s))
    }
    fn unlink(&self, name: &str) -> Result<(), PlatformError> {
        self.arena.unlink(name)
    }
    fn page_size(&self) -> u64 {
        PAGE as u64
    }
    fn cpu_count(&self) -> u32 {
        self.cpus
    }
    fn now_ns(&self) -> u64 {
        (self.clock_ns)()
    }
    fn random(&self, buf: &mut [u8]) -> Result<(), PlatformError> {
        // Relaxed: only uniqueness matters.
        let v = NEXT_NAME.fetch_add(1, Relaxed).to_le_bytes();
        buf.iter_mut().enumerate().for_each(|(i, b)| *b = v[i % v.len()]);
        Ok(())
    }
    fn identity(&self) -> ProcessIdentity {
        ProcessIdentity { pid: 1, start_time: 1, uid: 0 }
    }
    fn is_alive(&self, _who: &ProcessIdentity) -> bool {
        // One program: a rank that stops stops everything.
        true
    }
    fn yield_now(&self) {
        (self.relax)();
    }
    fn wait(&self, word: &AtomicU32, expected: u32, deadline_ns: u64) -> WaitOutcome {
        // No futex: spin on the word (a runtime with its own scheduler would park here).
        // Acquire: as a futex wake-up, the change brings what preceded it.
        while word.load(core::sync::atomic::Ordering::Acquire) == expected {
            if self.now_ns() >= deadline_ns {
                return WaitOutcome::TimedOut;
            }
            (self.relax)();
        }
        WaitOutcome::Woken
    }
    fn wake(&self, _word: &AtomicU32) {
        // Waiters spin on the word itself.
    }
}
