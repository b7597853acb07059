//! The conformance suite: one function per row of the contract's checklist, generic
//! over the runtime. Exporter is the test process, importers are forked children
//! (the shared skeleton is in `super::ipc`).

#![allow(dead_code)]

use core::ffi::c_void;

use kpccl_ascend::codes::*;
use kpccl_ascend::{AclRuntime, IpcKey, Memcpy};

use super::ipc::{Exported, SIZE, code, exporter, fill, importer, read, recv_key, send_key, whitelisted_importer};
use super::proc::spawn;

/// Happy path on one device: whitelist, import, read, write back, close in order.
pub fn happy_same_device<R: AclRuntime>(rt: &R) {
    let p = exporter(rt, 0, 0x5a);
    let mut child = whitelisted_importer(rt, 0, |c, k| {
        let q = rt.ipc_mem_import_by_key(k, ACL_RT_IPC_MEM_IMPORT_FLAG_DEFAULT).unwrap();
        assert_ne!(q, core::ptr::null_mut());
        assert!(read(rt, q).iter().all(|&b| b == 0x5a));
        fill(rt, q, 0xa5);
        rt.synchronize_device().unwrap();
        rt.ipc_mem_close(k).unwrap();
        c.send_i32(1);
    });
    // Exported only once the importer runs and has sent its tgid.
    let tgid = child.chan.recv_i32();
    let exp = Exported::of(rt, p, ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT);
    exp.whitelist(tgid);
    exp.send_to(&mut child);
    assert_eq!(child.chan.recv_i32(), 1);
    child.join();
    assert!(read(rt, p).iter().all(|&b| b == 0xa5));
    exp.release();
}

/// Happy path across devices: flag ENABLE_PEER_ACCESS, and explicit peer access
/// with flag 0; host copies to a cross-device imported address are refused.
pub fn happy_cross_device<R: AclRuntime>(rt: &R) {
    let exp = Exported::new(rt, 0, 0x33, ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION);
    for flag in [ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS, ACL_RT_IPC_MEM_IMPORT_FLAG_DEFAULT] {
        exp.run_importer(1, |_, k| {
            assert!(rt.device_can_access_peer(1, 0).unwrap());
            if flag == ACL_RT_IPC_MEM_IMPORT_FLAG_DEFAULT {
                rt.device_enable_peer_access(0, 0).unwrap();
            }
            let q = rt.ipc_mem_import_by_key(k, flag).unwrap();
            let local = rt.malloc(4096, ACL_MEM_MALLOC_NORMAL_ONLY).unwrap();
            // SAFETY: both are device blocks of at least 4096 bytes.
            unsafe { rt.memcpy(Memcpy::exact(local, q, 4096, ACL_MEMCPY_DEVICE_TO_DEVICE)) }.unwrap();
            assert!(read(rt, local).iter().all(|&b| b == 0x33));
            let host = [0u8; 16];
            // SAFETY: `q` is an imported block of at least 16 bytes.
            let r = unsafe { rt.memcpy(Memcpy::exact(q, host.as_ptr().cast(), 16, ACL_MEMCPY_HOST_TO_DEVICE)) };
            assert_eq!(code(r), ACL_ERROR_RT_PARAM_INVALID);
            rt.free(local).unwrap();
            rt.ipc_mem_close(k).unwrap();
        });
    }
    exp.release();
}

/// A process missing from the whitelist gets 507899.
pub fn not_whitelisted<R: AclRuntime>(rt: &R) {
    let exp = Exported::new(rt, 0, 1, ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT);
    let mut child = exp.spawn_importer(0, |c, k| {
        assert_eq!(code(rt.ipc_mem_import_by_key(k, 0)), ACL_ERROR_RT_DRV_INTERNAL_ERROR);
        c.send_i32(rt.device_get_bare_tgid().unwrap());
        let _ = c.recv_i32();
        // Whitelisted now: the import succeeds.
        rt.ipc_mem_import_by_key(k, 0).unwrap();
        rt.ipc_mem_close(k).unwrap();
    });
    exp.whitelist(child.chan.recv_i32());
    child.chan.send_i32(1);
    child.join();
    exp.release();
}

/// SetImportPid on a key exported with DISABLE_PID_VALIDATION gives 207006, and
/// anyone may import it.
pub fn disable_validation<R: AclRuntime>(rt: &R) {
    let exp = Exported::new(rt, 0, 2, ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION);
    let mut child = importer(rt, 0, |_, k| {
        let q = rt.ipc_mem_import_by_key(k, 0).unwrap();
        assert!(read(rt, q).iter().all(|&b| b == 2));
        rt.ipc_mem_close(k).unwrap();
    });
    assert_eq!(code(rt.ipc_mem_set_import_pid(&exp.key, &[child.pid])), ACL_ERROR_RT_NO_PERMISSION);
    exp.send_to(&mut child);
    child.join();
    exp.release();
}

/// 31 pids per call pass, 32 and 0 give 107000; only the creator may set pids.
pub fn pid_limit<R: AclRuntime>(rt: &R) {
    let exp = Exported::new(rt, 0, 3, 0);
    let k = &exp.key;
    let pids: Vec<i32> = (100_000..100_032).collect();
    rt.ipc_mem_set_import_pid(k, &pids[..31]).unwrap();
    assert_eq!(code(rt.ipc_mem_set_import_pid(k, &pids)), ACL_ERROR_RT_PARAM_INVALID);
    assert_eq!(code(rt.ipc_mem_set_import_pid(k, &[])), ACL_ERROR_RT_PARAM_INVALID);
    let me = rt.device_get_bare_tgid().unwrap();
    assert_eq!(code(rt.ipc_mem_set_import_pid(k, &[0, me])), ACL_ERROR_RT_DRV_INTERNAL_ERROR);
    exp.run_importer(0, |_, k| {
        assert_eq!(code(rt.ipc_mem_set_import_pid(k, &[1234])), ACL_ERROR_RT_DRV_INTERNAL_ERROR);
    });
    exp.release();
}

/// Importing twice gives the same pointer and needs two closes; a third close (the
/// importer's double close) gives 507899.
pub fn double_import_and_double_close<R: AclRuntime>(rt: &R) {
    let exp = Exported::new(rt, 0, 4, 1);
    exp.run_importer(0, |_, k| {
        let a = rt.ipc_mem_import_by_key(k, 0).unwrap();
        let b = rt.ipc_mem_import_by_key(k, 0).unwrap();
        assert_eq!(a, b);
        rt.ipc_mem_close(k).unwrap();
        assert!(read(rt, a).iter().all(|&x| x == 4), "still mapped after one close");
        rt.ipc_mem_close(k).unwrap();
        assert_eq!(code(rt.ipc_mem_close(k)), ACL_ERROR_RT_DRV_INTERNAL_ERROR);
    });
    exp.close();
    assert_eq!(code(rt.ipc_mem_close(&exp.key)), ACL_ERROR_RT_DRV_INTERNAL_ERROR, "exporter double close");
    exp.free();
}

/// A process that neither created nor imported the key cannot close it.
pub fn foreign_close<R: AclRuntime>(rt: &R) {
    let exp = Exported::new(rt, 0, 5, 1);
    exp.run_importer(0, |_, k| {
        assert_eq!(code(rt.ipc_mem_close(k)), ACL_ERROR_RT_DRV_INTERNAL_ERROR);
    });
    // The key survived the foreign close.
    exp.run_importer(0, |_, k| {
        rt.ipc_mem_import_by_key(k, 0).unwrap();
        rt.ipc_mem_close(k).unwrap();
    });
    exp.release();
}

/// Faithful: the exporter's close while an importer maps the key returns 0; new
/// imports fail, a second exporter close gives 107017, the importer's close still 0.
pub fn exporter_close_before_importers<R: AclRuntime>(rt: &R) {
    let exp = Exported::new(rt, 0, 6, 1);
    let mut holder = exp.spawn_holder(0);
    exp.close();
    exp.run_importer(0, |_, k| {
        assert_eq!(code(rt.ipc_mem_import_by_key(k, 0)), ACL_ERROR_RT_DRV_INTERNAL_ERROR);
    });
    assert_eq!(code(rt.ipc_mem_close(&exp.key)), ACL_ERROR_RT_INVALID_HANDLE);
    holder.chan.send_i32(1);
    holder.join();
    assert_eq!(code(rt.ipc_mem_close(&exp.key)), ACL_ERROR_RT_DRV_INTERNAL_ERROR);
    exp.free();
}

/// Faithful: freeing exported memory returns 0; later imports fail with 507899 and
/// the exporter's close still returns 0.
pub fn free_while_exported<R: AclRuntime>(rt: &R) {
    let exp = Exported::new(rt, 0, 7, 1);
    exp.free();
    exp.run_importer(0, |_, k| {
        assert_eq!(code(rt.ipc_mem_import_by_key(k, 0)), ACL_ERROR_RT_DRV_INTERNAL_ERROR);
    });
    exp.close();
}

/// Exports must be page-aligned, inside one allocation, with valid size, len, flags.
pub fn export_checks<R: AclRuntime>(rt: &R) {
    let p = exporter(rt, 0, 8);
    // SAFETY: offsets inside the allocation, only used as addresses.
    let inner = unsafe { p.cast::<u8>().add(64) }.cast::<c_void>();
    assert_eq!(code(rt.ipc_mem_get_export_key(inner, 4096, 0)), ACL_ERROR_RT_DRV_INTERNAL_ERROR);
    assert_eq!(code(rt.ipc_mem_get_export_key(p, SIZE * 2, 0)), ACL_ERROR_RT_DRV_INTERNAL_ERROR);
    assert_eq!(code(rt.ipc_mem_get_export_key(p, 0, 0)), ACL_ERROR_RT_PARAM_INVALID);
    assert_eq!(code(rt.ipc_mem_get_export_key(p, SIZE, 2)), ACL_ERROR_RT_PARAM_INVALID);
    assert_eq!(code(rt.ipc_mem_get_export_key(core::ptr::null_mut(), SIZE, 0)), ACL_ERROR_INVALID_PARAM);
    // A page-aligned sub-range is fine, and each export is a new key of the driver's format.
    // SAFETY: as above.
    let page = unsafe { p.cast::<u8>().add(4096) }.cast::<c_void>();
    let a = rt.ipc_mem_get_export_key(page, 4096, 1).unwrap();
    let b = rt.ipc_mem_get_export_key(page, 4096, 1).unwrap();
    assert_ne!(a, b);
    for k in [a, b] {
        assert_eq!(k.0[64], 0);
        assert!(k.0[..64].iter().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c)));
        rt.ipc_mem_close(&k).unwrap();
    }
    rt.free(p).unwrap();
}

/// An imported address cannot be exported again.
pub fn reexport_imported<R: AclRuntime>(rt: &R) {
    let exp = Exported::new(rt, 0, 9, 1);
    exp.run_importer(0, |_, k| {
        let q = rt.ipc_mem_import_by_key(k, 0).unwrap();
        assert_eq!(code(rt.ipc_mem_get_export_key(q, 4096, 1)), ACL_ERROR_RT_DRV_INTERNAL_ERROR);
        rt.ipc_mem_close(k).unwrap();
    });
    exp.release();
}

/// When the exporter dies its keys are destroyed: imports then fail with 507899.
/// When an importer dies its import is dropped: the exporter's close finds none.
pub fn process_death<R: AclRuntime>(rt: &R) {
    let mut exp_child = spawn(|c| {
        let exp = Exported::new(rt, 0, 10, 1);
        send_key(c, &exp.key);
        let _ = c.recv_i32(); // killed while waiting
    });
    let k = recv_key(&mut exp_child.chan);
    rt.set_device(0).unwrap();
    let q = rt.ipc_mem_import_by_key(&k, 0).unwrap();
    assert!(read(rt, q).iter().all(|&b| b == 10));
    rt.ipc_mem_close(&k).unwrap();
    exp_child.kill();
    assert_eq!(code(rt.ipc_mem_import_by_key(&k, 0)), ACL_ERROR_RT_DRV_INTERNAL_ERROR);

    let exp = Exported::new(rt, 0, 11, 1);
    let mut imp = exp.spawn_holder(0);
    imp.kill(); // while it holds the import
    exp.close();
    assert_eq!(code(rt.ipc_mem_close(&exp.key)), ACL_ERROR_RT_DRV_INTERNAL_ERROR, "no importer kept the key");
    exp.free();
}

/// Argument and context checks of the non-IPC calls.
pub fn runtime_checks<R: AclRuntime + Sync>(rt: &R) {
    std::thread::scope(|s| {
        s.spawn(|| {
            assert_eq!(code(rt.malloc(4096, 0)), ACL_ERROR_RT_CONTEXT_NULL);
            rt.set_device(0).unwrap();
            assert_eq!(code(rt.malloc(0, 0)), ACL_ERROR_INVALID_PARAM);
            assert_eq!(code(rt.device_can_access_peer(0, 0)), ACL_ERROR_INVALID_PARAM);
            assert_eq!(code(rt.device_enable_peer_access(0, 0)), ACL_ERROR_INVALID_PARAM);
            assert_eq!(code(rt.device_enable_peer_access(1, 1)), ACL_ERROR_FEATURE_UNSUPPORTED);
            let p = rt.malloc(4096, 0).unwrap();
            // SAFETY: count > destMax is refused before any access.
            let r = unsafe {
                rt.memcpy(Memcpy { dst: p, dst_max: 16, src: p, count: 32, kind: ACL_MEMCPY_DEVICE_TO_DEVICE })
            };
            assert_eq!(code(r), ACL_ERROR_RT_PARAM_INVALID);
            // SAFETY: bad kind is refused before any access.
            let r = unsafe { rt.memcpy(Memcpy::exact(p, p, 16, 9)) };
            assert_eq!(code(r), ACL_ERROR_INVALID_PARAM);
            rt.free(p).unwrap();
            assert_eq!(code(rt.free(p)), ACL_ERROR_RT_PARAM_INVALID);
            rt.reset_device(0).unwrap();
        });
    });
    let mut child = spawn(|_| {
        rt.init().unwrap();
        assert_eq!(code(rt.init()), ACL_ERROR_REPEAT_INITIALIZE);
        rt.finalize().unwrap();
        assert_eq!(code(rt.finalize()), ACL_ERROR_REPEAT_FINALIZE);
    });
    assert_eq!(child.wait(), 0);
}

/// Key parsing and lookup: malformed keys give 107000, unparseable ones 107000 with
/// flag 0 but 507899 with flag 1, unknown ones 507899; a process cannot import one key
/// on two devices; SetImportPid on a destroyed key an importer holds gives 107017.
pub fn key_checks<R: AclRuntime>(rt: &R) {
    rt.set_device(0).unwrap();
    let no_nul = IpcKey([b'a'; 65]);
    let mut empty = IpcKey([0; 65]);
    assert_eq!(code(rt.ipc_mem_import_by_key(&no_nul, 0)), ACL_ERROR_RT_PARAM_INVALID);
    assert_eq!(code(rt.ipc_mem_import_by_key(&empty, 0)), ACL_ERROR_RT_PARAM_INVALID);
    empty.0[..4].copy_from_slice(b"zz!?");
    assert_eq!(code(rt.ipc_mem_import_by_key(&empty, 0)), ACL_ERROR_RT_PARAM_INVALID);
    assert_eq!(code(rt.ipc_mem_import_by_key(&empty, 1)), ACL_ERROR_RT_DRV_INTERNAL_ERROR);
    assert_eq!(code(rt.ipc_mem_import_by_key(&empty, 2)), ACL_ERROR_RT_PARAM_INVALID);
    let mut unknown = IpcKey([b'0'; 65]);
    unknown.0[64] = 0;
    assert_eq!(code(rt.ipc_mem_import_by_key(&unknown, 0)), ACL_ERROR_RT_DRV_INTERNAL_ERROR);
    assert_eq!(code(rt.ipc_mem_close(&unknown)), ACL_ERROR_RT_DRV_INTERNAL_ERROR);

    let exp = Exported::new(rt, 0, 12, 0);
    let mut child = whitelisted_importer(rt, 1, |c, k| {
        rt.ipc_mem_import_by_key(k, 1).unwrap();
        rt.set_device(2).unwrap();
        assert_eq!(code(rt.ipc_mem_import_by_key(k, 1)), ACL_ERROR_RT_DRV_INTERNAL_ERROR);
        c.send_i32(1);
        let _ = c.recv_i32();
        rt.set_device(1).unwrap();
        rt.ipc_mem_close(k).unwrap();
    });
    let tgid = exp.admit(&mut child);
    assert_eq!(child.chan.recv_i32(), 1);
    exp.close();
    assert_eq!(code(rt.ipc_mem_set_import_pid(&exp.key, &[tgid])), ACL_ERROR_RT_INVALID_HANDLE);
    child.chan.send_i32(1);
    child.join();
    assert_eq!(code(rt.ipc_mem_set_import_pid(&exp.key, &[tgid])), ACL_ERROR_RT_DRV_INTERNAL_ERROR);
    exp.free();
}

/// Cross-device import with flag 0 and no peer access: the import succeeds (as on
/// the hardware) but device-to-device copies from it are refused.
pub fn cross_device_without_peer_access<R: AclRuntime>(rt: &R) {
    let exp = Exported::new(rt, 0, 13, 1);
    exp.run_importer(3, |_, k| {
        let q = rt.ipc_mem_import_by_key(k, ACL_RT_IPC_MEM_IMPORT_FLAG_DEFAULT).unwrap();
        let local = rt.malloc(4096, ACL_MEM_MALLOC_NORMAL_ONLY).unwrap();
        // SAFETY: both are device blocks of at least 4096 bytes.
        let r = unsafe { rt.memcpy(Memcpy::exact(local, q, 4096, ACL_MEMCPY_DEVICE_TO_DEVICE)) };
        assert_ne!(code(r), 0, "copy without peer access must fail");
        rt.free(local).unwrap();
        rt.ipc_mem_close(k).unwrap();
    });
    exp.release();
}

/// The pid-reuse guard: a whitelist entry set before a process started does not
/// admit that process, though it has the pid; set again after it started, it does.
/// The pids the next child may get are predicted from `ns_last_pid`; when other
/// processes take them every time, the case prints a skip.
pub fn pid_reuse_guard<R: AclRuntime>(rt: &R) {
    let exp = Exported::new(rt, 0, 6, ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT);
    let mut tested = false;
    for _ in 0..20 {
        let Some(last) =
            std::fs::read_to_string("/proc/sys/kernel/ns_last_pid").ok().and_then(|s| s.trim().parse::<i32>().ok())
        else {
            break;
        };
        let pids: Vec<i32> = (last + 1..).take(ACL_IPC_MAX_PIDS_PER_CALL).collect();
        rt.ipc_mem_set_import_pid(&exp.key, &pids).unwrap();
        // Start times count in 10 ms ticks: the child must start in a later one.
        std::thread::sleep(std::time::Duration::from_millis(30));
        let mut child = exp.spawn_importer(0, |c, k| {
            c.send_i32(rt.device_get_bare_tgid().unwrap());
            c.send_i32(code(rt.ipc_mem_import_by_key(k, 0)));
            if c.recv_i32() == 1 {
                rt.ipc_mem_import_by_key(k, 0).unwrap();
                rt.ipc_mem_close(k).unwrap();
            }
        });
        let tgid = child.chan.recv_i32();
        let first = child.chan.recv_i32();
        assert_eq!(first, ACL_ERROR_RT_DRV_INTERNAL_ERROR, "an entry set before the importer started admitted it");
        let predicted = pids.contains(&tgid);
        if predicted {
            exp.whitelist(tgid);
        }
        child.chan.send_i32(i32::from(predicted));
        child.join();
        if predicted {
            tested = true;
            break;
        }
    }
    if !tested {
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "SKIP pid_reuse_guard: no child got a predicted pid");
    }
    exp.release();
}

/// Streams, asynchronous copies and page-locked host memory: host -> device ->
/// host through `aclrtMemcpyAsync` on a created stream and on the default stream,
/// each completed by `aclrtSynchronizeStream`; asynchronous host-to-host is refused.
pub fn streams_and_host_memory<R: AclRuntime>(rt: &R) {
    rt.set_device(0).unwrap();
    let n = 4096;
    let src = rt.malloc_host(n).unwrap().cast::<u8>();
    let back = rt.malloc_host(n).unwrap().cast::<u8>();
    assert_eq!(src as usize % 64, 0, "aclrtMallocHost memory is 64-byte aligned");
    // SAFETY: a host block of `n` bytes, owned here.
    unsafe { core::ptr::write_bytes(src, 0x6b, n) };
    // SAFETY: as above.
    unsafe { core::ptr::write_bytes(back, 0, n) };
    let dev = rt.malloc(n, ACL_MEM_MALLOC_NORMAL_ONLY).unwrap();
    let s = rt.create_stream().unwrap();
    assert_ne!(s, kpccl_ascend::AclStream::DEFAULT);
    for stream in [s, kpccl_ascend::AclStream::DEFAULT] {
        // SAFETY: device and host blocks of `n` bytes, alive until the sync below.
        unsafe { rt.memcpy_async(Memcpy::exact(dev, src.cast(), n, ACL_MEMCPY_HOST_TO_DEVICE), stream) }.unwrap();
        // SAFETY: as above.
        unsafe { rt.memcpy_async(Memcpy::exact(back.cast(), dev, n, ACL_MEMCPY_DEVICE_TO_HOST), stream) }.unwrap();
        rt.synchronize_stream(stream).unwrap();
        // SAFETY: `back` is `n` host bytes, and the stream is synchronised.
        let got = unsafe { core::slice::from_raw_parts(back, n) };
        assert!(got.iter().all(|&b| b == 0x6b), "the async round trip moved the bytes");
        // SAFETY: as above.
        unsafe { core::ptr::write_bytes(back, 0, n) };
    }
    // SAFETY: two host blocks of `n` bytes.
    let r = unsafe { rt.memcpy_async(Memcpy::exact(back.cast(), src.cast(), n, ACL_MEMCPY_HOST_TO_HOST), s) };
    assert_eq!(code(r), ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "no asynchronous copy within the host");
    // SAFETY: count > destMax is refused before anything is read.
    let r = unsafe {
        rt.memcpy_async(
            Memcpy { dst: dev, dst_max: 16, src: src.cast(), count: 32, kind: ACL_MEMCPY_HOST_TO_DEVICE },
            s,
        )
    };
    assert_eq!(code(r), ACL_ERROR_RT_PARAM_INVALID);
    rt.destroy_stream(s).unwrap();
    rt.free(dev).unwrap();
    rt.free_host(src.cast()).unwrap();
    rt.free_host(back.cast()).unwrap();
    assert_ne!(code(rt.malloc_host(0)), 0, "size 0 is refused");
}

/// Rule read from the runtime's source ([src]): `aclrtIpcMemClose` in a thread with
/// no current device is 107002 before any effect, so the key survives it.
pub fn close_needs_a_device<R: AclRuntime + Sync>(rt: &R) {
    let exp = Exported::new(rt, 0, 14, ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION);
    std::thread::scope(|s| {
        s.spawn(|| assert_eq!(code(rt.ipc_mem_close(&exp.key)), ACL_ERROR_RT_CONTEXT_NULL));
    });
    exp.run_importer(0, |_, k| {
        let q = rt.ipc_mem_import_by_key(k, 0).unwrap();
        assert!(read(rt, q).iter().all(|&b| b == 14), "the key outlived the refused close");
        rt.ipc_mem_close(k).unwrap();
    });
    exp.release();
}

/// `aclrtSetDevice` and `aclrtResetDevice` count per process and device [doc]: the
/// device stays usable until as many resets as sets, a reset more is an error.
/// In a child, whose counts start at 0.
pub fn set_and_reset_device_count<R: AclRuntime>(rt: &R) {
    let child = spawn(|_| {
        rt.set_device(0).unwrap();
        rt.set_device(0).unwrap();
        rt.reset_device(0).unwrap();
        let p = rt.malloc(4096, ACL_MEM_MALLOC_NORMAL_ONLY).expect("one set is left: the device is usable");
        rt.free(p).unwrap();
        rt.reset_device(0).unwrap();
        assert_eq!(code(rt.malloc(4096, ACL_MEM_MALLOC_NORMAL_ONLY)), ACL_ERROR_RT_CONTEXT_NULL);
        assert_ne!(code(rt.reset_device(0)), 0, "a reset with no set left is an error");
    });
    child.join();
}

/// Exports of huge-page memory start on a 2 MiB page [src]: an `ACL_MEM_MALLOC_HUGE_ONLY`
/// block refuses an export 4 KiB in (507899) and takes one of the whole block, or from
/// its second huge page.
pub fn huge_page_exports<R: AclRuntime>(rt: &R) {
    const HUGE: usize = 2 << 20;
    rt.set_device(0).unwrap();
    let p = rt.malloc(2 * HUGE, ACL_MEM_MALLOC_HUGE_ONLY).unwrap();
    assert_eq!(p as usize % HUGE, 0, "huge-page memory starts on a huge page");
    // Addresses inside the allocation, only passed to the runtime.
    let (small, huge) = (p.cast::<u8>().wrapping_add(4096).cast::<c_void>(), p.cast::<u8>().wrapping_add(HUGE).cast());
    assert_eq!(code(rt.ipc_mem_get_export_key(small, 4096, 1)), ACL_ERROR_RT_DRV_INTERNAL_ERROR);
    for (ptr, len) in [(p, 2 * HUGE), (huge, HUGE)] {
        let k = rt.ipc_mem_get_export_key(ptr, len, 1).unwrap();
        rt.ipc_mem_close(&k).unwrap();
    }
    rt.free(p).unwrap();
}
