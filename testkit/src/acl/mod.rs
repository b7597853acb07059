//! The conformance suite of the ACL IPC calls, generic over
//! [`AclRuntime`](kpccl_ascend::AclRuntime): forked processes, the cases, and
//! [`conformance_tests!`](crate::conformance_tests), which makes one `#[test]`
//! per case for a backend (the simulator, the dlopen'd library).

// Test support: the names of the helpers say what they are.
#![allow(missing_docs)]

pub mod ipc;
pub mod proc;
pub mod suite;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

static SERIAL: Mutex<()> = Mutex::new(());

/// Runs one suite case: one at a time (tests fork), skipped when the backend is
/// absent, and checked to leave no simulator state behind.
pub fn run<R>(make: impl FnOnce() -> Option<R>, case: impl FnOnce(&R)) {
    let _serial = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
    let Some(rt) = make() else { return };
    let dir = PathBuf::from(std::env::var_os("ASCEND_SIM_DIR").unwrap_or_else(|| sim_default_dir().into()));
    let _cleanup = ClearOnPanic(&dir);
    case(&rt);
    kpccl_ascend::sim::sweep().expect("sweep the simulator registry");
    assert!(!dir.exists(), "simulator state left behind in {}", dir.display());
}

/// Runs a case of a rule the contract read from the runtime's source ([src] in
/// `docs/ascend-ipc.md`), not yet seen on hardware: as [`run`], and a failure says
/// that on a real runtime the contract, and the simulator with it, may be what is wrong.
pub fn run_unverified<R>(make: impl FnOnce() -> Option<R>, case: impl FnOnce(&R)) {
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(make, case)));
    if let Err(panic) = outcome {
        eprintln!(
            "this case checks a [src] rule of docs/ascend-ipc.md that hardware has not confirmed: \
             against a real runtime, correct the contract and the simulator"
        );
        std::panic::resume_unwind(panic);
    }
}

/// Removes the simulator's state when a case fails, so that the exports it
/// never closed do not fail every case after it as leftovers.
struct ClearOnPanic<'a>(&'a Path);

impl Drop for ClearOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let _ = std::fs::remove_dir_all(self.0);
        }
    }
}

fn sim_default_dir() -> String {
    use std::os::unix::fs::MetadataExt;
    let uid = std::fs::metadata("/proc/self").map(|m| m.uid()).unwrap_or(0);
    format!("/dev/shm/ascend-sim2-{uid}")
}

/// One `#[test]` per checklist row, for the backend made by `$make`
/// (an expression of type `Option<impl AclRuntime + Sync>`; `None` skips). The
/// second list holds the rules read from the runtime's source, not yet confirmed
/// on hardware: they run the same, through [`run_unverified`].
#[macro_export]
macro_rules! conformance_tests {
    ($make:expr) => {
        $crate::conformance_tests!(@ $make; run;
            happy_same_device, happy_cross_device, not_whitelisted, disable_validation,
            pid_limit, double_import_and_double_close, foreign_close,
            exporter_close_before_importers, free_while_exported, export_checks,
            reexport_imported, process_death, runtime_checks, key_checks,
            cross_device_without_peer_access, pid_reuse_guard, streams_and_host_memory,
            set_and_reset_device_count);
        $crate::conformance_tests!(@ $make; run_unverified;
            close_needs_a_device, huge_page_exports);
    };
    (@ $make:expr; $run:ident; $($case:ident),*) => {
        $(
            #[test]
            fn $case() {
                $crate::acl::$run(|| $make, $crate::acl::suite::$case);
            }
        )*
    };
}
