//! `cargo xtask bench [--smoke] [ARGS...]`: the benchmark suite
//! (the `kpccl-bench` crate, `bench/`).
//!
//! Full run (optimized build, about 5 minutes on a quiet 2-core machine): the
//! criterion micro-benchmarks, then the multi-process suite with the real
//! workloads (the pipeline kernel and the window allreduce against Open MPI),
//! which writes `BENCHMARKS.md`, `docs/fence-latency.svg`, `docs/pipeline.svg`
//! and `docs/allreduce.svg`. `--parts` without `micro` skips criterion.
//!
//! `--smoke` runs everything once with a few iterations in the dev profile,
//! for the test suite: no timing is checked, and the report goes to
//! `target/kpccl-bench-smoke/` so that the committed one stays untouched.
//! Other arguments go to the `kpccl-bench` driver (`--rounds N`, `--no-mpi`…).
// Commands here are fixed words: no untrusted input reaches them.

use std::{env, path::PathBuf, process::ExitCode};

use crate::cmd::{Cmd, Result, bail, err};

pub(crate) const HELP: &str = "\
cargo xtask bench [--smoke] [ARGS...]
  the benchmark suite (bench/): criterion micro-benchmarks, then kpccl's fences, window creation
  and copies against a bare flag exchange and Open MPI, and two real workloads against Open MPI
  (the PRK pipeline kernel, the window allreduce of examples/); writes BENCHMARKS.md and
  docs/{fence-latency,pipeline,allreduce}.svg (a run of some --parts or --ranks writes them under
  target/kpccl-bench/partial/ instead). --smoke: everything once, a few iterations, results
  verified, report under target/kpccl-bench-smoke/ (no timing checked). ARGS go to the kpccl-bench
  driver (--rounds N, --ranks 2,8, --parts micro,ref,rust,c,mpi,create,copy,pipeline,allreduce,
  --no-mpi, --variant TAG:KPCCL_X=V, --patience SECONDS); --no-experiments drops the design
  variants measured by default.";

/// `cargo xtask bench …`: run from `main` before the other tasks' flags are parsed.
pub(crate) fn main(args: impl Iterator<Item = String>) -> ExitCode {
    let args: Vec<String> = args.collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("{HELP}");
        return ExitCode::SUCCESS;
    }
    crate::exit_code(crate::enter_project_root().and_then(|()| run(&args)))
}

fn target_dir() -> PathBuf {
    env::var_os("CARGO_TARGET_DIR").map_or_else(|| PathBuf::from("target"), PathBuf::from)
}

/// `cargo xtask bench --smoke`, as a step of `cargo xtask test`.
pub(crate) fn smoke() -> Result<()> {
    run(&["--smoke".to_owned()])
}

fn run(args: &[String]) -> Result<()> {
    let smoke = args.iter().any(|a| a == "--smoke");
    let rest: Vec<&String> = args.iter().filter(|a| *a != "--smoke").collect();
    // The bench profile (release settings) for the build, criterion and the
    // driver alike, so that `cargo bench` and the rest share their artifacts.
    let profile: &[&str] = if smoke { &[] } else { &["--profile", "bench"] };
    let work = target_dir().join(if smoke { "kpccl-bench-smoke" } else { "kpccl-bench" });
    std::fs::create_dir_all(&work).map_err(|e| err!("{}: {e}", work.display()))?;

    // The criterion micro-benchmarks (part `micro`). A full run writes them
    // to a directory of this run's own (CRITERION_HOME), which the report
    // reads; `cargo bench`'s baselines under target/criterion stay untouched.
    // The smoke run checks that they run once (criterion's test mode), with
    // nothing measured to report.
    let parts = rest.iter().position(|a| *a == "--parts").and_then(|i| rest.get(i + 1));
    let micro = parts.is_none_or(|p| p.split(',').any(|p| p == "micro"));
    // Absolute: cargo runs the benchmark in the package's directory.
    let criterion_home = std::path::absolute(work.join("criterion")).map_err(|e| err!("{}: {e}", work.display()))?;
    let measured = micro && !smoke;
    if smoke && micro {
        Cmd::cargo().args(["test", "-p", "kpccl-bench", "--bench", "micro"]).run()?;
    } else if measured {
        match std::fs::remove_dir_all(&criterion_home) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => bail!("{}: {e}", criterion_home.display()),
            _ => {}
        }
        Cmd::cargo()
            .env("CRITERION_HOME", &criterion_home)
            .args(["bench", "-p", "kpccl-bench", "--bench", "micro", "--"])
            .args(["--warm-up-time", "1", "--measurement-time", "2"])
            .run()
            .map_err(|e| err!("the criterion benchmarks failed: {e}"))?;
    }
    // libkpccl.so is linked by the C benchmark; it must sit next to kpccl-bench.
    Cmd::cargo().arg("build").args(profile).args(["-p", "kpccl-ffi", "-p", "kpccl-bench"]).run()?;

    // Only a full run replaces the committed report: one of some parts or
    // rank counts writes its own under the work directory.
    let partial = rest.iter().any(|a| *a == "--parts" || *a == "--ranks");
    let (out, svg) = if smoke || partial {
        let dir = work.join(if smoke { "" } else { "partial" });
        (dir.join("BENCHMARKS.md"), dir.join("docs/fence-latency.svg"))
    } else {
        (PathBuf::from("BENCHMARKS.md"), PathBuf::from("docs/fence-latency.svg"))
    };
    let mut driver = Cmd::cargo()
        .arg("run")
        .args(profile)
        .args(["-q", "-p", "kpccl-bench", "--bin", "kpccl-bench", "--"])
        .arg("--out")
        .arg(&out)
        .arg("--svg")
        .arg(&svg)
        .arg("--work")
        .arg(work.join("run"));
    if measured {
        driver = driver.arg("--criterion").arg(&criterion_home);
    }
    if smoke {
        driver = driver.arg("--smoke");
    } else if !rest.iter().any(|a| *a == "--no-experiments") {
        driver = driver.arg("--experiments");
    }
    driver.args(rest.iter().filter(|a| **a != "--no-experiments")).run()?;
    println!("wrote {} and the plots next to {}", out.display(), svg.display());
    Ok(())
}
