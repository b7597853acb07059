//! The launcher's out-of-band collectives for C programs started by
//! `kpccl-run` (no MPI needed): `kpccl_run_oob` hands out callbacks backed
//! by [`kpccl_posix::launch::RunOob`].

use core::ffi::{c_int, c_void};
use std::sync::{Mutex, OnceLock, PoisonError};

use kpccl_posix::Oob;
use kpccl_posix::launch::RunOob;

use crate::error::Error;
use crate::handle;
use crate::oob::{AllgatherFn, kpccl_shm_datatype_t, kpccl_shm_oob_cb_t};

/// The process's connection to its launcher, made at the first call and
/// kept until the process exits (the launcher sees the exit), with the pid
/// of the process that made it.
static RUN: OnceLock<(RunOob, u32)> = OnceLock::new();

fn connect() -> Result<&'static RunOob, Error> {
    // One connection per process: the launcher refuses a second one for the
    // same rank, so threads racing here must not both connect.
    static CONNECTING: Mutex<()> = Mutex::new(());
    let _one_at_a_time = CONNECTING.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((run, pid)) = RUN.get() {
        return ours(run, *pid).ok_or(Error::Launcher(format!(
            "this process is a forked child of rank {}'s process (pid {pid}), whose connection to the launcher it \
             cannot use (a collective over it would be taken for that rank's)",
            run.rank()
        )));
    }
    let run = RunOob::from_env()
        .map_err(|e| {
            // The client says a malformed variable (or a rank beyond the
            // count) so: the caller's setting, as the library's own are.
            if e.kind() == std::io::ErrorKind::InvalidInput {
                Error::LauncherSetting(e.to_string())
            } else {
                Error::Launcher(e.to_string())
            }
        })?
        .ok_or(Error::NoLauncher)?;
    Ok(&RUN.get_or_init(|| (run, std::process::id())).0)
}

/// `run` if this process made it (pid `maker`); `None` in a forked child,
/// which shares the parent's socket: whatever it sent would be taken for
/// the parent rank's part in the job's next collective.
fn ours(run: &RunOob, maker: u32) -> Option<&RunOob> {
    (std::process::id() == maker).then_some(run)
}

/// Runs a callback body; a panic, a foreign group or a forked child (see
/// [`ours`]) is an error code.
fn callback(group_arg: *mut c_void, body: impl FnOnce(&RunOob) -> Result<(), c_int>) -> c_int {
    let run = RUN.get().and_then(|(run, pid)| ours(run, *pid));
    let Some(run) = run.filter(|r| group_of(r) == group_arg) else { return -1 };
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body(run))) {
        Ok(Ok(())) => 0,
        Ok(Err(code)) => code,
        Err(_) => -1,
    }
}

fn code(e: kpccl_posix::OobError) -> c_int {
    if e.code == 0 { -1 } else { e.code }
}

/// [`run_allgather`]'s type: the C type of `oob_allgather`, with the
/// datatype read as the `int` a C enum is.
type IntAllgatherFn = unsafe extern "C" fn(*const c_void, *mut c_void, c_int, *mut c_void, c_int) -> c_int;

// A field-less `repr(C)` enum is passed as C passes its enum: an `int`.
const _: () = assert!(size_of::<kpccl_shm_datatype_t>() == size_of::<c_int>());

/// [`run_allgather`] as `kpccl_shm_oob_cb_t` holds it.
fn run_allgather_cb() -> AllgatherFn {
    // SAFETY: the two types differ only in the last parameter, a field-less
    // `#[repr(C)]` enum of `int` size (asserted above) against `c_int`, which
    // the C ABI passes alike (rustc lowers such an enum to its integer);
    // every value the caller passes is then a valid `c_int`.
    unsafe { core::mem::transmute::<IntAllgatherFn, AllgatherFn>(run_allgather) }
}

/// The size of the elements of the datatype numbered `code`; `None` for
/// numbers that are no `kpccl_shm_datatype_t` (C lets an enum hold any).
fn element_size(code: c_int) -> Option<usize> {
    use kpccl_shm_datatype_t::*;
    let all = [
        KPCCL_SHM_DATATYPE_CHAR,
        KPCCL_SHM_DATATYPE_INT,
        KPCCL_SHM_DATATYPE_LONG,
        KPCCL_SHM_DATATYPE_FLOAT,
        KPCCL_SHM_DATATYPE_DOUBLE,
    ];
    all.into_iter().find(|d| *d as c_int == code).map(kpccl_shm_datatype_t::size)
}

/// The launcher's allgather. `datatype` is taken as an `int` (see
/// [`run_allgather_cb`]): a number that is no datatype fails the call
/// (taken as the enum, it would be undefined behaviour: a crash).
///
/// # Safety
/// As for any `oob_allgather`: `sendbuf` holds `size` elements of
/// `datatype`, `recvbuf` room for that many per rank; `group` is the one
/// `kpccl_run_oob` gave.
unsafe extern "C" fn run_allgather(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    size: c_int,
    group: *mut c_void,
    datatype: c_int,
) -> c_int {
    callback(group, |run| {
        let element = element_size(datatype).ok_or(-1)?;
        let len = usize::try_from(size).map_err(|_| -1)?.checked_mul(element).ok_or(-1)?;
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
/// process was not started by the launcher (`KPCCL_ERR_OUT_OF_BAND`: it has
/// no out-of-band layer; Python's `Comm.from_env()` raises `kpccl.Error`).
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
/// A child forked by the process after this call cannot use the
/// connection (it would speak for the parent's rank): there this call
/// fails, and so do the callbacks it gave, sending nothing.
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
        let callbacks = kpccl_shm_oob_cb_t { oob_allgather: Some(run_allgather_cb()), oob_barrier: Some(run_barrier) };
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
