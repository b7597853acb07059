//! The launcher's out-of-band collectives for C programs started by
//! `kpccl-run` (no MPI needed): `kpccl_run_oob` hands out callbacks backed
//! by [`kpccl_posix::launch::RunOob`].

use core::ffi::{c_int, c_void};
use std::sync::{Mutex, OnceLock, PoisonError};

use kpccl_posix::Oob;
use kpccl_posix::launch::RunOob;

use crate::error::Error;
use crate::handle;
use crate::oob::{kpccl_shm_datatype_t, kpccl_shm_oob_cb_t};

/// The process's connection to its launcher, made at the first call and
/// kept until the process exits (the launcher sees the exit).
static RUN: OnceLock<RunOob> = OnceLock::new();

fn connect() -> Result<&'static RunOob, Error> {
    // One connection per process: the launcher refuses a second one for the
    // same rank, so threads racing here must not both connect.
    static CONNECTING: Mutex<()> = Mutex::new(());
    let _one_at_a_time = CONNECTING.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(run) = RUN.get() {
        return Ok(run);
    }
    let run = RunOob::from_env()
        .map_err(|e| Error::Launcher(e.to_string()))?
        .ok_or(Error::Invalid { arg: "environment", why: "not started by kpccl-run (KPCCL_RUN_SOCKET is not set)" })?;
    Ok(RUN.get_or_init(|| run))
}

/// The group pointer of the launcher's callbacks: the connection's address.
/// Runs a callback body; a panic or a foreign group is an error code.
fn callback(group_arg: *mut c_void, body: impl FnOnce(&RunOob) -> Result<(), c_int>) -> c_int {
    let Some(run) = RUN.get().filter(|r| group_of(r) == group_arg) else { return -1 };
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body(run))) {
        Ok(Ok(())) => 0,
        Ok(Err(code)) => code,
        Err(_) => -1,
    }
}

fn code(e: kpccl_posix::OobError) -> c_int {
    if e.code == 0 { -1 } else { e.code }
}

/// The launcher's allgather.
///
/// # Safety
/// As for any `oob_allgather`: `sendbuf` holds `size` elements of
/// `datatype`, `recvbuf` room for that many per rank; `datatype` is one of
/// the enumerators; `group` is the one `kpccl_run_oob` gave.
unsafe extern "C" fn run_allgather(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    size: c_int,
    group: *mut c_void,
    datatype: kpccl_shm_datatype_t,
) -> c_int {
    callback(group, |run| {
        let len = usize::try_from(size).map_err(|_| -1)?.checked_mul(datatype.size()).ok_or(-1)?;
        let total = len.checked_mul(run.nranks() as usize).ok_or(-1)?;
        if len > 0 && (sendbuf.is_null() || recvbuf.is_null()) {
            return Err(-1);
        }
        let (send, recv): (&[u8], &mut [u8]) = if len == 0 {
            (&[], &mut [])
        } else {
            // SAFETY: not NULL; `sendbuf` holds `len` bytes by the caller's contract.
            let send = unsafe { core::slice::from_raw_parts(sendbuf.cast::<u8>(), len) };
            // SAFETY: not NULL; `recvbuf` holds `total` bytes by the caller's
            // contract, and does not overlap `sendbuf` (MPI's rule).
            let recv = unsafe { core::slice::from_raw_parts_mut(recvbuf.cast::<u8>(), total) };
            (send, recv)
        };
        run.allgather(send, recv).map_err(code)
    })
}

/// The launcher's barrier.
///
/// # Safety
/// `group` is the one `kpccl_run_oob` gave.
unsafe extern "C" fn run_barrier(group: *mut c_void) -> c_int {
    callback(group, |run| run.barrier().map_err(code))
}

/// For programs started by `kpccl-run -n N -- ./program` (no MPI): connects
/// to the launcher (once per process) and fills `cbs` with callbacks over
/// it, `*group` with their group, `*rank` and `*nranks` with this process's
/// place in the job. Pass them to `kpccl_shm_comm_create`. Fails when the
/// process was not started by the launcher.
///
/// A collective over these callbacks (inside `kpccl_shm_comm_create` and
/// `kpccl_shm_win_alloc`) waits for the other ranks at most
/// `KPCCL_OOB_TIMEOUT_MS` milliseconds (default 60000), or `KPCCL_TIMEOUT_MS`
/// when that is set and shorter; then it fails on every rank, and
/// `kpccl_last_error()` names the rank that did not come ("rank 2 did not
/// answer during window creation (pid 1234, …)"). A rank that dies fails it
/// at once on every rank ("rank 2 died during window creation (pid 1234,
/// signal 9)").
///
/// # Safety
/// Every pointer is `NULL` (an error) or valid for writes of its type.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kpccl_run_oob(
    cbs: *mut kpccl_shm_oob_cb_t,
    group: *mut *mut c_void,
    rank: *mut c_int,
    nranks: *mut c_int,
) -> c_int {
    ffi_boundary!("kpccl_run_oob", {
        let outs = (handle::out(cbs, "cbs")?, handle::out(group, "group")?);
        let (rank, nranks) = (handle::out(rank, "rank")?, handle::out(nranks, "nranks")?);
        let run = connect()?;
        let (r, n) = (c_int::try_from(run.rank()), c_int::try_from(run.nranks()));
        let (Ok(r), Ok(n)) = (r, n) else {
            return Err(Error::Invalid { arg: "environment", why: "KPCCL_RANK or KPCCL_NRANKS is too large" });
        };
        let callbacks = kpccl_shm_oob_cb_t { oob_allgather: Some(run_allgather), oob_barrier: Some(run_barrier) };
        // SAFETY: all four checked not NULL and aligned; writable by the caller's contract.
        unsafe { outs.0.as_ptr().write(callbacks) };
        // SAFETY: as above.
        unsafe { outs.1.as_ptr().write(group_of(run)) };
        // SAFETY: as above.
        unsafe { rank.as_ptr().write(r) };
        // SAFETY: as above.
        unsafe { nranks.as_ptr().write(n) };
        Ok(())
    })
}

/// The group pointer of the launcher's callbacks: the connection's address.
fn group_of(run: &'static RunOob) -> *mut c_void {
    core::ptr::from_ref(run).cast_mut().cast()
}
