//! A C program that uses only the ACL IPC calls, compiled with `cc` against
//! `ascend/include/acl_ipc.h` and linked to the simulator's `libascendcl.so`, shares
//! memory between two processes and gets 507899 before it is whitelisted.
#![allow(clippy::std_instead_of_core, clippy::alloc_instead_of_core)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

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

/// Compiles `tests/c/<name>.c` against the simulator library (with `-I include`
/// when `include` is given), runs it with `args` and `env`, bounded, and returns
/// its output; `None` (with a skip line) when there is no way to build it here.
fn build_and_run(name: &str, include: Option<&Path>, args: &[&str], env: &[(&str, &str)]) -> Option<String> {
    if cfg!(target_arch = "aarch64") && std::env::var_os("CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER").is_some() {
        skip("cross run under an emulator: the host `cc` cannot link the aarch64 library");
        return None;
    }
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    if Command::new(&cc).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_err() {
        skip("no C compiler (`cc` or $CC)");
        return None;
    }
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let source = here.join(format!("tests/c/{name}.c"));
    let libs = lib_dir();
    let work = std::env::temp_dir().join(format!("kpccl-ascend-c-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&work).unwrap();
    let prog = work.join(name);
    let mut build = Command::new(&cc);
    build.args(["-std=c11", "-D_POSIX_C_SOURCE=200809L", "-Wall", "-Wextra", "-Werror"]);
    if let Some(dir) = include {
        build.arg("-I").arg(dir);
    }
    let built = build
        .arg(&source)
        .arg("-o")
        .arg(&prog)
        .arg(format!("-L{}", libs.display()))
        .arg("-lascendcl")
        .arg(format!("-Wl,-rpath,{}", libs.display()))
        .output()
        .expect("run the C compiler");
    assert!(built.status.success(), "cc failed:\n{}", String::from_utf8_lossy(&built.stderr));

    let mut run = Command::new(&prog);
    // The rpath names the library built for this test; cargo's LD_LIBRARY_PATH
    // (which wins over it) may hold an older build.
    run.args(args).env_remove("LD_LIBRARY_PATH").stdout(Stdio::piped()).stderr(Stdio::piped());
    for (k, v) in env {
        run.env(k, v);
    }
    let mut child = run.spawn().unwrap();
    let finished = kpccl_testkit::wait_or_kill(&mut child, Duration::from_secs(30));
    assert!(finished.is_some(), "the C program {name} did not finish in 30 s");
    let out = child.wait_with_output().unwrap();
    let _ = std::fs::remove_dir_all(&work);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "C program {name} failed: {:?}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.lines().any(|l| l == "OK"), "{stdout}");
    Some(stdout)
}

#[test]
fn c_program_shares_memory_and_sees_507899() {
    let include = Path::new(env!("CARGO_MANIFEST_DIR")).join("../include");
    let Some(stdout) = build_and_run("acl_ipc_pair", Some(&include), &[], &[]) else { return };
    assert!(stdout.contains("import before whitelisting: 507899"), "{stdout}");
    kpccl_ascend::sim::sweep().unwrap();
}

/// The copy rules of the reference page, checked by a C program that declares
/// only CANN's prototypes, under the A2 and the inference chip models.
#[test]
fn c_program_written_to_cann_prototypes_sees_the_copy_rules() {
    for (chip, arg) in [("A2", "a2"), ("inference", "inference")] {
        let Some(stdout) = build_and_run("acl_rules", None, &[arg], &[("ASCEND_SIM_CHIP", chip)]) else { return };
        assert!(stdout.contains(" 0 failed"), "{stdout}");
    }
    kpccl_ascend::sim::sweep().unwrap();
}
