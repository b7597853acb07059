//! The conformance suite against the in-process simulator, plus its strict mode.
#![allow(clippy::std_instead_of_core, clippy::alloc_instead_of_core)]

use kpccl_testkit::acl;

use kpccl_ascend::codes::*;
use kpccl_ascend::sim::HostSim;
use kpccl_ascend::{AclRuntime, Memcpy};

use acl::ipc::Exported;

kpccl_testkit::conformance_tests!(Some(HostSim::faithful()));

/// Runs `case` as the suite runs its cases, on the simulator `make` gives.
fn on_sim(make: fn() -> HostSim, case: impl FnOnce(&HostSim)) {
    acl::run(|| Some(make()), case);
}

/// Strict mode refuses the exporter's close and free while an importer maps the key.
#[test]
fn strict_mode_reports_misuse() {
    on_sim(HostSim::strict, |rt| {
        let exp = Exported::new(rt, 0, 1, 1);
        let mut holder = exp.spawn_holder(0);
        assert_eq!(rt.ipc_mem_close(&exp.key).unwrap_err().code(), ACL_ERROR_RT_IPC_ERROR);
        assert_eq!(rt.free(exp.ptr).unwrap_err().code(), ACL_ERROR_RT_IPC_ERROR);
        holder.chan.send_i32(1);
        holder.join();
        exp.release();
    });
}

/// Faithful mode: after the exporter's close, an importer's view faults at its next
/// access (from its next simulator call on), as the driver frees its pages.
#[test]
fn importer_view_revoked_after_exporter_close() {
    on_sim(HostSim::faithful, |rt| {
        let exp = Exported::new(rt, 0, 2, 1);
        let mut imp = exp.spawn_importer(0, |c, k| {
            let q = rt.ipc_mem_import_by_key(k, 0).unwrap().cast::<u8>();
            // SAFETY: `q` maps at least one readable byte until revoked.
            let _ = unsafe { q.read_volatile() };
            c.send_i32(1);
            let _ = c.recv_i32();
            rt.synchronize_device().unwrap();
            // SAFETY: deliberately touches the revoked view: the child must fault.
            let _ = unsafe { q.read_volatile() };
            c.send_i32(2);
        });
        assert_eq!(imp.chan.recv_i32(), 1);
        exp.close();
        imp.chan.send_i32(1);
        assert_eq!(imp.wait(), 128 + libc::SIGSEGV, "the importer's access must fault");
        exp.free();
    });
}

/// The simulator runs a stream's copies when it is synchronised, in the order they
/// were queued: before that the bytes are not there, so a missing synchronisation
/// shows in tests. A stream of another device is 107003, an unknown one 107000.
#[test]
fn stream_work_runs_in_order_at_synchronisation() {
    on_sim(HostSim::faithful, |rt| {
        rt.set_device(0).unwrap();
        let dev = rt.malloc(64, ACL_MEM_MALLOC_NORMAL_ONLY).unwrap();
        let s = rt.create_stream().unwrap();
        let (a, b) = ([1u8; 64], [2u8; 64]);
        // SAFETY: a device block of 64 bytes and two host arrays alive until the sync.
        unsafe { rt.memcpy_async(Memcpy::exact(dev, a.as_ptr().cast(), 64, ACL_MEMCPY_HOST_TO_DEVICE), s) }.unwrap();
        // SAFETY: as above.
        unsafe { rt.memcpy_async(Memcpy::exact(dev, b.as_ptr().cast(), 64, ACL_MEMCPY_HOST_TO_DEVICE), s) }.unwrap();
        let mut seen = [9u8; 64];
        // SAFETY: synchronous read of the device block.
        unsafe { rt.memcpy(Memcpy::exact(seen.as_mut_ptr().cast(), dev, 64, ACL_MEMCPY_DEVICE_TO_HOST)) }.unwrap();
        assert_eq!(seen, [0u8; 64], "queued copies have not run before the sync");
        rt.synchronize_stream(s).unwrap();
        // SAFETY: as above.
        unsafe { rt.memcpy(Memcpy::exact(seen.as_mut_ptr().cast(), dev, 64, ACL_MEMCPY_DEVICE_TO_HOST)) }.unwrap();
        assert_eq!(seen, [2u8; 64], "the later copy ran last");
        // Destroying a stream first runs what it still holds.
        // SAFETY: as above.
        unsafe { rt.memcpy_async(Memcpy::exact(dev, a.as_ptr().cast(), 64, ACL_MEMCPY_HOST_TO_DEVICE), s) }.unwrap();
        rt.destroy_stream(s).unwrap();
        // SAFETY: as above.
        unsafe { rt.memcpy(Memcpy::exact(seen.as_mut_ptr().cast(), dev, 64, ACL_MEMCPY_DEVICE_TO_HOST)) }.unwrap();
        assert_eq!(seen, [1u8; 64]);
        assert_eq!(rt.synchronize_stream(s).unwrap_err().code(), ACL_ERROR_RT_PARAM_INVALID);
        let other = rt.create_stream().unwrap();
        rt.set_device(1).unwrap();
        // SAFETY: refused before any byte moves.
        let r = unsafe { rt.memcpy_async(Memcpy::exact(dev, a.as_ptr().cast(), 64, ACL_MEMCPY_HOST_TO_DEVICE), other) };
        assert_eq!(r.unwrap_err().code(), ACL_ERROR_RT_STREAM_CONTEXT);
        rt.set_device(0).unwrap();
        rt.destroy_stream(other).unwrap();
        rt.free(dev).unwrap();
    });
}
