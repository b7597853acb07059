//! Windows: allocation, fences, queries and free.

use core::ffi::{c_int, c_void};
use core::ptr::NonNull;

use kpccl_posix::Comm;

use crate::attr::{Options, kpccl_shm_win_attr_t};
use crate::comm::{self, kpccl_shm_comm_h};
use crate::device::{self, AnyWindow};
use crate::error::{Error, RangeOf};
use crate::handle::{self, Kind};
use crate::oob::CallbackOob;

/// A window as C sees it: the public fields, followed by library-private
/// state. Never allocate, copy or write one; read `rank` and `nranks`.
///
/// Ranks are the communicator's. Over several nodes, only the ranks of this
/// rank's node share the window's memory (`kpccl_shm_comm_node_ranks`).
#[repr(C)]
#[derive(Debug)]
pub struct kpccl_shm_win_t {
    /// This process's rank (in the communicator).
    pub rank: c_int,
    /// The number of ranks in the communicator (on every node).
    pub nranks: c_int,
    /// Library-private (the handle's serial number).
    pub reserved: u64,
}

/// A window handle. Every call checks it before use, so any value may be
/// passed: `NULL`, a foreign pointer and a communicator are refused, and so
/// is a freed window ("window handle 0x… (`win`) was freed (stale handle)") even
/// after new windows were made, because the library never hands out a freed
/// handle's value again until the process's handle region wraps: after 2^28
/// handles (windows and communicators) with the full 16 GiB of address
/// space it reserves, after fewer when it gets less (at most 1/64 of an
/// address-space limit, `ulimit -v`; halved while the system refuses; down
/// to 1 024 handles). A handle freed that long ago may then name a new
/// object. Until then a stale call never touches a live window. When every
/// handle is live, or the system refuses memory for more, a creation fails
/// on every rank ("cannot make a window handle: …").
///
/// A forked child refuses every handle of its parent ("… was made by the
/// parent process (pid N); a forked child cannot use it"): the windows'
/// memory is not mapped there. Use handles in the process that made them.
///
/// One thread at a time may fence, signal, wait on, put to, get from or free
/// a window.
/// Another thread's such call meanwhile fails ("… is in use by another
/// thread") instead of corrupting the fence; `kpccl_shm_win_query` may run
/// beside a fence, and a free racing a query either waits for it or makes
/// it fail as stale.
pub type kpccl_shm_win_h = *mut kpccl_shm_win_t;

impl handle::Object for AnyWindow {
    const KIND: Kind = Kind::Win;
}

// The C contract: `win->rank` and `win->nranks` come first.
const _: () = assert!(core::mem::offset_of!(kpccl_shm_win_t, rank) == 0);
const _: () = assert!(core::mem::offset_of!(kpccl_shm_win_t, nranks) == size_of::<c_int>());

/// Runs a pairwise call (`peer_fence`, `signal`, `wait`) on the live window
/// `win` with the rank `remote_rank`, both checked.
#[inline(always)]
fn with_peer<T>(
    win: kpccl_shm_win_h,
    remote_rank: c_int,
    op: impl FnOnce(&AnyWindow, u32) -> Result<T, Error>,
) -> Result<T, Error> {
    // SAFETY: none needed (see `get`).
    let w = unsafe { get(win) }?;
    let peer = handle::rank(remote_rank, "remote_rank", w.nranks(), RangeOf::WindowRanks)?;
    op(&w, peer)
}

/// Checks that `h` is a live window handle and takes exclusive use of its
/// window until the result is dropped (another thread's fence or free on it
/// is refused meanwhile). Lock-free: the fences' check.
///
/// # Safety
/// None beyond Rust's: every value of `h` is checked before use, and the
/// window cannot be freed while the result lives.
#[inline(always)]
pub(crate) unsafe fn get<'a>(h: kpccl_shm_win_h) -> Result<handle::Exclusive<'a, AnyWindow>, Error> {
    handle::exclusive(h, "win")
}

/// Allocates a window (collective over the communicator's ranks, on every
/// node): this rank owns `size` bytes (0 is legal; sizes may differ per
/// rank). The window's memory is shared by the ranks of each node; a failure
/// on any node fails every rank. On success
/// `*baseptr` is this rank's segment (`NULL` when `size` is 0) and `*win`
/// the window; on failure both are `NULL` and every rank fails, except
/// that an invalid `comm` (`NULL`, freed, or in use by another thread of
/// this rank) keeps this rank out of the collective, and the others then
/// wait for it (up to their out-of-band layer's own timeout).
///
/// Equivalent to [`kpccl_shm_win_alloc_ex`] with `attr` `NULL`.
///
/// # Safety
/// `comm` is any value (checked: see `kpccl_shm_comm_h`); `baseptr` and
/// `win` are `NULL` (an error) or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kpccl_shm_win_alloc(
    size: usize,
    comm: kpccl_shm_comm_h,
    baseptr: *mut *mut c_void,
    win: *mut kpccl_shm_win_h,
) -> c_int {
    ffi_boundary!("kpccl_shm_win_alloc", {
        // SAFETY: the caller's contract is this function's.
        unsafe { alloc(size, comm, core::ptr::null(), baseptr, win) }
    })
}

/// Allocates a window with options (collective): `attr` is `NULL` (the
/// defaults) or initialized by `kpccl_shm_win_attr_init`; otherwise as
/// [`kpccl_shm_win_alloc`]. Every rank must give the same layout and
/// alignment. A bad argument on one rank (a `NULL` output pointer, an
/// invalid attribute) fails the allocation on every rank; only an invalid
/// `comm` keeps the rank out of the collective.
///
/// # Safety
/// As [`kpccl_shm_win_alloc`]; `attr` is `NULL` or readable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kpccl_shm_win_alloc_ex(
    size: usize,
    comm: kpccl_shm_comm_h,
    attr: *const kpccl_shm_win_attr_t,
    baseptr: *mut *mut c_void,
    win: *mut kpccl_shm_win_h,
) -> c_int {
    ffi_boundary!("kpccl_shm_win_alloc_ex", {
        // SAFETY: the caller's contract is this function's.
        unsafe { alloc(size, comm, attr, baseptr, win) }
    })
}

/// # Safety
/// As [`kpccl_shm_win_alloc_ex`].
unsafe fn alloc(
    size: usize,
    comm: kpccl_shm_comm_h,
    attr: *const kpccl_shm_win_attr_t,
    baseptr: *mut *mut c_void,
    win: *mut kpccl_shm_win_h,
) -> Result<(), Error> {
    // SAFETY: NULL or writable (the caller's contract).
    unsafe { handle::clear(baseptr, core::ptr::null_mut()) };
    // SAFETY: NULL or writable (the caller's contract).
    unsafe { handle::clear(win, core::ptr::null_mut()) };
    // SAFETY: none needed (see `comm::get`).
    let guard = unsafe { comm::get(comm, "comm") }?;
    let comm: &Comm<CallbackOob> = &guard;
    let local = (|| {
        let outs = (handle::out(baseptr, "baseptr")?, handle::out(win, "win")?);
        if isize::try_from(size).is_err() {
            return Err(Error::Invalid { arg: "size", why: "larger than the address space allows" });
        }
        // SAFETY: NULL or readable (the caller's contract).
        let options = unsafe { Options::from_attr(attr) }?;
        // Segments are aligned within the mapping, and the mapping only to a
        // page. (One that is no power of two is refused by the collective,
        // saying so: it is never valid, "not supported yet" would mislead.)
        if options.align.is_some_and(|a| a > kpccl_posix::page_size() && a.is_power_of_two()) {
            return Err(Error::Invalid {
                arg: "attr->alignment",
                why: "larger than the page size (not supported yet)",
            });
        }
        // Claimed before the collective: a rank that cannot have a handle
        // fails with the others, not alone after they made the window.
        Ok((outs, options, handle::reserve::<AnyWindow>()?))
    })();
    let ((baseptr, win), options, slot) = match local {
        Ok(l) => l,
        Err(e) => {
            // Take part anyway, refused, so that every rank fails; report our own reason.
            let _ = comm.window(0).fail();
            return Err(e);
        }
    };
    if let Some(dev) = options.device {
        // SAFETY: both checked by `handle::out`, writable by the caller's contract.
        return unsafe { finish(device::alloc(comm, size, dev, &options)?, slot, baseptr, win) };
    }
    let builder = comm.window(size).options(&options.window());
    // SAFETY: both checked by `handle::out`, writable by the caller's contract.
    unsafe { finish(AnyWindow::Host(builder.alloc()?), slot, baseptr, win) }
}

/// Hands a new window to C in `slot`: `*baseptr` is this rank's segment,
/// `*win` the handle.
///
/// # Safety
/// `baseptr` and `win` are aligned and valid for writes.
unsafe fn finish(
    window: AnyWindow,
    slot: handle::Slot<AnyWindow>,
    baseptr: NonNull<*mut c_void>,
    win: NonNull<kpccl_shm_win_h>,
) -> Result<(), Error> {
    let (base, _) = window.segment(window.rank())?;
    let rank = c_int::try_from(window.rank()).expect("rank < MAX_RANKS");
    let nranks = c_int::try_from(window.nranks()).expect("nranks <= MAX_RANKS");
    let h = slot.fill(Box::new(window), rank, nranks);
    // SAFETY: aligned and writable (this function's contract).
    unsafe { baseptr.as_ptr().write(base) };
    // SAFETY: as above.
    unsafe { win.as_ptr().write(h) };
    Ok(())
}

/// Frees a window (collective): fences with every rank so that nobody still
/// reads, then unmaps. An accepted handle is gone afterwards even when the
/// call fails (e.g. a peer died during the fence): the memory is released
/// and the error returned. A refused one (stale, or in another thread's
/// fence) is left as it was. A peer fence or `kpccl_shm_peer_wait` of
/// another rank that waits for this one (a fence count that does not match)
/// fails as this call begins, and so does this call, instead of both
/// waiting for ever ("rank 1 left the window ... while rank 0 still waited
/// for it"); so does any later wait of theirs for this rank.
///
/// # Safety
/// `win` is any value (checked: see `kpccl_shm_win_h`); it fails, and the
/// window lives on, while another thread fences it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kpccl_shm_win_free(win: kpccl_shm_win_h) -> c_int {
    ffi_boundary!("kpccl_shm_win_free", {
        let window = handle::take::<AnyWindow, _>(win, "win")?;
        window.free()
    })
}

/// The pairwise fence with `remote_rank`: what this rank did in the window
/// before it is seen by `remote_rank` after its matching
/// `kpccl_shm_peer_fence(win, <this rank>)`, and vice versa. Fences between
/// a pair match one to one, in order; a fence with oneself returns at once.
/// `remote_rank` must run on this node: a rank of another node is an error
/// (shared memory does not cross nodes).
///
/// A fence that fails while waiting (a timeout, a dead peer, a rank that
/// left or abandoned the window) poisons the window for every rank: from
/// then on the fences and waits of every rank on it fail, naming the cause,
/// and the window can only be freed (`kpccl_shm_win_free`); do not retry.
/// (Refused arguments, such as a rank out of range or a window in use by
/// another thread, fail the call alone.)
///
/// # Safety
/// `win` is any value (checked: see `kpccl_shm_win_h`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kpccl_shm_peer_fence(win: kpccl_shm_win_h, remote_rank: c_int) -> c_int {
    ffi_boundary!("kpccl_shm_peer_fence", { with_peer(win, remote_rank, AnyWindow::peer_fence) })
}

/// Signals `remote_rank` once and returns without waiting: what this rank
/// did in the window before the call is seen by `remote_rank` after the
/// `kpccl_shm_peer_wait(win, <this rank>)` that consumes this signal.
/// Signals count: n signals satisfy n waits, none is lost or counted twice.
/// They are separate from fences: `kpccl_shm_peer_fence` and
/// `kpccl_shm_win_fence` neither send nor consume them, and each call orders
/// what it orders, so they mix freely on the same pair. A signal does not
/// wait for the peer to consume earlier ones: a rank that reuses a buffer
/// waits for a signal back (or fences) first. A signal to oneself does
/// nothing. `remote_rank` must run on this node.
///
/// # Safety
/// `win` is any value (checked: see `kpccl_shm_win_h`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kpccl_shm_peer_signal(win: kpccl_shm_win_h, remote_rank: c_int) -> c_int {
    ffi_boundary!("kpccl_shm_peer_signal", { with_peer(win, remote_rank, AnyWindow::signal) })
}

/// Waits until `remote_rank` has signalled this rank
/// (`kpccl_shm_peer_signal(win, <this rank>)`) more times than this rank has
/// waited for it, and consumes one signal: what `remote_rank` did in the
/// window before that signal is seen by this rank after the call. Like a
/// fence, it fails instead of hanging when `remote_rank` dies, when
/// `KPCCL_TIMEOUT_MS` passes, or when another rank abandoned the window.
/// Waiting for oneself returns at once. `remote_rank` must run on this node.
///
/// A wait that fails while waiting (a timeout, a dead peer, a rank that
/// left or abandoned the window) poisons the window for every rank: from
/// then on the fences and waits of every rank on it fail, naming the cause,
/// and the window can only be freed (`kpccl_shm_win_free`); do not retry.
/// (Refused arguments, such as a rank out of range or a window in use by
/// another thread, fail the call alone.)
///
/// # Safety
/// `win` is any value (checked: see `kpccl_shm_win_h`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kpccl_shm_peer_wait(win: kpccl_shm_win_h, remote_rank: c_int) -> c_int {
    ffi_boundary!("kpccl_shm_peer_wait", { with_peer(win, remote_rank, AnyWindow::wait) })
}

/// The wait that never waits, as `MPI_Test` is for a receive: if
/// `remote_rank` has signalled this rank more times than this rank has
/// waited for it, consumes one signal (as `kpccl_shm_peer_wait` does, with
/// the same ordering) and sets `*flag` to 1; otherwise sets it to 0 and
/// consumes nothing. Returns at once either way. Tests that find no signal
/// look for dead ranks at most once per `KPCCL_LIVENESS_MS` (50 ms):
/// `remote_rank` each time, every rank still in the window every eighth
/// time, so a loop of tests fails, naming the dead rank, as a wait does;
/// `KPCCL_TIMEOUT_MS` bounds waits, not tests. A rank that freed the window
/// is no error (a test at the end of a program may find no signal left):
/// a loop of tests on a rank in `kpccl_shm_win_free`, which waits for this
/// rank's free, ends only when a timeout ends that free. It fails at once,
/// too, while another thread of this process is in a call on `win`.
/// Testing oneself sets 1. On failure `*flag` is 0 (unless `flag` itself
/// was refused: `NULL` or misaligned) and nothing is consumed.
///
/// # Safety
/// `win` is any value (checked: see `kpccl_shm_win_h`); `flag` is `NULL`
/// or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kpccl_shm_peer_test(win: kpccl_shm_win_h, remote_rank: c_int, flag: *mut c_int) -> c_int {
    ffi_boundary!("kpccl_shm_peer_test", {
        let flag = handle::out(flag, "flag")?;
        // SAFETY: checked not NULL and aligned; writable by the caller's contract.
        unsafe { flag.as_ptr().write(0) };
        let taken = with_peer(win, remote_rank, AnyWindow::try_wait)?;
        // SAFETY: as above.
        unsafe { flag.as_ptr().write(c_int::from(taken)) };
        Ok(())
    })
}

/// The fence with every rank of this node's window (each of them calls it):
/// what any of them did before it is seen by all of them after it. Ranks on
/// other nodes take part in their own node's fence, not in this one.
///
/// A fence that fails while waiting (a timeout, a dead peer, a rank that
/// left or abandoned the window) poisons the window for every rank: from
/// then on the fences and waits of every rank on it fail, naming the cause,
/// and the window can only be freed (`kpccl_shm_win_free`); do not retry.
/// (Refused arguments, such as a rank out of range or a window in use by
/// another thread, fail the call alone.)
///
/// # Safety
/// `win` is any value (checked: see `kpccl_shm_win_h`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kpccl_shm_win_fence(win: kpccl_shm_win_h) -> c_int {
    ffi_boundary!("kpccl_shm_win_fence", {
        // SAFETY: none needed (see `get`).
        let w = unsafe { get(win) }?;
        w.fence()
    })
}

/// Rank `rank`'s segment, like `MPI_Win_shared_query`: its size in bytes and
/// its address in this process (`NULL` when the size is 0). Local. `rank`
/// must run on this node: for a rank of another node it is an error. For a
/// device window (`KPCCL_SHM_MEMORY_ASCEND`) the address is a device address
/// (the peer's segment as imported here), for `aclrtMemcpyAsync` and kernels.
///
/// # Safety
/// `win` is any value (checked: see `kpccl_shm_win_h`); `size` and
/// `baseptr` are `NULL` (an error) or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kpccl_shm_win_query(
    win: kpccl_shm_win_h,
    rank: c_int,
    size: *mut usize,
    baseptr: *mut *mut c_void,
) -> c_int {
    ffi_boundary!("kpccl_shm_win_query", {
        // Beside a fence on another thread, but never beside the free.
        let (base, len) = handle::shared(win, "win", |w: &AnyWindow| {
            w.segment(handle::rank(rank, "rank", w.nranks(), RangeOf::WindowRanks)?)
        })?;
        let (size, baseptr) = (handle::out(size, "size")?, handle::out(baseptr, "baseptr")?);
        // SAFETY: checked not NULL and aligned; writable by the caller's contract.
        unsafe { size.as_ptr().write(len) };
        // SAFETY: as above.
        unsafe { baseptr.as_ptr().write(base) };
        Ok(())
    })
}
