//! The smoke run (`cargo xtask bench --smoke`, a step of `cargo xtask test`)
//! exists to catch a benchmark program that no longer works: one that no
//! longer compiles, or that exits 0 having recorded nothing, must fail it,
//! not become a note in the report.
#![allow(clippy::std_instead_of_core)]

use std::fs;
use std::os::unix::fs::PermissionsExt as _;
use std::process::Command;

/// `mpicc` and `mpirun` that answer `--version` but cannot build, and a `cc`
/// that "builds" a program that exits 0 and records nothing.
const FAKE_TOOL: &str = r#"#!/bin/sh
case "$(basename "$0")" in
cc) while [ $# -gt 0 ]; do [ "$1" = -o ] && printf '#!/bin/sh\nexit 0\n' > "$2" && chmod +x "$2"; shift; done
   exit 0 ;;
*) for a; do [ "$a" = --version ] && { echo "fake 1.0"; exit 0; }; done
   echo "pipeline.c:1: error: fake compiler refuses" >&2; exit 1 ;;
esac
"#;

/// Whether the tests run under an emulator (`cargo xtask test-aarch64`):
/// benchmarks are never measured there, and the driver refuses to run.
fn emulated() -> bool {
    let emulated = !kpccl_posix::launch::runner::from_env().is_empty();
    if emulated {
        eprintln!("skipped: benchmarks never run under an emulator");
    }
    emulated
}

/// Runs the driver in smoke mode with the fake tools first on `PATH`:
/// whether it succeeded, and its standard error.
fn smoke_with_fake_tools(name: &str, args: &[&str]) -> (bool, String) {
    let dir = std::env::temp_dir().join(format!("kpccl-bench-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    let (bin, exe) = (dir.join("bin"), dir.join("exe"));
    fs::create_dir_all(&bin).unwrap();
    fs::create_dir_all(&exe).unwrap();
    for tool in ["cc", "mpicc", "mpirun"] {
        let path = bin.join(tool);
        fs::write(&path, FAKE_TOOL).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    }
    // The driver looks for libkpccl.so beside itself; the fake cc never reads it.
    let driver = exe.join("kpccl-bench");
    fs::copy(env!("CARGO_BIN_EXE_kpccl-bench"), &driver).unwrap();
    fs::write(exe.join("libkpccl.so"), b"").unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let out = Command::new(&driver)
        .arg("--smoke")
        .args(args)
        .arg("--work")
        .arg(dir.join("work"))
        .arg("--out")
        .arg(dir.join("BENCHMARKS.md"))
        .env("PATH", path)
        .output()
        .unwrap();
    let _ = fs::remove_dir_all(&dir);
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn an_mpi_program_that_does_not_build_fails_the_smoke_run() {
    if emulated() {
        return;
    }
    let (ok, stderr) = smoke_with_fake_tools("mpi-build", &["--parts", "pipeline", "--ranks", "2"]);
    assert!(!ok, "the smoke run passed although pipeline.c did not build:\n{stderr}");
    assert!(stderr.contains("bench/c/pipeline.c") && stderr.contains("fake compiler refuses"), "{stderr}");
}

#[test]
fn a_program_that_records_nothing_fails_the_smoke_run() {
    if emulated() {
        return;
    }
    let (ok, stderr) = smoke_with_fake_tools("no-result", &["--parts", "c", "--ranks", "2", "--no-mpi"]);
    assert!(!ok, "the smoke run passed although the C fences recorded nothing:\n{stderr}");
    assert!(stderr.contains("c fences n=2: ") && stderr.contains("recorded no result"), "{stderr}");
}
