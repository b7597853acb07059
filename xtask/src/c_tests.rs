//! The C tests: `ffi/tests/c/*.c` compiled against `libkpccl` and run, on the
//! host and under qemu-aarch64.
//!
//! For now a stub: there is no `ffi/` crate yet. Whoever adds `ffi/tests/c`
//! fills in [`run`] (STYLE.md §2.8): for each `*.c`, compile with
//! `{cc} -std=c11 -Wall -Wextra -Werror -pedantic -I ffi/include`, link the
//! staticlib built for `target` plus the libraries that
//! `cargo rustc -p kpccl-ffi --crate-type staticlib -- --print native-static-libs`
//! prints, run the binary as `runner… launcher… binary` (the launcher starts
//! the ranks, and must put the runner in front of what it execs under qemu),
//! and sum the `N passed, N failed` line each test prints last with
//! [`Counts::sum`](crate::report::Counts::sum).

use std::{fs, io, path::PathBuf};

use crate::{
    cmd::{Result, bail, err},
    report::Counts,
};

/// Where the C tests live.
pub(crate) const DIR: &str = "ffi/tests/c";

/// How to build and run the C tests for one target.
#[derive(Debug, Clone)]
pub(crate) struct CTests {
    /// C compiler and linker driver: `cc`, `aarch64-linux-gnu-gcc`.
    pub(crate) cc: String,
    /// Rust target the library is built for; `None` is the host (`target/debug`).
    pub(crate) target: Option<String>,
    /// Words put in front of every program run (`qemu-aarch64 -L /usr/aarch64-linux-gnu`); empty on the host.
    pub(crate) runner: Vec<String>,
    /// A launcher that starts a test as several ranks (`kpccl-run -n 4 --`), if the tests need one.
    pub(crate) launcher: Option<Vec<String>>,
}

impl CTests {
    /// The host: the system's `cc`, programs run directly.
    pub(crate) fn host() -> CTests {
        CTests { cc: "cc".to_owned(), target: None, runner: Vec::new(), launcher: None }
    }
}

/// Builds and runs the C tests with `cfg`. `Ok(None)` when there are none.
pub(crate) fn run(cfg: &CTests) -> Result<Option<Counts>> {
    let sources = sources()?;
    if sources.is_empty() {
        println!("no C tests yet (no {DIR}/*.c)");
        return Ok(None);
    }
    // Failing here, rather than passing with nothing run, keeps C tests that
    // were added without a runner from being counted as green.
    bail!(
        "{} C test(s) in {DIR}, but xtask cannot build C tests yet: fill in xtask/src/c_tests.rs::run \
         (cc {}, target {}, runner {:?}, launcher {:?})",
        sources.len(),
        cfg.cc,
        cfg.target.as_deref().unwrap_or("host"),
        cfg.runner.join(" "),
        cfg.launcher.as_ref().map(|l| l.join(" ")),
    )
}

/// The C test sources, `ffi/tests/c/*.c`, sorted; none when the directory is absent.
pub(crate) fn sources() -> Result<Vec<PathBuf>> {
    let entries = match fs::read_dir(DIR) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => bail!("reading {DIR}: {e}"),
    };
    let mut sources = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| err!("reading {DIR}: {e}"))?.path();
        if path.extension().is_some_and(|ext| ext == "c") && path.is_file() {
            sources.push(path);
        }
    }
    sources.sort();
    Ok(sources)
}
