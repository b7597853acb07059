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
    live().insert(p.as_ptr().addr(), kind);
}

/// Checks that `p` is a live handle of `kind`.
pub(crate) fn check<T>(p: *mut T, arg: &'static str, kind: Kind) -> Result<NonNull<T>, Error> {
    let p = NonNull::new(p).ok_or(Error::Null(arg))?;
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
            Ok(p)
        }
        _ => Err(Error::Handle { arg, kind: kind.name() }),
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
    fn ranks_are_checked() {
        assert_eq!(rank(3, "r", 4).ok(), Some(3));
        assert!(rank(4, "r", 4).is_err());
        assert!(rank(-1, "r", 4).is_err());
    }
}
