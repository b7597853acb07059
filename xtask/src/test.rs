//! `cargo xtask test`: the whole host suite, in order, stopping at the first
//! failure, then a table of steps and a `N passed, N failed` line (steps).

use std::{env, fs, path::PathBuf};

use crate::{
    c_tests::{self, CTests},
    cmd::{Cmd, Error, Result, bail, require_targets},
    report::{Counts, Done, Steps},
};

/// The target that proves `kpccl-core` is `no_std`: it has no `std` at all.
pub(crate) const NO_STD_TARGET: &str = "aarch64-unknown-none";

type StepFn = Box<dyn FnOnce() -> Result<Done>>;

pub(crate) fn run(quick: bool) -> Result<()> {
    let plan: Vec<(&str, StepFn)> = vec![
        ("rustfmt", Box::new(fmt)),
        ("clippy", Box::new(clippy)),
        ("no_std build (kpccl-core, embedding example; aarch64-unknown-none)", Box::new(no_std)),
        ("host-only libkpccl (kpccl-ffi --no-default-features)", Box::new(host_only)),
        ("cargo test (host)", Box::new(tests)),
        ("loom", Box::new(move || if quick { Ok(skipped_quick()) } else { loom() })),
        ("miri (kpccl-core)", Box::new(move || if quick { Ok(skipped_quick()) } else { miri() })),
        ("rustdoc", Box::new(doc)),
        ("C tests (host)", Box::new(|| c_test_step(&CTests::host()))),
        ("Rust over MPI (kpccl-posix --features mpi)", Box::new(crate::rust_mpi::step)),
        ("benchmarks (smoke: once, no timing checked)", Box::new(bench_smoke)),
        ("Python package (pip install ./python, pytest)", Box::new(crate::python::step)),
    ];
    let names: Vec<&str> = plan.iter().map(|(name, _)| *name).collect();
    let mut steps = Steps::new(plan.len());
    for (i, (name, step)) in plan.into_iter().enumerate() {
        if !steps.run(name, step) {
            steps.abandon(&names[i + 1..]);
            break;
        }
    }
    steps.print_table("cargo xtask test");
    println!("{} passed, {} failed", steps.passed(), steps.failed());
    if steps.failed() > 0 { Err(Error::reported()) } else { Ok(()) }
}

fn skipped_quick() -> Done {
    Done::Skipped("--quick".to_owned())
}

fn fmt() -> Result<Done> {
    Cmd::cargo().args(["fmt", "--all", "--check"]).run()?;
    Ok(Done::Ran(String::new()))
}

fn clippy() -> Result<Done> {
    Cmd::cargo().args(["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"]).run()?;
    Ok(Done::Ran(String::new()))
}

/// `kpccl-core` builds for a target without `std`, and links no libc; the
/// embedding example (static memory, no allocator) builds and links there.
pub(crate) fn no_std() -> Result<Done> {
    require_targets(&[NO_STD_TARGET])?;
    Cmd::cargo().args(["build", "-p", "kpccl-core", "--target", NO_STD_TARGET]).run()?;
    Cmd::cargo().args(["build", "-p", "kpccl-embedded-example", "--target", NO_STD_TARGET, "--bins"]).run()?;
    let tree = Cmd::cargo().args(["tree", "-p", "kpccl-core", "-e", "normal"]).read()?;
    print!("{tree}");
    if let Some(line) = tree.lines().find(|line| tree_crate(line) == Some("libc")) {
        bail!("kpccl-core depends on libc: {}", line.trim());
    }
    Ok(Done::Ran("core and the embedding example build; no libc in core's tree".to_owned()))
}

/// The crate name on a `cargo tree` line: `├── spin v0.12.3` → `spin`.
fn tree_crate(line: &str) -> Option<&str> {
    line.trim_start_matches(|c: char| !c.is_ascii_alphanumeric()).split_whitespace().next()
}

fn tests() -> Result<Done> {
    let out = Cmd::cargo().args(["test", "--workspace"]).run_tee()?;
    let (counts, _) = Counts::sum(&out.stdout);
    if !out.success {
        bail!("cargo test failed ({}): {counts}", out.status);
    }
    Ok(Done::Ran(counts.to_string()))
}

/// libkpccl without the Ascend backend: clippy-clean, and the single-rank C
/// ABI tests pass against it (a device window is refused, naming the feature).
/// Before `cargo test`, which then puts the default build's libraries back.
fn host_only() -> Result<Done> {
    const HOST_ONLY: [&str; 3] = ["-p", "kpccl-ffi", "--no-default-features"];
    Cmd::cargo().arg("clippy").args(HOST_ONLY).args(["--all-targets", "--", "-D", "warnings"]).run()?;
    let out = Cmd::cargo().arg("test").args(HOST_ONLY).args(["--test", "single_rank"]).run_tee()?;
    let (counts, _) = Counts::sum(&out.stdout);
    if !out.success {
        bail!("the host-only libkpccl failed its tests ({}): {counts}", out.status);
    }
    Ok(Done::Ran(counts.to_string()))
}

/// Where builds with other `RUSTFLAGS` go, so they do not evict the normal build.
fn side_target_dir(name: &str) -> PathBuf {
    env::var_os("CARGO_TARGET_DIR").map_or_else(|| PathBuf::from("target"), PathBuf::from).join(name)
}

/// `flags` appended to what the caller already had in `var`.
fn extend_flags(var: &str, flags: &str) -> String {
    match env::var(var) {
        Ok(old) if !old.trim().is_empty() => format!("{old} {flags}"),
        _ => flags.to_owned(),
    }
}

/// The loom models: every `core/tests/loom_*.rs`, built with `--cfg loom`,
/// after clippy on core and its tests under that cfg.
fn loom() -> Result<Done> {
    let models = loom_tests()?;
    if models.is_empty() {
        println!("note: no core/tests/loom_*.rs yet, nothing to model-check");
        return Ok(Done::Skipped("no core/tests/loom_*.rs yet".to_owned()));
    }
    let loom_cargo = || {
        Cmd::cargo()
            .env("RUSTFLAGS", extend_flags("RUSTFLAGS", "--cfg loom"))
            .env("CARGO_TARGET_DIR", side_target_dir("loom"))
    };
    // Core's code under `cfg(loom)` and every test target there lint-clean.
    loom_cargo().args(["clippy", "-p", "kpccl-core", "--tests", "--", "-D", "warnings"]).run()?;
    let preemptions = env::var("LOOM_MAX_PREEMPTIONS").unwrap_or_else(|_| "2".to_owned());
    let mut cmd = loom_cargo()
        .env("LOOM_MAX_PREEMPTIONS", &preemptions)
        // Optimized models without the release profile's LTO and single
        // codegen unit: builds in half the time (loom's dependencies are big).
        .env("CARGO_PROFILE_RELEASE_LTO", "off")
        .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "16")
        .args(["test", "-p", "kpccl-core", "--release"]);
    for model in &models {
        cmd = cmd.args(["--test", model]);
    }
    let out = cmd.run_tee()?;
    let (counts, _) = Counts::sum(&out.stdout);
    if !out.success {
        bail!("loom failed ({}): {counts}", out.status);
    }
    Ok(Done::Ran(format!("{} ({counts})", models.join(", "))))
}

/// The names of the loom test targets, sorted.
fn loom_tests() -> Result<Vec<String>> {
    let dir = "core/tests";
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => bail!("reading {dir}: {e}"),
    };
    let mut names = Vec::new();
    for entry in entries {
        let name = entry.map_err(|e| crate::cmd::err!("reading {dir}: {e}"))?.file_name();
        let name = name.to_string_lossy();
        if let Some(stem) = name.strip_suffix(".rs").filter(|stem| stem.starts_with("loom_")) {
            names.push(stem.to_owned());
        }
    }
    names.sort();
    Ok(names)
}

/// `kpccl-core`'s tests under Miri (nightly). Miri keeps its own target
/// directory (`target/miri`), so it does not disturb the normal build.
fn miri() -> Result<Done> {
    if !Cmd::cargo_toolchain("nightly").args(["miri", "--version"]).succeeds() {
        bail!(
            "Miri is not installed; run:\n    rustup toolchain install nightly --profile minimal --component miri,rust-src\n    cargo +nightly miri setup"
        );
    }
    let out = Cmd::cargo_toolchain("nightly")
        .env("MIRIFLAGS", extend_flags("MIRIFLAGS", "-Zmiri-strict-provenance -Zmiri-symbolic-alignment-check"))
        .args(["miri", "test", "-p", "kpccl-core"])
        .run_tee()?;
    let (counts, _) = Counts::sum(&out.stdout);
    if !out.success {
        bail!("miri failed ({}): {counts}", out.status);
    }
    Ok(Done::Ran(counts.to_string()))
}

fn doc() -> Result<Done> {
    Cmd::cargo()
        .env("RUSTDOCFLAGS", extend_flags("RUSTDOCFLAGS", "-D warnings"))
        .args(["doc", "--workspace", "--no-deps"])
        .run()?;
    Ok(Done::Ran(String::new()))
}

fn bench_smoke() -> Result<Done> {
    crate::bench::smoke()?;
    Ok(Done::Ran(String::new()))
}

/// The C-tests step, shared with `test-aarch64`.
pub(crate) fn c_test_step(cfg: &CTests) -> Result<Done> {
    match c_tests::run(cfg)? {
        None => Ok(Done::Skipped(format!("no C tests yet (no {}/*.c)", c_tests::DIR))),
        Some(counts) if counts.failed > 0 => bail!("C tests: {counts}"),
        Some(counts) => Ok(Done::Ran(counts.to_string())),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_cargo_tree_lines() {
        assert_eq!(super::tree_crate("kpccl-core v0.1.0 (/work/main/core)"), Some("kpccl-core"));
        assert_eq!(super::tree_crate("│   └── libc v0.2.177"), Some("libc"));
        assert_eq!(super::tree_crate("├── spin v0.12.3"), Some("spin"));
        assert_eq!(super::tree_crate(""), None);
    }
}
