//! Collective creation of a device window (ascend-ipc.md, "documented order"):
//!
//! 1. A host window of kind Ascend carries the fence slots; ranks asking for
//!    another kind fail there, together.
//! 2. `Ident`: each rank sets its device, allocates its segment and gathers
//!    every rank's device, bare tgid and size.
//! 3. `Export`: each rank exports its segment and whitelists its peers' tgids
//!    (known only now, and after the peers started: the pid-reuse guard),
//!    then gathers the keys. Receiving a key means its whitelist is set.
//! 4. `Import`: each rank imports its peers' segments (peer access enabled
//!    across devices) and gathers the results.
//! 5. A fence on the host window confirms that every rank is in.
//!
//! Every gathered record carries its rank's status, so all ranks reach the
//! same verdict and fail together; on failure, imports are closed, a fence
//! stands for the barrier, then keys are closed and memory freed. A rank
//! whose out-of-band call fails poisons the host window, then makes one
//! "flush" allgather ([`lockstep`]): the others either meet it in the
//! current allgather or their next, or, after the last one, find the poison
//! in step 5's fence and flush too.

use kpccl_core::Oob;
use kpccl_core::fence::{Poison, PoisonKind};
use kpccl_core::protocol::lockstep::{self, LockstepRecord as _};
use kpccl_posix::{Comm, Window};

use super::Options;
use super::error::{Call, Collective, Error, Failure};
use super::record::{self, NO_VALIDATION, Record, Stage};
use super::state::{DeviceState, Restore, Segment};
use crate::backend::Runtime;
use crate::codes::*;

/// Bytes actually allocated and exported for a segment of `size`: whole
/// pages, as the driver only exports page-aligned ranges (2 MiB pages once
/// `aclrtMalloc` picks huge pages, above 1 MiB).
pub(crate) fn alloc_len(size: usize) -> usize {
    let page = if size > 1 << 20 { 2 << 20 } else { 4096 };
    size.div_ceil(page) * page
}

/// Runs the protocol; `host` is the window of step 1.
pub(crate) fn create<O: Oob>(
    comm: &Comm<O>,
    host: &Window,
    rt: Result<Runtime, Error>,
    opts: &Options,
) -> Result<DeviceState, Error> {
    let (me, n) = (comm.rank(), comm.nranks());
    let oob = comm.oob();
    let mut table = vec![Record::default(); n as usize];
    // A rank whose allgather fails leaves the protocol: it poisons the host
    // window first, so that no rank waits for it in a fence (the failure
    // path's barrier, or step 5, where the poison asks for the flush).
    let poison = || {
        host.raw().poison(Poison { kind: PoisonKind::Flush, rank: me });
    };

    // 2. Ident.
    let mut mine = Record::new(Stage::Ident, me, n);
    mine.device = opts.device;
    mine.size = opts.size as u64;
    mine.options = if opts.validation { 0 } else { NO_VALIDATION };
    // Creation makes the window's device current; the thread's context is
    // set back at the end (dropped last: a failed creation's `state` is
    // released while the window's device is still current).
    let _restore = rt.as_ref().ok().map(Restore::current);
    let (mut state, local) = match rt {
        Ok(rt) => {
            let mut state = DeviceState::new(rt, opts.device, me, n);
            let local = ident(&mut state, opts, &mut mine).err();
            (Some(state), local)
        }
        Err(e) => {
            mine.fail(Failure::NoRuntime);
            (None, Some(e))
        }
    };
    if let Some(e) = &local {
        mine.fail(local_failure(e));
    }
    lockstep::exchange(oob, &mine, &mut table, poison).map_err(Error::local)?;
    record::verdict(&table, Stage::Ident, local)?;
    let mut state = state.take().expect("a rank without a runtime reported a failure");
    let tgids: Vec<i32> = table.iter().map(|r| r.tgid).collect();
    // Every rank reads the same table: all refuse alike.
    if let Some((ranks, tgid)) = shared_process(&tgids) {
        return Err(Error::SharedProcess { ranks, tgid });
    }
    let sizes = record::sizes(&table)?;
    for ((seg, rec), &len) in state.segs.iter_mut().zip(&table).zip(&sizes) {
        seg.device = rec.device;
        seg.len = len;
    }

    // 3. Export.
    let mut mine = Record::new(Stage::Export, me, n);
    mine.options = if opts.validation { 0 } else { NO_VALIDATION };
    let local = export(&mut state, opts, &tgids, &mut mine).err();
    if let Some(e) = &local {
        mine.fail(local_failure(e));
    }
    lockstep::exchange(oob, &mine, &mut table, poison).map_err(Error::local)?;
    record::verdict(&table, Stage::Export, local)?;
    let keys = record::keys(&table, &sizes)?;

    // 4. Import.
    let mut mine = Record::new(Stage::Import, me, n);
    mine.options = if opts.validation { 0 } else { NO_VALIDATION };
    let local = import(&mut state, &keys).err();
    if let Some(e) = &local {
        mine.fail(local_failure(e));
    }
    let verdict = lockstep::exchange(oob, &mine, &mut table, poison)
        .map_err(Error::local)
        .and_then(|()| record::verdict(&table, Stage::Import, local));
    if let Err(e) = verdict {
        // Importers close before exporters destroy: the fence is the barrier
        // (it fails fast on the poison of a rank that left the protocol).
        let _ = state.close_imports();
        if !matches!(e, Error::Collective(Collective::Local(Failure::Oob(_)))) {
            let _ = host.fence();
        }
        return Err(e);
    }

    // 5. Everyone is in. A rank whose last allgather failed after the others
    // finished it has flushed; it asks them, through the poison word, to flush too.
    match host.fence() {
        Ok(()) => Ok(state),
        Err(e) => {
            if let Some(Poison { kind: PoisonKind::Flush, rank }) = host.poisoned() {
                lockstep::flush(oob, &mine, Failure::Oob(-1), &mut table);
                let _ = state.close_imports();
                return Err(Collective::Peer { rank, failure: Failure::Oob(-1) }.into());
            }
            let _ = state.close_imports();
            Err(e.into())
        }
    }
}

/// The first two ranks with one process (tgid; 0 is unknown), if any.
fn shared_process(tgids: &[i32]) -> Option<([u32; 2], i32)> {
    let mut first_rank = std::collections::HashMap::new();
    for (rank, &tgid) in (0u32..).zip(tgids).filter(|&(_, &t)| t != 0) {
        if let Some(&first) = first_rank.get(&tgid) {
            return Some(([first, rank], tgid));
        }
        first_rank.insert(tgid, rank);
    }
    None
}

/// What a rank's own error tells the others.
fn local_failure(e: &Error) -> Failure {
    match e {
        Error::Collective(Collective::Local(f)) => *f,
        Error::Backend(_) => Failure::NoRuntime,
        _ => Failure::Argument,
    }
}

/// Stage 2, local part: the device, this process's tgid, the window's stream,
/// the allocation (with the policy of the options: P2P by default, which the
/// inference chips need before another device may import it).
fn ident(state: &mut DeviceState, opts: &Options, mine: &mut Record) -> Result<(), Error> {
    if opts.device < 0 {
        return Err(Error::NegativeDevice { device: opts.device });
    }
    if isize::try_from(opts.size).is_err() {
        return Err(Error::SizeTooLarge { size: opts.size as u64 });
    }
    let rt = state.rt.clone();
    match rt.init() {
        Ok(()) => {}
        Err(e) if e.code() == ACL_ERROR_REPEAT_INITIALIZE => {}
        Err(e) => return Err(Error::acl(Call::Init, e)),
    }
    rt.set_device(opts.device).map_err(|e| Error::acl(Call::SetDevice, e))?;
    state.holds_device = true;
    state.context = Some(rt.get_current_context().map_err(|e| Error::acl(Call::GetContext, e))?);
    mine.tgid = rt.device_get_bare_tgid().map_err(|e| Error::acl(Call::GetBareTgid, e))?;
    state.stream = Some(rt.create_stream().map_err(|e| Error::acl(Call::CreateStream, e))?);
    if opts.size > 0 {
        let ptr = rt.malloc(alloc_len(opts.size), opts.policy).map_err(|e| Error::acl(Call::Malloc, e))?;
        state.alloc = Some(ptr);
        let me = state.rank as usize;
        state.segs[me] = Segment { ptr, len: opts.size, device: opts.device, imported: None };
    }
    Ok(())
}

/// Stage 3, local part: the key, and the whitelist of every peer's tgid.
fn export(state: &mut DeviceState, opts: &Options, tgids: &[i32], mine: &mut Record) -> Result<(), Error> {
    let Some(ptr) = state.alloc else { return Ok(()) };
    let rt = state.rt.clone();
    let flags = if opts.validation {
        ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT
    } else {
        ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION
    };
    let key =
        rt.ipc_mem_get_export_key(ptr, alloc_len(opts.size), flags).map_err(|e| Error::acl(Call::GetExportKey, e))?;
    state.key = Some(key);
    mine.set_key(&key);
    if !opts.validation || opts.skips_whitelist() {
        return Ok(());
    }
    // The runtime skips its own tgid, and refuses a call left with nothing.
    let own = tgids[state.rank as usize];
    let mut pids: Vec<i32> = tgids.iter().copied().filter(|&p| p != 0 && p != own).collect();
    pids.sort_unstable();
    pids.dedup();
    for chunk in pids.chunks(ACL_IPC_MAX_PIDS_PER_CALL) {
        rt.ipc_mem_set_import_pid(&key, chunk).map_err(|e| Error::acl(Call::SetImportPid, e))?;
    }
    Ok(())
}

/// Stage 4, local part: every peer's segment, imported. Stops at the first failure
/// (the imports made so far are closed by the caller).
fn import(state: &mut DeviceState, keys: &[Option<crate::IpcKey>]) -> Result<(), Error> {
    let rt = state.rt.clone();
    let me = state.rank;
    for (peer, key) in (0u32..).zip(keys) {
        let Some(key) = key.filter(|_| peer != me) else { continue };
        let their = state.segs[peer as usize].device;
        let mut flags = ACL_RT_IPC_MEM_IMPORT_FLAG_DEFAULT;
        if their != state.device {
            let can = rt.device_can_access_peer(state.device, their).map_err(|e| {
                Error::local(Failure::Acl { call: Call::CanAccessPeer, code: e.code(), peer: Some(peer) })
            })?;
            if !can {
                return Err(Error::local(Failure::NoPeerAccess { peer }));
            }
            flags = ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS;
        }
        let ptr = rt
            .ipc_mem_import_by_key(&key, flags)
            .map_err(|e| Error::local(Failure::Acl { call: Call::ImportByKey, code: e.code(), peer: Some(peer) }))?;
        let seg = &mut state.segs[peer as usize];
        seg.ptr = ptr;
        seg.imported = Some(key);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::shared_process;

    #[test]
    fn shared_process_names_the_first_two_ranks_of_a_process_and_skips_unknown_ones() {
        assert_eq!(shared_process(&[5, 0, 0, 7, 5, 7]), Some(([0, 4], 5)));
        assert_eq!(shared_process(&[0, 0, 3]), None);
        assert_eq!(shared_process(&[1, 2, 3]), None);
    }
}
