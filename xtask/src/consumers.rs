//! The installed package, used the way its users would (part of the host C
//! tests). `cargo xtask install` stages a prefix under `DESTDIR`, then:
//!
//! 1. the layout: the SONAME, the symlink chain, only `kpccl_*` exported,
//!    every file there, and the files naming the prefix, not `DESTDIR`;
//! 2. `ffi/tests/mpi/comm_create_mpi.c` (kpccl_mpi.h) built with
//!    `pkg-config --cflags --libs kpccl` as C11 and C++17, with Open MPI and
//!    with MPICH when installed, each run on 4 ranks under its own launcher;
//!    and once with `kpccl-static` (libkpccl.a in a dynamic MPI program);
//! 3. the CMake project `ffi/tests/consumer` (`find_package(kpccl)`,
//!    `kpccl::kpccl`, `MPI::MPI_C`), shared and static, run on 4 ranks;
//! 4. the reference example linked fully static with
//!    `pkg-config --static`, run by the installed `kpccl-run`;
//! 5. the reference example linked from the build tree, as a user who has
//!    not installed anything does (`mpicc -I ffi/include … -L target/release
//!    -lkpccl`), run on 2 ranks: it needs `libkpccl.so.0` there.
//!
//! Every build uses `-Wall -Wextra -Werror`. The staged prefix is used in
//! place: the CMake package finds its prefix from where it lies, and
//! pkg-config is told the prefix (`--define-variable=prefix=`).

use std::{
    fs,
    path::{Path, PathBuf},
    time::Instant,
};

use crate::{
    c_tests::{CFLAGS, CTests, DIR, EXAMPLE, Flavor, Run, page_casts, run_one},
    cmd::{Cmd, Result, bail, err, which},
    install,
    report::Counts,
    staticlib::target_dir,
};

/// The prefix the staged files name (never created: they are used in place).
const PREFIX: &str = "/opt/kpccl-consumer-test";
/// The MPI helper's test program.
const MPI_TEST: &str = "ffi/tests/mpi/comm_create_mpi.c";
/// The CMake consumer project.
const CMAKE_PROJECT: &str = "ffi/tests/consumer";
/// Ranks of every MPI run.
const RANKS: u32 = 4;

/// One row per check: its name, how it ran, and how it went.
pub(crate) fn run(cfg: &CTests, mpirun: Option<&[String]>, out: &Path) -> Vec<(String, String, Run)> {
    let start = Instant::now();
    let stage = std::env::current_dir().unwrap_or_default().join(out).join("stage");
    let _ = fs::remove_dir_all(&stage);
    let root = match install::install(Path::new(PREFIX), Some(&stage)) {
        Ok(installed) => installed.root,
        Err(e) => return vec![row("install", "DESTDIR", failed(start, format!("install: {e}")))],
    };
    let mut rows = vec![row("install", "DESTDIR layout", timed(start, || layout(&root)))];
    match mpirun {
        Some(mpirun) => {
            rows.extend(mpi_programs(cfg, mpirun, &root, out));
            let start = Instant::now();
            let run = match from_build_tree(out) {
                Ok(program) => run_one(cfg, &Flavor::Mpi(mpirun.to_vec()), &program, 2),
                Err(e) => failed(start, e.to_string()),
            };
            rows.push(row("-L target/release -lkpccl", &format!("{} -np 2", mpirun[0]), run));
        }
        None => println!("note: the installed package is not tried with MPI (no mpicc/mpirun)"),
    }
    let launcher = vec![root.join("bin").join("kpccl-run").to_string_lossy().into_owned()];
    let start = Instant::now();
    let run = match fully_static(&root, out) {
        Ok(program) => run_one(cfg, &Flavor::Launcher(launcher), &program, 2),
        Err(e) => failed(start, e.to_string()),
    };
    rows.push(row("kpccl.pc --static (cc -static)", "kpccl-run -n 2", run));
    rows
}

fn row(name: &str, what: &str, run: Run) -> (String, String, Run) {
    (name.to_owned(), what.to_owned(), run)
}

fn failed(start: Instant, why: String) -> Run {
    Run {
        counts: Counts { passed: 0, failed: 1 },
        verdict: format!("FAILED: {why}"),
        elapsed: start.elapsed(),
        output: String::new(),
    }
}

/// A check that either passes whole (`Ok(n)`: `n` things checked) or fails.
fn timed(start: Instant, check: impl FnOnce() -> Result<u64>) -> Run {
    match check() {
        Ok(n) => Run {
            counts: Counts { passed: n, failed: 0 },
            verdict: format!("{n} checks"),
            elapsed: start.elapsed(),
            output: String::new(),
        },
        Err(e) => failed(start, e.to_string()),
    }
}

/// The staged tree is what `install` promises.
fn layout(root: &Path) -> Result<u64> {
    let lib = root.join("lib");
    let mut checked = 0;
    for file in [
        "include/kpccl.h",
        "include/kpccl_mpi.h",
        "lib/libkpccl.a",
        "lib/pkgconfig/kpccl.pc",
        "lib/pkgconfig/kpccl-static.pc",
        "lib/cmake/kpccl/kpccl-config.cmake",
        "lib/cmake/kpccl/kpccl-config-version.cmake",
        "lib/kpccl/sim/libascendcl.so",
        "bin/kpccl-run",
    ] {
        if !root.join(file).is_file() {
            bail!("{file} is not installed");
        }
        checked += 1;
    }
    for (link, to) in [("libkpccl.so", "libkpccl.so.0"), ("libkpccl.so.0", "libkpccl.so.0.1.0")] {
        let found = fs::read_link(lib.join(link)).map_err(|e| err!("lib/{link}: {e}"))?;
        if found != Path::new(to) {
            bail!("lib/{link} points to {}, not {to}", found.display());
        }
        checked += 1;
    }
    let real = lib.join("libkpccl.so.0.1.0");
    let dynamic = Cmd::new("readelf").quiet().arg("-d").arg(&real).read()?;
    if !dynamic.contains("Library soname: [libkpccl.so.0]") {
        bail!("{} has no SONAME libkpccl.so.0:\n{dynamic}", real.display());
    }
    let symbols = Cmd::new("nm").quiet().args(["-D", "--defined-only"]).arg(&real).read()?;
    let names: Vec<&str> = symbols.lines().filter_map(|l| l.split_whitespace().nth(2)).collect();
    let foreign: Vec<&&str> = names.iter().filter(|n| !n.starts_with("kpccl_")).collect();
    if names.len() < 10 || !foreign.is_empty() {
        bail!("exports {} symbols, of which not kpccl_*: {foreign:?}", names.len());
    }
    let prefix = Cmd::new("pkg-config")
        .quiet()
        .env("PKG_CONFIG_PATH", lib.join("pkgconfig"))
        .args(["--variable=prefix", "kpccl"])
        .read()?;
    if prefix.trim() != PREFIX {
        bail!("kpccl.pc says prefix={}, not {PREFIX} (DESTDIR must not show)", prefix.trim());
    }
    Ok(checked + 3)
}

/// `pkg-config [--static] --cflags --libs module` for the staged tree.
fn pkg_config(root: &Path, module: &str, static_: bool) -> Result<Vec<String>> {
    let mut cmd = Cmd::new("pkg-config")
        .env("PKG_CONFIG_PATH", root.join("lib").join("pkgconfig"))
        .arg(format!("--define-variable=prefix={}", root.display()));
    if static_ {
        cmd = cmd.arg("--static");
    }
    let flags = cmd.args(["--cflags", "--libs", module]).read()?;
    Ok(flags.split_whitespace().map(str::to_owned).collect())
}

/// The shared libraries `program` needs (`readelf -d`).
fn needed(program: &Path) -> Result<String> {
    Cmd::new("readelf").quiet().arg("-d").arg(program).read()
}

/// The MPIs to try: (name, C compiler, C++ compiler, launcher words).
fn mpis(mpirun: &[String]) -> Vec<(&'static str, &'static str, &'static str, Vec<String>)> {
    let mut mpis = vec![("mpicc", "mpicc", "mpicxx", mpirun.to_vec())];
    if which("mpicc.mpich").is_some() && which("mpiexec.mpich").is_some() && which("mpicxx.mpich").is_some() {
        mpis.push(("MPICH", "mpicc.mpich", "mpicxx.mpich", vec!["mpiexec.mpich".to_owned()]));
    } else {
        println!("note: MPICH is not installed (apt-get install mpich libmpich-dev): kpccl_mpi.h not tried with it");
    }
    mpis
}

/// Item 2 and 3 of the module's list.
fn mpi_programs(cfg: &CTests, mpirun: &[String], root: &Path, out: &Path) -> Vec<(String, String, Run)> {
    let mut rows = Vec::new();
    let rpath = format!("-Wl,-rpath,{}", root.join("lib").display());
    for (name, cc, cxx, launcher) in mpis(mpirun) {
        let flavor = Flavor::Mpi(launcher.clone());
        let ranks = format!("{} -np {RANKS}", launcher[0]);
        for (lang, compiler, std) in [("C11", cc, "-std=c11"), ("C++17", cxx, "-std=c++17")] {
            let start = Instant::now();
            let program = out.join(format!("comm_create_mpi-{}-{}", cc.replace('.', "-"), lang.replace('+', "x")));
            let built = pkg_config(root, "kpccl", false).and_then(|flags| {
                let mut cmd = Cmd::new(compiler).arg(std).args(&CFLAGS[1..]);
                if lang != "C11" {
                    cmd = cmd.args(["-x", "c++"]);
                }
                cmd.arg(MPI_TEST).args(["-x", "none", "-o"]).arg(&program).args(flags).arg(&rpath).run()
            });
            let run = match built.and_then(|()| expect_needed(&program, true)) {
                Ok(()) => run_one(cfg, &flavor, &program, RANKS),
                Err(e) => failed(start, e.to_string()),
            };
            rows.push(row(&format!("kpccl_mpi.h {lang} ({name}, .pc)"), &ranks, run));
        }
    }
    let flavor = Flavor::Mpi(mpirun.to_vec());
    let ranks = format!("{} -np {RANKS}", mpirun[0]);
    let start = Instant::now();
    let program = out.join("comm_create_mpi-kpccl-static");
    let built = pkg_config(root, "kpccl-static", false)
        .and_then(|flags| Cmd::new("mpicc").args(CFLAGS).arg(MPI_TEST).arg("-o").arg(&program).args(flags).run());
    let run = match built.and_then(|()| expect_needed(&program, false)) {
        Ok(()) => run_one(cfg, &flavor, &program, RANKS),
        Err(e) => failed(start, e.to_string()),
    };
    rows.push(row("kpccl_mpi.h C11 (kpccl-static.pc)", &ranks, run));

    if which("cmake").is_none() {
        println!("note: cmake is not installed: the CMake package is not tried");
        return rows;
    }
    for static_ in [false, true] {
        let start = Instant::now();
        let run = match cmake_build(root, out, static_) {
            Ok(program) => run_one(cfg, &flavor, &program, RANKS),
            Err(e) => failed(start, e.to_string()),
        };
        let name = if static_ { "CMake kpccl::kpccl (static)" } else { "CMake kpccl::kpccl (shared)" };
        rows.push(row(name, &ranks, run));
    }
    rows
}

/// `program` links libkpccl dynamically (by its SONAME) or not at all.
fn expect_needed(program: &Path, shared: bool) -> Result<()> {
    let dynamic = needed(program)?;
    match (shared, dynamic.contains("[libkpccl.so.0]"), dynamic.contains("libkpccl")) {
        (true, true, _) | (false, _, false) => Ok(()),
        (true, false, _) => bail!("{} does not need libkpccl.so.0:\n{dynamic}", program.display()),
        (false, _, true) => bail!("{} needs libkpccl although linked statically:\n{dynamic}", program.display()),
    }
}

/// Configures and builds the CMake consumer; the program.
fn cmake_build(root: &Path, out: &Path, static_: bool) -> Result<PathBuf> {
    let build = out.join(if static_ { "cmake-static" } else { "cmake-shared" });
    let _ = fs::remove_dir_all(&build);
    Cmd::new("cmake")
        .args(["-S", CMAKE_PROJECT, "-B"])
        .arg(&build)
        .arg(format!("-DCMAKE_PREFIX_PATH={}", root.display()))
        .arg(format!("-DKPCCL_STATIC={}", if static_ { "ON" } else { "OFF" }))
        .run()?;
    Cmd::new("cmake").arg("--build").arg(&build).run()?;
    let program = build.join("comm_create_mpi");
    expect_needed(&program, !static_)?;
    Ok(program)
}

/// The reference example built against the release `libkpccl.so` in the
/// build tree (which `install` has just built), found at run time through an
/// rpath to that directory, as `LD_LIBRARY_PATH` would find it.
fn from_build_tree(out: &Path) -> Result<PathBuf> {
    let release = std::env::current_dir().unwrap_or_default().join(target_dir()).join("release");
    let program = out.join("kpccl_peer_fence-build-tree");
    Cmd::new("mpicc")
        .args(CFLAGS)
        .args(page_casts(Path::new(EXAMPLE)))
        .args(["-I", "ffi/include"])
        .arg(EXAMPLE)
        .arg("-o")
        .arg(&program)
        .arg("-L")
        .arg(&release)
        .arg("-lkpccl")
        .arg(format!("-Wl,-rpath,{}", release.display()))
        .run()?;
    expect_needed(&program, true)?;
    Ok(program)
}

/// The reference example over the launcher's shim, linked with `cc -static`
/// and `pkg-config --static kpccl`: no dynamic section at all.
fn fully_static(root: &Path, out: &Path) -> Result<PathBuf> {
    let program = out.join("kpccl_peer_fence-static");
    Cmd::new("cc")
        .args(CFLAGS)
        .args(["-DKPCCL_NO_MPI", "-I", &format!("{DIR}/nompi"), "-I", DIR])
        .arg(EXAMPLE)
        .args(["-static", "-o"])
        .arg(&program)
        .args(pkg_config(root, "kpccl", true)?)
        .run()?;
    let dynamic = needed(&program)?;
    if !dynamic.contains("no dynamic section") {
        bail!("{} is not fully static:\n{dynamic}", program.display());
    }
    Ok(program)
}
