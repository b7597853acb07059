//! The conformance suite against the in-process simulator, plus its strict mode.
#![allow(clippy::std_instead_of_core, clippy::alloc_instead_of_core)]

mod common;

use kpccl_ascend::AclRuntime;
use kpccl_ascend::codes::*;
use kpccl_ascend::sim::HostSim;

use common::ipc::Exported;

conformance_tests!(Some(HostSim::faithful()));

/// Strict mode refuses the exporter's close and free while an importer maps the key.
#[test]
fn strict_mode_reports_misuse() {
    common::run(
        || Some(HostSim::strict()),
        |rt: &HostSim| {
            let exp = Exported::new(rt, 0, 1, 1);
            let mut holder = exp.spawn_holder(0);
            assert_eq!(rt.ipc_mem_close(&exp.key).unwrap_err().code(), ACL_ERROR_RT_IPC_ERROR);
            assert_eq!(rt.free(exp.ptr).unwrap_err().code(), ACL_ERROR_RT_IPC_ERROR);
            holder.chan.send_i32(1);
            holder.join();
            exp.release();
        },
    );
}

/// Faithful mode: after the exporter's close, an importer's view faults at its next
/// access (from its next simulator call on), as the driver frees its pages.
#[test]
fn importer_view_revoked_after_exporter_close() {
    common::run(
        || Some(HostSim::faithful()),
        |rt: &HostSim| {
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
        },
    );
}
