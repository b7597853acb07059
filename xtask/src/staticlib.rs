//! `libkpccl.a` built for a target, with the native libraries rustc says a
//! program linking it needs (`--print native-static-libs`): shared by the C
//! tests and by `install` (pkg-config's `Libs.private`, CMake's static target).

use std::{env, path::PathBuf};

use crate::cmd::{Cmd, Result, bail};

/// rustc's usual answer for a Linux staticlib, when it does not print one (a fresh build).
const DEFAULT_NATIVE_LIBS: &str = "-ldl -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc";

/// The release `libkpccl.a` and the `-l` flags it needs.
#[derive(Debug)]
pub(crate) struct StaticLib {
    pub(crate) path: PathBuf,
    pub(crate) native: Vec<String>,
}

impl StaticLib {
    /// Builds `libkpccl.a` (release) for `target` (`None`: the host).
    pub(crate) fn build(target: Option<&str>) -> Result<StaticLib> {
        let mut cmd = Cmd::cargo().args(["rustc", "-p", "kpccl-ffi", "--release", "--crate-type", "staticlib"]);
        let mut dir = target_dir();
        if let Some(target) = target {
            cmd = cmd.args(["--target", target]);
            dir = dir.join(target);
        }
        let out = cmd.args(["--", "--print", "native-static-libs"]).run_tee()?;
        if !out.success {
            bail!("building libkpccl.a failed ({})", out.status);
        }
        let printed = out.stderr.lines().find_map(|l| l.split_once("native-static-libs: ").map(|(_, libs)| libs));
        let native = printed.unwrap_or_else(|| {
            println!(
                "note: the library was fresh, so rustc printed no native-static-libs; using {DEFAULT_NATIVE_LIBS}"
            );
            DEFAULT_NATIVE_LIBS
        });
        let path = dir.join("release").join("libkpccl.a");
        if !path.is_file() {
            bail!("{} was not built", path.display());
        }
        Ok(StaticLib { path, native: native.split_whitespace().map(str::to_owned).collect() })
    }

    /// The flags for a C compiler driver: without `-lgcc_s`, which gcc and
    /// clang add themselves where it exists and which breaks `-static`
    /// (there is no `libgcc_s.a`; the driver uses libgcc_eh there).
    pub(crate) fn driver_libs(&self) -> Vec<String> {
        self.native.iter().filter(|l| *l != "-lgcc_s").cloned().collect()
    }
}

/// Cargo's target directory.
pub(crate) fn target_dir() -> PathBuf {
    env::var_os("CARGO_TARGET_DIR").map_or_else(|| PathBuf::from("target"), PathBuf::from)
}

#[cfg(test)]
mod tests {
    #[test]
    fn driver_libs_drop_only_gcc_s() {
        let lib = super::StaticLib {
            path: "libkpccl.a".into(),
            native: ["-ldl", "-lgcc_s", "-lm", "-ldl"].map(str::to_owned).to_vec(),
        };
        assert_eq!(lib.driver_libs(), ["-ldl", "-lm", "-ldl"]);
    }
}
