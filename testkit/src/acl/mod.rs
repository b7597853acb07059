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
/// (an expression of type `Option<impl AclRuntime + Sync>`; `None` skips).
#[macro_export]
macro_rules! conformance_tests {
    ($make:expr) => {
        $crate::conformance_tests!(@ $make;
            happy_same_device, happy_cross_device, not_whitelisted, disable_validation,
            pid_limit, double_import_and_double_close, foreign_close,
            exporter_close_before_importers, free_while_exported, export_checks,
            reexport_imported, process_death, runtime_checks, key_checks,
            cross_device_without_peer_access, pid_reuse_guard, streams_and_host_memory);
    };
    (@ $make:expr; $($case:ident),*) => {
        $(
            #[test]
            fn $case() {
                $crate::acl::run(|| $make, $crate::acl::suite::$case);
            }
        )*
    };
}
