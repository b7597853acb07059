//! [`AclRuntime`] for [`HostSim`]: the rules and codes of `docs/ascend-ipc.md` §5.

use core::ffi::c_void;

use super::key::{self, Parsed};
use super::mem;
use super::registry::{self, Importer, Record, RegistryError, WlEntry};
use super::state::{self, Alloc, Import};
use super::{Chip, HostSim, copylog, device_count, procinfo, stream};
use crate::codes::*;
use crate::runtime::{AclContext, AclError, AclResult, AclRuntime, AclStream, IpcKey, Memcpy};

/// The whitelist entries a key can hold (the driver's `IPC_WLIST_NUM`). Like the
/// driver (`devmm_ipc_node_set_pids_check`), a call is refused whole when the
/// entries held plus the pids it passes would exceed it, counting pids it would
/// skip (0, the creator) or only refresh: `-EINVAL`, which reaches the caller as
/// 507899. A key exported without pid validation fills the same list: each
/// process's first import adds its entry (`_devmm_ipc_node_get_wlist`), which a
/// close keeps, and an import that would add the 32 769th is refused (507899).
const WLIST_LIMIT: usize = 32_768;

fn fail<T>(code: i32) -> AclResult<T> {
    Err(AclError::new(code))
}

/// A registry that could not be read or written: said on stderr (an ACL
/// code cannot carry why), then the driver's internal error; a refused
/// variable (the lock's timeout) as [`config`] says it.
fn registry_io(e: RegistryError) -> AclError {
    match e {
        RegistryError::Refused(refused) => config(refused),
        RegistryError::Io(e) => {
            eprintln!("ascend simulator: {e}");
            AclError::new(ACL_ERROR_RT_INTERNAL_ERROR)
        }
    }
}

fn current() -> AclResult<i32> {
    state::current().ok_or(AclError::new(ACL_ERROR_RT_CONTEXT_NULL))
}

/// Makes this process's views of keys the exporter destroyed, freed or lost with its
/// death inaccessible (the driver frees those pages; the simulator applies it at the
/// importer's next call).
fn revoke_stale_imports() {
    let mut g = state::proc();
    let p = g.as_mut().expect("state is set by proc()");
    let live: Vec<String> = p.imports.iter().filter(|i| !i.revoked).map(|i| i.key.clone()).collect();
    if live.is_empty() {
        return;
    }
    let stale: Vec<String> =
        registry::with(|reg| live.into_iter().filter(|k| reg.find(k).is_none_or(|r| r.revoked)).collect())
            .unwrap_or_default();
    for imp in p.imports.iter_mut().filter(|i| stale.contains(&i.key)) {
        mem::revoke(&imp.map);
        imp.revoked = true;
    }
}

/// Whether `policy` (its low byte: the bandwidth bits may be or-ed in) is one of
/// the `ACL_MEM_MALLOC_*_P2P` policies (3, 4, 5 and HUGE1G_ONLY_P2P, 7).
fn is_p2p_policy(policy: u32) -> bool {
    matches!(
        policy & 0xff,
        ACL_MEM_MALLOC_HUGE_FIRST_P2P | ACL_MEM_MALLOC_HUGE_ONLY_P2P | ACL_MEM_MALLOC_NORMAL_ONLY_P2P | 7
    )
}

/// The handle of device 0's first default context. Device `d`'s context made
/// after `e` releases of the device is this plus `e * CONTEXT_DEVICES + d`
/// (made-up addresses: a context is only ever compared and passed back).
const CONTEXT_BASE: usize = 0x6b70_0000;
/// Devices per context epoch in the handles.
const CONTEXT_DEVICES: usize = 1 << 16;

fn valid_device(dev: i32) -> AclResult<()> {
    let count = device_count().map_err(config)?;
    if (0..count).contains(&dev) { Ok(()) } else { fail(ACL_ERROR_RT_INVALID_DEVICEID) }
}

/// A simulator variable with a value it refuses: said on stderr, then 100000,
/// as for an unknown chip model.
fn config(e: kpccl_posix::Error) -> AclError {
    eprintln!("ascend simulator: {e}");
    AclError::new(ACL_ERROR_INVALID_PARAM)
}

/// The argument checks shared by `aclrtMemcpy` and `aclrtMemcpyAsync`: NULL or an
/// unknown kind is 100000, `count > dst_max` 107000; `Ok(false)` for nothing to copy.
fn copy_args(c: &Memcpy) -> AclResult<bool> {
    if c.dst.is_null() || c.src.is_null() || c.kind > 5 {
        return fail(ACL_ERROR_INVALID_PARAM);
    }
    if c.count == 0 {
        return Ok(false);
    }
    if c.dst_max == 0 || c.count > c.dst_max {
        return fail(ACL_ERROR_RT_PARAM_INVALID);
    }
    Ok(true)
}

/// The sides of a copy that `kind` says are device memory (or, for
/// `ACL_MEMCPY_DEFAULT`, that start in device memory) must be device memory of
/// this process for all `count` bytes: the runtime refuses another address
/// (107000) where the simulator's plain copy would crash or write past a block.
fn device_sides(p: &state::Proc, dst: usize, src: usize, count: usize, kind: u32) -> AclResult<()> {
    let (dst_device, src_device) = match kind {
        ACL_MEMCPY_HOST_TO_DEVICE => (true, false),
        ACL_MEMCPY_DEVICE_TO_HOST => (false, true),
        ACL_MEMCPY_DEVICE_TO_DEVICE => (true, true),
        ACL_MEMCPY_DEFAULT => (p.physical_device(dst).is_some(), p.physical_device(src).is_some()),
        _ => (false, false),
    };
    for (addr, device) in [(dst, dst_device), (src, src_device)] {
        if device && !p.holds_device_range(addr, count) {
            return fail(ACL_ERROR_RT_PARAM_INVALID);
        }
    }
    Ok(())
}

/// A copy touching an import whose pages the exporter released (closed or
/// freed) since: the device faults it, and the call reports it as a
/// synchronised stream reports such a copy (507000), where touching the
/// revoked view from the host would crash the process.
fn revoked_side(p: &state::Proc, dst: usize, src: usize) -> AclResult<()> {
    if [dst, src].into_iter().any(|a| p.import_at(a).is_some_and(|i| i.revoked)) {
        return fail(ACL_ERROR_RT_INTERNAL_ERROR);
    }
    Ok(())
}

impl HostSim {
    /// The reference page's rules on copies that touch memory imported from
    /// another device (docs/ascend-ipc.md, "Rules of the reference page"):
    /// - the kind must name the direction, device to device (no inferred kind,
    ///   no host side, synchronous or asynchronous): 107000;
    /// - peer access to the owner's device must be enabled: 107000 (strict: 507022);
    /// - a synchronous copy within one device (both sides' pages on the owner's
    ///   device) is not supported: 207000; the asynchronous form is.
    ///
    /// Memory imported on its owner's device is under none of these limits. A
    /// synchronous copy between imported memory and the importer's own device
    /// memory (two devices) is allowed: the page names only copies within one device.
    fn check_copy(&self, p: &state::Proc, cur: i32, c: &Memcpy, sync: bool) -> AclResult<()> {
        let (dst, src, kind) = (c.dst as usize, c.src as usize, c.kind);
        device_sides(p, dst, src, c.count, kind)?;
        for (addr, other) in [(dst, src), (src, dst)] {
            let Some(imp) = p.import_at(addr).filter(|i| i.owner_dev != i.dev) else { continue };
            if kind != ACL_MEMCPY_DEVICE_TO_DEVICE {
                return fail(ACL_ERROR_RT_PARAM_INVALID);
            }
            if !p.p2p.contains(&(cur, imp.owner_dev)) {
                return fail(if self.strict { ACL_ERROR_RT_IPC_ERROR } else { ACL_ERROR_RT_PARAM_INVALID });
            }
            if sync && p.physical_device(other) == Some(imp.owner_dev) {
                return fail(ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
            }
        }
        Ok(())
    }

    /// Refuses IPC calls on a chip without IPC (207000), or an unknown chip model (100000).
    fn ipc_supported(&self) -> AclResult<()> {
        match self.chip {
            Chip::Unknown => fail(ACL_ERROR_INVALID_PARAM),
            c if !c.has_ipc() => fail(ACL_ERROR_RT_FEATURE_NOT_SUPPORT),
            _ => Ok(()),
        }
    }

    /// The checks of an IPC call after its parameters' (docs/ascend-ipc.md §1.2,
    /// Close): the runtime looks the thread's context up first (107002), then
    /// asks whether the chip has IPC; the current device.
    fn runtime_state(&self) -> AclResult<i32> {
        let cur = current()?;
        self.ipc_supported()?;
        Ok(cur)
    }

    /// `aclrtIpcMemGetExportKey` with an explicit key buffer length, as the C ABI
    /// passes it (anything but at least 65 is refused with 107000).
    pub fn export_key_with_len(&self, ptr: *mut c_void, size: usize, len: usize, flags: u64) -> AclResult<IpcKey> {
        if ptr.is_null() {
            return fail(ACL_ERROR_INVALID_PARAM);
        }
        if size == 0 || len < ACL_IPC_KEY_LEN || flags > 1 {
            return fail(ACL_ERROR_RT_PARAM_INVALID);
        }
        self.runtime_state()?;
        let addr = ptr as usize;
        let guard = state::proc();
        let p = guard.as_ref().expect("state is set by proc()");
        if p.import_at(addr).is_some() {
            return fail(ACL_ERROR_RT_DRV_INTERNAL_ERROR);
        }
        // The driver shares whole pages of one allocation: the range starts on one of its pages.
        let Some(a) = p.allocs.iter().find(|a| {
            addr >= a.map.addr
                && addr.checked_add(size).is_some_and(|e| e <= a.map.addr + a.len)
                && addr.is_multiple_of(a.page_size)
        }) else {
            return fail(ACL_ERROR_RT_DRV_INTERNAL_ERROR);
        };
        let me = procinfo::own_pid();
        let tgid = procinfo::bare_tgid();
        let record = || Record {
            key: String::new(),
            creator_tgid: tgid,
            creator_pid: me,
            creator_start: procinfo::start_ticks(me).unwrap_or(0),
            dev: a.dev,
            fd: std::os::fd::AsRawFd::as_raw_fd(&a.file),
            offset: addr - a.map.addr,
            size,
            need_wlist: flags == ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT,
            p2p: a.p2p,
            valid: true,
            revoked: false,
            wlist: Vec::new(),
            importers: Vec::new(),
        };
        registry::with(|reg| {
            reg.counter += 1;
            let k = key::format(tgid, reg.counter, a.dev);
            let mut r = record();
            r.key = String::from_utf8_lossy(k.significant()).into_owned();
            reg.records.push(r);
            k
        })
        .map_err(registry_io)
    }
}

impl AclRuntime for HostSim {
    fn init(&self) -> AclResult<()> {
        if self.chip == Chip::Unknown {
            static SAID: std::sync::Once = std::sync::Once::new();
            SAID.call_once(|| {
                let v = std::env::var(super::CHIP_ENV).unwrap_or_default();
                eprintln!("ascend simulator: {}={v:?}: expected inference, A2, A3 or \"200I/500 A2\"", super::CHIP_ENV);
            });
            return fail(ACL_ERROR_INVALID_PARAM);
        }
        let mut g = state::proc();
        let p = g.as_mut().expect("state is set by proc()");
        if p.inited {
            return fail(ACL_ERROR_REPEAT_INITIALIZE);
        }
        p.inited = true;
        Ok(())
    }

    fn finalize(&self) -> AclResult<()> {
        let mut g = state::proc();
        let p = g.as_mut().expect("state is set by proc()");
        if !p.inited {
            return fail(ACL_ERROR_REPEAT_FINALIZE);
        }
        p.inited = false;
        Ok(())
    }

    fn set_device(&self, device: i32) -> AclResult<()> {
        valid_device(device)?;
        state::set_device(device);
        Ok(())
    }

    fn get_current_context(&self) -> AclResult<AclContext> {
        let (dev, epoch) = state::current_context().ok_or(AclError::new(ACL_ERROR_RT_CONTEXT_NULL))?;
        let index = usize::try_from(epoch).ok().and_then(|e| e.checked_mul(CONTEXT_DEVICES));
        let index = index.and_then(|i| i.checked_add(dev as usize + CONTEXT_BASE));
        Ok(AclContext(index.ok_or(AclError::new(ACL_ERROR_RT_INTERNAL_ERROR))?))
    }

    fn set_current_context(&self, context: AclContext) -> AclResult<()> {
        let index = context.0.checked_sub(CONTEXT_BASE).ok_or(AclError::new(ACL_ERROR_INVALID_PARAM))?;
        let (epoch, dev) = (index / CONTEXT_DEVICES, index % CONTEXT_DEVICES);
        let dev = i32::try_from(dev).ok().filter(|&d| valid_device(d).is_ok());
        let dev = dev.ok_or(AclError::new(ACL_ERROR_INVALID_PARAM))?;
        match state::enter_context(dev, epoch as u64) {
            state::Entered::Yes => Ok(()),
            // A context of a device released since is gone, as on hardware.
            state::Entered::Released => fail(ACL_ERROR_RT_CONTEXT_NULL),
            // A handle the runtime never gave.
            state::Entered::Unknown => fail(ACL_ERROR_INVALID_PARAM),
        }
    }

    fn reset_device(&self, device: i32) -> AclResult<()> {
        valid_device(device)?;
        match state::reset_device(device) {
            // The process no longer holds the device: the runtime's context release error.
            None => fail(ACL_ERROR_RT_CONTEXT_RELEASE_ERROR),
            Some(false) => Ok(()),
            Some(true) => {
                revoke_stale_imports();
                stream::release_device(state::proc().as_mut().expect("state is set by proc()"), device)
            }
        }
    }

    fn malloc(&self, size: usize, policy: u32) -> AclResult<*mut c_void> {
        if size == 0 {
            return fail(ACL_ERROR_INVALID_PARAM);
        }
        let dev = current()?;
        // Rounded up to 32 bytes, plus 32 of padding: past `usize` is more
        // memory than there is.
        let len = size
            .checked_next_multiple_of(32)
            .and_then(|l| l.checked_add(32))
            .ok_or(AclError::new(ACL_ERROR_RT_MEMORY_ALLOCATION))?;
        let page_size = mem::page_size(policy, size);
        let file =
            mem::page_round(len).and_then(mem::create).map_err(|_| AclError::new(ACL_ERROR_RT_MEMORY_ALLOCATION))?;
        let map = mem::map_aligned(&file, len, page_size).map_err(|_| AclError::new(ACL_ERROR_RT_MEMORY_ALLOCATION))?;
        let addr = map.addr;
        let mut g = state::proc();
        let p = g.as_mut().expect("state is set by proc()");
        p.largest_malloc = p.largest_malloc.max(size);
        p.allocs.push(Alloc { map, file, len, dev, p2p: is_p2p_policy(policy), page_size });
        Ok(addr as *mut c_void)
    }

    fn free(&self, ptr: *mut c_void) -> AclResult<()> {
        if ptr.is_null() {
            return fail(ACL_ERROR_INVALID_PARAM);
        }
        let addr = ptr as usize;
        let mut g = state::proc();
        let p = g.as_mut().expect("state is set by proc()");
        let Some(i) = p.allocs.iter().position(|a| a.map.addr == addr) else {
            return fail(ACL_ERROR_RT_PARAM_INVALID);
        };
        let me = procinfo::own_pid();
        let fd = std::os::fd::AsRawFd::as_raw_fd(&p.allocs[i].file);
        let strict = self.strict;
        let refused = registry::with(|reg| {
            let live = |r: &Record| r.creator_pid == me && r.fd == fd && r.valid && !r.revoked;
            if strict && reg.records.iter().any(|r| live(r) && !r.importers.is_empty()) {
                return true;
            }
            for r in reg.records.iter_mut().filter(|r| live(r)) {
                // The driver frees every importer's pages of the keys on this range.
                r.revoked = true;
            }
            false
        })
        .map_err(registry_io)?;
        if refused {
            return fail(ACL_ERROR_RT_IPC_ERROR);
        }
        let a = p.allocs.swap_remove(i);
        mem::unmap(&a.map);
        // Importers' mappings now fault (SIGBUS), as their pages are gone.
        let _ = a.file.set_len(0);
        Ok(())
    }

    unsafe fn memcpy(&self, c: Memcpy) -> AclResult<()> {
        let Memcpy { dst, src, count, kind, .. } = c;
        if !copy_args(&c)? {
            return Ok(());
        }
        let cur = current()?;
        revoke_stale_imports();
        {
            let mut g = state::proc();
            let p = g.as_mut().expect("state is set by proc()");
            let (d, s) = (dst as usize, src as usize);
            let verdict = self.check_copy(p, cur, &c, true).and_then(|()| revoked_side(p, d, s));
            if p.import_at(d).is_some() || p.import_at(s).is_some() {
                copylog::record(p, d, s, count, kind, verdict.err().map_or(ACL_SUCCESS, |e| e.code()));
            }
            verdict?;
        }
        if dst.cast_const() == src {
            return Ok(());
        }
        // SAFETY: the caller guarantees both ranges are valid for `count` bytes;
        // `copy` allows overlap.
        unsafe { core::ptr::copy(src.cast::<u8>(), dst.cast::<u8>(), count) };
        Ok(())
    }

    fn malloc_host(&self, size: usize) -> AclResult<*mut c_void> {
        if size == 0 {
            return fail(ACL_ERROR_INVALID_PARAM);
        }
        let addr = mem::host_alloc(size).ok_or(AclError::new(ACL_ERROR_BAD_ALLOC))?;
        state::proc().as_mut().expect("state is set by proc()").host.push(addr);
        Ok(addr as *mut c_void)
    }

    fn free_host(&self, ptr: *mut c_void) -> AclResult<()> {
        if ptr.is_null() {
            return fail(ACL_ERROR_INVALID_PARAM);
        }
        let mut g = state::proc();
        let p = g.as_mut().expect("state is set by proc()");
        let Some(i) = p.host.iter().position(|&h| h == ptr as usize) else {
            return fail(ACL_ERROR_RT_PARAM_INVALID);
        };
        mem::host_free(p.host.swap_remove(i));
        Ok(())
    }

    fn create_stream(&self) -> AclResult<AclStream> {
        let cur = current()?;
        let mut g = state::proc();
        Ok(AclStream(stream::create(g.as_mut().expect("state is set by proc()"), cur)))
    }

    fn destroy_stream(&self, s: AclStream) -> AclResult<()> {
        let cur = current()?;
        if s == AclStream::DEFAULT {
            return fail(ACL_ERROR_RT_PARAM_INVALID);
        }
        revoke_stale_imports();
        let mut g = state::proc();
        let p = g.as_mut().expect("state is set by proc()");
        let i = stream::find(p, s.0, cur)?;
        // The runtime waits for the stream's tasks before destroying it.
        let ran = stream::drain(p, i);
        p.streams.swap_remove(i);
        ran
    }

    fn synchronize_stream(&self, s: AclStream) -> AclResult<()> {
        let cur = current()?;
        {
            let mut g = state::proc();
            let p = g.as_mut().expect("state is set by proc()");
            let i = stream::find(p, s.0, cur)?;
            if p.streams[i].queue.is_empty() {
                // Idle: nothing to run, so no registry access (fences sync every time).
                return Ok(());
            }
        }
        revoke_stale_imports();
        let mut g = state::proc();
        let p = g.as_mut().expect("state is set by proc()");
        let i = stream::find(p, s.0, cur)?;
        stream::drain(p, i)
    }

    unsafe fn memcpy_async(&self, c: Memcpy, s: AclStream) -> AclResult<()> {
        let Memcpy { dst, src, count, kind, .. } = c;
        if !copy_args(&c)? {
            return Ok(());
        }
        if kind == ACL_MEMCPY_HOST_TO_HOST {
            // CANN: no asynchronous copy within the host (207000 in the EP form).
            return fail(ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
        }
        let cur = current()?;
        revoke_stale_imports();
        let mut g = state::proc();
        let p = g.as_mut().expect("state is set by proc()");
        let i = stream::find(p, s.0, cur)?;
        self.check_copy(p, cur, &c, false)?;
        let (dst, src) = (dst as usize, src as usize);
        let task = state::Task { dst, src, count, dst_device: p.is_device(dst), src_device: p.is_device(src) };
        stream::push(p, i, task);
        Ok(())
    }

    fn synchronize_device(&self) -> AclResult<()> {
        let cur = current()?;
        revoke_stale_imports();
        let mut g = state::proc();
        let p = g.as_mut().expect("state is set by proc()");
        let mut result = Ok(());
        for i in 0..p.streams.len() {
            if p.streams[i].dev == cur {
                result = result.and(stream::drain(p, i));
            }
        }
        result
    }

    fn device_can_access_peer(&self, device: i32, peer: i32) -> AclResult<bool> {
        if device == peer {
            return fail(ACL_ERROR_INVALID_PARAM);
        }
        valid_device(device)?;
        valid_device(peer)?;
        Ok(true)
    }

    fn device_enable_peer_access(&self, peer: i32, flags: u32) -> AclResult<()> {
        if flags != 0 {
            return fail(ACL_ERROR_FEATURE_UNSUPPORTED);
        }
        let cur = current()?;
        if peer == cur {
            return fail(ACL_ERROR_INVALID_PARAM);
        }
        valid_device(peer)?;
        let mut g = state::proc();
        let p = g.as_mut().expect("state is set by proc()");
        if !p.p2p.contains(&(cur, peer)) {
            p.p2p.push((cur, peer));
        }
        Ok(())
    }

    fn device_get_bare_tgid(&self) -> AclResult<i32> {
        Ok(procinfo::bare_tgid())
    }

    fn ipc_mem_get_export_key(&self, ptr: *mut c_void, size: usize, flags: u64) -> AclResult<IpcKey> {
        self.export_key_with_len(ptr, size, ACL_IPC_KEY_LEN, flags)
    }

    fn ipc_mem_set_import_pid(&self, key: &IpcKey, pids: &[i32]) -> AclResult<()> {
        if pids.is_empty() || pids.len() > ACL_IPC_MAX_PIDS_PER_CALL {
            return fail(ACL_ERROR_RT_PARAM_INVALID);
        }
        self.runtime_state()?;
        let Parsed::Hex(name) = key::parse(key) else {
            return fail(ACL_ERROR_RT_DRV_INTERNAL_ERROR);
        };
        let me = procinfo::own_pid();
        let now = procinfo::now_ticks();
        let code = registry::with(|reg| {
            let r = match exported_by(reg, &name, me) {
                Ok(r) => r,
                Err(code) => return code,
            };
            if !r.need_wlist {
                return ACL_ERROR_RT_NO_PERMISSION;
            }
            if r.wlist.len() + pids.len() > WLIST_LIMIT {
                return ACL_ERROR_RT_DRV_INTERNAL_ERROR;
            }
            let creator = r.creator_tgid;
            let wanted: Vec<i32> = pids.iter().copied().filter(|&p| p != 0 && p != creator).collect();
            if wanted.is_empty() {
                return ACL_ERROR_RT_DRV_INTERNAL_ERROR;
            }
            for pid in wanted {
                r.wlist.retain(|w| w.pid != pid);
                r.wlist.push(WlEntry { pid, set_time: now });
            }
            ACL_SUCCESS
        })
        .map_err(registry_io)?;
        crate::runtime::check(code)
    }

    fn ipc_mem_import_by_key(&self, key: &IpcKey, flags: u64) -> AclResult<*mut c_void> {
        if flags > 1 {
            return fail(ACL_ERROR_RT_PARAM_INVALID);
        }
        let parsed = key::parse(key);
        if parsed == Parsed::Malformed || (parsed == Parsed::NotHex && flags == 0) {
            return fail(ACL_ERROR_RT_PARAM_INVALID);
        }
        let cur = self.runtime_state()?;
        // With flags 1 the peer-device lookup asks the driver about the key: state, checked after the context.
        let Parsed::Hex(name) = parsed else { return fail(ACL_ERROR_RT_DRV_INTERNAL_ERROR) };
        let needs_p2p = self.chip.needs_p2p_policy();
        let mut g = state::proc();
        let p = g.as_mut().expect("state is set by proc()");
        if let Some(imp) = p.imports.iter_mut().find(|i| i.key == name) {
            if imp.dev != cur {
                return fail(ACL_ERROR_RT_DRV_INTERNAL_ERROR);
            }
            // A key its exporter destroyed (closed, freed, or died with) imports
            // no more, held here or not; the import held stays until closed.
            let live =
                registry::with(|reg| reg.find(&name).is_some_and(|r| r.valid && !r.revoked)).map_err(registry_io)?;
            if !live {
                return fail(ACL_ERROR_RT_DRV_INTERNAL_ERROR);
            }
            imp.refs += 1;
            return Ok(imp.map.addr as *mut c_void);
        }
        let me = procinfo::own_pid();
        let my_start = procinfo::start_ticks(me).unwrap_or(0);
        let tgid = procinfo::bare_tgid();
        let now = procinfo::now_ticks();
        let result = registry::with(|reg| {
            let Some(r) = reg.find(&name) else { return Err(ACL_ERROR_RT_DRV_INTERNAL_ERROR) };
            if !r.valid || r.revoked {
                return Err(ACL_ERROR_RT_DRV_INTERNAL_ERROR);
            }
            match import_entry(r, tgid, now) {
                Some(w) if my_start <= w.set_time => {}
                _ => return Err(ACL_ERROR_RT_DRV_INTERNAL_ERROR),
            }
            if needs_p2p && r.dev != cur && !r.p2p {
                // Inference products: another device maps only P2P-policy memory.
                return Err(ACL_ERROR_RT_DRV_INTERNAL_ERROR);
            }
            let file = mem::open_foreign(r.creator_pid, r.fd).map_err(|_| ACL_ERROR_RT_DRV_INTERNAL_ERROR)?;
            let map = mem::map(&file, r.offset, r.size).map_err(|_| ACL_ERROR_RT_MEMORY_ALLOCATION)?;
            r.importers.push(Importer { pid: me, start: my_start, dev: cur });
            Ok((Unrecorded(Some(map)), r.dev))
        })
        .map_err(registry_io)?;
        let (mut map, owner_dev) = result.map_err(AclError::new)?;
        let map = map.0.take().expect("an unrecorded mapping is taken once");
        if owner_dev != cur
            && flags == ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS
            && !p.p2p.contains(&(cur, owner_dev))
        {
            p.p2p.push((cur, owner_dev));
        }
        let addr = map.addr;
        p.imports.push(Import { key: name, map, refs: 1, dev: cur, owner_dev, revoked: false });
        Ok(addr as *mut c_void)
    }

    fn ipc_mem_close(&self, key: &IpcKey) -> AclResult<()> {
        self.runtime_state()?;
        let Parsed::Hex(name) = key::parse(key) else {
            return fail(ACL_ERROR_RT_DRV_INTERNAL_ERROR);
        };
        let me = procinfo::own_pid();
        {
            let mut g = state::proc();
            let p = g.as_mut().expect("state is set by proc()");
            if let Some(i) = p.imports.iter().position(|i| i.key == name) {
                if p.imports[i].refs > 1 {
                    p.imports[i].refs -= 1;
                    return Ok(());
                }
                // The registry first: a close it cannot record fails with the
                // import as it was, so that closing again finishes it.
                registry::with(|reg| {
                    if let Some(r) = reg.find(&name)
                        && let Some(j) = r.importers.iter().position(|x| x.pid == me)
                    {
                        r.importers.remove(j);
                    }
                })
                .map_err(registry_io)?;
                let imp = p.imports.swap_remove(i);
                mem::unmap(&imp.map);
                return Ok(());
            }
        }
        let strict = self.strict;
        let code = registry::with(|reg| {
            let r = match exported_by(reg, &name, me) {
                Ok(r) => r,
                Err(code) => return code,
            };
            if !r.importers.is_empty() && strict {
                return ACL_ERROR_RT_IPC_ERROR;
            }
            // Importers' pages are freed by the driver; the record lives until they close.
            r.valid = false;
            r.revoked = true;
            ACL_SUCCESS
        })
        .map_err(registry_io)?;
        crate::runtime::check(code)
    }
}

/// The whitelist entry an import by `tgid` of `r` is checked against. A key
/// exported without pid validation adds the importer's entry on its first
/// import, set now, as the driver does; none past [`WLIST_LIMIT`].
fn import_entry(r: &mut Record, tgid: i32, now: u64) -> Option<&WlEntry> {
    let held = r.wlist.iter().position(|w| w.pid == tgid);
    let i = match held {
        Some(i) => i,
        None if r.need_wlist || r.wlist.len() >= WLIST_LIMIT => return None,
        None => {
            r.wlist.push(WlEntry { pid: tgid, set_time: now });
            r.wlist.len() - 1
        }
    };
    r.wlist.get(i)
}

/// A fresh import's mapping until the registry has recorded the import:
/// unmapped if the registry cannot be written, as the import then fails.
struct Unrecorded(Option<mem::Mapping>);

impl Drop for Unrecorded {
    fn drop(&mut self) {
        if let Some(map) = self.0.take() {
            mem::unmap(&map);
        }
    }
}

/// The live record of `name` if `me` exported it; else the driver's answer to
/// its exporter's calls: unknown or someone else's key (internal error), or a
/// key already closed (invalid handle while importers still map it).
fn exported_by<'r>(reg: &'r mut registry::Registry, name: &str, me: i32) -> Result<&'r mut Record, i32> {
    let Some(r) = reg.find(name) else { return Err(ACL_ERROR_RT_DRV_INTERNAL_ERROR) };
    if r.creator_pid != me {
        return Err(ACL_ERROR_RT_DRV_INTERNAL_ERROR);
    }
    if !r.valid {
        return Err(if r.importers.is_empty() { ACL_ERROR_RT_DRV_INTERNAL_ERROR } else { ACL_ERROR_RT_INVALID_HANDLE });
    }
    Ok(r)
}
