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

/// The 23 symbols `AclApi::open` resolves.
const SYMBOLS: [&str; 23] = [
    "aclInit",
    "aclFinalize",
    "aclrtSetDevice",
    "aclrtResetDevice",
    "aclrtGetCurrentContext",
    "aclrtSetCurrentContext",
    "aclrtMalloc",
    "aclrtFree",
    "aclrtMemcpy",
    "aclrtSynchronizeDevice",
    "aclrtDeviceCanAccessPeer",
    "aclrtDeviceEnablePeerAccess",
    "aclrtDeviceGetBareTgid",
    "aclrtIpcMemGetExportKey",
    "aclrtIpcMemSetImportPid",
    "aclrtIpcMemImportByKey",
    "aclrtIpcMemClose",
    "aclrtMallocHost",
    "aclrtFreeHost",
    "aclrtCreateStream",
    "aclrtDestroyStream",
    "aclrtSynchronizeStream",
    "aclrtMemcpyAsync",
];

/// A `libascendcl.so` with every symbol, whose `aclInit` needs a function no
/// loaded library has (a runtime of another CANN version than its
/// dependencies): bound lazily, the process would die at the first call with
/// "symbol lookup error"; loading refuses it instead, naming the symbol.
#[test]
fn a_library_whose_dependencies_lack_a_symbol_is_refused_at_load_not_at_the_call() {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    // Under an emulator the host `cc` cannot build an aarch64 library.
    let cross =
        cfg!(target_arch = "aarch64") && std::env::var_os("CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER").is_some();
    let has_cc = std::process::Command::new(&cc).arg("--version").output().is_ok_and(|o| o.status.success());
    if cross || !has_cc {
        let _ = writeln!(std::io::stderr(), "SKIP: no C compiler for the target");
        return;
    }
    let dir = kpccl_testkit::ScratchDir::under(&std::env::temp_dir(), "acl-lazy", "missing-dependency");
    let mut source = String::from("extern int rtSymbolOfAnotherVersion(void);\n");
    for name in SYMBOLS {
        let body = if name == "aclInit" { "return rtSymbolOfAnotherVersion();" } else { "return 0;" };
        source += &format!("int {name}(void) {{ {body} }}\n");
    }
    let c = dir.path().join("acl.c");
    std::fs::write(&c, source).unwrap();
    let lib = dir.path().join("libascendcl.so");
    // `-z lazy`: the library itself asks for lazy binding (some toolchains default to `now`).
    let built = std::process::Command::new(&cc)
        .args(["-shared", "-fPIC", "-Wl,-z,lazy", "-o"])
        .arg(&lib)
        .arg(&c)
        .output()
        .expect("run the C compiler");
    assert!(built.status.success(), "cc failed:\n{}", String::from_utf8_lossy(&built.stderr));
    let err = AclApi::open(&lib).expect_err("a runtime with an unresolvable symbol was loaded");
    assert!(matches!(err, LoadError::Library(_)), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("rtSymbolOfAnotherVersion") && text.contains(&lib.display().to_string()), "{text}");
}
