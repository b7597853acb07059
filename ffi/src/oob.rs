//! The out-of-band callbacks of C programs (MPI, typically), as a
//! [`kpccl_core::Oob`].

use core::cell::Cell;
use core::ffi::{c_int, c_long, c_void};
use std::rc::Rc;

use kpccl_core::protocol::Record;
use kpccl_core::{Oob, OobError};

use crate::error::Error;

/// The element type of an out-of-band allgather.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum kpccl_shm_datatype_t {
    /// `char`: the library gathers bytes with this type.
    KPCCL_SHM_DATATYPE_CHAR = 0,
    /// `int`.
    KPCCL_SHM_DATATYPE_INT = 1,
    /// `long`.
    KPCCL_SHM_DATATYPE_LONG = 2,
    /// `float`.
    KPCCL_SHM_DATATYPE_FLOAT = 3,
    /// `double`.
    KPCCL_SHM_DATATYPE_DOUBLE = 4,
}

impl kpccl_shm_datatype_t {
    /// Bytes per element.
    pub(crate) fn size(self) -> usize {
        match self {
            Self::KPCCL_SHM_DATATYPE_CHAR => 1,
            Self::KPCCL_SHM_DATATYPE_INT => size_of::<c_int>(),
            Self::KPCCL_SHM_DATATYPE_LONG => size_of::<c_long>(),
            Self::KPCCL_SHM_DATATYPE_FLOAT => size_of::<f32>(),
            Self::KPCCL_SHM_DATATYPE_DOUBLE => size_of::<f64>(),
        }
    }
}

/// The allgather callback's type (Rust side).
pub(crate) type AllgatherFn = unsafe extern "C" fn(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    size: c_int,
    group: *mut c_void,
    datatype: kpccl_shm_datatype_t,
) -> c_int;

/// The barrier callback's type (Rust side).
pub(crate) type BarrierFn = unsafe extern "C" fn(group: *mut c_void) -> c_int;

/// The type of the callback that releases a communicator's group when the
/// communicator is destroyed (`kpccl_shm_comm_set_release`).
pub(crate) type ReleaseFn = unsafe extern "C" fn(group: *mut c_void);

/// The out-of-band collectives a communicator is built on. The allgather is
/// called only inside `kpccl_shm_comm_create`, `kpccl_shm_win_alloc` and
/// `kpccl_shm_win_alloc_ex`, by every rank in the same order. A non-zero
/// return fails the call on every rank. The barrier must be set (not
/// `NULL`), as in HPCKit's API, but this version of the library never calls
/// it: no kpccl call runs an out-of-band barrier.
///
/// A callback must return to the library: it must not throw (C++: catch
/// everything inside it and return non-zero instead), `longjmp` out of it, or
/// end its thread. The library's frames lie between it and the caller, and
/// unwinding or jumping across them is undefined behaviour: it would leave
/// the call's work half done (the handle claimed for the new object, the
/// window half made), and the other ranks waiting.
///
/// A callback that fails had better fail before taking part. One that took
/// part and then returns an error leaves the others with a completed
/// allgather: window creation still fails on every rank, but the single
/// allgather of communicator creation cannot tell them; they learn of it at
/// their next kpccl collective on the same group, where the failing rank
/// waits for them.
///
/// What bounds the wait: the library cannot interrupt a callback, so a rank
/// that never calls (stopped, stuck) keeps the others inside the callbacks
/// for as long as they block — with MPI, until the MPI job ends (mpirun
/// aborts the job when a rank dies; a timeout of the MPI implementation or
/// of the batch system, if any, bounds a stopped one). `KPCCL_TIMEOUT_MS`
/// bounds every wait of the library itself; under `kpccl-run`
/// (`kpccl_run_oob`) the callbacks are bounded too. When a creation fails
/// because a rank of this node died, the error names it (found by its pid
/// and start time).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct kpccl_shm_oob_cb_t {
    /// Gathers `size` elements of `datatype` from every rank's `sendbuf`
    /// into every rank's `recvbuf` (rank r's at element `r * size`), over
    /// the ranks of `group`; returns 0 on success. The library passes
    /// `KPCCL_SHM_DATATYPE_CHAR` and a byte count.
    pub oob_allgather: Option<
        unsafe extern "C" fn(
            sendbuf: *const c_void,
            recvbuf: *mut c_void,
            size: c_int,
            group: *mut c_void,
            datatype: kpccl_shm_datatype_t,
        ) -> c_int,
    >,
    /// Returns once every rank of `group` has called it; 0 on success.
    /// Required, but not called by this version of the library.
    pub oob_barrier: Option<unsafe extern "C" fn(group: *mut c_void) -> c_int>,
}

/// A pointer to out-of-band callbacks (HPCKit's name). `kpccl_shm_comm_create`
/// takes a `const kpccl_shm_oob_cb_t *`, which this converts to, as does a
/// pointer to a `const` table of callbacks.
pub type kpccl_shm_oob_cb_h = *mut kpccl_shm_oob_cb_t;

/// Room, in ranks, of the first allgather's buffer: see [`GroupSize`].
const FIRST_GATHER_RANKS: usize = 1 << 16;
const _: () = assert!(FIRST_GATHER_RANKS == 65_536, "`reserve_room` names the room in ranks");

/// Bytes of the first allgather's buffer: a communicator-creation record per
/// rank of the largest group (19 MiB of address space).
const ROOM_BYTES: usize = size_of::<Record>() * FIRST_GATHER_RANKS;

/// `len` zeroed bytes, or `None` if they cannot be allocated (a low
/// `RLIMIT_AS`). Zeroed by the allocator, as `vec![0; len]` is: the pages
/// are not touched, so the room costs only address space.
fn zeroed(len: usize) -> Option<Vec<u8>> {
    if len == 0 {
        return Some(Vec::new());
    }
    let layout = std::alloc::Layout::array::<u8>(len).ok()?;
    // SAFETY: `layout` has a non-zero size.
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
    // SAFETY: `ptr` (when not NULL) was allocated by the global allocator
    // with the layout of `len` bytes, which a `Vec<u8>` of capacity `len`
    // has, and all `len` bytes are initialised (zero).
    (!ptr.is_null()).then(|| unsafe { Vec::from_raw_parts(ptr, len, len) })
}

/// What the first allgather of a communicator showed about the size of the
/// callbacks' group. The allgather callback cannot be told the size of its
/// buffer: with a `nranks` smaller than the group (the node's rank count
/// passed with `MPI_COMM_WORLD`, say) it would write past the buffer. So the
/// first allgather gathers into a zeroed buffer with room for
/// [`FIRST_GATHER_RANKS`] ranks (allocated lazily, so the room costs only
/// address space), and a record past the first `nranks` shows a larger
/// group; later ones, on a group checked not to be larger, gather in place.
/// A record left zero within the first `nranks` shows a smaller group (the
/// world's rank count passed with a node's communicator): the core names
/// only the first rank that sent nothing; this says how many answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GroupSize {
    /// No allgather has completed.
    Unchecked,
    /// As many ranks as `nranks` answered.
    Fits,
    /// At least this many ranks answered.
    Larger(usize),
    /// Only this many ranks answered.
    Smaller(usize),
}

/// The C callbacks and their group, copied at communicator creation.
#[derive(Debug)]
pub(crate) struct CallbackOob {
    allgather: AllgatherFn,
    /// `None` when C passed none: refused by [`CallbackOob::check`], after
    /// the copy, so that the rank can still take part in the collective.
    barrier: Option<BarrierFn>,
    group: *mut c_void,
    /// Called with `group` when these callbacks are dropped (the
    /// communicator destroyed), if set; a `Cell` because it is set through
    /// the handle's exclusive (shared-reference) access.
    release: Cell<Option<ReleaseFn>>,
    /// Shared with the creating call, which reads it also when the
    /// creation failed (and these callbacks are gone with it).
    group_size: Rc<Cell<GroupSize>>,
    /// The first allgather's buffer, allocated before any collective
    /// ([`CallbackOob::reserve_room`]); empty once used.
    room: Room,
}

/// The first allgather's buffer, reserved ahead; empty once taken. Its
/// `Debug` gives the length, not 19 MiB of zeros.
#[derive(Default)]
struct Room(Cell<Vec<u8>>);

impl Room {
    fn take(&self) -> Vec<u8> {
        self.0.take()
    }

    fn put(&self, room: Vec<u8>) {
        self.0.set(room);
    }
}

impl core::fmt::Debug for Room {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let room = self.take();
        let len = room.len();
        self.put(room);
        write!(f, "Room({len} bytes)")
    }
}

impl CallbackOob {
    /// Copies the callbacks out of `cbs`: the allgather is required here,
    /// without which the rank cannot take part in any collective; a missing
    /// barrier is refused later, by [`CallbackOob::check`].
    ///
    /// # Safety
    /// `cbs` is `NULL` or points to a readable `kpccl_shm_oob_cb_t`.
    pub(crate) unsafe fn new(cbs: *const kpccl_shm_oob_cb_t, group: *mut c_void) -> Result<Self, Error> {
        if cbs.is_null() {
            return Err(Error::Null("oob"));
        }
        // Read where it is, aligned or not (a member of a packed struct):
        // refused, the rank could not take part, and the others would wait.
        // SAFETY: not NULL, readable by the caller's contract; both fields
        // are `Option<fn>`, for which every bit pattern C can store (NULL or
        // a function address) is valid.
        let cbs = unsafe { cbs.read_unaligned() };
        Ok(Self {
            allgather: cbs.oob_allgather.ok_or(Error::Null("oob->oob_allgather"))?,
            barrier: cbs.oob_barrier,
            group,
            release: Cell::new(None),
            group_size: Rc::new(Cell::new(GroupSize::Unchecked)),
            room: Room::default(),
        })
    }

    /// Allocates the first allgather's buffer now, before the collective,
    /// so that a rank that cannot have it fails as a refused argument does:
    /// it takes part refused and every rank fails. Taking part needs that
    /// buffer all the same (the callback may write a whole group's records),
    /// so the refused part allocates it again; if that fails too, this
    /// rank cannot take part at all and the others wait in their allgather.
    pub(crate) fn reserve_room(&self) -> Result<(), Error> {
        let what = "the records of the first out-of-band allgather (room for up to 65536 ranks)";
        let room = zeroed(ROOM_BYTES).ok_or(Error::NoMemory { bytes: ROOM_BYTES, what })?;
        self.room.put(room);
        Ok(())
    }

    /// Refuses callbacks that lack what HPCKit's API requires (the barrier),
    /// as a bad argument of this rank: the caller still takes part in the
    /// collective, refused, so that every rank fails instead of waiting.
    pub(crate) fn check(&self) -> Result<(), Error> {
        self.barrier.map(|_| ()).ok_or(Error::Null("oob->oob_barrier"))
    }

    /// What the first allgather showed about the group's size, readable
    /// also once these callbacks are dropped (by a failed creation).
    pub(crate) fn group_size_probe(&self) -> Rc<Cell<GroupSize>> {
        Rc::clone(&self.group_size)
    }

    /// The user's allgather of `send` into `recv`, a buffer of `recv_len`
    /// bytes (one block of `send.len()` per rank of the group, by the
    /// callback's contract).
    ///
    /// # Safety
    /// `recv` is valid for writes of `recv_len` bytes.
    unsafe fn call_allgather(&self, send: &[u8], recv: *mut u8) -> Result<(), OobError> {
        // The core gathers small fixed-size records; every rank passes the
        // same length, so a length that does not fit fails on every rank.
        let count = c_int::try_from(send.len()).map_err(|_| OobError { code: -1 })?;
        // SAFETY: `send` holds `count` bytes and `recv` one such block per
        // rank of the group (the caller's contract), as the callback's
        // contract asks; the callback and `group` are the user's, promised
        // valid at creation.
        let rc = unsafe {
            (self.allgather)(
                send.as_ptr().cast(),
                recv.cast(),
                count,
                self.group,
                kpccl_shm_datatype_t::KPCCL_SHM_DATATYPE_CHAR,
            )
        };
        if rc == 0 { Ok(()) } else { Err(OobError { code: rc }) }
    }

    /// The first allgather: into room for [`FIRST_GATHER_RANKS`] ranks, then
    /// copied to `recv` (see [`GroupSize`]). Without the room (not reserved,
    /// and not to be had now) it fails without taking part: the callback
    /// could write past a smaller buffer.
    fn first_allgather(&self, send: &[u8], recv: &mut [u8]) -> Result<(), OobError> {
        let block = send.len().max(1);
        let len = recv.len().max(block.saturating_mul(FIRST_GATHER_RANKS));
        let reserved = self.room.take();
        let Some(mut room) = Some(reserved).filter(|r| r.len() == len).or_else(|| zeroed(len)) else {
            // A rank whose room was reserved never allocates here; one refused
            // for want of it reports that (`reserve_room`), not this code.
            return Err(OobError { code: -1 });
        };
        // SAFETY: `room` is a writable buffer of its length, which holds one
        // block per rank for groups of up to `FIRST_GATHER_RANKS` ranks.
        unsafe { self.call_allgather(send, room.as_mut_ptr()) }?;
        // Every record the core gathers has a non-zero magic word.
        let answered = |b: &[u8]| b.iter().any(|&x| x != 0);
        let past = room[recv.len()..].chunks(block).take_while(|b| answered(b)).count();
        let within = room[..recv.len()].chunks(block).filter(|b| answered(b)).count();
        let size = match (past, within * block < recv.len()) {
            (0, false) => GroupSize::Fits,
            (0, true) => GroupSize::Smaller(within),
            (past, _) => GroupSize::Larger(recv.len() / block + past),
        };
        self.group_size.set(size);
        recv.copy_from_slice(&room[..recv.len()]);
        Ok(())
    }

    /// Makes dropping these callbacks call `release(group)`, once (`None`: nothing).
    pub(crate) fn set_release(&self, release: Option<ReleaseFn>) {
        self.release.set(release);
    }
}

impl Drop for CallbackOob {
    fn drop(&mut self) {
        if let Some(release) = self.release.take() {
            // SAFETY: the user's callback with the user's group, which the
            // user promised valid until the communicator is destroyed: now.
            unsafe { release(self.group) };
        }
    }
}

impl Oob for CallbackOob {
    fn allgather(&self, send: &[u8], recv: &mut [u8]) -> Result<(), OobError> {
        debug_assert_eq!(recv.len() % send.len().max(1), 0, "recv holds one send per rank");
        if self.group_size.get() == GroupSize::Unchecked {
            return self.first_allgather(send, recv);
        }
        // SAFETY: `recv` is writable, and holds one block per rank of a group
        // that the first allgather found no larger than the rank count.
        unsafe { self.call_allgather(send, recv.as_mut_ptr()) }
    }

    fn barrier(&self) -> Result<(), OobError> {
        // A communicator without one is never made (`check`).
        let barrier = self.barrier.ok_or(OobError { code: -1 })?;
        // SAFETY: the user's callback and group, promised valid at creation.
        let rc = unsafe { barrier(self.group) };
        if rc == 0 { Ok(()) } else { Err(OobError { code: rc }) }
    }
}
