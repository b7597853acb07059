//! `cargo xtask install [--prefix DIR]`: libkpccl for C users, the usual
//! Unix way: `DIR/lib/libkpccl.{so,a}`, `DIR/include/kpccl.h` and
//! `DIR/lib/pkgconfig/kpccl.pc`, so that `pkg-config --cflags --libs kpccl`
//! (or `--static`) gives the compile and link flags.

use std::{
    fs,
    path::{Path, PathBuf},
};

use crate::{
    cmd::{Cmd, Result, bail, err},
    header,
};

/// Where `install` puts things without `--prefix`.
pub(crate) const DEFAULT_PREFIX: &str = "/usr/local";
/// What the static library needs besides itself (rustc's native-static-libs on Linux).
const LIBS_PRIVATE: &str = "-lgcc_s -lutil -lrt -lpthread -lm -ldl -lc";

pub(crate) fn run(prefix: &Path) -> Result<()> {
    let prefix = absolute(prefix)?;
    Cmd::cargo().args(["build", "--release", "-p", "kpccl-ffi"]).run()?;
    let release =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| PathBuf::from("target"), PathBuf::from).join("release");
    let (lib, include, pkgconfig) = (prefix.join("lib"), prefix.join("include"), prefix.join("lib").join("pkgconfig"));
    for dir in [&lib, &include, &pkgconfig] {
        fs::create_dir_all(dir).map_err(|e| err!("creating {}: {e}", dir.display()))?;
    }
    for name in ["libkpccl.so", "libkpccl.a"] {
        copy(&release.join(name), &lib.join(name))?;
    }
    copy(Path::new(header::HEADER), &include.join("kpccl.h"))?;
    let pc = pkgconfig.join("kpccl.pc");
    fs::write(&pc, pc_file(&prefix, &version()?)).map_err(|e| err!("writing {}: {e}", pc.display()))?;
    println!("installed {}; to use it:", pc.display());
    println!("    export PKG_CONFIG_PATH={}", pkgconfig.display());
    println!("    cc prog.c $(pkg-config --cflags --libs kpccl) -Wl,-rpath,{}", lib.display());
    println!("    cc prog.c $(pkg-config --cflags kpccl) {}/libkpccl.a {LIBS_PRIVATE}    # static", lib.display());
    Ok(())
}

fn absolute(prefix: &Path) -> Result<PathBuf> {
    if prefix.is_absolute() {
        return Ok(prefix.to_path_buf());
    }
    // xtask runs from the workspace root; a relative prefix is the caller's.
    let base = std::env::var_os("PWD").map(PathBuf::from).filter(|p| p.is_absolute());
    match base {
        Some(base) => Ok(base.join(prefix)),
        None => bail!("--prefix {} must be absolute", prefix.display()),
    }
}

fn copy(from: &Path, to: &Path) -> Result<()> {
    fs::copy(from, to).map_err(|e| err!("copying {} to {}: {e}", from.display(), to.display()))?;
    println!("installed {}", to.display());
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

/// The pkg-config file of an installation under `prefix`.
pub(crate) fn pc_file(prefix: &Path, version: &str) -> String {
    format!(
        "prefix={}\nlibdir=${{prefix}}/lib\nincludedir=${{prefix}}/include\n\n\
         Name: kpccl\n\
         Description: KPCCL shared-memory windows (kpccl_shm_*), from kpccl-rs\n\
         Version: {version}\n\
         Cflags: -I${{includedir}}\n\
         Libs: -L${{libdir}} -lkpccl\n\
         Libs.private: {LIBS_PRIVATE}\n",
        prefix.display()
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn pc_file_names_the_prefix() {
        let pc = super::pc_file(std::path::Path::new("/opt/kpccl"), "0.1.0");
        assert!(pc.starts_with("prefix=/opt/kpccl\n"), "{pc}");
        assert!(pc.contains("\nVersion: 0.1.0\n") && pc.contains("\nLibs: -L${libdir} -lkpccl\n"), "{pc}");
    }
}
