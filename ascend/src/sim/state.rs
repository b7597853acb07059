//! Per-process simulator state: allocations, imports, peer access, init and device
//! counts. A forked child starts afresh, as a new process has no device context.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::fs::File;
use std::sync::{Mutex, MutexGuard};

use super::mem::Mapping;
use super::procinfo;

/// One `aclrtMalloc` block.
#[derive(Debug)]
pub(crate) struct Alloc {
    pub(crate) map: Mapping,
    pub(crate) file: File,
    /// Usable length: the size rounded up to 32 bytes plus 32 bytes of padding.
    pub(crate) len: usize,
    pub(crate) dev: i32,
    /// Allocated with a P2P policy (`ACL_MEM_MALLOC_*_P2P`).
    pub(crate) p2p: bool,
    /// The size of its pages (4 KiB, or a huge page): exports start on a page.
    pub(crate) page_size: usize,
}

/// One imported key in this process.
#[derive(Debug)]
pub(crate) struct Import {
    pub(crate) key: String,
    pub(crate) map: Mapping,
    pub(crate) refs: u32,
    pub(crate) dev: i32,
    pub(crate) owner_dev: i32,
    /// The exporter destroyed the key or freed the memory: the view was made
    /// inaccessible.
    pub(crate) revoked: bool,
}

/// A copy queued by `aclrtMemcpyAsync`, run when its stream is synchronised.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Task {
    pub(crate) dst: usize,
    pub(crate) src: usize,
    pub(crate) count: usize,
    /// Whether each side was device memory (an allocation or an import) when queued.
    pub(crate) dst_device: bool,
    pub(crate) src_device: bool,
}

/// One stream: the copies queued on it, in order. Handle 0 is a device's default stream.
#[derive(Debug)]
pub(crate) struct Stream {
    pub(crate) handle: usize,
    pub(crate) dev: i32,
    pub(crate) queue: Vec<Task>,
}

/// The state of this process.
#[derive(Debug, Default)]
pub(crate) struct Proc {
    pid: i32,
    pub(crate) inited: bool,
    pub(crate) allocs: Vec<Alloc>,
    pub(crate) imports: Vec<Import>,
    /// Enabled peer access, `(from, to)`: one-directional.
    pub(crate) p2p: Vec<(i32, i32)>,
    /// Blocks from `aclrtMallocHost`, by address.
    pub(crate) host: Vec<usize>,
    pub(crate) streams: Vec<Stream>,
    /// Streams created so far, to give each a distinct handle.
    pub(crate) streams_made: usize,
    /// Synchronous copies that touched imported memory (see `copylog`).
    pub(crate) sync_import_copies: u64,
    /// The largest `aclrtMalloc` since the last [`take_largest_malloc`].
    pub(crate) largest_malloc: usize,
}

/// The largest `aclrtMalloc` size this process asked for and got since the
/// last call (0 for none): the largest block of device memory a code path
/// takes at once.
pub fn take_largest_malloc() -> usize {
    proc().as_mut().map_or(0, |p| core::mem::take(&mut p.largest_malloc))
}

/// What this process holds of the simulated runtime: the resources a
/// program must give back (allocations, imports, created streams, host
/// blocks, device counts). A test reads it to prove a code path balanced
/// every `aclrtMalloc`, import, `aclrtCreateStream` and `aclrtSetDevice`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Held {
    /// Live `aclrtMalloc` blocks.
    pub allocs: usize,
    /// Imported keys not closed (each counted once, whatever its refcount).
    pub imports: usize,
    /// Streams from `aclrtCreateStream` not destroyed.
    pub streams: usize,
    /// Live `aclrtMallocHost` blocks.
    pub host: usize,
    /// `(device, count)` of every device set and not reset as often.
    pub devices: Vec<(i32, u32)>,
}

/// What this process holds now (see [`Held`]).
pub fn held() -> Held {
    let mut held = proc().as_ref().map_or_else(Held::default, |p| Held {
        allocs: p.allocs.len(),
        imports: p.imports.len(),
        streams: p.streams.iter().filter(|s| s.handle != 0).count(),
        host: p.host.len(),
        devices: Vec::new(),
    });
    held.devices = with_devices(|d| d.iter().filter(|(_, r)| r.count > 0).map(|(&dev, r)| (dev, r.count)).collect());
    held
}

impl Proc {
    /// Whether `[addr, addr+len)` lies inside one live allocation or one import that
    /// was not revoked.
    pub(crate) fn device_range(&self, addr: usize, len: usize) -> bool {
        let inside =
            |start: usize, size: usize| addr >= start && addr.checked_add(len).is_some_and(|e| e <= start + size);
        self.allocs.iter().any(|a| inside(a.map.addr, a.len))
            || self.imports.iter().any(|i| !i.revoked && inside(i.map.addr, i.map.len))
    }

    /// Whether `addr` lies in device memory of this process (an allocation or an import).
    pub(crate) fn is_device(&self, addr: usize) -> bool {
        self.allocs.iter().any(|a| addr >= a.map.addr && addr < a.map.addr + a.map.len)
            || self.import_at(addr).is_some()
    }

    /// The device whose memory holds `addr`: an allocation's device, or an
    /// import's owner device; `None` for host memory.
    pub(crate) fn physical_device(&self, addr: usize) -> Option<i32> {
        if let Some(a) = self.allocs.iter().find(|a| addr >= a.map.addr && addr < a.map.addr + a.map.len) {
            return Some(a.dev);
        }
        self.import_at(addr).map(|i| i.owner_dev)
    }

    /// Whether the `count` bytes at `addr` lie inside one allocation or
    /// import of this process.
    pub(crate) fn holds_device_range(&self, addr: usize, count: usize) -> bool {
        let fits =
            |map: &Mapping| addr >= map.addr && addr.checked_add(count).is_some_and(|end| end <= map.addr + map.len);
        self.allocs.iter().any(|a| fits(&a.map)) || self.imports.iter().any(|i| fits(&i.map))
    }

    /// The import whose mapping contains `addr`.
    pub(crate) fn import_at(&self, addr: usize) -> Option<&Import> {
        self.imports.iter().find(|i| addr >= i.map.addr && addr < i.map.addr + i.map.len)
    }
}

static PROC: Mutex<Option<Proc>> = Mutex::new(None);

/// This process's state, reset if the process is a fork of the one that made it.
pub(crate) fn proc() -> MutexGuard<'static, Option<Proc>> {
    guard_forks();
    let mut g = PROC.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let me = procinfo::own_pid();
    if g.as_ref().is_none_or(|p| p.pid != me) {
        if let Some(old) = g.take() {
            // The parent's mappings stay in the child (fork copied them); its
            // descriptors are closed here.
            core::mem::forget(old.imports);
            drop(old.allocs.into_iter().map(|a| a.file).collect::<Vec<_>>());
        }
        *g = Some(Proc { pid: me, ..Proc::default() });
    }
    g
}

thread_local! {
    /// `(pid, device, epoch)`: the current device of this thread, -1 for none, and
    /// the device's epoch when this thread set it.
    static CURRENT: Cell<(i32, i32, u64)> = const { Cell::new((0, -1, 0)) };
}

/// The `aclrtSetDevice` count of one device in this process, and its epoch: how many
/// times its resources were released (a thread bound before a release is unbound).
#[derive(Debug, Default, Clone, Copy)]
struct DeviceRefs {
    count: u32,
    epoch: u64,
}

/// `(pid, device -> refs)`: reset in a forked child, as a new process has set no device.
static DEVICES: Mutex<(i32, BTreeMap<i32, DeviceRefs>)> = Mutex::new((0, BTreeMap::new()));

/// Runs `f` on this process's device counts.
fn with_devices<R>(f: impl FnOnce(&mut BTreeMap<i32, DeviceRefs>) -> R) -> R {
    guard_forks();
    let mut g = DEVICES.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let me = procinfo::own_pid();
    if g.0 != me {
        *g = (me, BTreeMap::new());
    }
    f(&mut g.1)
}

/// The current device of this thread: the one it set, unless that device's
/// resources were released (its count fell to 0) since.
pub(crate) fn current() -> Option<i32> {
    let (pid, dev, epoch) = CURRENT.with(Cell::get);
    if pid != procinfo::own_pid() || dev < 0 {
        return None;
    }
    with_devices(|d| d.get(&dev).is_some_and(|r| r.count > 0 && r.epoch == epoch)).then_some(dev)
}

/// This thread's current device, with the epoch it was set in: which of the
/// device's default contexts is current.
pub(crate) fn current_context() -> Option<(i32, u64)> {
    let (_, _, epoch) = CURRENT.with(Cell::get);
    current().map(|dev| (dev, epoch))
}

/// What became of a default context `aclrtSetCurrentContext` was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Entered {
    /// It is live: now this thread's.
    Yes,
    /// It was given, and its device was released since.
    Released,
    /// No such context was ever given (its device was never set in that epoch).
    Unknown,
}

/// `aclrtSetCurrentContext` of `dev`'s default context of `epoch`: makes it
/// this thread's device, counting nothing, if it is live.
pub(crate) fn enter_context(dev: i32, epoch: u64) -> Entered {
    let refs = with_devices(|d| d.get(&dev).copied().unwrap_or_default());
    // The context of an epoch was given once the device was set in it; an
    // epoch ends only with a release, after such a set.
    if epoch < refs.epoch {
        return Entered::Released;
    }
    if epoch > refs.epoch || refs.count == 0 {
        return Entered::Unknown;
    }
    CURRENT.with(|c| c.set((procinfo::own_pid(), dev, epoch)));
    Entered::Yes
}

/// `aclrtSetDevice`: counts one more use of `dev` and makes it this thread's device.
pub(crate) fn set_device(dev: i32) {
    let epoch = with_devices(|d| {
        let r = d.entry(dev).or_default();
        r.count += 1;
        r.epoch
    });
    CURRENT.with(|c| c.set((procinfo::own_pid(), dev, epoch)));
}

/// `aclrtResetDevice`: counts one use of `dev` less. `Some(true)` when that was the
/// last, releasing the device: every thread bound to it loses it. `None` when the
/// count was already 0.
pub(crate) fn reset_device(dev: i32) -> Option<bool> {
    with_devices(|d| {
        let r = d.get_mut(&dev).filter(|r| r.count > 0)?;
        r.count -= 1;
        let released = r.count == 0;
        if released {
            r.epoch += 1;
        }
        Some(released)
    })
}

type Locks = (
    MutexGuard<'static, Option<Proc>>,
    MutexGuard<'static, (i32, BTreeMap<i32, DeviceRefs>)>,
    Option<MutexGuard<'static, ()>>,
);

thread_local! {
    /// The simulator's locks, held by the forking thread across a `fork`.
    static HELD_ACROSS_FORK: core::cell::RefCell<Option<Locks>> = const { core::cell::RefCell::new(None) };
}

/// Makes every `fork` of the process wait until no other thread is inside
/// the simulator: a child inherits the locks as they were, and one held by
/// a thread the child does not have would make its first simulator call
/// wait for ever (the simulator never forks while it holds them); nor does
/// it inherit the registry lock's open file (see `registry::hold_for_fork`).
pub(crate) fn guard_forks() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: the handlers are plain functions of this library, which
        // unregisters them if it is unloaded (glibc ties them to the DSO).
        unsafe { libc::pthread_atfork(Some(lock_for_fork), Some(unlock_after_fork), Some(unlock_after_fork)) };
    });
}

/// `pthread_atfork` prepare handler: takes the locks, in the order calls nest
/// them (the registry is entered with the process state held, never the reverse).
extern "C" fn lock_for_fork() {
    let p = PROC.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let d = DEVICES.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let r = super::registry::hold_for_fork();
    HELD_ACROSS_FORK.with(|h| *h.borrow_mut() = Some((p, d, r)));
}

/// `pthread_atfork` parent and child handler: gives the locks back.
extern "C" fn unlock_after_fork() {
    HELD_ACROSS_FORK.with(|h| drop(h.borrow_mut().take()));
}
