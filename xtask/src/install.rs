//! `cargo xtask install [--prefix DIR]`: libkpccl as a system library, for C
//! and MPI programs, under `$DESTDIR$DIR` (`DESTDIR` empty: `DIR` itself):
//!
//! ```text
//! lib/libkpccl.so.X.Y.Z   SONAME libkpccl.so.X, with libkpccl.so.X -> and libkpccl.so ->
//! lib/libkpccl.a
//! include/kpccl.h, include/kpccl_mpi.h
//! lib/pkgconfig/kpccl.pc, kpccl-static.pc
//! lib/cmake/kpccl/kpccl-config.cmake, kpccl-config-version.cmake
//! bin/kpccl-run
//! lib/kpccl/sim/libascendcl.so   the Ascend simulator, out of the loader's way
//! ```
//!
//! The files name `DIR`, never `DESTDIR` (a staging root for packagers).

use std::{
    env, fs,
    os::unix::fs::symlink,
    path::{Path, PathBuf},
};

use crate::{
    cmd::{Cmd, Result, bail, err},
    header,
    package_files::{self, Version},
    staticlib::{StaticLib, target_dir},
};

/// Where `install` puts things without `--prefix`.
pub(crate) const DEFAULT_PREFIX: &str = "/usr/local";
/// The MPI helper header, installed beside `kpccl.h`.
pub(crate) const MPI_HEADER: &str = "ffi/include/kpccl_mpi.h";

/// An installation: where its files are now, and the prefix they name.
#[derive(Debug)]
pub(crate) struct Installed {
    /// `$DESTDIR$prefix`.
    pub(crate) root: PathBuf,
    pub(crate) version: Version,
}

pub(crate) fn run(prefix: &Path) -> Result<()> {
    let prefix = absolute(prefix)?;
    let destdir = env::var_os("DESTDIR").filter(|d| !d.is_empty()).map(PathBuf::from);
    let installed = install(&prefix, destdir.as_deref())?;
    let lib = prefix.join("lib");
    println!("\ninstalled libkpccl {} under {}; to use it:", installed.version, installed.root.display());
    println!("    export PKG_CONFIG_PATH={}/pkgconfig", lib.display());
    println!("    cc prog.c $(pkg-config --cflags --libs kpccl) -Wl,-rpath,{}", lib.display());
    println!("    mpicc prog.c $(pkg-config --cflags --libs kpccl-static)      # libkpccl.a, the rest dynamic");
    println!("    cc -static prog.c $(pkg-config --static --cflags --libs kpccl)  # all static");
    println!(
        "    cmake -DCMAKE_PREFIX_PATH={} ...   # find_package(kpccl CONFIG REQUIRED), kpccl::kpccl",
        prefix.display()
    );
    println!("    {}/bin/kpccl-run -n 4 -- ./prog    # N ranks without MPI", prefix.display());
    println!("    LD_LIBRARY_PATH={}/kpccl/sim KPCCL_ASCEND=acl ...   # the Ascend simulator", lib.display());
    Ok(())
}

/// Builds what is installed and installs it for `prefix` under `destdir`.
pub(crate) fn install(prefix: &Path, destdir: Option<&Path>) -> Result<Installed> {
    if !prefix.is_absolute() {
        bail!("the prefix {} is not absolute", prefix.display());
    }
    let version = Version::parse(&version()?).ok_or_else(|| err!("kpccl-ffi's version is not X.Y.Z"))?;
    let staticlib = StaticLib::build(None)?;
    let libs = staticlib.driver_libs();
    Cmd::cargo().args(["build", "--release", "-p", "kpccl-ffi", "-p", "kpccl-ascend-simlib"]).run()?;
    Cmd::cargo().args(["build", "--release", "-p", "kpccl-run", "--bin", "kpccl-run"]).run()?;
    let release = target_dir().join("release");

    let root = match destdir {
        Some(d) => d.join(prefix.strip_prefix("/").unwrap_or(prefix)),
        None => prefix.to_path_buf(),
    };
    let lib = root.join("lib");
    let (include, bin, sim) = (root.join("include"), root.join("bin"), lib.join("kpccl").join("sim"));
    let (pkgconfig, cmake) = (lib.join("pkgconfig"), lib.join("cmake").join("kpccl"));
    for dir in [&lib, &include, &bin, &sim, &pkgconfig, &cmake] {
        fs::create_dir_all(dir).map_err(|e| err!("creating {}: {e}", dir.display()))?;
    }

    let real = format!("libkpccl.so.{version}");
    let soname = format!("libkpccl.so.{}", version.major);
    copy(&release.join("libkpccl.so"), &lib.join(&real))?;
    link(&real, &lib.join(&soname))?;
    link(&soname, &lib.join("libkpccl.so"))?;
    copy(&staticlib.path, &lib.join("libkpccl.a"))?;
    copy(Path::new(header::HEADER), &include.join("kpccl.h"))?;
    copy(Path::new(MPI_HEADER), &include.join("kpccl_mpi.h"))?;
    copy(&release.join("kpccl-run"), &bin.join("kpccl-run"))?;
    copy(&release.join("libascendcl.so"), &sim.join("libascendcl.so"))?;
    write(&pkgconfig.join("kpccl.pc"), &package_files::pc_file(prefix, version, &libs))?;
    write(&pkgconfig.join("kpccl-static.pc"), &package_files::pc_static_file(prefix, version, &libs))?;
    write(&cmake.join("kpccl-config.cmake"), &package_files::cmake_config(version, &libs))?;
    write(&cmake.join("kpccl-config-version.cmake"), &package_files::cmake_version(version))?;
    Ok(Installed { root, version })
}

fn absolute(prefix: &Path) -> Result<PathBuf> {
    if prefix.is_absolute() {
        return Ok(prefix.to_path_buf());
    }
    // xtask runs from the workspace root; a relative prefix is the caller's.
    let base = env::var_os("PWD").map(PathBuf::from).filter(|p| p.is_absolute());
    match base {
        Some(base) => Ok(base.join(prefix)),
        None => bail!("--prefix {} must be absolute", prefix.display()),
    }
}

fn copy(from: &Path, to: &Path) -> Result<()> {
    // A fresh file, not one rewritten in place: a running program may have
    // the old library mapped.
    let _ = fs::remove_file(to);
    fs::copy(from, to).map_err(|e| err!("copying {} to {}: {e}", from.display(), to.display()))?;
    println!("installed {}", to.display());
    Ok(())
}

fn link(target: &str, at: &Path) -> Result<()> {
    let _ = fs::remove_file(at);
    symlink(target, at).map_err(|e| err!("linking {} -> {target}: {e}", at.display()))?;
    println!("installed {} -> {target}", at.display());
    Ok(())
}

fn write(path: &Path, text: &str) -> Result<()> {
    fs::write(path, text).map_err(|e| err!("writing {}: {e}", path.display()))?;
    println!("installed {}", path.display());
    Ok(())
}

/// kpccl-ffi's version, from `cargo pkgid` (`path+file:///…/ffi#kpccl-ffi@0.1.0`).
fn version() -> Result<String> {
    let id = Cmd::cargo().quiet().args(["pkgid", "-p", "kpccl-ffi"]).read()?;
    match id.trim().rsplit_once(['@', '#']) {
        Some((_, v)) if v.chars().next().is_some_and(|c| c.is_ascii_digit()) => Ok(v.to_owned()),
        _ => bail!("cannot read a version from `cargo pkgid`: {id}"),
    }
}
