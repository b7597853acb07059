//! The reference page's rules on memory imported from another process, as the
//! simulator enforces them, under every chip model: across two devices in both
//! directions (exporter on 0 and importer on 1, then the reverse), and on one
//! device, where none of them applies. Then the simulator's choices where the
//! documentation is silent: what a device's release does to the other threads and
//! its streams, and the page size each allocation policy gives.
#![allow(clippy::std_instead_of_core, clippy::alloc_instead_of_core)]

use kpccl_testkit::acl;

use core::ffi::c_void;

use kpccl_ascend::codes::*;
use kpccl_ascend::sim::{Chip, HostSim, sync_import_copies};
use kpccl_ascend::{AclRuntime, AclStream, IpcKey, Memcpy};

use acl::ipc::{Exported, SIZE, code, fill, read};

/// The chips that have IPC memory sharing.
const IPC_CHIPS: [Chip; 3] = [Chip::Inference, Chip::A2, Chip::A3];

/// A [`SIZE`] block on `dev` allocated with `policy`, filled with `byte`, exported
/// without a whitelist.
fn export_with<'r>(rt: &'r HostSim, dev: i32, policy: u32, byte: u8) -> Exported<'r, HostSim> {
    rt.set_device(dev).unwrap();
    let p = rt.malloc(SIZE, policy).unwrap();
    fill(rt, p, byte);
    Exported::of(rt, p, ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION)
}

fn at(p: *mut c_void, off: usize) -> *mut c_void {
    p.cast::<u8>().wrapping_add(off).cast()
}

/// A synchronous copy of `n` bytes; its ACL code.
fn sync_copy(rt: &HostSim, dst: *mut c_void, src: *mut c_void, n: usize, kind: u32) -> i32 {
    // SAFETY: every caller passes blocks of at least `n` bytes (device or host).
    code(unsafe { rt.memcpy(Memcpy::exact(dst, src, n, kind)) })
}

/// An asynchronous copy of `n` bytes on `s`; its ACL code (the copy runs at the
/// stream's synchronisation).
fn async_copy(rt: &HostSim, dst: *mut c_void, src: *mut c_void, n: usize, kind: u32, s: AclStream) -> i32 {
    // SAFETY: as in `sync_copy`; the blocks outlive the stream's synchronisation.
    code(unsafe { rt.memcpy_async(Memcpy::exact(dst, src, n, kind), s) })
}

/// The importer's side across devices: every rule, then a write into the
/// exporter's memory through an allowed asynchronous copy.
fn cross_device_rules(rt: &HostSim, q: *mut c_void, owner: i32) {
    let n = 4096;
    let mut host = vec![0u8; n];
    let h = host.as_mut_ptr().cast::<c_void>();
    let local = rt.malloc(n, ACL_MEM_MALLOC_HUGE_FIRST_P2P).unwrap();
    let s = rt.create_stream().unwrap();
    let d2d = ACL_MEMCPY_DEVICE_TO_DEVICE;
    // P2P must be enabled between the devices (the import used flag 0).
    assert_eq!(async_copy(rt, local, q, n, d2d, s), ACL_ERROR_RT_PARAM_INVALID, "no peer access yet");
    assert_eq!(sync_copy(rt, local, q, n, d2d), ACL_ERROR_RT_PARAM_INVALID, "no peer access yet");
    rt.device_enable_peer_access(owner, 0).unwrap();
    // No inferred direction; no host side, synchronous or asynchronous, either way.
    for kind in [ACL_MEMCPY_DEFAULT, ACL_MEMCPY_HOST_TO_DEVICE, ACL_MEMCPY_DEVICE_TO_HOST] {
        assert_eq!(sync_copy(rt, q, h, n, kind), ACL_ERROR_RT_PARAM_INVALID, "sync into the import, kind {kind}");
        assert_eq!(sync_copy(rt, h, q, n, kind), ACL_ERROR_RT_PARAM_INVALID, "sync from the import, kind {kind}");
        assert_eq!(async_copy(rt, q, h, n, kind, s), ACL_ERROR_RT_PARAM_INVALID, "async into, kind {kind}");
        assert_eq!(async_copy(rt, h, q, n, kind, s), ACL_ERROR_RT_PARAM_INVALID, "async from, kind {kind}");
    }
    // Within one device (both addresses in the import, pages on the owner's
    // device): the synchronous copy is refused, the asynchronous one runs.
    let before = sync_import_copies();
    assert_eq!(sync_copy(rt, at(q, 8192), q, n, d2d), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    assert_eq!(sync_import_copies(), before + 1, "the refused attempt is counted");
    assert_eq!(async_copy(rt, at(q, 8192), q, n, d2d, s), 0);
    // Between the import and this device's memory, asynchronously, both ways.
    assert_eq!(async_copy(rt, local, at(q, 8192), n, d2d, s), 0);
    rt.synchronize_stream(s).unwrap();
    assert!(read(rt, local).iter().all(|&b| b == 0x11), "the in-import async copy moved the exporter's bytes");
    fill(rt, local, 0x22);
    assert_eq!(async_copy(rt, q, local, n, d2d, s), 0);
    rt.synchronize_stream(s).unwrap();
    // The page leaves a synchronous copy across the two devices open: the
    // simulator allows it, and counts it.
    assert_eq!(sync_copy(rt, local, q, n, d2d), 0);
    assert_eq!(sync_import_copies(), before + 2);
    rt.destroy_stream(s).unwrap();
    rt.free(local).unwrap();
}

#[test]
fn cross_device_rules_in_both_directions_under_each_chip() {
    for chip in IPC_CHIPS {
        for (owner, importer) in [(0, 1), (1, 0)] {
            acl::run(
                || Some(HostSim::faithful().with_chip(chip)),
                |rt: &HostSim| {
                    let exp = export_with(rt, owner, ACL_MEM_MALLOC_HUGE_FIRST_P2P, 0x11);
                    exp.run_importer(importer, |_, k| {
                        let q = rt.ipc_mem_import_by_key(k, ACL_RT_IPC_MEM_IMPORT_FLAG_DEFAULT).unwrap();
                        cross_device_rules(rt, q, owner);
                        rt.ipc_mem_close(k).unwrap();
                    });
                    assert!(read(rt, exp.ptr).iter().all(|&b| b == 0x22), "{chip}: the importer's write landed");
                    exp.release();
                },
            );
        }
    }
}

#[test]
fn an_importer_on_the_owners_device_has_no_limits() {
    for chip in IPC_CHIPS {
        for dev in [0, 1] {
            acl::run(
                || Some(HostSim::faithful().with_chip(chip)),
                |rt: &HostSim| {
                    // Not even a P2P policy is needed on one device.
                    let exp = export_with(rt, dev, ACL_MEM_MALLOC_NORMAL_ONLY, 0x11);
                    exp.run_importer(dev, |_, k| {
                        let q = rt.ipc_mem_import_by_key(k, 0).unwrap();
                        let n = 4096;
                        let mut host = vec![0x33u8; n];
                        let h = host.as_mut_ptr().cast::<c_void>();
                        assert_eq!(sync_copy(rt, q, h, n, ACL_MEMCPY_HOST_TO_DEVICE), 0);
                        assert_eq!(sync_copy(rt, at(q, 8192), q, n, ACL_MEMCPY_DEVICE_TO_DEVICE), 0);
                        assert_eq!(sync_copy(rt, h, at(q, 8192), n, ACL_MEMCPY_DEFAULT), 0);
                        assert!(host.iter().all(|&b| b == 0x33));
                        rt.ipc_mem_close(k).unwrap();
                    });
                    let got = read(rt, exp.ptr);
                    assert!(got.iter().all(|&b| b == 0x33), "{chip}: the same-device write landed");
                    exp.release();
                },
            );
        }
    }
}

/// Only the inference model refuses another device's import of memory that was
/// not allocated with a P2P policy (507899); the same device always may.
#[test]
fn the_inference_chip_needs_a_p2p_policy_across_devices() {
    for chip in IPC_CHIPS {
        for (policy, p2p) in [(ACL_MEM_MALLOC_HUGE_FIRST, false), (ACL_MEM_MALLOC_NORMAL_ONLY_P2P, true)] {
            acl::run(
                || Some(HostSim::faithful().with_chip(chip)),
                |rt: &HostSim| {
                    let exp = export_with(rt, 0, policy, 0x11);
                    exp.run_importer(1, |_, k| {
                        let r = rt.ipc_mem_import_by_key(k, ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS);
                        if chip.needs_p2p_policy() && !p2p {
                            assert_eq!(code(r), ACL_ERROR_RT_DRV_INTERNAL_ERROR, "{chip}, policy {policy}");
                        } else {
                            r.unwrap();
                            rt.ipc_mem_close(k).unwrap();
                        }
                    });
                    exp.run_importer(0, |_, k| {
                        rt.ipc_mem_import_by_key(k, 0).unwrap();
                        rt.ipc_mem_close(k).unwrap();
                    });
                    exp.release();
                },
            );
        }
    }
}

/// Atlas 200I/500 A2 has no IPC memory sharing: 207000; an unknown model fails
/// `aclInit` and every IPC call with 100000.
#[test]
fn chips_without_ipc_refuse_it() {
    acl::run(
        || Some(HostSim::faithful().with_chip(Chip::Atlas200I500A2)),
        |rt: &HostSim| {
            rt.set_device(0).unwrap();
            let p = rt.malloc(SIZE, ACL_MEM_MALLOC_HUGE_FIRST).unwrap();
            assert_eq!(code(rt.ipc_mem_get_export_key(p, SIZE, 0)), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
            let unknown = HostSim::faithful().with_chip(Chip::Unknown);
            assert_eq!(code(unknown.init()), ACL_ERROR_INVALID_PARAM);
            assert_eq!(code(unknown.ipc_mem_get_export_key(p, SIZE, 0)), ACL_ERROR_INVALID_PARAM);
            rt.free(p).unwrap();
        },
    );
    assert_eq!(Chip::parse("200I/500 A2"), Some(Chip::Atlas200I500A2));
    assert_eq!(Chip::parse("a2"), None, "names are exact");
}

/// Where the documentation is silent, the simulator is conservative: when a
/// device's `aclrtSetDevice` count falls to 0 its resources go for every thread of
/// the process, so a thread bound to it before gets 107002 until it sets it again,
/// even after another thread set it anew; its streams run what they hold and go; a
/// reset with no set left is 507007 (`ACL_ERROR_RT_CONTEXT_RELEASE_ERROR`, the
/// runtime's answer).
#[test]
fn releasing_a_device_unbinds_every_thread_and_drops_its_streams() {
    in_fresh_process(|rt| {
        let (to_bound, bound_rx) = std::sync::mpsc::channel::<()>();
        let (bound_tx, from_bound) = std::sync::mpsc::channel::<i32>();
        std::thread::scope(|s| {
            s.spawn(move || {
                rt.set_device(0).unwrap();
                bound_tx.send(0).unwrap();
                bound_rx.recv().unwrap();
                bound_tx.send(code(rt.malloc(64, ACL_MEM_MALLOC_NORMAL_ONLY))).unwrap();
            });
            assert_eq!(from_bound.recv().unwrap(), 0);
            rt.set_device(0).unwrap();
            let host = [7u8; 64];
            let dev = rt.malloc(64, ACL_MEM_MALLOC_NORMAL_ONLY).unwrap();
            let s0 = rt.create_stream().unwrap();
            // SAFETY: a device block and a host array of 64 bytes, alive past the reset.
            unsafe { rt.memcpy_async(Memcpy::exact(dev, host.as_ptr().cast(), 64, ACL_MEMCPY_HOST_TO_DEVICE), s0) }
                .unwrap();
            rt.reset_device(0).unwrap();
            rt.reset_device(0).unwrap();
            assert_eq!(code(rt.malloc(64, ACL_MEM_MALLOC_NORMAL_ONLY)), ACL_ERROR_RT_CONTEXT_NULL);
            assert_eq!(code(rt.reset_device(0)), ACL_ERROR_RT_CONTEXT_RELEASE_ERROR);
            rt.set_device(0).unwrap();
            to_bound.send(()).unwrap();
            assert_eq!(from_bound.recv().unwrap(), ACL_ERROR_RT_CONTEXT_NULL, "a binding from before the release");
            assert_eq!(code(rt.synchronize_stream(s0)), ACL_ERROR_RT_PARAM_INVALID, "the stream went");
            let mut seen = [0u8; 64];
            // SAFETY: a synchronous read of the device block.
            unsafe { rt.memcpy(Memcpy::exact(seen.as_mut_ptr().cast(), dev, 64, ACL_MEMCPY_DEVICE_TO_HOST)) }.unwrap();
            assert_eq!(seen, host, "the stream ran its copy before it went");
            rt.free(dev).unwrap();
            rt.reset_device(0).unwrap();
        });
    });
}

/// Runs `case` on a faithful simulator in a forked child: its device counts
/// and contexts start afresh, and what it releases no other case sees.
fn in_fresh_process(case: impl FnOnce(&HostSim)) {
    acl::run(|| Some(HostSim::faithful()), |rt: &HostSim| acl::proc::spawn(|_| case(rt)).join());
}

/// Contexts (docs/ascend-ipc.md §1.2): switching between two devices' default
/// contexts moves the thread's device and counts nothing, so one reset still
/// releases a device set once; a context of a released device is gone (107002),
/// and a handle the runtime never gave is refused (100000).
#[test]
fn contexts_switch_devices_without_counting() {
    in_fresh_process(|rt| {
        assert_eq!(code(rt.get_current_context()), ACL_ERROR_RT_CONTEXT_NULL);
        rt.set_device(0).unwrap();
        let c0 = rt.get_current_context().unwrap();
        rt.set_device(1).unwrap();
        let c1 = rt.get_current_context().unwrap();
        assert_ne!(c0, c1);
        for _ in 0..10 {
            rt.set_current_context(c0).unwrap();
            rt.set_current_context(c1).unwrap();
        }
        rt.set_current_context(c0).unwrap();
        let s0 = rt.create_stream().unwrap();
        rt.set_current_context(c1).unwrap();
        assert_eq!(code(rt.synchronize_stream(s0)), ACL_ERROR_RT_STREAM_CONTEXT, "device 0's stream on 1");
        rt.set_current_context(c0).unwrap();
        rt.destroy_stream(s0).unwrap();
        // Set once, reset once: released, switches or not.
        rt.reset_device(0).unwrap();
        assert_eq!(code(rt.malloc(64, ACL_MEM_MALLOC_NORMAL_ONLY)), ACL_ERROR_RT_CONTEXT_NULL);
        assert_eq!(code(rt.set_current_context(c0)), ACL_ERROR_RT_CONTEXT_NULL, "a released device's");
        rt.set_current_context(c1).unwrap();
        assert_eq!(code(rt.set_current_context(kpccl_ascend::AclContext(1))), ACL_ERROR_INVALID_PARAM);
        rt.reset_device(1).unwrap();
    });
}

/// Page sizes by policy (docs/ascend-ipc.md §1.2): HUGE_FIRST takes 2 MiB pages
/// above 1 MiB only, the HUGE_ONLY policies always; an export starts on a page of
/// its allocation, which starts on one.
#[test]
fn exports_start_on_a_page_of_the_allocations_page_size() {
    acl::run(
        || Some(HostSim::faithful()),
        |rt: &HostSim| {
            const HUGE: usize = 2 << 20;
            rt.set_device(0).unwrap();
            let cases = [
                (ACL_MEM_MALLOC_HUGE_FIRST, 1 << 20, 4096),
                (ACL_MEM_MALLOC_HUGE_FIRST, (1 << 20) + 1, HUGE),
                (ACL_MEM_MALLOC_HUGE_FIRST_P2P, HUGE, HUGE),
                (ACL_MEM_MALLOC_HUGE_ONLY_P2P, 8192, HUGE),
                (ACL_MEM_MALLOC_NORMAL_ONLY, 2 * HUGE, 4096),
                (ACL_MEM_MALLOC_NORMAL_ONLY_P2P, 2 * HUGE, 4096),
            ];
            for (policy, size, page) in cases {
                let p = rt.malloc(size, policy).unwrap();
                assert_eq!(p as usize % page, 0, "policy {policy}, size {size}");
                let small = rt.ipc_mem_get_export_key(at(p, 4096), 4096, 1);
                let want = if page == 4096 { 0 } else { ACL_ERROR_RT_DRV_INTERNAL_ERROR };
                assert_eq!(code(small), want, "policy {policy}, size {size}: export 4 KiB in");
                let whole = rt.ipc_mem_get_export_key(p, size, 1).unwrap();
                for k in small.into_iter().chain([whole]) {
                    rt.ipc_mem_close(&k).unwrap();
                }
                rt.free(p).unwrap();
            }
        },
    );
}

/// A copy whose device side is not device memory of this process, or runs
/// past its block, is refused (107000) before a byte moves, where a plain
/// copy would crash; a size past the address space fails the allocation
/// (207001) rather than wrap into a small block reported as success.
#[test]
fn copies_outside_device_memory_and_impossible_sizes_are_refused() {
    acl::run(
        || Some(HostSim::faithful()),
        |rt: &HostSim| {
            rt.set_device(0).unwrap();
            let p = rt.malloc(SIZE, ACL_MEM_MALLOC_NORMAL_ONLY).unwrap();
            let mut host = vec![0u8; 64];
            let h = host.as_mut_ptr().cast::<c_void>();
            let bogus = core::ptr::without_provenance_mut::<c_void>(0x3000);
            let past = 1 << 30;
            for (dst, src, n, kind) in [
                (bogus, p, 8, ACL_MEMCPY_DEVICE_TO_DEVICE),
                (p, bogus, 8, ACL_MEMCPY_DEVICE_TO_DEVICE),
                (bogus, h, 8, ACL_MEMCPY_HOST_TO_DEVICE),
                (h, bogus, 8, ACL_MEMCPY_DEVICE_TO_HOST),
                (h, at(p, 8), past, ACL_MEMCPY_DEVICE_TO_HOST),
                (at(p, 8), h, past, ACL_MEMCPY_DEFAULT),
            ] {
                // SAFETY: refused before any byte is copied (what is tested).
                let got = code(unsafe { rt.memcpy(Memcpy::exact(dst, src, n, kind)) });
                assert_eq!(got, ACL_ERROR_RT_PARAM_INVALID, "{n} bytes {src:?} -> {dst:?}, kind {kind}");
            }
            assert_eq!(sync_copy(rt, p, h, 64, ACL_MEMCPY_HOST_TO_DEVICE), ACL_SUCCESS);
            // The last: rounded to 32 bytes and padded it fits, to whole pages it does not.
            for size in [usize::MAX, usize::MAX - 40, usize::MAX - 100] {
                assert_eq!(code(rt.malloc(size, ACL_MEM_MALLOC_NORMAL_ONLY)), ACL_ERROR_RT_MEMORY_ALLOCATION, "{size}");
            }
            rt.free(p).unwrap();
        },
    );
}

/// The exporter closes or frees memory an importer maps (the driver frees the
/// importer's pages): the importer's next synchronous copy of it fails as a
/// synchronised stream reports a faulting copy (507000), and does not crash
/// the importer on its revoked view.
#[test]
fn a_synchronous_copy_of_memory_the_exporter_released_fails_and_does_not_crash() {
    acl::run(
        || Some(HostSim::faithful()),
        |rt| {
            once_released(
                rt,
                |k| rt.ipc_mem_import_by_key(k, 0).unwrap(),
                |k, q, _| {
                    let mut host = vec![0u8; 64];
                    let h = host.as_mut_ptr().cast::<c_void>();
                    for (dst, src, kind) in [(h, q, ACL_MEMCPY_DEVICE_TO_HOST), (q, h, ACL_MEMCPY_HOST_TO_DEVICE)] {
                        assert_eq!(sync_copy(rt, dst, src, 64, kind), ACL_ERROR_RT_INTERNAL_ERROR, "kind {kind}");
                    }
                    rt.ipc_mem_close(k).unwrap();
                },
            );
        },
    );
}

/// For each way an exporter releases memory an importer maps (its key
/// closed, then the memory freed): an importer process maps it with
/// `import`, and once the exporter released it runs `then(key, address,
/// freed)`; the exporter then releases the rest.
fn once_released<R: AclRuntime>(
    rt: &R,
    import: impl Fn(&IpcKey) -> *mut c_void,
    then: impl Fn(&IpcKey, *mut c_void, bool),
) {
    for frees in [false, true] {
        let exp = Exported::new(rt, 0, 5, ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION);
        let mut importer = exp.spawn_importer(0, |c, k| {
            let q = import(k);
            c.send_i32(1);
            let _ = c.recv_i32();
            then(k, q, frees);
        });
        assert_eq!(importer.chan.recv_i32(), 1);
        if frees {
            exp.free()
        } else {
            exp.close()
        }
        importer.chan.send_i32(1);
        importer.join();
        if frees { exp.close() } else { exp.free() }
    }
}

/// The order of an IPC call's checks (docs/ascend-ipc.md §1.2, Close; §5): its
/// parameters' (107000), then the thread's context (107002), before the chip's
/// support (207000) and the key's state (507899), so a thread without a device
/// hears that first, whatever the chip or the key.
#[test]
fn the_context_is_checked_before_the_chip_and_the_key() {
    let chipless = HostSim::faithful().with_chip(Chip::Atlas200I500A2);
    // Well-formed (64 hex digits and a NUL), exported by no one.
    let mut unknown = IpcKey([b'0'; ACL_IPC_KEY_LEN]);
    unknown.0[ACL_IPC_KEY_LEN - 1] = 0;
    let mut not_hex = IpcKey([0; ACL_IPC_KEY_LEN]);
    not_hex.0[0] = b'z';
    // A thread of its own: no device set in it.
    std::thread::spawn(move || {
        let no_context = ACL_ERROR_RT_CONTEXT_NULL;
        assert_eq!(code(chipless.ipc_mem_close(&unknown)), no_context, "close");
        assert_eq!(code(chipless.ipc_mem_set_import_pid(&unknown, &[1])), no_context, "set_import_pid");
        assert_eq!(code(chipless.ipc_mem_import_by_key(&unknown, 0)), no_context, "import");
        let bogus = core::ptr::without_provenance_mut::<c_void>(0x20_0000);
        assert_eq!(code(chipless.ipc_mem_get_export_key(bogus, 4096, 0)), no_context, "export");
        // The driver's answer to a non-hex key (flags 1) is state: after the context too.
        assert_eq!(code(HostSim::faithful().ipc_mem_import_by_key(&not_hex, 1)), no_context, "non-hex import");
        // Parameters first: a bad flag is 107000 with or without a context.
        assert_eq!(code(chipless.ipc_mem_import_by_key(&unknown, 2)), ACL_ERROR_RT_PARAM_INVALID, "flags 2");
    })
    .join()
    .unwrap();
}

/// A key its exporter destroyed imports no more (507899, docs/ascend-ipc.md
/// §5), even into a process that still holds an import of it: the held
/// import stays, and closes as usual.
#[test]
fn a_destroyed_key_is_not_imported_again_by_a_process_that_holds_it() {
    acl::run(
        || Some(HostSim::faithful()),
        |rt| {
            let import_twice = |k: &IpcKey| {
                let q = rt.ipc_mem_import_by_key(k, 0).unwrap();
                assert_eq!(rt.ipc_mem_import_by_key(k, 0).unwrap(), q, "a live key's second import");
                q
            };
            once_released(rt, import_twice, |k, _, frees| {
                let again = code(rt.ipc_mem_import_by_key(k, 0));
                assert_eq!(again, ACL_ERROR_RT_DRV_INTERNAL_ERROR, "re-import of a destroyed key (freed: {frees})");
                // The two imports held close; a third close has nothing left.
                rt.ipc_mem_close(k).unwrap();
                rt.ipc_mem_close(k).unwrap();
                assert_ne!(code(rt.ipc_mem_close(k)), ACL_SUCCESS, "a close past the imports held");
            });
        },
    );
}
