//! `kpccl-bench`: the benchmark suite's driver (see the crate docs).
//!
//! ```text
//! kpccl-bench [--smoke] [--rounds N] [--experiments] [--no-mpi]
//!             [--ranks 2,4,8] [--parts micro,ref,rust,c,mpi,create,copy,pipeline,allreduce]
//!             [--variant TAG[@N,N…]:KEY=VALUE[,KEY=VALUE…]]… [--patience SECONDS]
//!             [--out BENCHMARKS.md] [--svg docs/fence-latency.svg]
//!             [--criterion DIR] [--work DIR]
//! ```
//!
//! Internal modes: `kpccl-bench rank …` (one rank, under the launcher) and
//! `kpccl-bench reference …` (the flag exchange; it forks).
#![allow(clippy::std_instead_of_core, clippy::alloc_instead_of_core, clippy::print_stderr)]

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use kpccl_bench::driver::{self, Options};
use kpccl_bench::measure::Budget;
use kpccl_bench::ranks::{self, Job, What};
use kpccl_bench::reference::{self, Spin};
use kpccl_bench::{criterion_results, report, results, svg};
use kpccl_posix::launch::RunOob;

const USAGE: &str = "usage: kpccl-bench [--smoke] [--rounds N] [--experiments] [--no-mpi] \
[--ranks 2,4,8] [--parts micro,ref,rust,c,mpi,create,copy,pipeline,allreduce] [--variant TAG[@N,..]:KEY=VALUE,..] \
[--patience SECONDS] \
[--out BENCHMARKS.md] [--svg docs/fence-latency.svg] [--criterion DIR] [--work DIR]";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let r = match args.first().map(String::as_str) {
        Some("rank") => rank(&args[1..]),
        Some("reference") => reference_mode(&args[1..]),
        _ => drive(&args),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kpccl-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `rank WHAT TAG BUDGET OUT IDLE_REPS [SIZE…]`, under the launcher.
fn rank(args: &[String]) -> Result<(), String> {
    let [what, tag, budget, out, idle, sizes @ ..] = args else { return Err("rank: missing arguments".to_owned()) };
    let idle_reps = idle.parse().map_err(|e| format!("idle reps {idle:?}: {e}"))?;
    let sizes: Vec<u64> =
        sizes.iter().map(|s| s.parse().map_err(|e| format!("size {s:?}: {e}"))).collect::<Result<_, _>>()?;
    let oob = RunOob::from_env().map_err(|e| format!("launcher: {e}"))?.ok_or("rank: not started by the launcher")?;
    let job = Job {
        what: What::parse(what)?,
        tag,
        budget: Budget::parse(budget)?,
        out: Path::new(out),
        sizes: &sizes,
        idle_reps,
    };
    ranks::run(oob, &job)
}

/// `reference bare|hint|yield BUDGET OUT`.
fn reference_mode(args: &[String]) -> Result<(), String> {
    let [spin, budget, out] = args else { return Err("reference: expected SPIN BUDGET OUT".to_owned()) };
    let (spin, key) = match spin.as_str() {
        "bare" => (Spin::Bare, "ref/flag/2"),
        "hint" => (Spin::Hint, "ref/flag-pause/2"),
        "yield" => (Spin::Yield, "ref/handoff/2"),
        _ => return Err(format!("reference: unknown spin {spin:?}")),
    };
    let samples = reference::run(&Budget::parse(budget)?, spin).map_err(|e| format!("reference: {e}"))?;
    results::append(Path::new(out), key, "ns", &samples).map_err(|e| format!("{out}: {e}"))
}

fn drive(args: &[String]) -> Result<(), String> {
    let mut opts = Options {
        smoke: false,
        rounds: 4,
        work: std::env::temp_dir().join(format!("kpccl-bench-{}", std::process::id())),
        no_mpi: false,
        variants: Vec::new(),
        ranks: driver::RANKS.to_vec(),
        parts: Vec::new(),
        patience: Duration::from_secs(60),
    };
    let (mut out, mut svg_path, mut criterion) = (None, None, None);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().cloned().ok_or(format!("{a} needs a value\n{USAGE}"));
        match a.as_str() {
            "--smoke" => opts.smoke = true,
            "--experiments" => opts.variants.extend(driver::Variant::experiments()),
            "--variant" => opts.variants.push(driver::Variant::parse(&value()?)?),
            "--no-mpi" => opts.no_mpi = true,
            "--rounds" => opts.rounds = value()?.parse().map_err(|e| format!("--rounds: {e}"))?,
            "--out" => out = Some(PathBuf::from(value()?)),
            "--svg" => svg_path = Some(PathBuf::from(value()?)),
            "--criterion" => criterion = Some(PathBuf::from(value()?)),
            "--work" => opts.work = PathBuf::from(value()?),
            "--ranks" => {
                opts.ranks = value()?
                    .split(',')
                    .map(|v| v.parse().map_err(|e| format!("--ranks {v:?}: {e}")))
                    .collect::<Result<_, _>>()?;
            }
            "--patience" => {
                opts.patience = Duration::from_secs(value()?.parse().map_err(|e| format!("--patience: {e}"))?);
            }
            "--parts" => {
                opts.parts = value()?.split(',').map(str::to_owned).collect();
                if let Some(p) = opts.parts.iter().find(|p| !driver::PARTS.contains(&p.as_str())) {
                    return Err(format!("--parts: unknown part {p:?} (known: {})", driver::PARTS.join(",")));
                }
            }
            "-h" | "--help" => {
                eprintln!("{USAGE}");
                return Ok(());
            }
            _ => return Err(format!("unknown argument {a:?}\n{USAGE}")),
        }
    }
    refuse_emulation()?;
    // No runner in front of the ranks: benchmarks never run under qemu.
    // SAFETY: single-threaded here; nothing reads the environment concurrently.
    #[allow(unsafe_code)]
    unsafe {
        std::env::set_var(kpccl_posix::launch::RUNNER_ENV, "");
    };
    let ctx = driver::run(&opts)?;
    // criterion's output directory (its CRITERION_HOME) of this run, if it measured.
    let crit = match &criterion {
        Some(dir) => criterion_results::read(dir).map_err(|e| format!("{}: {e}", dir.display()))?,
        None => Vec::new(),
    };
    let machine = report::Machine::probe();
    // The workloads' plots sit next to the fence plot, written when measured.
    let has = |prefix: &str| ctx.results.keys().any(|k| k.starts_with(prefix));
    let plots: [(Option<PathBuf>, String); 3] = [
        (svg_path.clone(), svg::fence_plot(&ctx.results)),
        (
            svg_path.as_ref().filter(|_| has("pipeline/")).map(|p| p.with_file_name("pipeline.svg")),
            svg::pipeline_plot(&ctx.results),
        ),
        (
            svg_path.as_ref().filter(|_| has("allreduce/")).map(|p| p.with_file_name("allreduce.svg")),
            svg::allreduce_plot(&ctx.results),
        ),
    ];
    let links: Vec<Option<String>> =
        plots.iter().map(|(p, _)| p.as_ref().map(|p| relative_link(out.as_deref(), p))).collect();
    let links =
        report::Links { fences: links[0].as_deref(), pipeline: links[1].as_deref(), allreduce: links[2].as_deref() };
    let text = report::render(&ctx, &machine, &crit, &links, opts.smoke);
    for (p, plot) in &plots {
        if let Some(p) = p {
            write(p, plot)?;
        }
    }
    match &out {
        Some(p) => write(p, &text)?,
        None => print!("{text}"),
    }
    if opts.smoke && !ctx.failures.is_empty() {
        // The report names them too; a smoke run exists to catch exactly this.
        return Err(format!("{} benchmark program(s) failed: {}", ctx.failures.len(), ctx.failures.join("; ")));
    }
    if !opts.smoke {
        let _ = std::fs::remove_dir_all(&opts.work);
    }
    Ok(())
}

fn write(p: &Path, text: &str) -> Result<(), String> {
    if let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    std::fs::write(p, text).map_err(|e| format!("{}: {e}", p.display()))?;
    eprintln!("kpccl-bench: wrote {}", p.display());
    Ok(())
}

/// `svg` as a link from the directory of `out`.
fn relative_link(out: Option<&Path>, svg: &Path) -> String {
    let base = out.and_then(Path::parent).filter(|d| !d.as_os_str().is_empty());
    match base.and_then(|b| svg.strip_prefix(b).ok()) {
        Some(rel) => rel.to_string_lossy().into_owned(),
        None => svg.to_string_lossy().into_owned(),
    }
}

/// Benchmarks never run under an emulator: refuse when this process is
/// really a qemu binary (qemu-user fakes `/proc/self/exe`, but not the
/// `/proc/./<pid>` spelling), or when the kernel's machine differs from
/// the one this binary was built for.
#[allow(unsafe_code)]
fn refuse_emulation() -> Result<(), String> {
    let exe = std::fs::read_link(format!("/proc/./{}/exe", std::process::id())).unwrap_or_default();
    if exe.file_name().is_some_and(|f| f.to_string_lossy().contains("qemu")) {
        return Err(format!("running under {}: benchmarks are never measured under emulation", exe.display()));
    }
    // SAFETY: all-zero bytes are a valid `utsname`.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: a valid out-parameter.
    if unsafe { libc::uname(&raw mut u) } != 0 {
        return Ok(());
    }
    // SAFETY: uname NUL-terminates `machine`.
    let machine = unsafe { std::ffi::CStr::from_ptr(u.machine.as_ptr()) }.to_string_lossy().into_owned();
    if machine != std::env::consts::ARCH {
        return Err(format!(
            "this is a {} binary on a {machine} kernel (an emulator such as qemu-user?): benchmarks are \
             never measured under emulation",
            std::env::consts::ARCH
        ));
    }
    Ok(())
}
