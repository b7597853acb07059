//! The in-process platform with a hook on every segment it maps: doubles of
//! a platform that breaks its contract (a mapping shorter than asked for, a
//! header changed between creation and attach).

use kpccl_core::sync::AtomicU32;
use kpccl_core::threads::{HeapSegment, ThreadPlatform};
use kpccl_core::{Platform, PlatformError, ProcessIdentity, Segment, WaitOutcome};

/// The call that mapped a segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mapped {
    /// `Platform::create` (the creator's mapping).
    Created,
    /// `Platform::open` (an attaching rank's).
    Opened,
}

/// [`ThreadPlatform`], but each segment `create` or `open` maps passes
/// through `hook` first; everything else is the thread platform's.
#[derive(Clone, Debug)]
pub struct Hooked<F> {
    /// The platform underneath (its `leaked()` tells what names were left).
    pub inner: ThreadPlatform,
    hook: F,
}

impl<F> Hooked<F> {
    /// A thread platform with `page`-byte pages, its segments passed through `hook`.
    pub fn new(page: u64, hook: F) -> Self {
        Self { inner: ThreadPlatform::new(page), hook }
    }
}

impl<S: Segment, F: Fn(Mapped, HeapSegment) -> S> Platform for Hooked<F> {
    type Segment = S;
    fn create(&self, name: &str, len: u64) -> Result<S, PlatformError> {
        Ok((self.hook)(Mapped::Created, self.inner.create(name, len)?))
    }
    fn open(&self, name: &str, len: u64) -> Result<S, PlatformError> {
        Ok((self.hook)(Mapped::Opened, self.inner.open(name, len)?))
    }
    fn max_window_len(&self) -> u64 {
        self.inner.max_window_len()
    }
    fn unlink(&self, name: &str) -> Result<(), PlatformError> {
        self.inner.unlink(name)
    }
    fn page_size(&self) -> u64 {
        self.inner.page_size()
    }
    fn cpu_count(&self) -> u32 {
        self.inner.cpu_count()
    }
    fn now_ns(&self) -> u64 {
        self.inner.now_ns()
    }
    fn random(&self, buf: &mut [u8]) -> Result<(), PlatformError> {
        self.inner.random(buf)
    }
    fn identity(&self) -> ProcessIdentity {
        self.inner.identity()
    }
    fn is_alive(&self, who: &ProcessIdentity) -> bool {
        self.inner.is_alive(who)
    }
    fn yield_now(&self) {
        self.inner.yield_now();
    }
    fn wait(&self, word: &AtomicU32, expected: u32, deadline_ns: u64) -> WaitOutcome {
        self.inner.wait(word, expected, deadline_ns)
    }
    fn wake(&self, word: &AtomicU32) {
        self.inner.wake(word);
    }
}
