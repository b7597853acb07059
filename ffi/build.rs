//! Gives `libkpccl.so` the SONAME of a system library, `libkpccl.so.MAJOR`,
//! so that programs record the major version they were linked against and a
//! later incompatible library is not picked up by mistake.
//!
//! The exported symbols need no list of ours: rustc's own version script for
//! a cdylib already exports only the `#[no_mangle]` entry points (all named
//! `kpccl_*`; `cargo xtask c-test` checks it with `nm -D --defined-only`).

fn main() {
    let major = std::env::var("CARGO_PKG_VERSION_MAJOR").unwrap_or_else(|_| "0".to_owned());
    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    // GNU ld and lld both take `-soname`; macOS has install names instead.
    if target_os != "macos" && target_os != "ios" {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libkpccl.so.{major}");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
