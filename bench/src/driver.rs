//! The driver: builds the C programs, runs every benchmark program in
//! rounds (so that a disturbance of the machine hits every measurement
//! alike), and collects their results.

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kpccl_run::{Binding, Launch};

use crate::measure::Budget;
use crate::ranks::{self, CREATE_SIZES, What};
use crate::results::{self, Results};
use crate::workloads;

/// The parts `--parts` selects from (`micro`, the criterion benchmarks, is
/// `cargo xtask bench`'s: the driver accepts and ignores it).
pub const PARTS: [&str; 9] = ["micro", "ref", "rust", "c", "mpi", "create", "copy", "pipeline", "allreduce"];

/// Rank counts of the fence benchmarks (8 oversubscribes a 2-core machine).
pub const RANKS: [u32; 3] = [2, 4, 8];

/// Options of a whole run.
#[derive(Clone, Debug)]
pub struct Options {
    /// A few iterations of everything, to show that it runs.
    pub smoke: bool,
    /// Rounds of the fence benchmarks.
    pub rounds: u32,
    /// Where programs are built and results collected.
    pub work: PathBuf,
    /// Skip Open MPI even when `mpicc` is there.
    pub no_mpi: bool,
    /// Design variants measured in the same run as the defaults: a result
    /// tag and the `KPCCL_*` variables that make the variant (Rust fences).
    pub variants: Vec<Variant>,
    /// Rank counts of the fence benchmarks.
    pub ranks: Vec<u32>,
    /// Which parts run (`ref`, `rust`, `c`, `mpi`, `create`, `copy`,
    /// `pipeline`, `allreduce`); empty: all.
    pub parts: Vec<String>,
    /// How long, in all, to wait for other processes to leave the machine idle.
    pub patience: Duration,
}

/// A design variant: the Rust fence benchmarks with some variables set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Variant {
    /// The results' key prefix (`rust-aligned`…).
    pub tag: String,
    /// The variables.
    pub envs: Vec<(String, String)>,
    /// The rank counts it runs at (empty: all of the run's).
    pub ranks: Vec<u32>,
}

impl Variant {
    /// Parses `TAG[@N,N…]:KEY=VALUE[,KEY=VALUE…]`.
    pub fn parse(s: &str) -> Result<Variant, String> {
        let (head, envs) = s.split_once(':').ok_or_else(|| format!("variant {s:?}: expected TAG:KEY=VALUE,…"))?;
        let (tag, ranks) = match head.split_once('@') {
            Some((t, r)) => {
                let ranks = r
                    .split(',')
                    .map(|v| v.parse().map_err(|e| format!("variant {s:?}: {e}")))
                    .collect::<Result<_, _>>()?;
                (t, ranks)
            }
            None => (head, Vec::new()),
        };
        let envs = envs
            .split(',')
            .filter(|kv| !kv.is_empty())
            .map(|kv| {
                kv.split_once('=')
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    .ok_or_else(|| format!("variant {s:?}: {kv:?} is not KEY=VALUE"))
            })
            .collect::<Result<_, _>>()?;
        Ok(Variant { tag: format!("rust-{tag}"), envs, ranks })
    }

    /// The variants `--experiments` measures.
    #[must_use]
    pub fn experiments() -> Vec<Variant> {
        ["aligned@2,8:KPCCL_LAYOUT=aligned", "spin0@4,8:KPCCL_SPIN=0"]
            .iter()
            .map(|v| Variant::parse(v).expect("built-in variants parse"))
            .collect()
    }
}

impl Options {
    /// Whether `part` runs.
    #[must_use]
    pub fn part(&self, part: &str) -> bool {
        self.parts.is_empty() || self.parts.iter().any(|p| p == part)
    }
}

/// What a run found out besides the numbers.
#[derive(Clone, Debug, Default)]
pub struct Context {
    /// Every measurement.
    pub results: Results,
    /// Notes for the report (skipped parts, failures).
    pub notes: Vec<String>,
    /// The programs that failed (a benchmark that fails, or whose result
    /// does not validate), each with its error; also among the notes.
    pub failures: Vec<String>,
    /// The window sizes of the creation benchmark.
    pub sizes: Vec<u64>,
    /// `mpirun --version`'s first line, when Open MPI runs.
    pub mpi_version: Option<String>,
    /// The `mpirun` command line used.
    pub mpi_command: Option<String>,
    /// /proc/loadavg at the start and the end.
    pub load: (String, String),
    /// How long the run took.
    pub elapsed: Duration,
    /// The share of CPU time that other processes used during the run, in percent.
    pub foreign_cpu: Option<f64>,
}

/// A program run as one step: its name and how it failed, if it did.
type Step = Result<(), String>;

/// The directory of this executable, where cargo also put `libkpccl.so`.
fn exe_dir() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    exe.parent().map(Path::to_path_buf).ok_or_else(|| "the executable has no directory".to_owned())
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// Whether `program` can be run (found on PATH).
fn found(program: &str) -> bool {
    Command::new(program).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok()
}

/// Runs `cmd` in a process group of its own with its output captured; after
/// `timeout` the whole group gets SIGTERM, then SIGKILL (a hung benchmark
/// must not hang the suite).
#[allow(unsafe_code)]
fn run_timed(cmd: &mut Command, timeout: Duration) -> Step {
    use std::io::Read as _;
    use std::os::unix::process::CommandExt as _;
    let shown = format!("{cmd:?}");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("{shown}: {e}"))?;
    let (mut out, mut err) = (child.stdout.take(), child.stderr.take());
    let readers = [
        out.take().map(|mut o| {
            std::thread::spawn(move || {
                let mut s = String::new();
                let _ = o.read_to_string(&mut s);
                s
            })
        }),
        err.take().map(|mut e| {
            std::thread::spawn(move || {
                let mut s = String::new();
                let _ = e.read_to_string(&mut s);
                s
            })
        }),
    ];
    let deadline = Instant::now() + timeout;
    let mut killed = false;
    let status = loop {
        if let Some(st) = child.try_wait().map_err(|e| format!("{shown}: {e}"))? {
            break st;
        }
        if Instant::now() >= deadline && !killed {
            let pgid = -i32::try_from(child.id()).unwrap_or(i32::MAX);
            // SAFETY: signals our own child's process group.
            unsafe { libc::kill(pgid, libc::SIGTERM) };
            std::thread::sleep(Duration::from_secs(2));
            // SAFETY: as above.
            unsafe { libc::kill(pgid, libc::SIGKILL) };
            killed = true;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let [o, e] = readers.map(|r| r.and_then(|h| h.join().ok()).unwrap_or_default());
    if killed {
        return Err(format!("{shown} timed out after {} s and was killed: {}", timeout.as_secs(), e.trim_end()));
    }
    if status.success() { Ok(()) } else { Err(format!("{shown} failed ({status}): {}{}", e.trim_end(), o.trim_end())) }
}

fn run_quiet(cmd: &mut Command) -> Step {
    run_timed(cmd, Duration::from_secs(300))
}

/// Compiles `src` (relative to the workspace root) with `cc` into `out`;
/// `bench/c` is on the include path.
fn compile(cc: &str, src: &str, out: &Path, extra: &[OsString]) -> Step {
    let root = workspace_root();
    let mut cmd = Command::new(cc);
    cmd.args(["-O2", "-std=gnu11", "-Wall", "-Wextra", "-Werror"])
        .arg("-I")
        .arg(root.join("bench/c"))
        .arg(root.join(src))
        .arg("-o")
        .arg(out)
        .args(extra);
    run_quiet(&mut cmd)
}

/// The C programs of a run: the C-API benchmark, and the MPI ones that build.
#[derive(Clone, Debug)]
struct Programs {
    kpccl: PathBuf,
    /// `bench/c/mpi_bench.c`.
    mpi: Option<PathBuf>,
    /// `bench/c/pipeline.c`, when its part runs.
    pipeline: Option<PathBuf>,
    /// `examples/kpccl_allreduce.c`, when its part runs.
    allreduce: Option<PathBuf>,
}

/// A directory holding `libkpccl.so.MAJOR`, the name the programs look for
/// at run time (the library's SONAME), as a link to cargo's `libkpccl.so`
/// in `lib`: cargo makes no such name, `cargo xtask install` does.
fn soname_dir(lib: &Path, work: &Path) -> Result<PathBuf, String> {
    let dir = work.join("lib");
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let link = dir.join(concat!("libkpccl.so.", env!("CARGO_PKG_VERSION_MAJOR")));
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(lib.join("libkpccl.so"), &link)
        .map_err(|e| format!("linking {}: {e}", link.display()))?;
    Ok(dir)
}

/// Builds the C-API and MPI programs; an MPI one that does not build is a
/// failure of the run, and its part is skipped.
fn build_c(opts: &Options, ctx: &mut Context) -> Result<Programs, String> {
    let lib = exe_dir()?;
    if !lib.join("libkpccl.so").exists() {
        return Err(format!(
            "{} has no libkpccl.so: build it with `cargo build -p kpccl-ffi` in the same profile",
            lib.display()
        ));
    }
    let include = workspace_root().join("ffi/include");
    let kpccl = opts.work.join("kpccl_bench");
    let mut rpath = OsString::from("-Wl,-rpath,");
    rpath.push(soname_dir(&lib, &opts.work)?);
    let mut l = OsString::from("-L");
    l.push(&lib);
    let mut i = OsString::from("-I");
    i.push(&include);
    let link = [i, l, "-lkpccl".into(), rpath];
    compile("cc", "bench/c/kpccl_bench.c", &kpccl, &link)?;
    let mut progs = Programs { kpccl, mpi: None, pipeline: None, allreduce: None };
    if opts.no_mpi {
        ctx.notes.push("Open MPI skipped (--no-mpi).".to_owned());
        return Ok(progs);
    }
    if !found("mpicc") || !found("mpirun") {
        ctx.notes.push("Open MPI skipped: `mpicc` or `mpirun` is not on PATH.".to_owned());
        return Ok(progs);
    }
    let mut build = |part: &str, src: &str, name: &str| {
        if !opts.part(part) {
            return None;
        }
        let out = opts.work.join(name);
        match compile("mpicc", src, &out, &link) {
            Ok(()) => Some(out),
            Err(e) => {
                // A failure, not only a note: the smoke run must catch a program that stopped building.
                let failure = format!("{src} does not build, so its part is skipped: {e}");
                ctx.notes.push(failure.clone());
                ctx.failures.push(failure);
                None
            }
        }
    };
    // mpi_bench serves the `mpi` and `create` parts; empty parts select all.
    let mpi_part = if opts.part("mpi") { "mpi" } else { "create" };
    progs.mpi = build(mpi_part, "bench/c/mpi_bench.c", "mpi_bench");
    progs.pipeline = build("pipeline", "bench/c/pipeline.c", "pipeline");
    progs.allreduce = build("allreduce", workloads::ALLREDUCE_SOURCE, "allreduce");
    Ok(progs)
}

/// The results' key prefix of the C fences with ranks bound one per CPU
/// (`kpccl-run --bind-to cpu`), a variant of `c`.
pub const BOUND_TAG: &str = "c-bound";

/// `mpirun` with the flags every MPI job here uses.
fn mpirun(n: u32) -> Command {
    let mut cmd = Command::new("mpirun");
    cmd.args(mpirun_flags()).arg("-np").arg(n.to_string());
    cmd
}

/// Shared memory only (ob1 over vader), as root, more ranks than cores
/// allowed, no binding (the kpccl launcher does not bind either).
fn mpirun_flags() -> [&'static str; 10] {
    ["--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "--mca", "pml", "ob1", "--mca", "btl", "self,vader"]
}

fn launch(n: u32, envs: &[(&str, &str)]) -> Launch {
    let mut l = Launch::new(n).timeout(Duration::from_secs(300));
    for (k, v) in envs {
        l = l.env(k, v);
    }
    l
}

fn run_launch(l: &Launch, program: &Path, args: &[String]) -> Step {
    let report = l.run(program, args).map_err(|e| format!("cannot start {}: {e}", program.display()))?;
    if report.success() { Ok(()) } else { Err(format!("{} {args:?}: {report}", program.display())) }
}

/// One Rust rank job.
struct RustJob<'a> {
    what: What,
    tag: &'a str,
    envs: &'a [(&'a str, &'a str)],
    sizes: &'a [u64],
    idle_reps: u64,
}

impl RustJob<'_> {
    fn fences(tag: &str) -> RustJob<'_> {
        RustJob { what: What::Fences, tag, envs: &[], sizes: &[], idle_reps: 0 }
    }

    fn run(&self, n: u32, budget: &Budget, out: &Path) -> Step {
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let mut args = vec![
            "rank".to_owned(),
            self.what.name().to_owned(),
            self.tag.to_owned(),
            budget.arg(),
            path_arg(out),
            self.idle_reps.to_string(),
        ];
        args.extend(self.sizes.iter().map(u64::to_string));
        run_launch(&launch(n, self.envs), &exe, &args)
    }
}

fn path_arg(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// The reference, in a child process of its own (it forks).
fn reference(spin: &str, budget: &Budget, out: &Path) -> Step {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    run_quiet(Command::new(exe).args(["reference", spin, &budget.arg(), &path_arg(out)]))
}

/// Free bytes in the segment directory.
#[allow(unsafe_code)]
fn shm_free() -> Option<u64> {
    let dir = std::env::var("KPCCL_SHM_DIR").unwrap_or_else(|_| kpccl_posix::DEFAULT_SHM_DIR.to_owned());
    let c = std::ffi::CString::new(dir).ok()?;
    // SAFETY: all-zero bytes are a valid `statvfs`.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a valid out-parameter.
    if unsafe { libc::statvfs(c.as_ptr(), &raw mut s) } != 0 {
        return None;
    }
    // The field types differ between targets; `from` keeps every width exact.
    #[allow(clippy::useless_conversion)]
    let (avail, frsize) = (u64::from(s.f_bavail), u64::from(s.f_frsize));
    Some(avail.saturating_mul(frsize))
}

/// Total and idle CPU jiffies from /proc/stat, and our own children's.
fn cpu_jiffies() -> Option<(u64, u64)> {
    let stat = fs::read_to_string("/proc/stat").ok()?;
    let cpu: Vec<u64> = stat.lines().next()?.split_whitespace().skip(1).filter_map(|v| v.parse().ok()).collect();
    let total = cpu.iter().take(8).sum();
    let idle = cpu.get(3)? + cpu.get(4).copied().unwrap_or(0);
    Some((total, idle))
}

/// CPU time of this process and its waited-for children, in jiffies-compatible seconds.
#[allow(unsafe_code)]
fn own_cpu_secs() -> f64 {
    let mut total = 0.0;
    for who in [libc::RUSAGE_SELF, libc::RUSAGE_CHILDREN] {
        // SAFETY: all-zero bytes are a valid `rusage`.
        let mut r: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: a valid out-parameter.
        unsafe { libc::getrusage(who, &raw mut r) };
        #[allow(clippy::cast_precision_loss)]
        let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        total += secs(r.ru_utime) + secs(r.ru_stime);
    }
    total
}

/// The share of the machine's CPU time that was busy over `window`, in
/// percent (measured while this program and its children are idle, so the
/// busy time is other processes').
fn busy_over(window: Duration) -> Option<f64> {
    let (t0, i0) = cpu_jiffies()?;
    std::thread::sleep(window);
    let (t1, i1) = cpu_jiffies()?;
    let total = t1.checked_sub(t0)?;
    #[allow(clippy::cast_precision_loss)]
    (total > 0).then(|| 100.0 * total.saturating_sub(i1.saturating_sub(i0)) as f64 / total as f64)
}

/// Waits, at most `budget` in all, until other processes leave the machine
/// nearly idle (≤ 10 % busy over half a second). Returns whether it is quiet.
fn wait_quiet(budget: &mut Duration) -> bool {
    const WINDOW: Duration = Duration::from_millis(500);
    let mut said = false;
    loop {
        match busy_over(WINDOW) {
            Some(b) if b <= 10.0 => return true,
            None => return true,
            Some(b) => {
                if *budget < WINDOW {
                    eprintln!("kpccl-bench: still {b:.0} % busy; measuring anyway");
                    return false;
                }
                *budget -= WINDOW;
                if !said {
                    eprintln!(
                        "kpccl-bench: other processes keep the machine {b:.0} % busy; waiting for them (at most {} s more)",
                        budget.as_secs()
                    );
                    said = true;
                }
            }
        }
    }
}

/// How many lines the results file has (none when it is not there yet).
fn result_lines(out: &Path) -> usize {
    fs::read_to_string(out).map_or(0, |t| t.lines().count())
}

fn load() -> String {
    fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// Runs everything; results and notes land in the returned context.
pub fn run(opts: &Options) -> Result<Context, String> {
    let start = Instant::now();
    let mut ctx = Context { load: (load(), String::new()), ..Context::default() };
    let jiffies0 = cpu_jiffies();
    let own0 = own_cpu_secs();
    fs::create_dir_all(&opts.work).map_err(|e| format!("{}: {e}", opts.work.display()))?;
    let out = opts.work.join("results.tsv");
    let _ = fs::remove_file(&out);
    let budget = if opts.smoke { Budget::SMOKE } else { Budget::FULL };
    let progs = build_c(opts, &mut ctx)?;
    let (cprog, mpi) = (&progs.kpccl, &progs.mpi);
    if mpi.is_some() || progs.pipeline.is_some() || progs.allreduce.is_some() {
        ctx.mpi_version = Command::new("mpirun")
            .arg("--version")
            .output()
            .ok()
            .and_then(|o| String::from_utf8_lossy(&o.stdout).lines().next().map(str::to_owned));
        ctx.mpi_command = Some(format!("mpirun {} -np N", mpirun_flags().join(" ")));
    }
    let mut failures = Vec::new();
    let mut recorded = result_lines(&out);
    let mut step = |name: &str, r: Step| {
        // Every program appends its samples to `out`: one that exits 0 with
        // none added measured nothing, and the report would show a dash.
        let now = result_lines(&out);
        let r =
            r.and_then(|()| if now > recorded { Ok(()) } else { Err("exited 0 but recorded no result".to_owned()) });
        recorded = now;
        if let Err(e) = r {
            eprintln!("kpccl-bench: {name}: {e}");
            failures.push(format!("{name}: {e}"));
        }
    };
    let fences = ["ref", "rust", "c", "mpi"].iter().any(|p| opts.part(p));
    let rounds = match (fences, opts.smoke) {
        (false, _) => 0,
        (true, true) => 1,
        (true, false) => opts.rounds.max(1),
    };
    let idle_reps = if opts.smoke { 1 } else { 3 };
    // Benchmarks on a busy 2-core machine measure the scheduler, not the
    // fences: before each phase wait a little for other work to finish.
    let mut patience = if opts.smoke { Duration::ZERO } else { opts.patience };
    let mut busy_phases = 0;
    let mut quiet = |patience: &mut Duration| {
        if !wait_quiet(patience) {
            busy_phases += 1;
        }
    };
    for round in 0..rounds {
        quiet(&mut patience);
        eprintln!("kpccl-bench: fence round {}/{rounds}", round + 1);
        // The reference at both ends of the round, so that it sees the same
        // machine (vCPU placement, neighbours) as the measurements between.
        let reference_pair = |step: &mut dyn FnMut(&str, Step)| {
            if opts.part("ref") {
                step("reference", reference("bare", &budget, &out));
                step("reference (pause)", reference("hint", &budget, &out));
                step("reference (hand-off)", reference("yield", &budget, &out));
            }
        };
        reference_pair(&mut step);
        for &n in &opts.ranks {
            if opts.part("rust") {
                let idle_reps = if round == 0 { idle_reps } else { 0 };
                let job = RustJob { idle_reps, ..RustJob::fences("rust") };
                step(&format!("rust fences n={n}"), job.run(n, &budget, &out));
            }
            if opts.part("c") {
                step(
                    &format!("c fences n={n}"),
                    run_launch(&launch(n, &[]), cprog, &["c".to_owned(), budget.arg(), path_arg(&out)]),
                );
                if n == 2 {
                    // As users' jobs run (mpirun binds small jobs): one CPU each.
                    let bound = launch(n, &[]).binding(Binding::Cpu);
                    step(
                        "c fences bound n=2",
                        run_launch(&bound, cprog, &[BOUND_TAG.to_owned(), budget.arg(), path_arg(&out)]),
                    );
                }
            }
            if let Some(mpi) = mpi.as_ref().filter(|_| opts.part("mpi")) {
                let late = match (round, opts.smoke) {
                    (0, true) => "1",
                    (0, false) => "200",
                    _ => "0",
                };
                step(
                    &format!("mpi fences n={n}"),
                    run_quiet(mpirun(n).arg(mpi).args(["fences", &budget.arg(), &path_arg(&out), late])),
                );
            }
            if !opts.smoke {
                for v in opts.variants.iter().filter(|v| v.ranks.is_empty() || v.ranks.contains(&n)) {
                    let envs: Vec<(&str, &str)> = v.envs.iter().map(|(k, x)| (k.as_str(), x.as_str())).collect();
                    let job = RustJob { envs: &envs, ..RustJob::fences(&v.tag) };
                    step(&format!("{} n={n}", v.tag), job.run(n, &budget, &out));
                }
            }
        }
        reference_pair(&mut step);
    }
    let free = shm_free().unwrap_or(0);
    ctx.sizes = CREATE_SIZES.iter().copied().filter(|&s| s < (1 << 30) || free >= 3 * s).collect();
    if ctx.sizes.len() < CREATE_SIZES.len() {
        ctx.notes
            .push(format!("1 GiB windows skipped: the segment directory has {} MiB free (3 GiB wanted).", free >> 20));
    }
    if opts.smoke {
        ctx.sizes.retain(|&s| s <= 1 << 20);
    }
    if opts.part("create") {
        quiet(&mut patience);
        eprintln!("kpccl-bench: window creation");
        for &n in &opts.ranks {
            let job = RustJob { what: What::Create, sizes: &ctx.sizes, ..RustJob::fences("rust") };
            step(&format!("rust create n={n}"), job.run(n, &budget, &out));
            if let Some(mpi) = mpi {
                let reps = |s: u64| ranks::create_reps(s, opts.smoke);
                let reps = format!("{}:{}:{}", reps(4096), reps(64 << 20), reps(1 << 30));
                step(
                    &format!("mpi create n={n}"),
                    run_quiet(
                        mpirun(n)
                            .arg(mpi)
                            .args(["create", &reps, &path_arg(&out)])
                            .args(ctx.sizes.iter().map(u64::to_string)),
                    ),
                );
            }
        }
    }
    if opts.part("copy") {
        quiet(&mut patience);
        eprintln!("kpccl-bench: copy bandwidth");
        step("rust copy", RustJob { what: What::Copy, ..RustJob::fences("rust") }.run(2, &budget, &out));
    }
    let workloads = [
        ("pipeline", "pipeline kernel", &progs.pipeline, workloads::pipeline_args(opts.smoke, &out)),
        ("allreduce", "window allreduce", &progs.allreduce, workloads::allreduce_args(opts.smoke, &out)),
    ];
    for (name, what, program, args) in workloads {
        let Some(program) = program else { continue };
        quiet(&mut patience);
        eprintln!("kpccl-bench: {what}");
        for &n in &opts.ranks {
            step(&format!("{name} n={n}"), run_quiet(mpirun(n).arg(program).args(&args)));
        }
    }
    if busy_phases > 0 && !opts.smoke {
        ctx.notes.push(format!(
            "{busy_phases} phase(s) started while other processes kept the machine more than 10 % busy \
             (the patience of {} s ran out): their numbers include that interference.",
            opts.patience.as_secs()
        ));
    }
    ctx.notes.extend(failures.iter().cloned());
    ctx.failures.extend(failures);
    let text = fs::read_to_string(&out).unwrap_or_default();
    results::parse_into(&text, &mut ctx.results);
    ctx.load.1 = load();
    ctx.elapsed = start.elapsed();
    if let (Some((t0, i0)), Some((t1, i1))) = (jiffies0, cpu_jiffies()) {
        // SAFETY-free arithmetic: jiffies are USER_HZ (100 per second on Linux).
        #[allow(clippy::cast_precision_loss)]
        let busy = (t1 - t0).saturating_sub(i1 - i0) as f64 / 100.0;
        #[allow(clippy::cast_precision_loss)]
        let total = (t1 - t0) as f64 / 100.0;
        let own = own_cpu_secs() - own0;
        if total > 0.0 {
            ctx.foreign_cpu = Some((100.0 * (busy - own) / total).max(0.0));
        }
    }
    Ok(ctx)
}
