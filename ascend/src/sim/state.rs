//! Per-process simulator state: allocations, imports, peer access, init and device
//! counts. A forked child starts afresh, as a new process has no device context.

use std::cell::Cell;
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

/// The state of this process.
#[derive(Debug, Default)]
pub(crate) struct Proc {
    pid: i32,
    pub(crate) inited: bool,
    pub(crate) allocs: Vec<Alloc>,
    pub(crate) imports: Vec<Import>,
    /// Enabled peer access, `(from, to)`: one-directional.
    pub(crate) p2p: Vec<(i32, i32)>,
}

impl Proc {
    /// The import whose mapping contains `addr`.
    pub(crate) fn import_at(&self, addr: usize) -> Option<&Import> {
        self.imports.iter().find(|i| addr >= i.map.addr && addr < i.map.addr + i.map.len)
    }
}

static PROC: Mutex<Option<Proc>> = Mutex::new(None);

/// This process's state, reset if the process is a fork of the one that made it.
pub(crate) fn proc() -> MutexGuard<'static, Option<Proc>> {
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
    /// `(pid, device)`: the current device of this thread, -1 for none.
    static CURRENT: Cell<(i32, i32)> = const { Cell::new((0, -1)) };
}

/// The current device of this thread, if `aclrtSetDevice` was called in this process.
pub(crate) fn current() -> Option<i32> {
    let (pid, dev) = CURRENT.with(Cell::get);
    (pid == procinfo::own_pid() && dev >= 0).then_some(dev)
}

/// Sets (or clears, with -1) the current device of this thread.
pub(crate) fn set_current(dev: i32) {
    CURRENT.with(|c| c.set((procinfo::own_pid(), dev)));
}
