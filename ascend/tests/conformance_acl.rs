//! The acl backend: load errors name what is missing, and the conformance suite runs
//! against a real `libascendcl.so` when one loads (else each case prints a skip).
#![allow(clippy::std_instead_of_core, clippy::alloc_instead_of_core)]

use std::io::Write;
use std::path::Path;

use kpccl_ascend::acl::{AclApi, AclBackend, LoadError};

fn real() -> Option<AclBackend> {
    match AclBackend::load() {
        // `cargo test` puts target/<profile>/deps on LD_LIBRARY_PATH, where the
        // simulator library may sit: that is not a real runtime.
        Ok(b) if b.api().is_simulator() => {
            let lib = b.api().library();
            let _ = writeln!(std::io::stderr(), "SKIP: {lib} is the kpccl simulator, not CANN's runtime");
            None
        }
        Ok(b) => Some(b),
        Err(e) => {
            // Straight to stderr, past the test harness's capture, so the skip shows.
            let _ = writeln!(std::io::stderr(), "SKIP: no real ACL runtime: {e}");
            None
        }
    }
}

kpccl_testkit::conformance_tests!(real());

#[test]
fn missing_library_is_named() {
    let err = AclApi::open(Path::new("/nonexistent/libascendcl.so")).unwrap_err();
    assert!(matches!(err, LoadError::Library(_)));
    assert!(err.to_string().contains("/nonexistent/libascendcl.so"), "{err}");
}

#[test]
fn missing_symbols_are_named() {
    let err = AclApi::open(Path::new("libc.so.6")).unwrap_err();
    let LoadError::Symbols { missing, .. } = &err else { panic!("{err}") };
    // The 15 calls of the IPC contract, the 6 of streams, async copies and
    // host memory, and the 2 of the thread's context.
    assert_eq!(missing.len(), 23);
    assert!(err.to_string().contains("aclrtSetCurrentContext"), "{err}");
    assert!(err.to_string().contains("aclrtIpcMemImportByKey"), "{err}");
    assert!(err.to_string().contains("aclrtMemcpyAsync"), "{err}");
}
