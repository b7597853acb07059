//! Gives `libkpccl.so` the SONAME of a system library, `libkpccl.so.MAJOR`,
//! so that programs record the major version they were linked against and a
//! later incompatible library is not picked up by mistake.
//!
//! A program linked with `-L target/release -lkpccl` then needs
//! `libkpccl.so.MAJOR`, a name cargo does not make; so that it runs from the
//! build tree (`LD_LIBRARY_PATH=target/release`, or an rpath there) as it
//! does from an installed prefix, the build puts the link
//! `libkpccl.so.MAJOR -> libkpccl.so` beside the library.
//!
//! The exported symbols need no list of ours: rustc's own version script for
//! a cdylib already exports only the `#[no_mangle]` entry points (all named
//! `kpccl_*`; `cargo xtask c-test` checks it with `nm -D --defined-only`).

use std::path::Path;

fn main() {
    let major = std::env::var("CARGO_PKG_VERSION_MAJOR").unwrap_or_else(|_| "0".to_owned());
    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    // GNU ld and lld both take `-soname`; macOS has install names instead.
    if target_os != "macos" && target_os != "ios" {
        let soname = format!("libkpccl.so.{major}");
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,{soname}");
        soname_link(&soname);
    }
    println!("cargo:rerun-if-changed=build.rs");
}

/// Makes `soname -> libkpccl.so` in the directory cargo puts the library in
/// (`OUT_DIR` is `<that directory>/build/kpccl-ffi-<hash>/out`). The link
/// dangles until the library is linked, and is harmless in a build that
/// makes no `libkpccl.so` (`cargo rustc --crate-type staticlib`).
fn soname_link(soname: &str) {
    let Some(out_dir) = std::env::var_os("OUT_DIR") else { return };
    let Some(dir) = Path::new(&out_dir).ancestors().nth(3) else { return };
    let link = dir.join(soname);
    if std::fs::read_link(&link).is_ok_and(|to| to == Path::new("libkpccl.so")) {
        return;
    }
    let _ = std::fs::remove_file(&link);
    #[cfg(unix)]
    if let Err(e) = std::os::unix::fs::symlink("libkpccl.so", &link) {
        println!("cargo:warning=could not link {} -> libkpccl.so: {e}", link.display());
    }
}
