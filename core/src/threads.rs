//! A reference in-process platform whose ranks are threads of one process
//! (feature `threads`, which brings in `std`): segments are zeroed,
//! page-aligned heap buffers in a process-wide name registry, waits poll
//! with a yield, and the out-of-band collectives are a barrier around a
//! shared buffer. It is what a runtime author starts from (see
//! `docs/EMBEDDING.md`), and what the core's own tests run on.
#![allow(unsafe_code)] // the heap segments: one allocation, one deallocation

use core::alloc::Layout;
use core::ptr::NonNull;
use core::time::Duration;
use std::alloc;
use std::collections::BTreeMap;
use std::string::{String, ToString};
use std::sync::{Arc, Barrier, Mutex, MutexGuard, mpsc};
use std::time::Instant;
use std::vec::Vec;

use crate::error::{OobError, PlatformError, PlatformOp};
use crate::sync::{AtomicU32, AtomicU64, Ordering};
use crate::{Oob, Platform, ProcessIdentity, Segment, WaitOutcome};

const EEXIST: i64 = 17;
const ENOENT: i64 = 2;
const ENOMEM: i64 = 12;

/// A zeroed heap allocation aligned to the page, freed when the last
/// mapping and the name are gone (like an unlinked, unmapped shm object).
#[derive(Debug)]
struct Buffer {
    ptr: NonNull<u8>,
    layout: Layout,
}

// SAFETY: the buffer is plain memory; every access to it goes through raw
// pointers whose users synchronise as the window protocol prescribes.
unsafe impl Send for Buffer {}
// SAFETY: as above.
unsafe impl Sync for Buffer {}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: allocated in `create` with exactly this layout, freed once.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) };
    }
}

/// The names of every live segment of the process (the `/dev/shm` of the threads).
static SEGMENTS: Mutex<BTreeMap<String, Arc<Buffer>>> = Mutex::new(BTreeMap::new());
static NEXT_NAME: AtomicU64 = AtomicU64::new(1);

fn segments() -> MutexGuard<'static, BTreeMap<String, Arc<Buffer>>> {
    SEGMENTS.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A mapping of a heap segment.
#[derive(Debug)]
pub struct HeapSegment(Arc<Buffer>);

impl Segment for HeapSegment {
    fn base(&self) -> NonNull<u8> {
        self.0.ptr
    }
    fn len(&self) -> usize {
        self.0.layout.size()
    }
    fn reserve(&self, offset: u64, len: u64) -> Result<(), PlatformError> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len() as u64 => Ok(()),
            _ => Err(PlatformError { op: PlatformOp::Reserve, code: ENOMEM }),
        }
    }
}

/// The platform of one group of thread ranks. Clones share the record of the
/// names they created, so a test can check that none is left behind.
#[derive(Clone, Debug)]
pub struct ThreadPlatform {
    page: u64,
    epoch: Instant,
    created: Arc<Mutex<Vec<String>>>,
    max_window_len: u64,
}

impl ThreadPlatform {
    /// A platform with pages of `page` bytes (a power of two).
    pub fn new(page: u64) -> Self {
        Self { page, epoch: Instant::now(), created: Arc::default(), max_window_len: u64::MAX }
    }

    /// This clone, as a rank that can map at most `max` bytes (a process
    /// under a lower `RLIMIT_AS` than its peers').
    #[must_use]
    pub fn with_max_window_len(mut self, max: u64) -> Self {
        self.max_window_len = max;
        self
    }

    /// The segments this platform created whose names still exist.
    pub fn leaked(&self) -> Vec<String> {
        let live = segments();
        self.created.lock().unwrap().iter().filter(|n| live.contains_key(*n)).cloned().collect()
    }

    /// How many segments this platform created.
    pub fn created(&self) -> usize {
        self.created.lock().unwrap().len()
    }
}

impl Platform for ThreadPlatform {
    type Segment = HeapSegment;

    fn create(&self, name: &str, len: u64) -> Result<HeapSegment, PlatformError> {
        let mut live = segments();
        if live.contains_key(name) {
            return Err(PlatformError { op: PlatformOp::Create, code: EEXIST });
        }
        let size = usize::try_from(len).map_err(|_| PlatformError { op: PlatformOp::Create, code: ENOMEM })?;
        let align = usize::try_from(self.page).unwrap();
        let layout = Layout::from_size_align(size.max(1), align)
            .map_err(|_| PlatformError { op: PlatformOp::Create, code: ENOMEM })?;
        // SAFETY: `layout` has a non-zero size.
        let ptr = NonNull::new(unsafe { alloc::alloc_zeroed(layout) })
            .ok_or(PlatformError { op: PlatformOp::Create, code: ENOMEM })?;
        let buffer = Arc::new(Buffer { ptr, layout });
        live.insert(name.to_string(), Arc::clone(&buffer));
        self.created.lock().unwrap().push(name.to_string());
        Ok(HeapSegment(buffer))
    }

    fn max_window_len(&self) -> u64 {
        self.max_window_len
    }

    fn open(&self, name: &str, len: u64) -> Result<HeapSegment, PlatformError> {
        let buffer = segments().get(name).cloned().ok_or(PlatformError { op: PlatformOp::Open, code: ENOENT })?;
        let have = buffer.layout.size() as u64;
        if have != len {
            return Err(PlatformError { op: PlatformOp::Size, code: i64::try_from(have).unwrap_or(i64::MAX) });
        }
        Ok(HeapSegment(buffer))
    }

    fn unlink(&self, name: &str) -> Result<(), PlatformError> {
        segments().remove(name).map(drop).ok_or(PlatformError { op: PlatformOp::Unlink, code: ENOENT })
    }

    fn page_size(&self) -> u64 {
        self.page
    }
    fn cpu_count(&self) -> u32 {
        std::thread::available_parallelism().map_or(1, |n| u32::try_from(n.get()).unwrap_or(u32::MAX))
    }
    fn now_ns(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
    fn random(&self, buf: &mut [u8]) -> Result<(), PlatformError> {
        // Unique rather than unpredictable: all the threads share one process.
        // Relaxed: only uniqueness matters (the RMW gives it); it orders nothing.
        let v = NEXT_NAME.fetch_add(1, Ordering::Relaxed).to_le_bytes();
        for (i, b) in buf.iter_mut().enumerate() {
            *b = v[i % v.len()];
        }
        Ok(())
    }
    fn identity(&self) -> ProcessIdentity {
        ProcessIdentity { pid: u64::from(std::process::id()), start_time: 1, uid: 1000 }
    }
    fn is_alive(&self, _who: &ProcessIdentity) -> bool {
        true
    }
    fn yield_now(&self) {
        std::thread::yield_now();
    }
    fn wait(&self, word: &AtomicU32, expected: u32, deadline_ns: u64) -> WaitOutcome {
        loop {
            // Acquire: as a futex wake-up, what the waker did before changing the word is seen after.
            if word.load(Ordering::Acquire) != expected {
                return WaitOutcome::Woken;
            }
            if self.now_ns() >= deadline_ns {
                return WaitOutcome::TimedOut;
            }
            std::thread::yield_now();
        }
    }
    fn wake(&self, _word: &AtomicU32) {}
}

/// The shared state of one group's out-of-band collectives.
#[derive(Debug)]
struct Group {
    nranks: usize,
    barrier: Barrier,
    buf: Mutex<Vec<u8>>,
}

/// One rank's handle on its group's out-of-band collectives.
#[derive(Clone, Debug)]
pub struct ThreadOob {
    group: Arc<Group>,
    rank: usize,
}

impl ThreadOob {
    /// One handle per rank of a new group of `nranks`.
    pub fn group(nranks: u32) -> Vec<Self> {
        let n = nranks as usize;
        let group = Arc::new(Group { nranks: n, barrier: Barrier::new(n), buf: Mutex::default() });
        (0..n).map(|rank| Self { group: Arc::clone(&group), rank }).collect()
    }
}

impl Oob for ThreadOob {
    fn allgather(&self, send: &[u8], recv: &mut [u8]) -> Result<(), OobError> {
        let (n, len) = (self.group.nranks, send.len());
        {
            let mut buf = self.group.buf.lock().unwrap();
            if buf.len() < n * len {
                buf.resize(n * len, 0);
            }
            buf[self.rank * len..][..len].copy_from_slice(send);
        }
        self.group.barrier.wait();
        // A `recv` for another rank count than the group's (a rank that
        // disagrees on it) gets what fits, the rest zeroed, as from ranks
        // that sent nothing: failing here instead, before the barrier, would
        // leave the others in it for ever, and so would this rank's flush.
        let fits = recv.len().min(n * len);
        recv[..fits].copy_from_slice(&self.group.buf.lock().unwrap()[..fits]);
        recv[fits..].fill(0);
        // Nobody writes the next round's contribution before everyone has read this one.
        self.group.barrier.wait();
        Ok(())
    }

    fn barrier(&self) -> Result<(), OobError> {
        self.group.barrier.wait();
        Ok(())
    }
}

/// Runs `f(rank, oob)` on `nranks` threads and returns the results in rank
/// order; panics if a rank panics (at once, with its message: the others
/// may be waiting for it for ever) or if they take longer than `limit` (a
/// hang is a failure, never a stuck test).
pub fn run<T, F>(nranks: u32, limit: Duration, f: F) -> Vec<T>
where
    T: Send + 'static,
    F: Fn(u32, ThreadOob) -> T + Send + Sync + 'static,
{
    let f = Arc::new(f);
    let (tx, rx) = mpsc::channel();
    let handles: Vec<_> = (0u32..)
        .zip(ThreadOob::group(nranks))
        .map(|(rank, oob)| {
            let (f, tx) = (Arc::clone(&f), tx.clone());
            std::thread::Builder::new()
                .name(std::format!("rank-{rank}"))
                .spawn(move || {
                    // Caught to be reported at once: a rank waiting for this
                    // one in the out-of-band barrier would never end.
                    let out = std::panic::catch_unwind(core::panic::AssertUnwindSafe(|| f(rank, oob)));
                    let _ = tx.send((rank, out));
                })
                .unwrap()
        })
        .collect();
    drop(tx);
    let deadline = Instant::now() + limit;
    let mut results: Vec<Option<T>> = (0..nranks).map(|_| None).collect();
    for _ in 0..nranks {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok((rank, Ok(out))) => results[rank as usize] = Some(out),
            Ok((rank, Err(e))) => {
                let what = e.downcast_ref::<&str>().copied().or_else(|| e.downcast_ref::<String>().map(String::as_str));
                let what = what.unwrap_or("a panic whose payload is not a string");
                std::panic::resume_unwind(std::boxed::Box::new(std::format!("rank {rank} panicked: {what}")));
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let missing: Vec<usize> = (0..results.len()).filter(|&r| results[r].is_none()).collect();
                panic!("ranks {missing:?} of {nranks} still running after {limit:?}");
            }
            // Unreachable: every rank reports, panicked or not.
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    for (rank, h) in handles.into_iter().enumerate() {
        if let Err(e) = h.join() {
            std::panic::resume_unwind(std::boxed::Box::new(std::format!("rank {rank} panicked: {e:?}")));
        }
    }
    results.into_iter().map(|r| r.expect("every rank reported")).collect()
}
