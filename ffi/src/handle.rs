//! Handles given to C: every live one is registered, so a freed, foreign or
//! mistyped handle is refused *before* it is dereferenced; each also carries
//! a magic number, cleared when it is freed. And the checks of pointer
//! arguments.

use core::ptr::NonNull;
use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use crate::error::Error;

/// What a handle points to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A `kpccl_shm_comm_t`.
    Comm,
    /// A `kpccl_shm_win_t`.
    Win,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Self::Comm => "communicator handle",
            Self::Win => "window handle",
        }
    }
}

/// Addresses of the live handles. A handle's address is reused only after
/// it was freed, when it names the new handle.
static LIVE: Mutex<BTreeMap<usize, Kind>> = Mutex::new(BTreeMap::new());

fn live() -> std::sync::MutexGuard<'static, BTreeMap<usize, Kind>> {
    // A panic while holding the lock cannot leave the map half-updated.
    LIVE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Registers a new handle.
pub(crate) fn register<T>(p: NonNull<T>, kind: Kind) {
    let mut live = live();
    live.insert(p.as_ptr().addr(), kind);
    fast::insert(p.as_ptr().addr(), kind);
}

/// Checks that `p` is a live handle of `kind`. Lock-free for the handles the
/// fast table holds (every fence goes through here).
#[inline]
pub(crate) fn check<T>(p: *mut T, arg: &'static str, kind: Kind) -> Result<NonNull<T>, Error> {
    let p = NonNull::new(p).ok_or(Error::Null(arg))?;
    if fast::contains(p.as_ptr().addr(), kind) {
        return Ok(p);
    }
    match live().get(&p.as_ptr().addr()) {
        Some(k) if *k == kind => Ok(p),
        _ => Err(Error::Handle { arg, kind: kind.name() }),
    }
}

/// Unregisters a live handle of `kind`, so that no later call accepts it;
/// the caller then owns it and frees it.
pub(crate) fn take<T>(p: *mut T, arg: &'static str, kind: Kind) -> Result<NonNull<T>, Error> {
    let p = NonNull::new(p).ok_or(Error::Null(arg))?;
    let mut live = live();
    match live.get(&p.as_ptr().addr()) {
        Some(k) if *k == kind => {
            live.remove(&p.as_ptr().addr());
            fast::remove(p.as_ptr().addr(), kind);
            Ok(p)
        }
        _ => Err(Error::Handle { arg, kind: kind.name() }),
    }
}

/// A lock-free cache of [`LIVE`]: an open-addressed table of `address | kind`
/// words, written only under `LIVE`'s lock and read without it. A handle that
/// finds no room near its hash stays in the map alone (the slow path).
mod fast {
    use kpccl_core::sync::AtomicU64;
    use kpccl_core::sync::Ordering::{Acquire, Relaxed, Release};

    use super::Kind;

    const SLOTS: usize = 4096;
    /// How far from its home slot an entry may sit.
    const PROBES: usize = 16;
    const EMPTY: u64 = 0;
    /// A removed entry: lookups go past it, inserts reuse it.
    const GONE: u64 = 1;

    static TABLE: [AtomicU64; SLOTS] = [const { AtomicU64::new(EMPTY) }; SLOTS];

    /// Handles are boxes of 8-aligned structs, so the low bits are free for the kind.
    #[inline]
    fn entry(addr: usize, kind: Kind) -> u64 {
        addr as u64
            | match kind {
                Kind::Comm => 2,
                Kind::Win => 4,
            }
    }

    #[inline]
    fn probe(addr: usize) -> impl Iterator<Item = &'static AtomicU64> {
        // Fibonacci hashing of the address without its always-zero low bits.
        let home = ((addr as u64 >> 3).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 52) as usize;
        (0..PROBES).map(move |i| &TABLE[(home + i) % SLOTS])
    }

    /// Under `LIVE`'s lock.
    pub(super) fn insert(addr: usize, kind: Kind) {
        // Relaxed: slots change only under the lock we hold.
        if let Some(slot) = probe(addr).find(|s| matches!(s.load(Relaxed), EMPTY | GONE)) {
            // Release: a reader that finds the entry also sees the handle's
            // initialisation (C hands the handle over with its own synchronisation anyway).
            slot.store(entry(addr, kind), Release);
        }
    }

    /// Under `LIVE`'s lock.
    pub(super) fn remove(addr: usize, kind: Kind) {
        let e = entry(addr, kind);
        // Relaxed: slots change only under the lock we hold.
        if let Some(slot) = probe(addr).find(|s| s.load(Relaxed) == e) {
            // Release: ordered before the handle is freed; a caller racing with
            // the free breaks the API's contract either way.
            slot.store(GONE, Release);
        }
    }

    #[inline]
    pub(super) fn contains(addr: usize, kind: Kind) -> bool {
        let e = entry(addr, kind);
        // Acquire: pairs with `insert`'s Release store.
        probe(addr).map(|s| s.load(Acquire)).take_while(|&v| v != EMPTY).any(|v| v == e)
    }
}

/// Checks that an output pointer can be written.
pub(crate) fn out<T>(p: *mut T, arg: &'static str) -> Result<NonNull<T>, Error> {
    let p = NonNull::new(p).ok_or(Error::Null(arg))?;
    if !p.as_ptr().is_aligned() {
        return Err(Error::Misaligned(arg));
    }
    Ok(p)
}

/// Writes `value` through an output pointer, if it is usable (for the
/// `NULL` a failed call leaves in its output handle).
///
/// # Safety
/// `p` is `NULL` or valid for writes of a `T`.
pub(crate) unsafe fn clear<T>(p: *mut T, value: T) {
    if let Ok(p) = out(p, "") {
        // SAFETY: not NULL, aligned, and valid for writes by the caller's contract.
        unsafe { p.as_ptr().write(value) };
    }
}

/// A rank argument, checked against `0..nranks`.
pub(crate) fn rank(value: core::ffi::c_int, arg: &'static str, nranks: u32) -> Result<u32, Error> {
    u32::try_from(value).ok().filter(|r| *r < nranks).ok_or(Error::Range {
        arg,
        value: i64::from(value),
        min: 0,
        end: i64::from(nranks),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_live_handles_of_the_right_kind_pass() {
        let mut a = 1u64;
        let p = NonNull::from(&mut a);
        assert!(matches!(check(p.as_ptr(), "h", Kind::Win), Err(Error::Handle { .. })));
        register(p, Kind::Win);
        assert!(check(p.as_ptr(), "h", Kind::Win).is_ok());
        assert!(matches!(check(p.as_ptr(), "h", Kind::Comm), Err(Error::Handle { .. })));
        assert!(take(p.as_ptr(), "h", Kind::Win).is_ok());
        assert!(matches!(take(p.as_ptr(), "h", Kind::Win), Err(Error::Handle { .. })));
        assert!(matches!(check(core::ptr::null_mut::<u64>(), "h", Kind::Win), Err(Error::Null("h"))));
    }

    #[test]
    fn more_handles_than_the_fast_table_holds() {
        let words: &'static mut [u64] = Vec::leak(vec![0u64; 6000]);
        let ptrs: Vec<*mut u64> = words.iter_mut().map(core::ptr::from_mut).collect();
        for &p in &ptrs {
            register(NonNull::new(p).unwrap(), Kind::Comm);
        }
        for &p in &ptrs {
            assert!(check(p, "h", Kind::Comm).is_ok());
            assert!(check(p, "h", Kind::Win).is_err());
        }
        for &p in &ptrs {
            assert!(take(p, "h", Kind::Comm).is_ok());
        }
        for &p in &ptrs {
            assert!(check(p, "h", Kind::Comm).is_err());
            assert!(take(p, "h", Kind::Comm).is_err());
        }
    }

    #[test]
    fn ranks_are_checked() {
        assert_eq!(rank(3, "r", 4).ok(), Some(3));
        assert!(rank(4, "r", 4).is_err());
        assert!(rank(-1, "r", 4).is_err());
    }
}
