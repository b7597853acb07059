//! A C program that uses only the ACL IPC calls, compiled with `cc` against
//! `ascend/include/acl_ipc.h` and linked to the simulator's `libascendcl.so`, shares
//! memory between two processes and gets 507899 before it is whitelisted.
#![allow(clippy::std_instead_of_core, clippy::alloc_instead_of_core)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn skip(why: &str) {
    // Straight to stderr, past the test harness's capture, so the skip shows.
    let _ = writeln!(std::io::stderr(), "SKIP c_program: {why}");
}

/// The directory holding the simulator library cargo built for this test.
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let deps = exe.parent().expect("deps directory").to_path_buf();
    [deps.clone(), deps.join("..")]
        .into_iter()
        .find(|d| d.join("libascendcl.so").exists())
        .unwrap_or_else(|| panic!("libascendcl.so not built next to {}", exe.display()))
}

#[test]
fn c_program_shares_memory_and_sees_507899() {
    if cfg!(target_arch = "aarch64") && std::env::var_os("CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER").is_some() {
        return skip("cross run under an emulator: the host `cc` cannot link the aarch64 library");
    }
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    if Command::new(&cc).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_err() {
        return skip("no C compiler (`cc` or $CC)");
    }
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let include = here.join("../include");
    let source = here.join("tests/c/acl_ipc_pair.c");
    let libs = lib_dir();
    let work = std::env::temp_dir().join(format!("kpccl-ascend-c-{}", std::process::id()));
    std::fs::create_dir_all(&work).unwrap();
    let prog = work.join("acl_ipc_pair");
    let built = Command::new(&cc)
        .args(["-std=c11", "-D_POSIX_C_SOURCE=200809L", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(&include)
        .arg(&source)
        .arg("-o")
        .arg(&prog)
        .arg(format!("-L{}", libs.display()))
        .arg("-lascendcl")
        .arg(format!("-Wl,-rpath,{}", libs.display()))
        .output()
        .expect("run the C compiler");
    assert!(built.status.success(), "cc failed:\n{}", String::from_utf8_lossy(&built.stderr));

    let mut child = Command::new(&prog).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the C program did not finish in 30 s");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let out = child.wait_with_output().unwrap();
    let _ = std::fs::remove_dir_all(&work);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "C program failed: {:?}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("import before whitelisting: 507899"), "{stdout}");
    assert!(stdout.lines().any(|l| l == "OK"), "{stdout}");
    kpccl_ascend::sim::sweep().unwrap();
}
