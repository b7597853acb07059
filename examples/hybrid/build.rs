//! Builds the MPI shim of `kpccl-hybrid` (mpi/hybrid_mpi.c) with the
//! host's `mpicc` (or `$MPICC`), when there is one and the target is the host; otherwise
//! `kpccl-hybrid` is built without MPI and says so when run. An `mpicc`
//! that is there but fails on the shim sets `kpccl_mpi_broken` too, so that
//! the test fails instead of skipping.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(kpccl_mpi)");
    println!("cargo::rustc-check-cfg=cfg(kpccl_mpi_broken)");
    println!("cargo::rerun-if-changed=mpi/hybrid_mpi.c");
    println!("cargo::rerun-if-env-changed=KPCCL_NO_MPI");
    println!("cargo::rerun-if-env-changed=MPICC");
    // Another MPI first on PATH is another mpicc, whose shim must match its mpirun.
    println!("cargo::rerun-if-env-changed=PATH");
    let mpicc = std::env::var("MPICC").unwrap_or_else(|_| "mpicc".to_owned());
    let (host, target) = (std::env::var("HOST").unwrap_or_default(), std::env::var("TARGET").unwrap_or_default());
    if host != target || std::env::var_os("KPCCL_NO_MPI").is_some() {
        return;
    }
    // Open MPI's wrapper answers --showme:link, MPICH's -link_info (with the compiler first).
    let link = match read(&mpicc, &["--showme:link"]) {
        Some(words) => words,
        None => match read(&mpicc, &["-link_info"]) {
            Some(words) => words.split_whitespace().skip(1).collect::<Vec<_>>().join(" "),
            None => return,
        },
    };
    // cc drives the MPI wrapper as the C compiler (flags, archive, `ar`);
    // the link lines are ours, for kpccl-hybrid alone.
    let built = cc::Build::new()
        .compiler(&mpicc)
        .file("mpi/hybrid_mpi.c")
        .std("c11")
        .opt_level(2)
        .warnings(true)
        .extra_warnings(true)
        .cargo_metadata(false)
        .try_compile("kpccl_hybrid_mpi");
    if let Err(e) = built {
        println!("cargo::warning=mpicc is there but the MPI shim did not build ({e}): kpccl-hybrid runs without MPI");
        println!("cargo::rustc-cfg=kpccl_mpi_broken");
        return;
    }
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let archive = out.join("libkpccl_hybrid_mpi.a");
    println!("cargo::rustc-cfg=kpccl_mpi");
    println!("cargo::rustc-link-arg-bin=kpccl-hybrid={}", archive.display());
    for word in link.split_whitespace() {
        println!("cargo::rustc-link-arg-bin=kpccl-hybrid={word}");
    }
}

fn read(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned()).filter(|s| !s.is_empty())
}
