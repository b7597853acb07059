//! Handles given to C, and the checks of pointer arguments.
//!
//! A handle is the address of a block of the handle [`arena`]: every value
//! C passes is compared with the region before anything is read, and a
//! block's address is not handed out again (until the region wraps), so a
//! freed handle is refused as freed even when a new object was made since,
//! and a foreign or mistyped one is refused too; nothing behind a refused
//! handle is touched.
//!
//! Calls that must not overlap on one handle (fences, a window allocation
//! on a communicator, free and destroy) take it [`exclusive`]ly, without a
//! lock: a second thread is refused meanwhile, and so is a free. The thread
//! that made the handle enters with plain stores (its owner-biased fast
//! path, `kpccl_core::bias`); any other thread takes the block's busy bit
//! with a compare-and-swap, and the first such call revokes the bias for
//! good, with one `membarrier`. The compare-and-swap is what a fence would
//! otherwise pay on every call: about 10–15 ns of a two-rank exchange.
//! Queries run [`shared`], under the arena's lock, which `take` (free,
//! destroy) also holds: a free racing a query either waits for it or is
//! seen by it.
//!
//! A handle is [`reserve`]d before the collective that makes its object, and
//! filled after it: running out of handles then fails every rank together
//! (the rank joins the collective refused), never one rank after the others
//! made the object. A forked child refuses every handle of its parent
//! ([`fork`]): their windows' memory is not mapped there.

mod arena;
mod fork;

use core::marker::PhantomData;
use core::mem::ManuallyDrop;
use core::ops::Deref;
use core::ptr::NonNull;

use kpccl_core::sync::Ordering::{Acquire, Relaxed, Release};
use kpccl_posix::bias::{heavy_fence, heavy_fence_works, prepare_heavy_fence, thread_token};

use self::arena::{Arena, Block};
use crate::error::{Error, RangeOf};
use crate::win::kpccl_shm_win_t;

/// What a handle points to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A `kpccl_shm_comm_h`.
    Comm,
    /// A `kpccl_shm_win_h`.
    Win,
}

impl Kind {
    /// The name C programmers know it by.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Comm => "communicator handle",
            Self::Win => "window handle",
        }
    }

    /// The block state of a live, idle handle of this kind.
    const fn tag(self) -> u64 {
        match self {
            Self::Comm => 1,
            Self::Win => 2,
        }
    }

    /// The kind of a live handle in `state` (busy or not); `None` for free,
    /// reserved and forked-off blocks.
    fn of_tag(state: u64) -> Option<Kind> {
        match state & !BUSY {
            1 => Some(Self::Comm),
            2 => Some(Self::Win),
            _ => None,
        }
    }
}

// A block's state: 0 free; a kind's tag (1, 2) live and idle, plus BUSY while
// one call has exclusive use; RESERVED while its object is being made; in a
// forked child, FORKED with the pid of the process that made the handle in
// the high half (and the tag or RESERVED it had).

/// The bits of a kind's tag.
const TAG: u64 = 3;
/// Set in a block's state while one call has exclusive use of the handle.
const BUSY: u64 = 4;
/// A block claimed for an object being made (see [`reserve`]).
const RESERVED: u64 = 8;
/// A block the parent process had in use, in a forked child (see [`fork`]).
const FORKED: u64 = 16;
/// Where a forked-off block's state keeps the pid of its handle's maker.
const PID_SHIFT: u32 = 32;

/// A block's state in a child forked by process `pid`: refused for good,
/// naming the process that made it (an ancestor's own mark is kept).
fn forked(state: u64, pid: u32) -> u64 {
    if state & FORKED != 0 { state } else { FORKED | (state & (TAG | RESERVED)) | (u64::from(pid) << PID_SHIFT) }
}

/// A type that lives behind handles of one kind.
pub(crate) trait Object {
    /// The kind of its handles.
    const KIND: Kind;
}

/// Why a handle was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// It was never made by this library.
    Foreign,
    /// It was freed.
    Stale,
    /// It is a live handle of another kind.
    Kind(Kind),
    /// Another thread is in an exclusive call on it.
    Busy,
    /// Another thread made it, and the system refuses the barrier
    /// (`membarrier`) that would let this one take it over.
    OwnerOnly,
    /// This process is a forked child, and the handle was made by the
    /// process of this pid (its parent, or an earlier ancestor).
    Forked(u32),
}

/// A handle claimed for an object still being made, by a collective that
/// runs meanwhile (without the arena's lock): [`Slot::fill`] publishes it;
/// dropped unfilled, it is released. Claimed before the collective, so that
/// a rank that cannot have a handle joins the collective refused and every
/// rank fails together, instead of failing alone after the others made the
/// object (their next collective would wait for it for ever).
#[derive(Debug)]
#[must_use = "a reserved handle is released unless filled"]
pub(crate) struct Slot<T> {
    block: &'static Block,
    serial: u64,
    first_life: bool,
    kind: PhantomData<fn() -> T>,
}

/// Claims a handle for an object of `T`'s kind, to be made next.
pub(crate) fn reserve<T: Object>() -> Result<Slot<T>, Error> {
    #[cfg(test)]
    if tests::REFUSE_RESERVE.with(core::cell::Cell::take) {
        return Err(Error::NoHandle { kind: T::KIND, why: arena::ALL_LIVE });
    }
    let arena = Arena::global()
        .ok_or(Error::NoHandle { kind: T::KIND, why: "no address space could be reserved for handles" })?;
    // Before the first handle exists: a child forked from now on refuses them.
    fork::register();
    let mut cursor = arena.lock();
    let (block, serial, first_life) = arena.claim(&mut cursor).map_err(|why| Error::NoHandle { kind: T::KIND, why })?;
    // Relaxed: claims and releases happen under the lock we hold; a lock-free
    // reader that sees it refuses it (not a kind's tag), and reads nothing else.
    block.state.store(RESERVED, Relaxed);
    Ok(Slot { block, serial, first_life, kind: PhantomData })
}

impl<T: Object> Slot<T> {
    /// Publishes the handle of `object`: `rank` and `nranks` are what C reads
    /// through a window handle.
    pub(crate) fn fill<H>(self, object: Box<T>, rank: core::ffi::c_int, nranks: core::ffi::c_int) -> *mut H {
        // Filled, not released: no drop.
        let this = ManuallyDrop::new(self);
        let block = this.block;
        let head = kpccl_shm_win_t { rank, nranks, reserved: this.serial };
        // SAFETY: a reserved block is ours alone until `state` publishes it
        // (every other call refuses it), on a page `claim` made writable.
        unsafe { block.head.get().write(head) };
        // SAFETY: as above.
        unsafe { block.object.get().write(Box::into_raw(object).cast::<()>()) };
        // A bias only in the block's first life: after a reuse, a stale call of
        // the former owner could hide the new one's entry (`Bias::give_first`).
        // A reused block's bias was revoked by `take` and stays so.
        if this.first_life && heavy_fence_works() {
            block.bias.give_first(thread_token());
        }
        // Release: whoever finds the handle live also sees the block filled.
        block.state.store(T::KIND.tag(), Release);
        core::ptr::from_ref(block).cast_mut().cast::<H>()
    }
}

impl<T> Drop for Slot<T> {
    fn drop(&mut self) {
        // A slot exists only once the arena does.
        let Some(arena) = Arena::global() else { return };
        let mut cursor = arena.lock();
        // Relaxed: under the lock, as every claim and release.
        self.block.state.store(0, Relaxed);
        arena.release(&mut cursor, self.block);
    }
}

/// Makes a handle for `object` at once (no collective between).
#[cfg(test)]
pub(crate) fn make<T: Object, H>(
    object: Box<T>,
    rank: core::ffi::c_int,
    nranks: core::ffi::c_int,
) -> Result<*mut H, Error> {
    Ok(reserve::<T>()?.fill(object, rank, nranks))
}

/// Exclusive use of a live handle's object: the handle is busy until this
/// is dropped (another exclusive call, and a free, are refused meanwhile).
#[derive(Debug)]
pub(crate) struct Exclusive<'a, T> {
    block: &'a Block,
    /// Entered on the owner's fast path (else with the busy bit).
    owner: bool,
    object: &'a T,
}

impl<T> Deref for Exclusive<'_, T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        self.object
    }
}

impl<T> Drop for Exclusive<'_, T> {
    #[inline]
    fn drop(&mut self) {
        if self.owner {
            self.block.bias.leave();
        } else {
            // Release: the next exclusive user (or the free) sees what this
            // call did to the object. Nothing else writes a busy state, so a
            // store does; `exclusive` set only BUSY, so this is idle again.
            self.block.state.store(self.block.state.load(Relaxed) & !BUSY, Release);
        }
    }
}

/// Takes exclusive use of the live handle `h` of `T`'s kind, lock-free (every
/// fence goes through here): on the owner's fast path, plain loads and
/// stores; else one compare-and-swap (and once, a revocation).
#[inline(always)]
pub(crate) fn exclusive<'a, T: Object, H>(h: *mut H, arg: &'static str) -> Result<Exclusive<'a, T>, Error> {
    let idle = T::KIND.tag();
    let block = Arena::global().and_then(|a| a.block(h.addr()));
    if let Some(b) = block {
        let me = thread_token();
        if b.bias.try_enter(me) {
            // Acquire: pairs with `make`'s Release and the last busy user's,
            // so the block and the object are seen as they left them; not
            // idle: another thread holds the handle, or it was freed.
            if b.state.load(Acquire) == idle {
                // SAFETY: live, and a free revokes the bias first, which
                // refuses while this call is inside (`take`).
                let object = unsafe { object::<T>(b) };
                return Ok(Exclusive { block: b, owner: true, object });
            }
            b.bias.leave();
        }
        // Relaxed: only a hint that spares the compare-and-swap (a locked
        // write on some CPUs) when the handle is not idle.
        if b.state.load(Relaxed) == idle
            // Acquire: as above. Relaxed on failure: a refusal reads nothing of the object.
            && b.state.compare_exchange(idle, idle | BUSY, Acquire, Relaxed).is_ok()
        {
            if !b.bias.revoke(me, heavy_fence) {
                // The owner is in a call on it, or the barrier failed.
                // Release: nothing was done; pairs as the guard's store.
                b.state.store(idle, Release);
                return Err(refused::<T>(h, arg, not_revoked()));
            }
            // SAFETY: live and now busy, with the owner out: the object stays
            // until the guard is dropped (`take` refuses busy handles).
            let object = unsafe { object::<T>(b) };
            return Ok(Exclusive { block: b, owner: false, object });
        }
    }
    Err(refusal::<T>(h, arg, block))
}

/// Why a revocation failed: the owner is inside, unless the barrier itself
/// cannot run here (then no other thread can ever take the handle).
#[cold]
fn not_revoked() -> Refusal {
    if heavy_fence_works() { Refusal::Busy } else { Refusal::OwnerOnly }
}

/// Runs `f` on the live handle `h`'s object under the arena's lock, so that
/// no free can run meanwhile; exclusive calls on the handle may.
pub(crate) fn shared<T: Object, H, R>(
    h: *mut H,
    arg: &'static str,
    f: impl FnOnce(&T) -> Result<R, Error>,
) -> Result<R, Error> {
    let p = NonNull::new(h).ok_or(Error::Null(arg))?;
    let arena = Arena::global().ok_or(refused::<T>(h, arg, Refusal::Foreign))?;
    let cursor = arena.lock();
    let Some(block) = arena.block(p.as_ptr().addr()) else {
        return Err(refused::<T>(h, arg, Refusal::Foreign));
    };
    // Acquire: pairs with `make`'s Release (the block and object filled).
    let state = block.state.load(Acquire);
    if Kind::of_tag(state) != Some(T::KIND) {
        return Err(classify::<T>(arena, &cursor, block, h.addr(), arg, state));
    }
    // SAFETY: live, and no `take` can free it while we hold the lock.
    // Exclusive users borrow it shared, too.
    f(unsafe { object::<T>(block) })
}

/// The object of a live block of `T`'s kind.
///
/// # Safety
/// `block` is live, of `T`'s kind, and stays so for `'a`.
unsafe fn object<'a, T: Object>(block: &Block) -> &'a T {
    // SAFETY: written before the block was published live (the caller saw it
    // live with Acquire), and not written again while it is.
    let p = unsafe { *block.object.get() };
    // SAFETY: made by `make` from a `Box<T>` (the kind's type); alive for
    // `'a` by the caller's contract.
    unsafe { &*p.cast::<T>() }
}

/// Unregisters the live, idle handle `h` (no later call accepts it) and
/// gives its object back, to be freed.
pub(crate) fn take<T: Object, H>(h: *mut H, arg: &'static str) -> Result<Box<T>, Error> {
    NonNull::new(h).ok_or(Error::Null(arg))?;
    let foreign = refused::<T>(h, arg, Refusal::Foreign);
    let arena = Arena::global().ok_or(foreign)?;
    let me = thread_token();
    // Revoking another thread's bias below may first register for the
    // barrier, milliseconds once per process: done before the lock, so that
    // nothing else waits for it.
    if arena.block(h.addr()).is_some_and(|b| !b.bias.is_owner(0) && !b.bias.is_owner(me)) {
        prepare_heavy_fence();
    }
    let mut cursor = arena.lock();
    let Some(block) = arena.block(h.addr()) else {
        return Err(refused::<T>(h, arg, Refusal::Foreign));
    };
    let idle = T::KIND.tag();
    // Relaxed: a look before the compare-and-swap, which writes even when it
    // fails, and blocks never handed out are on read-only pages; a state that
    // is not 0 is on a written page. Under the lock, only an exclusive
    // user's busy bit can come and go meanwhile: the swap below decides.
    let state = block.state.load(Relaxed);
    if state != idle {
        return Err(classify::<T>(arena, &cursor, block, h.addr(), arg, state));
    }
    // Acquire: sees what the last exclusive user did to the object. Relaxed on
    // failure: the state only classifies the refusal (under the arena's lock).
    if let Err(state) = block.state.compare_exchange(idle, 0, Acquire, Relaxed) {
        return Err(classify::<T>(arena, &cursor, block, h.addr(), arg, state));
    }
    if !block.bias.revoke(me, heavy_fence) {
        // The owner is in a call on it (on another thread, or this free is
        // nested in one of its calls), or the barrier failed.
        // Release: back as it was; nothing was done.
        block.state.store(idle, Release);
        return Err(refused::<T>(h, arg, not_revoked()));
    }
    // SAFETY: it was live, and is ours alone now: every later call finds it freed.
    let object = unsafe { *block.object.get() };
    arena.release(&mut cursor, block);
    // SAFETY: made by `make` from a `Box<T>` (its kind's type), taken once.
    Ok(unsafe { Box::from_raw(object.cast::<T>()) })
}

/// Why `h` was refused by [`exclusive`] (out of the fences' way).
#[cold]
#[inline(never)]
fn refusal<T: Object>(h: *mut impl Sized, arg: &'static str, block: Option<&Block>) -> Error {
    let addr = h.addr();
    if h.is_null() {
        return Error::Null(arg);
    }
    match (Arena::global(), block) {
        (Some(arena), Some(block)) => {
            let cursor = arena.lock();
            // Relaxed: what the state was when we looked; no data is read.
            classify::<T>(arena, &cursor, block, addr, arg, block.state.load(Relaxed))
        }
        _ => refused::<T>(h, arg, Refusal::Foreign),
    }
}

/// The refusal of handle `h` of `T`'s kind, for `why`.
fn refused<T: Object>(h: *mut impl Sized, arg: &'static str, why: Refusal) -> Error {
    Error::Handle { arg, kind: T::KIND, addr: h.addr(), why }
}

/// Why a block in state `state` is not a live, idle handle of `T`'s kind.
fn classify<T: Object>(
    arena: &Arena,
    cursor: &arena::Cursor,
    block: &Block,
    addr: usize,
    arg: &'static str,
    state: u64,
) -> Error {
    if state & FORKED != 0 {
        let pid = u32::try_from(state >> PID_SHIFT).unwrap_or(0);
        return Error::Handle { arg, kind: T::KIND, addr, why: Refusal::Forked(pid) };
    }
    let why = match Kind::of_tag(state) {
        // Being made: no caller has its value yet.
        None if state == RESERVED => Refusal::Foreign,
        Some(k) if k != T::KIND => Refusal::Kind(k),
        Some(_) if state & BUSY != 0 => Refusal::Busy,
        // Freed after we looked; or live and idle again, a race the caller lost.
        Some(_) => Refusal::Busy,
        None if arena.was_made(cursor, block) => Refusal::Stale,
        None => Refusal::Foreign,
    };
    Error::Handle { arg, kind: T::KIND, addr, why }
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
/// Every fence checks one: the error is built only on failure (built
/// eagerly, its drop cost a call per fence).
#[inline]
pub(crate) fn rank(value: core::ffi::c_int, arg: &'static str, nranks: u32, of: RangeOf) -> Result<u32, Error> {
    u32::try_from(value).ok().filter(|r| *r < nranks).ok_or_else(|| Error::Range {
        arg,
        value: i64::from(value),
        of,
        min: 0,
        end: i64::from(nranks),
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    thread_local! {
        /// Makes this thread's next [`reserve`] fail as if every handle were live.
        pub(crate) static REFUSE_RESERVE: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
    }

    #[derive(Debug)]
    struct W(u64);
    impl Object for W {
        const KIND: Kind = Kind::Win;
    }
    #[derive(Debug)]
    struct C(u64);
    impl Object for C {
        const KIND: Kind = Kind::Comm;
    }

    fn why<R: core::fmt::Debug>(r: Result<R, Error>) -> Refusal {
        match r {
            Err(Error::Handle { why, .. }) => why,
            r => panic!("not a handle refusal: {r:?}"),
        }
    }

    #[test]
    fn only_live_handles_of_the_right_kind_pass() {
        let h: *mut kpccl_shm_win_t = make(Box::new(W(7)), 1, 2).unwrap();
        // SAFETY: a live window handle's public part.
        let head = unsafe { h.read() };
        assert_eq!((head.rank, head.nranks), (1, 2));
        assert_eq!(exclusive::<W, _>(h, "h").unwrap().0, 7);
        assert_eq!(shared::<W, _, _>(h, "h", |w| Ok(w.0)).unwrap(), 7);
        assert_eq!(why(exclusive::<C, _>(h, "h")), Refusal::Kind(Kind::Win));
        assert_eq!(why(take::<C, _>(h, "h")), Refusal::Kind(Kind::Win));
        assert_eq!(take::<W, _>(h, "h").unwrap().0, 7);
        assert_eq!(why(exclusive::<W, _>(h, "h")), Refusal::Stale);
        assert_eq!(why(shared::<W, _, _>(h, "h", |w| Ok(w.0))), Refusal::Stale);
        assert_eq!(why(take::<W, _>(h, "h")), Refusal::Stale);
        assert!(matches!(exclusive::<W, u8>(core::ptr::null_mut(), "h"), Err(Error::Null("h"))));
        let mut local = 0u64;
        assert_eq!(why(exclusive::<W, _>(&raw mut local, "h")), Refusal::Foreign);
        assert_eq!(why(take::<C, _>(&raw mut local, "h")), Refusal::Foreign);
        assert_eq!(local, 0);
    }

    #[test]
    fn a_freed_handle_stays_freed_while_new_ones_are_made() {
        let old: *mut u8 = make(Box::new(C(1)), 0, 1).unwrap();
        take::<C, _>(old, "h").unwrap();
        let new: Vec<*mut u8> = (0..3000).map(|i| make(Box::new(C(i)), 0, 1).unwrap()).collect();
        assert!(!new.contains(&old), "a freed handle's address is not handed out again");
        assert_eq!(why(exclusive::<C, _>(old, "h")), Refusal::Stale);
        for (i, &h) in new.iter().enumerate() {
            assert_eq!(exclusive::<C, _>(h, "h").unwrap().0, i as u64);
            assert_eq!(take::<C, _>(h, "h").unwrap().0, i as u64);
        }
    }

    #[test]
    fn an_exclusive_user_keeps_out_others_and_the_free() {
        let h: *mut u8 = make(Box::new(W(3)), 0, 1).unwrap();
        let guard = exclusive::<W, _>(h, "h").unwrap();
        assert_eq!(why(exclusive::<W, _>(h, "h")), Refusal::Busy);
        assert_eq!(why(take::<W, _>(h, "h")), Refusal::Busy);
        // Queries may run beside it.
        assert_eq!(shared::<W, _, _>(h, "h", |w| Ok(w.0)).unwrap(), 3);
        drop(guard);
        assert_eq!(biased(h), heavy_fence_works(), "refused nested calls leave the maker's bias");
        assert!(exclusive::<W, _>(h, "h").is_ok());
        assert_eq!(take::<W, _>(h, "h").unwrap().0, 3);
    }

    /// Whether the handle's maker still enters on its fast path.
    fn biased(h: *mut u8) -> bool {
        let block = Arena::global().and_then(|a| a.block(h.addr())).unwrap();
        block.bias.is_owner(thread_token())
    }

    #[test]
    fn the_maker_enters_without_the_busy_bit_until_another_thread_does() {
        let h: *mut u8 = make(Box::new(W(5)), 0, 1).unwrap();
        assert_eq!(biased(h), heavy_fence_works(), "the maker owns the handle where membarrier works");
        {
            let guard = exclusive::<W, _>(h, "h").unwrap();
            assert_eq!(guard.owner, heavy_fence_works());
        }
        let addr = h.addr();
        // Another thread gets in once the maker is out, and revokes the bias.
        let other = std::thread::spawn(move || exclusive::<W, _>(addr as *mut u8, "h").map(|g| (g.0, g.owner)));
        assert_eq!(other.join().unwrap().unwrap(), (5, false));
        assert!(!biased(h));
        // The maker now takes the busy bit, like everyone.
        assert!(!exclusive::<W, _>(h, "h").unwrap().owner);
        assert_eq!(take::<W, _>(h, "h").unwrap().0, 5);
    }

    #[test]
    fn a_call_on_the_fast_path_keeps_out_other_threads_and_their_free() {
        let h: *mut u8 = make(Box::new(W(6)), 0, 1).unwrap();
        let guard = exclusive::<W, _>(h, "h").unwrap();
        let addr = h.addr();
        let other = std::thread::spawn(move || {
            let h = addr as *mut u8;
            (why(exclusive::<W, _>(h, "h")), why(take::<W, _>(h, "h")))
        });
        assert_eq!(other.join().unwrap(), (Refusal::Busy, Refusal::Busy));
        assert_eq!(guard.0, 6, "the object is untouched");
        drop(guard);
        let other = std::thread::spawn(move || take::<W, _>(addr as *mut u8, "h").map(|w| w.0));
        assert_eq!(other.join().unwrap().unwrap(), 6);
        assert_eq!(why(exclusive::<W, _>(h, "h")), Refusal::Stale);
    }

    #[test]
    fn a_value_in_the_unused_part_of_the_region_is_foreign_and_nothing_is_written() {
        // Never handed out (the region does not wrap in tests): a read-only
        // page, which a compare-and-swap would fault on.
        let addr = Arena::global().unwrap().last_block_addr();
        let h = addr as *mut u8;
        assert_eq!(why(exclusive::<W, _>(h, "h")), Refusal::Foreign);
        assert_eq!(why(take::<W, _>(h, "h")), Refusal::Foreign);
        assert_eq!(why(shared::<C, _, _>(h, "h", |c| Ok(c.0))), Refusal::Foreign);
    }

    #[test]
    fn a_reserved_handle_is_unusable_until_filled_and_released_unfilled() {
        let slot = reserve::<W>().unwrap();
        let h = core::ptr::from_ref(slot.block).cast_mut().cast::<u8>();
        assert_eq!(why(exclusive::<W, _>(h, "h")), Refusal::Foreign, "no caller has it yet");
        assert_eq!(why(take::<W, _>(h, "h")), Refusal::Foreign);
        drop(slot);
        assert_eq!(why(exclusive::<W, _>(h, "h")), Refusal::Stale, "released: as a freed handle");
        let slot = reserve::<W>().unwrap();
        assert_ne!(core::ptr::from_ref(slot.block).cast_mut().cast::<u8>(), h, "not handed out again");
        let h: *mut u8 = slot.fill(Box::new(W(9)), 0, 1);
        assert_eq!(exclusive::<W, _>(h, "h").unwrap().0, 9);
        assert_eq!(take::<W, _>(h, "h").unwrap().0, 9);
    }

    #[test]
    fn a_refused_reservation_is_an_error_naming_the_kind() {
        REFUSE_RESERVE.with(|r| r.set(true));
        let e = reserve::<C>().unwrap_err();
        assert_eq!(e.to_string(), "cannot make a communicator handle: every handle of the region is live (free some)");
        assert!(reserve::<C>().is_ok(), "once only");
    }

    #[test]
    fn a_handle_of_the_parent_is_refused_in_a_forked_child_naming_the_parent() {
        let h: *mut u8 = make(Box::new(W(4)), 0, 1).unwrap();
        let block = Arena::global().and_then(|a| a.block(h.addr())).unwrap();
        // What the child's fork handler does to every block in use.
        // Relaxed: this test's own block, used by this thread only.
        let idle = block.state.load(Relaxed);
        block.state.store(forked(idle, 4242), Relaxed);
        assert_eq!(forked(forked(idle, 4242), 77), forked(idle, 4242), "the maker's pid is kept");
        assert_eq!(why(exclusive::<W, _>(h, "h")), Refusal::Forked(4242));
        assert_eq!(why(take::<W, _>(h, "win")), Refusal::Forked(4242));
        assert_eq!(why(shared::<W, _, _>(h, "h", |w| Ok(w.0))), Refusal::Forked(4242));
        assert_eq!(why(exclusive::<C, _>(h, "h")), Refusal::Forked(4242), "whatever kind was asked for");
        let text = take::<W, _>(h, "win").unwrap_err().to_string();
        let want = format!(
            "window handle {h:p} (`win`) was made by the parent process (pid 4242); a forked child cannot use it"
        );
        assert!(text.starts_with(&want), "{text}");
        // Relaxed: as above.
        block.state.store(idle, Relaxed);
        assert_eq!(take::<W, _>(h, "h").unwrap().0, 4);
    }

    #[test]
    fn ranks_are_checked() {
        assert_eq!(rank(3, "r", 4, RangeOf::WindowRanks).ok(), Some(3));
        assert!(rank(4, "r", 4, RangeOf::WindowRanks).is_err());
        assert!(rank(-1, "r", 4, RangeOf::WindowRanks).is_err());
    }
}
