//! The Linux [`Platform`]: segments as files in a tmpfs directory, futex
//! waits, a monotonic clock, `getrandom`, `/proc` liveness.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use kpccl_core::error::PlatformOp;
use kpccl_core::sync::AtomicU32;
use kpccl_core::{CpuMask, PlatformError, ProcessIdentity, WaitOutcome};

use crate::stats::{self, Counters};
use crate::way_in::WayIn;
use crate::{interrupt, liveness, sys};

/// Where segments are created unless `KPCCL_SHM_DIR` says otherwise.
pub const DEFAULT_SHM_DIR: &str = "/dev/shm";

/// When a window's memory is allocated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Reserve {
    /// At creation: every owner `fallocate`s its range, so a window that does
    /// not fit is an error on every rank and nothing can raise SIGBUS later.
    #[default]
    Eager,
    /// At first touch, like Open MPI: creation only checks that the directory
    /// has room for the whole window now. Faster for large windows, but memory
    /// another process takes in between can still make a first touch SIGBUS.
    Lazy,
}

/// The Linux platform. Cheap to clone.
#[derive(Clone, Debug)]
pub struct PosixPlatform {
    dir: Arc<PathBuf>,
    /// `dir` belongs to one (simulated) node: made on demand, removed when empty.
    node_dir: bool,
    identity: ProcessIdentity,
    reserve: Reserve,
    /// The window's counters (`KPCCL_STATS=1`): the platform counts the sleeps.
    stats: Option<Arc<Counters>>,
    /// Windows may use light wake-ups (`KPCCL_LIGHT_WAKES`).
    light_wakes: bool,
    /// The CPUs the node's ranks may run on together, once a communicator
    /// knows them ([`kpccl_core::NodeInfo::cpus`]).
    node_cpus: Option<u32>,
}

fn err(op: PlatformOp, e: &std::io::Error) -> PlatformError {
    PlatformError { op, code: i64::from(e.raw_os_error().unwrap_or(-1)) }
}

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

impl PosixPlatform {
    /// A platform whose segments live in `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: Arc::new(dir.into()),
            node_dir: false,
            identity: liveness::current(),
            reserve: Reserve::Eager,
            stats: None,
            light_wakes: false,
            node_cpus: None,
        }
    }

    /// The same platform, with light wake-ups allowed or not.
    #[must_use]
    pub fn with_light_wakes(self, light_wakes: bool) -> Self {
        Self { light_wakes, ..self }
    }

    /// The same platform, for the ranks of a node that may run on `cpus`
    /// CPUs together ([`Platform::cpu_count`]).
    #[must_use]
    pub(crate) fn with_node_cpus(self, cpus: u32) -> Self {
        Self { node_cpus: Some(cpus), ..self }
    }

    /// The same platform, counting its sleeps in `stats`.
    #[must_use]
    pub(crate) fn with_stats(self, stats: Option<Arc<Counters>>) -> Self {
        Self { stats, ..self }
    }

    /// The same platform, allocating windows' memory as `reserve` says.
    #[must_use]
    pub fn with_reserve(self, reserve: Reserve) -> Self {
        Self { reserve, ..self }
    }

    /// A platform whose segments live in `dir`, a directory private to one
    /// (simulated) node: created (0700) before a segment is, and removed
    /// once the last segment's name is gone.
    pub fn with_node_dir(dir: impl Into<PathBuf>) -> Self {
        Self { node_dir: true, ..Self::new(dir) }
    }

    /// The segment directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether the directory is a simulated node's own (private, made on demand).
    pub(crate) fn is_node_dir(&self) -> bool {
        self.node_dir
    }

    /// The configured segment directory: `dir`, or for a simulated node
    /// the directory that holds every node's.
    fn shm_dir(&self) -> &Path {
        if self.node_dir { self.dir.parent().unwrap_or(&self.dir) } else { &self.dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// One futex sleep, counted in the window's stats when it keeps them;
    /// whether it was woken (not timed out).
    fn sleep(&self, word: &AtomicU32, expected: u32, timeout: Option<Duration>) -> bool {
        let Some(stats) = &self.stats else {
            return sys::futex_wait(word, expected, timeout);
        };
        let start = Instant::now();
        let woken = sys::futex_wait(word, expected, timeout);
        stats::add(&stats.sleeps, 1);
        stats::add(&stats.slept_ns, u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX));
        woken
    }
}

/// A mapped segment (the file stays open for `reserve`).
#[derive(Debug)]
pub struct PosixSegment {
    fd: sys::Fd,
    map: sys::Mapping,
    reserve: Reserve,
    /// Made with a name (where the file system cannot make a file without
    /// one), which `publish` then removes.
    named: bool,
}

impl kpccl_core::Segment for PosixSegment {
    fn base(&self) -> std::ptr::NonNull<u8> {
        self.map.base()
    }
    fn len(&self) -> usize {
        self.map.len()
    }
    fn reserve(&self, offset: u64, len: u64) -> Result<(), PlatformError> {
        match self.reserve {
            Reserve::Eager => self.fd.allocate(offset, len).map_err(|e| err(PlatformOp::Reserve, &e)),
            Reserve::Lazy => Ok(()),
        }
    }
    fn inherited(&self) -> bool {
        self.map.inherited()
    }
}

fn map(fd: sys::Fd, len: u64, reserve: Reserve, named: bool) -> Result<PosixSegment, PlatformError> {
    let size =
        usize::try_from(len).map_err(|_| PlatformError { op: PlatformOp::Map, code: i64::from(libc::ENOMEM) })?;
    let map = sys::map_shared(&fd, size).map_err(|e| err(PlatformOp::Map, &e))?;
    Ok(PosixSegment { fd, map, reserve, named })
}

impl PosixPlatform {
    /// A simulated node's directory goes once it holds no name.
    fn remove_node_dir_if_empty(&self) {
        if self.node_dir {
            // Fails while another window of the node is being made: its creator removes it then.
            let _ = std::fs::remove_dir(&*self.dir);
        }
    }

    /// Removes what names a segment this process made: its name if it has
    /// one, else only a simulated node's directory left empty.
    fn release_name(&self, named: bool, name: &str) -> Result<(), PlatformError> {
        if named {
            return kpccl_core::Platform::unlink(self, name);
        }
        self.remove_node_dir_if_empty();
        Ok(())
    }

    /// A new segment file in the directory: without a name where its file
    /// system can (tmpfs can), so that no crash can leave one behind; else
    /// created exclusively as `name`. Whether it is named comes with it.
    fn make(&self, name: &str) -> std::io::Result<(sys::Fd, bool)> {
        let attempt = || {
            if self.node_dir {
                sys::private_dir(&self.dir)?;
            }
            let made = match sys::Fd::create_unnamed(&self.dir) {
                Ok(Some(fd)) => Ok((fd, false)),
                Ok(None) => sys::Fd::create(&self.path(name)).map(|fd| (fd, true)),
                Err(e) => Err(e),
            };
            if made.is_err() {
                // Nothing is left in the node's directory made just now: it goes too.
                self.remove_node_dir_if_empty();
            }
            made
        };
        if !self.node_dir {
            return attempt();
        }
        // Another creator (of this node, unlinking; of any node, sweeping)
        // may remove the (then empty) directory between our mkdir and our
        // create, or even before our check of it: retry.
        let mut tries = 0;
        loop {
            match attempt() {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && tries < 64 => tries += 1,
                made => break made,
            }
        }
    }
}

impl kpccl_core::Platform for PosixPlatform {
    type Segment = PosixSegment;

    fn create(&self, name: &str, len: u64) -> Result<PosixSegment, PlatformError> {
        crate::sweep::reap(self.shm_dir());
        if self.reserve == Reserve::Lazy {
            // Without reservation this is the only early "does not fit".
            // A simulated node's directory may not exist yet: its parent's file system.
            let free = sys::free_space(self.shm_dir()).map_err(|e| err(PlatformOp::Reserve, &e))?;
            if free < len {
                return Err(PlatformError { op: PlatformOp::Fit, code: i64::try_from(free).unwrap_or(i64::MAX) });
            }
        }
        let (fd, named) = self.make(name).map_err(|e| err(PlatformOp::Create, &e))?;
        let made =
            fd.set_len(len).map_err(|e| err(PlatformOp::Resize, &e)).and_then(|()| map(fd, len, self.reserve, named));
        if made.is_err() {
            let _ = self.release_name(named, name);
        }
        made
    }

    /// `name` is a segment name in the directory, or a way in that
    /// [`publish`](kpccl_core::Platform::publish) gave.
    fn open(&self, name: &str, len: u64) -> Result<PosixSegment, PlatformError> {
        let way_in = WayIn::parse(name);
        let fd = match way_in {
            Some(w) => sys::Fd::open_descriptor(Path::new(&w.path()), w.inode),
            None => sys::Fd::open(&self.path(name)),
        }
        .map_err(|e| err(PlatformOp::Open, &e))?;
        let st = fd.stat().map_err(|e| err(PlatformOp::Stat, &e))?;
        if way_in.is_some_and(|w| w.inode != st.inode) {
            // The creator's descriptor now is another file: the creator closed
            // the segment (or died and its pid was reused).
            return Err(PlatformError { op: PlatformOp::Open, code: i64::from(libc::ENOENT) });
        }
        if st.uid != self.identity.uid {
            return Err(PlatformError { op: PlatformOp::Owner, code: i64::from(st.uid) });
        }
        if st.size != len || !st.regular {
            return Err(PlatformError { op: PlatformOp::Size, code: i64::try_from(st.size).unwrap_or(-1) });
        }
        map(fd, len, self.reserve, false)
    }

    /// Removes the name at once, if the segment has one; the others open
    /// this process's descriptor (see `way_in.rs` for why, and what it costs).
    fn publish(&self, segment: &PosixSegment, name: &str, out: &mut dyn std::fmt::Write) -> Result<(), PlatformError> {
        let inode = segment.fd.stat().map_err(|e| err(PlatformOp::Stat, &e))?.inode;
        let way_in = WayIn { pid: self.identity.pid, fd: segment.fd.raw(), inode };
        self.release_name(segment.named, name)?;
        write!(out, "{way_in}")
            .map_err(|_| PlatformError { op: PlatformOp::Create, code: i64::from(libc::ENAMETOOLONG) })
    }

    fn unlink(&self, name: &str) -> Result<(), PlatformError> {
        let removed = std::fs::remove_file(self.path(name)).map_err(|e| err(PlatformOp::Unlink, &e));
        self.remove_node_dir_if_empty();
        removed
    }

    fn page_size(&self) -> u64 {
        sys::page_size()
    }

    fn max_window_len(&self) -> u64 {
        sys::address_space()
    }

    fn cpu_count(&self) -> u32 {
        // Read once: it parses cgroup files (~33 µs), and every communicator
        // creation asks (windows then ask for the node's count).
        static CPUS: OnceLock<u32> = OnceLock::new();
        self.node_cpus.unwrap_or_else(|| {
            *CPUS.get_or_init(|| {
                std::thread::available_parallelism().map_or(1, |n| u32::try_from(n.get()).unwrap_or(u32::MAX))
            })
        })
    }

    fn affinity(&self) -> CpuMask {
        sys::affinity()
    }

    fn cpu_quota(&self) -> Option<u32> {
        sys::cpu_quota()
    }

    fn now_ns(&self) -> u64 {
        u64::try_from(epoch().elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    fn random(&self, buf: &mut [u8]) -> Result<(), PlatformError> {
        sys::getrandom(buf).map_err(|e| err(PlatformOp::Random, &e))
    }

    fn identity(&self) -> ProcessIdentity {
        self.identity
    }

    fn is_alive(&self, who: &ProcessIdentity) -> bool {
        liveness::is_alive(who)
    }

    fn yield_now(&self) {
        std::thread::yield_now();
    }

    fn current_cpu(&self) -> Option<u32> {
        // getcpu: a vDSO call on x86_64 (a few ns), a system call on aarch64
        // (made once per flat-barrier arrival and per yield, each dearer).
        u32::try_from(rustix::thread::sched_getcpu()).ok()
    }

    fn wait(&self, word: &AtomicU32, expected: u32, deadline_ns: u64) -> WaitOutcome {
        let timeout = match deadline_ns {
            u64::MAX => None,
            d => match d.checked_sub(self.now_ns()) {
                Some(left) if left > 0 => Some(Duration::from_nanos(left)),
                _ => return WaitOutcome::TimedOut,
            },
        };
        let Some(every) = interrupt::slice() else {
            return if self.sleep(word, expected, timeout) { WaitOutcome::Woken } else { WaitOutcome::TimedOut };
        };
        if interrupt::ended() {
            // The caller's loop sees `interrupted` and gives up.
            return WaitOutcome::Woken;
        }
        // A slice at most `every` long; the caller's loop sleeps again if nothing changed.
        let slice = timeout.map_or(every, |t| t.min(every));
        let woken = self.sleep(word, expected, Some(slice));
        if interrupt::check() {
            return WaitOutcome::Woken;
        }
        if woken || timeout.is_none_or(|t| t > slice) { WaitOutcome::Woken } else { WaitOutcome::TimedOut }
    }

    fn wake(&self, word: &AtomicU32) {
        sys::futex_wake(word);
    }

    fn interrupted(&self) -> bool {
        interrupt::ended()
    }

    fn register_global_heavy_fence(&self) -> bool {
        self.light_wakes && sys::register_global_heavy_fence()
    }

    fn global_heavy_fence(&self) -> bool {
        sys::global_heavy_fence()
    }

    /// `KPCCL_TEST_CRASH=<step>:<rank>` aborts that rank at that step of window
    /// creation (feature `fault-injection`, for the crash tests; see
    /// `kpccl_core::Step`).
    #[cfg(feature = "fault-injection")]
    fn checkpoint(&self, step: kpccl_core::Step, rank: u32) {
        static CRASH: OnceLock<Option<(String, u32)>> = OnceLock::new();
        let crash = CRASH.get_or_init(|| {
            let v = std::env::var("KPCCL_TEST_CRASH").ok()?;
            let (step, rank) = v.split_once(':')?;
            Some((step.to_owned(), rank.parse().ok()?))
        });
        if crash.as_ref().is_some_and(|(s, r)| s == step.name() && *r == rank) {
            eprintln!("kpccl: KPCCL_TEST_CRASH: rank {rank} aborts at step {}", step.name());
            std::process::abort();
        }
    }
}
