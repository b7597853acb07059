//! Communicators: `kpccl_shm_comm_create` / `kpccl_shm_comm_destroy`.

use core::ffi::{c_int, c_void};
use core::ptr::NonNull;

use kpccl_posix::Comm;

use crate::error::Error;
use crate::handle::{self, Kind};
use crate::log::{self, Level};
use crate::oob::{CallbackOob, kpccl_shm_oob_cb_h};

/// A communicator (opaque): `nranks` processes of one node that create
/// windows together through out-of-band callbacks.
#[derive(Debug)]
pub struct kpccl_shm_comm_t {
    magic: u64,
    local_rank: u32,
    comm: Comm<CallbackOob>,
}

/// A communicator handle.
pub type kpccl_shm_comm_h = *mut kpccl_shm_comm_t;

const MAGIC: u64 = u64::from_be_bytes(*b"kpcclCOM");

impl kpccl_shm_comm_t {
    /// The Rust communicator.
    pub(crate) fn comm(&self) -> &Comm<CallbackOob> {
        &self.comm
    }
}

/// Checks that `h` is a live communicator handle and borrows it.
///
/// # Safety
/// No other thread frees `h` while the borrow lasts.
pub(crate) unsafe fn get<'a>(h: kpccl_shm_comm_h, arg: &'static str) -> Result<&'a kpccl_shm_comm_t, Error> {
    let p = handle::check(h, arg, Kind::Comm)?;
    // SAFETY: registered, so a live `Box<kpccl_shm_comm_t>` of ours; the C
    // side never sees inside it (opaque), so nothing writes it concurrently.
    let c = unsafe { p.as_ref() };
    if c.magic != MAGIC {
        return Err(Error::Handle { arg, kind: "communicator handle" });
    }
    Ok(c)
}

/// Creates a communicator (collective: every rank calls it with the same
/// `nranks`, its own `rank` and the same kind of callbacks).
///
/// `rank` is in `0..nranks`, unique per process; `local_rank` is the
/// caller's rank among the ranks on its node, in `0..nranks` (all ranks of a
/// communicator share one node, so it usually equals `rank`). `oob` is read
/// during this call (the callbacks are copied); `group` is passed to them
/// unchanged and must stay valid until the communicator and every window
/// allocation on it are done with. On success `*comm` is the new
/// communicator; on failure it is `NULL` and every rank fails.
///
/// A bad `rank`, `local_rank` or `comm` on one rank still takes part in the
/// collective, so that every rank fails and none waits; a `NULL` `oob` or
/// an invalid `nranks` cannot (the peers' callbacks then wait in vain).
///
/// # Safety
/// `oob` is `NULL` or points to a readable `kpccl_shm_oob_cb_t` whose
/// callbacks are valid to call with `group`; `comm` is `NULL` or valid for
/// writes of a handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kpccl_shm_comm_create(
    nranks: c_int,
    rank: c_int,
    local_rank: c_int,
    oob: kpccl_shm_oob_cb_h,
    group: *mut c_void,
    comm: *mut kpccl_shm_comm_h,
) -> c_int {
    ffi_boundary!("kpccl_shm_comm_create", {
        // SAFETY: `comm` is NULL or writable (the caller's contract).
        unsafe { handle::clear(comm, core::ptr::null_mut()) };
        // SAFETY: `oob` is NULL or readable (the caller's contract).
        let callbacks = unsafe { CallbackOob::new(oob, group) }?;
        let n = u32::try_from(nranks).ok().filter(|n| (1..=kpccl_core::MAX_RANKS).contains(n)).ok_or(Error::Range {
            arg: "nranks",
            value: nranks.into(),
            min: 1,
            end: i64::from(kpccl_core::MAX_RANKS) + 1,
        })?;
        let local = handle::rank(rank, "rank", n)
            .and_then(|r| Ok((r, handle::rank(local_rank, "local_rank", n)?, handle::out(comm, "comm")?)));
        let (rank, local_rank, out) = match local {
            Ok(l) => l,
            Err(e) => {
                // Take part anyway, refused, so that every rank fails rather than waits.
                Comm::fail(&callbacks, u32::try_from(rank).unwrap_or(u32::MAX), n);
                return Err(e);
            }
        };
        let c = Box::new(kpccl_shm_comm_t { magic: MAGIC, local_rank, comm: Comm::new(callbacks, rank, n)? });
        log::log(
            Level::Info,
            format_args!("rank {} (local rank {local_rank}) of {n}: communicator ready", c.comm.rank()),
        );
        let p = NonNull::from(Box::leak(c));
        handle::register(p, Kind::Comm);
        // SAFETY: `out` was checked not NULL and aligned; writable by the caller's contract.
        unsafe { out.as_ptr().write(p.as_ptr()) };
        Ok(())
    })
}

/// Destroys a communicator (local: no collective). Windows allocated on it
/// stay valid and are freed on their own.
///
/// # Safety
/// `comm` is `NULL` or a handle; no other thread uses it during or after the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kpccl_shm_comm_destroy(comm: kpccl_shm_comm_h) -> c_int {
    ffi_boundary!("kpccl_shm_comm_destroy", {
        let p = handle::take(comm, "comm", Kind::Comm)?;
        // SAFETY: it was registered, so it is a live `Box` of ours, now
        // unregistered: nobody else will free it.
        let mut c = unsafe { Box::from_raw(p.as_ptr()) };
        c.magic = 0;
        log::log(
            Level::Debug,
            format_args!("rank {} (local rank {}): communicator destroyed", c.comm.rank(), c.local_rank),
        );
        drop(c);
        Ok(())
    })
}
