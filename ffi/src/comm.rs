//! Communicators: `kpccl_shm_comm_create` / `kpccl_shm_comm_destroy`, and
//! where their ranks run: `kpccl_shm_comm_query` / `kpccl_shm_comm_node_ranks`.

use core::ffi::{c_int, c_void};

use kpccl_posix::Comm;

use crate::error::{Error, RangeOf};
use crate::handle::{self, Exclusive, Kind};
use crate::log::{self, Level};
use crate::oob::{CallbackOob, GroupSize, kpccl_shm_oob_cb_t};

/// A communicator (opaque): `nranks` processes, on one node or many, that
/// create windows together through out-of-band callbacks.
#[derive(Debug)]
pub struct kpccl_shm_comm_t {
    _opaque: [u8; 0],
}

/// Where a communicator's ranks run, as `kpccl_shm_comm_query` reports it.
/// Shared memory stops at the node: a window spans the `local_size` ranks of
/// the caller's node (`kpccl_shm_comm_node_ranks` lists them).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct kpccl_shm_comm_info_t {
    /// This process's rank in the communicator.
    pub rank: c_int,
    /// Ranks in the communicator (on every node).
    pub nranks: c_int,
    /// How many nodes the communicator spans.
    pub nnodes: c_int,
    /// This rank's node, `0..nnodes` (nodes are numbered by their lowest rank).
    pub node: c_int,
    /// This rank's number among its node's ranks, `0..local_size`.
    pub local_rank: c_int,
    /// Ranks on this node.
    pub local_size: c_int,
}

/// `local_rank` for `kpccl_shm_comm_create`: number this node's ranks in
/// rank order (every rank of the node must pass it).
pub const KPCCL_LOCAL_RANK_AUTO: c_int = -1;

/// A communicator handle, checked like a window handle (see
/// `kpccl_shm_win_h`): any value may be passed, and a destroyed one is
/// refused as stale even after new communicators were made. One thread at
/// a time may allocate a window on it or destroy it: another thread's
/// allocation or destruction meanwhile fails ("… is in use by another
/// thread"); queries may run beside them.
pub type kpccl_shm_comm_h = *mut kpccl_shm_comm_t;

impl handle::Object for Comm<CallbackOob> {
    const KIND: Kind = Kind::Comm;
}

/// Checks that `h` is a live communicator handle and takes exclusive use of
/// it until the result is dropped (for a window allocation: another
/// thread's allocation on it, or its destruction, is refused meanwhile).
///
/// # Safety
/// None beyond Rust's: every value of `h` is checked before use, and the
/// communicator cannot be destroyed while the result lives.
pub(crate) unsafe fn get<'a>(
    h: kpccl_shm_comm_h,
    arg: &'static str,
) -> Result<Exclusive<'a, Comm<CallbackOob>>, Error> {
    handle::exclusive(h, arg)
}

/// Creates a communicator (collective: every rank calls it with the same
/// `nranks`, its own `rank` and the same kind of callbacks).
///
/// `nranks` is 1 to 1024, counting the ranks of every node: the limit is on
/// the whole communicator, not on a node (two nodes of 600 ranks each are
/// refused, though each node's windows would span 600). `rank` is in
/// `0..nranks`, unique per process, and keeps its meaning in every call.
/// `local_rank` is the caller's rank among the ranks on its node:
/// on a node of `n` ranks, each passes its own value in `0..n` (else every
/// rank fails), or every rank of the node passes `KPCCL_LOCAL_RANK_AUTO` to
/// be numbered in rank order. Ranks are grouped by node: by boot id,
/// hostname and pid namespace, or by the `KPCCL_NODE_ID` environment variable when set (to
/// simulate nodes on one machine; each simulated node keeps its segments in
/// a directory of its own). Windows then span the ranks of one node
/// (see `kpccl_shm_comm_query`). `oob` is read
/// during this call (the callbacks are copied); `group` is passed to them
/// unchanged and must stay valid until the communicator and every window
/// allocation on it are done with. On success `*comm` is the new
/// communicator; on failure it is `NULL` and every rank fails.
///
/// A bad `nranks`, `rank`, `local_rank` or `comm`, or a `NULL`
/// `oob->oob_barrier`, on one rank still takes part in the collective, so
/// that every rank fails and none waits; a `NULL` `oob` or
/// `oob->oob_allgather` cannot (the peers' callbacks then wait in vain).
/// A `nranks` smaller than the callbacks' group (up to 65 536 ranks) fails
/// on every rank: the allgather of this call gathers into room for that
/// many ranks' records, where the callback cannot write past the buffer.
/// A larger one fails on every rank too, saying how many ranks answered.
///
/// # Safety
/// `oob` is `NULL` (an error) or points to a readable `kpccl_shm_oob_cb_t`
/// whose callbacks are valid to call with `group`; `comm` is `NULL` (an
/// error) or valid for writes of a handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kpccl_shm_comm_create(
    nranks: c_int,
    rank: c_int,
    local_rank: c_int,
    // Read only: `const`, so that C may pass a `static const` table of
    // callbacks (C++ refuses to drop the qualifier, C warns).
    oob: *const kpccl_shm_oob_cb_t,
    group: *mut c_void,
    comm: *mut kpccl_shm_comm_h,
) -> c_int {
    ffi_boundary!("kpccl_shm_comm_create", {
        // SAFETY: `comm` is NULL or writable (the caller's contract).
        unsafe { handle::clear(comm, core::ptr::null_mut()) };
        // SAFETY: `oob` is NULL or readable (the caller's contract).
        let callbacks = unsafe { CallbackOob::new(oob, group) }?;
        let count =
            u32::try_from(nranks).ok().filter(|n| (1..=kpccl_core::MAX_RANKS).contains(n)).ok_or(Error::Range {
                arg: "nranks",
                value: nranks.into(),
                of: RangeOf::RankCount,
                min: 1,
                end: i64::from(kpccl_core::MAX_RANKS) + 1,
            });
        // A count out of range still takes part, refused, with one the core
        // accepts: the first allgather has room for the callbacks' whole
        // group (`oob::GroupSize`), whatever the count.
        let n = count.as_ref().ok().copied().unwrap_or(if nranks < 1 { 1 } else { kpccl_core::MAX_RANKS });
        let given_local = |v: c_int| match v {
            KPCCL_LOCAL_RANK_AUTO => Ok(None),
            v => handle::rank(v, "local_rank", n, RangeOf::LocalRanks).map(Some),
        };
        // The handle is claimed before the collective: a rank that cannot
        // have one fails with the others, not alone after they made theirs.
        // So is the first allgather's buffer (`CallbackOob::reserve_room`).
        let local = count
            .and_then(|_| callbacks.check())
            .and_then(|()| callbacks.reserve_room())
            .and_then(|()| handle::rank(rank, "rank", n, RangeOf::CommRanks))
            .and_then(|r| {
                Ok((r, given_local(local_rank)?, handle::out(comm, "comm")?, handle::reserve::<Comm<CallbackOob>>()?))
            });
        let (rank, local_rank, out, slot) = match local {
            Ok(l) => l,
            Err(e) => {
                // Take part anyway, refused, so that every rank fails rather than waits.
                Comm::fail(&callbacks, u32::try_from(rank).unwrap_or(u32::MAX), n);
                return Err(e);
            }
        };
        let probe = callbacks.group_size_probe();
        let made = Comm::builder(callbacks, rank, n).local_rank(local_rank).build();
        // The probe (an `Rc`) goes before the handle is published: from then
        // on another thread may destroy the communicator, and its count with it.
        let group_size = probe.get();
        drop(probe);
        // Every rank that gathered the records of more ranks than `n` fails
        // here (those past `n` fail as out of range), the communicator
        // dropped; every rank that gathered fewer failed in the core, which
        // names the first rank that sent nothing: this says how many did.
        match group_size {
            GroupSize::Larger(at_least) => return Err(Error::GroupLarger { nranks: n, at_least }),
            GroupSize::Smaller(answered) => return Err(Error::GroupSmaller { nranks: n, answered }),
            GroupSize::Unchecked | GroupSize::Fits => {}
        }
        let comm = made?;
        log::log(
            Level::Info,
            format_args!(
                "rank {} (local rank {} of node {}) of {n}: communicator ready",
                comm.rank(),
                comm.local_rank(),
                comm.node()
            ),
        );
        let h = slot.fill(Box::new(comm), int(rank), nranks);
        // SAFETY: `out` was checked not NULL and aligned; writable by the caller's contract.
        unsafe { out.as_ptr().write(h) };
        Ok(())
    })
}

/// Destroys a communicator (local: no collective). Windows allocated on it
/// stay valid and are freed on their own.
///
/// # Safety
/// `comm` is any value (checked: see `kpccl_shm_comm_h`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kpccl_shm_comm_destroy(comm: kpccl_shm_comm_h) -> c_int {
    ffi_boundary!("kpccl_shm_comm_destroy", {
        let c = handle::take::<Comm<CallbackOob>, _>(comm, "comm")?;
        log::log(
            Level::Debug,
            format_args!("rank {} (local rank {}): communicator destroyed", c.rank(), c.local_rank()),
        );
        drop(c);
        Ok(())
    })
}

fn int(v: u32) -> c_int {
    c_int::try_from(v).expect("ranks and nodes are below MAX_RANKS")
}

/// Where this rank runs: fills `*info` with the rank and rank count, the
/// node count, this rank's node, its local rank and its node's rank count.
/// Local (no collective).
///
/// # Safety
/// `comm` is any value (checked: see `kpccl_shm_comm_h`); `info` is `NULL`
/// (an error) or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kpccl_shm_comm_query(comm: kpccl_shm_comm_h, info: *mut kpccl_shm_comm_info_t) -> c_int {
    ffi_boundary!("kpccl_shm_comm_query", {
        let i = handle::shared(comm, "comm", |c: &Comm<CallbackOob>| {
            Ok(kpccl_shm_comm_info_t {
                rank: int(c.rank()),
                nranks: int(c.nranks()),
                nnodes: int(c.nnodes()),
                node: int(c.node()),
                local_rank: int(c.local_rank()),
                local_size: int(c.local_size()),
            })
        })?;
        let out = handle::out(info, "info")?;
        // SAFETY: checked not NULL and aligned; writable by the caller's contract.
        unsafe { out.as_ptr().write(i) };
        Ok(())
    })
}

/// The CPU count this node's rank count is compared with: fills `*cpus`
/// with the count taken at creation, the CPUs the ranks' affinities cover,
/// fewer where some ranks are confined to fewer CPUs than they number, at
/// most the control groups' CPU quota (rounded up). More ranks than this on
/// a node make waits hand the CPU over instead of spinning; compare with
/// it, not with `sysconf(_SC_NPROCESSORS_ONLN)`, which a cpuset, a quota or
/// ranks pinned to CPUs make too many. Local (no collective).
///
/// # Safety
/// `comm` is any value (checked: see `kpccl_shm_comm_h`); `cpus` is `NULL`
/// (an error) or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kpccl_shm_comm_node_cpus(comm: kpccl_shm_comm_h, cpus: *mut c_int) -> c_int {
    ffi_boundary!("kpccl_shm_comm_node_cpus", {
        let n = handle::shared(comm, "comm", |c: &Comm<CallbackOob>| Ok(c.node_cpus()))?;
        let out = handle::out(cpus, "cpus")?;
        // At most the 1024 CPUs an affinity mask describes.
        let n = c_int::try_from(n).unwrap_or(c_int::MAX);
        // SAFETY: checked not NULL and aligned; writable by the caller's contract.
        unsafe { out.as_ptr().write(n) };
        Ok(())
    })
}

/// The global ranks on this node, by local rank: `ranks[l]` is the rank whose
/// local rank is `l`, for `l` in `0..local_size` (see `kpccl_shm_comm_query`).
/// `capacity` is the length of `ranks`; fewer than `local_size` is an error
/// (nothing written). Local (no collective).
///
/// # Safety
/// `comm` is any value (checked: see `kpccl_shm_comm_h`); `ranks` is `NULL`
/// (an error) or valid for writes of `capacity` ints.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kpccl_shm_comm_node_ranks(
    comm: kpccl_shm_comm_h,
    ranks: *mut c_int,
    capacity: c_int,
) -> c_int {
    ffi_boundary!("kpccl_shm_comm_node_ranks", {
        handle::shared(comm, "comm", |c: &Comm<CallbackOob>| {
            let out = handle::out(ranks, "ranks")?;
            let node = c.node_ranks();
            if usize::try_from(capacity).map_or(true, |cap| cap < node.len()) {
                return Err(Error::Range {
                    arg: "capacity",
                    value: capacity.into(),
                    of: RangeOf::NodeRanks,
                    min: i64::from(c.local_size()),
                    end: i64::from(c_int::MAX),
                });
            }
            // SAFETY: `ranks` is valid for writes of `capacity >= node.len()`
            // ints (the caller's contract), checked not NULL and aligned.
            let dst = unsafe { core::slice::from_raw_parts_mut(out.as_ptr(), node.len()) };
            for (d, &r) in dst.iter_mut().zip(node) {
                *d = int(r);
            }
            Ok(())
        })
    })
}
