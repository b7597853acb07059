//! `cargo xtask header [--check]`: `ffi/include/kpccl.h`, generated from the
//! `kpccl-ffi` sources by the cbindgen library with `ffi/cbindgen.toml`.
//! The header is committed; `--check` regenerates it in
//! memory and fails if the committed one differs (rust-analyzer's
//! `ensure_file_contents`), which `cargo xtask test` does before the C tests.

use std::{fs, io, path::Path};

use crate::cmd::{Result, bail, err};

/// The committed header.
pub(crate) const HEADER: &str = "ffi/include/kpccl.h";
const CRATE_DIR: &str = "ffi";

pub(crate) fn run(check: bool) -> Result<()> {
    let fresh = generate()?;
    let old = match fs::read_to_string(HEADER) {
        Ok(old) => Some(old),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => bail!("reading {HEADER}: {e}"),
    };
    if old.as_deref().map(normalize) == Some(normalize(&fresh)) {
        println!("{HEADER} is up to date");
        return Ok(());
    }
    if check {
        bail!("{HEADER} is out of date with ffi/src: run `cargo xtask header` and commit");
    }
    fs::write(HEADER, &fresh).map_err(|e| err!("writing {HEADER}: {e}"))?;
    println!("wrote {HEADER}");
    Ok(())
}

/// The header as cbindgen makes it now.
fn generate() -> Result<String> {
    let dir = Path::new(CRATE_DIR);
    let toml = dir.join("cbindgen.toml");
    let config = cbindgen::Config::from_file(&toml).map_err(|e| err!("{}: {e}", toml.display()))?;
    let bindings = cbindgen::Builder::new()
        .with_crate(dir)
        .with_config(config)
        .generate()
        .map_err(|e| err!("cbindgen on {CRATE_DIR}: {e}"))?;
    let mut out = Vec::new();
    bindings.write(&mut out);
    String::from_utf8(out).map_err(|e| err!("cbindgen wrote non-UTF-8: {e}"))
}

/// Line endings do not count as drift (a checkout with `core.autocrlf`).
fn normalize(s: &str) -> String {
    s.replace("\r\n", "\n")
}

#[cfg(test)]
mod tests {
    #[test]
    fn line_endings_are_not_drift() {
        assert_eq!(super::normalize("a\r\nb\n"), super::normalize("a\nb\n"));
    }
}
