//! The C tests: `ffi/tests/c/*.c` compiled against `libkpccl` and run, on the
//! host and under qemu-aarch64.
//!
//! 1. On the host, `kpccl.h` must match what cbindgen makes of `ffi/src`
//!    (`cargo xtask header --check`); it must compile alone as C11 and C++.
//! 2. `libkpccl.a` is built (release) for the target, with the native
//!    libraries rustc says it needs (`--print native-static-libs`).
//! 3. Every test is compiled with `{cc} -std=c11 -Wall -Wextra -Werror
//!    -pedantic` and linked statically, twice when MPI is there:
//!    - against `oob_shim.h` (`-DKPCCL_NO_MPI -I ffi/tests/c/nompi`: the few
//!      MPI calls the tests use, over `kpccl_run_oob`), run as
//!      `kpccl-run -n N -- [runner…] test`;
//!    - with `mpicc`, run as `mpirun -np N test` (host only: there is no MPI
//!      for aarch64 here).
//! 4. Each runs with 1, 2, 4 and 8 ranks, every run bounded by a timeout
//!    (`KPCCL_C_TEST_TIMEOUT` seconds; default 180, 600 under qemu).
//!    Its last `N passed, N failed` line is summed (the reference example
//!    prints none: its exit status counts as one test), a non-zero exit or
//!    a timeout is a failure.
//! 5. The reference example runs once more on 4 ranks split into 2 simulated
//!    nodes (`KPCCL_NODE_ID` per rank): every rank must fail, not hang, and
//!    the clear error be logged once (by the rank it is about).
//! 6. With MPI, `examples/kpccl_hybrid_allreduce.c` runs on 8 ranks as one
//!    node, 2 and 4 simulated nodes (as its output must say), verified
//!    against `MPI_Allreduce`; the time ratio it prints is shown. `examples/kpccl_allreduce.c` runs on 2
//!    and 4 ranks and must verify every size up to 256 KiB, its copies for
//!    peers made each way, and with its output streamed. Given bad
//!    arguments, each must exit non-zero, its usage said once, with no
//!    `MPI_Abort`.
//! 7. No `/dev/shm/kpccl-*` entry may be left behind.
//!
//! `examples/kpccl_peer_fence.c`, the reference example with its two
//! printing defects repaired, is tested from there: no copy to drift.

use std::{
    collections::BTreeSet,
    env, fs, io,
    io::Read,
    os::unix::process::CommandExt,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    thread,
    time::{Duration, Instant},
};

use crate::{
    cmd::{Cmd, Result, bail, err, which},
    consumers, header,
    report::{Counts, Secs},
    staticlib::{StaticLib, target_dir},
};

/// Where the C tests live.
pub(crate) const DIR: &str = "ffi/tests/c";
/// The rank counts every test runs with.
const RANKS: [u32; 4] = [1, 2, 4, 8];
/// What the C compiler is given for every test.
pub(crate) const CFLAGS: [&str; 5] = ["-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic"];

/// How to build and run the C tests for one target.
#[derive(Debug, Clone)]
pub(crate) struct CTests {
    /// C compiler and linker driver: `cc`, `aarch64-linux-gnu-gcc`.
    pub(crate) cc: String,
    /// Rust target the library is built for; `None` is the host.
    pub(crate) target: Option<String>,
    /// Words put in front of every program run (`qemu-aarch64 -L /usr/aarch64-linux-gnu`); empty on the host.
    pub(crate) runner: Vec<String>,
    /// The launcher program that starts a test as several ranks (it is given
    /// `-n N --timeout S -- [runner…] test`); `None` builds and uses the
    /// host's `kpccl-run`.
    pub(crate) launcher: Option<Vec<String>>,
}

impl CTests {
    /// The host: the system's `cc`, programs run directly.
    pub(crate) fn host() -> CTests {
        CTests { cc: "cc".to_owned(), target: None, runner: Vec::new(), launcher: None }
    }

    /// aarch64 under qemu, as `cargo xtask test-aarch64` runs them
    /// (`CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER` overrides the runner).
    pub(crate) fn aarch64() -> CTests {
        let runner = env::var("CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER")
            .unwrap_or_else(|_| "qemu-aarch64 -L /usr/aarch64-linux-gnu".to_owned());
        CTests {
            cc: "aarch64-linux-gnu-gcc".to_owned(),
            target: Some("aarch64-unknown-linux-gnu".to_owned()),
            runner: runner.split_whitespace().map(str::to_owned).collect(),
            launcher: None,
        }
    }

    fn under_emulation(&self) -> bool {
        !self.runner.is_empty()
    }

    /// How long one run may take: `KPCCL_C_TEST_TIMEOUT` seconds, else 180
    /// (600 under emulation).
    fn timeout(&self) -> Duration {
        let secs = env::var("KPCCL_C_TEST_TIMEOUT").ok().and_then(|s| s.trim().parse().ok()).filter(|s| *s > 0);
        Duration::from_secs(secs.unwrap_or(if self.under_emulation() { 600 } else { 180 }))
    }
}

/// Builds and runs the C tests with `cfg`. `Ok(None)` when there are none.
pub(crate) fn run(cfg: &CTests) -> Result<Option<Counts>> {
    let sources = sources()?;
    if sources.is_empty() {
        println!("no C tests yet (no {DIR}/*.c)");
        return Ok(None);
    }
    if cfg.target.is_none() {
        header::run(true)?;
    }
    let shm_before = shm_entries();
    header_compiles(cfg)?;
    let lib = StaticLib::build(cfg.target.as_deref())?;
    let launcher = match &cfg.launcher {
        Some(words) => words.clone(),
        None => vec![build_launcher()?],
    };
    let out = target_dir().join("c-tests").join(cfg.target.as_deref().unwrap_or("host"));
    fs::create_dir_all(&out).map_err(|e| err!("creating {}: {e}", out.display()))?;

    let mut flavors = vec![Flavor::Launcher(launcher.clone())];
    match mpi(cfg) {
        Ok(mpirun) => flavors.push(Flavor::Mpi(mpirun)),
        Err(why) => println!("note: C tests not run under mpirun: {why}"),
    }
    let mut programs = Vec::new();
    for flavor in &flavors {
        for source in &sources {
            programs.push((flavor, compile(cfg, flavor, &lib, source, &out)?));
        }
    }

    let mut table = Table::default();
    println!("\n{:<34} {:<20} {:>9}  result", "test", "ranks", "time");
    for n in RANKS {
        for (flavor, program) in &programs {
            let run = run_one(cfg, flavor, program, n);
            let name = program.file_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
            table.record(&name, &flavor.describe(n), &run);
        }
    }
    for (flavor, program) in programs.iter().filter(|(_, p)| p.to_string_lossy().contains("kpccl_peer_fence")) {
        let run = example_split(cfg, flavor, program);
        table.record("kpccl_peer_fence split", &format!("{} (2 nodes)", flavor.describe(4)), &run);
    }
    if let Some(mpi) = flavors.iter().find(|f| matches!(f, Flavor::Mpi(_))) {
        let program = compile(cfg, mpi, &lib, Path::new(HYBRID), &out)?;
        let args = ["1048576", "5"];
        for (nodes, wrap) in [(1, Vec::new()), (2, split_nodes(4)), (4, split_nodes(2))] {
            let mut run = verified(cfg, mpi, &program, (8, &wrap), &args, Some(HYBRID_RATIO));
            // Verified on the nodes the row names, not on one (a split that did not take).
            let saw = format!("8 ranks on {nodes} node");
            if run.counts.failed == 0 && !run.output.contains(&saw) {
                run.counts = Counts { passed: 0, failed: 1 };
                run.verdict = format!("FAILED: verified, but its output does not say {saw:?}");
            }
            let what = format!("mpirun -np 8 ({nodes} node{})", if nodes == 1 { "" } else { "s" });
            table.record("kpccl_hybrid_allreduce", &what, &run);
        }
        let run = refused(cfg, mpi, &program, &["0"]);
        table.record("kpccl_hybrid_allreduce 0", &mpi.describe(4), &run);
        // Up to 256 KiB in chunks of 64 KiB: both of its algorithms, chunks
        // reusing the window, each size checked on three calls.
        let program = compile(cfg, mpi, &lib, Path::new(ALLREDUCE), &out)?;
        // The copies as learnt while running, then each way for sure; then
        // the output streamed from 128 KiB (where stores can be streamed).
        let ways =
            [["--copies", "auto"], ["--copies", "cached"], ["--copies", "streamed"], ["--stream-output", "65536"]];
        for way in ways {
            let args = [&["--max", "262144", "--chunk", "65536", "--rounds", "1"], &way[..]].concat();
            for n in [2, 4] {
                let run = verified(cfg, mpi, &program, (n, &[]), &args, None);
                table.record(&format!("kpccl_allreduce {}", way.join(" ")), &mpi.describe(n), &run);
            }
        }
        let run = refused(cfg, mpi, &program, &["--rounds", "0"]);
        table.record("kpccl_allreduce --rounds 0", &mpi.describe(4), &run);
    }
    if cfg.target.is_none() {
        let mpirun =
            flavors.iter().find_map(|f| if let Flavor::Mpi(words) = f { Some(words.as_slice()) } else { None });
        for (name, what, run) in consumers::run(cfg, mpirun, &out) {
            table.record(&name, &what, &run);
        }
    }
    println!("C tests: {}", table.total);
    if !table.failures.is_empty() {
        println!("failed runs: {}", table.failures.join(", "));
    }

    let leaked: Vec<String> = shm_entries().difference(&shm_before).cloned().collect();
    if !leaked.is_empty() {
        bail!("the C tests left {} in /dev/shm", leaked.join(", "));
    }
    println!("no /dev/shm/kpccl-* entry left behind");
    Ok(Some(table.total))
}

/// The runs so far: their summed counts and the ones that failed.
#[derive(Debug, Default)]
struct Table {
    total: Counts,
    failures: Vec<String>,
}

impl Table {
    /// Prints `run`'s row (and its output's tail if it failed) and adds it up.
    fn record(&mut self, name: &str, ranks: &str, run: &Run) {
        println!("{name:<34} {ranks:<20} {:>9}  {}", Secs(run.elapsed).to_string(), run.verdict);
        self.total += run.counts;
        if run.counts.failed > 0 {
            self.failures.push(format!("{name} ({ranks})"));
            print_tail(&run.output);
        }
    }
}

/// `cargo xtask c-test [--aarch64]`: the C tests alone; fails unless every
/// one passed, after the counts line.
pub(crate) fn standalone(aarch64: bool) -> Result<()> {
    let cfg = if aarch64 { CTests::aarch64() } else { CTests::host() };
    let counts = run(&cfg)?.unwrap_or_default();
    println!("{counts}");
    if counts.failed > 0 { Err(crate::cmd::Error::reported()) } else { Ok(()) }
}

/// The reference example users see, tested as shown.
pub(crate) const EXAMPLE: &str = "examples/kpccl_peer_fence.c";
/// The hybrid model's example (MPI between nodes), run under mpirun only.
const HYBRID: &str = "examples/kpccl_hybrid_allreduce.c";
/// The window allreduce example, run under mpirun only.
const ALLREDUCE: &str = "examples/kpccl_allreduce.c";

/// The C test sources, `ffi/tests/c/*.c` and the reference example, sorted;
/// none when the test directory is absent.
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
    sources.push(PathBuf::from(EXAMPLE));
    sources.sort_by_key(|p| p.file_name().map(ToOwned::to_owned));
    Ok(sources)
}

/// The header compiles on its own, as C11 and (with the matching C++ compiler, if any) as C++.
fn header_compiles(cfg: &CTests) -> Result<()> {
    // Stricter than the tests: users build with these too.
    let strict = ["-Wstrict-prototypes", "-Wmissing-prototypes", "-Wredundant-decls", "-Wshadow", "-Wconversion"];
    Cmd::new(&cfg.cc).args(CFLAGS).args(strict).args(["-fsyntax-only", "-x", "c", header::HEADER]).run()?;
    let cxx = if cfg.cc == "cc" { "c++".to_owned() } else { cfg.cc.replace("gcc", "g++") };
    if which(&cxx).is_none() {
        println!("note: `{cxx}` not found: {} not checked as C++", header::HEADER);
        return Ok(());
    }
    Cmd::new(&cxx)
        .args(["-std=c++11", "-Wall", "-Wextra", "-Werror", "-pedantic", "-Wredundant-decls", "-Wshadow"])
        .args(["-fsyntax-only", "-x", "c++", header::HEADER])
        .run()
}

/// The host's `kpccl-run`, built now.
fn build_launcher() -> Result<String> {
    Cmd::cargo().args(["build", "-p", "kpccl-run", "--bin", "kpccl-run"]).run()?;
    let path = target_dir().join("debug").join("kpccl-run");
    if !path.is_file() {
        bail!("{} was not built", path.display());
    }
    Ok(path.to_string_lossy().into_owned())
}

/// How a test is built and started.
#[derive(Debug)]
pub(crate) enum Flavor {
    /// Against the MPI shim, started by the launcher (these words).
    Launcher(Vec<String>),
    /// With `mpicc`, started by `mpirun` (these words, before `-np N`).
    Mpi(Vec<String>),
}

impl Flavor {
    fn suffix(&self) -> &'static str {
        match self {
            Flavor::Launcher(_) => "run",
            Flavor::Mpi(_) => "mpi",
        }
    }

    fn describe(&self, n: u32) -> String {
        match self {
            Flavor::Launcher(_) => format!("kpccl-run -n {n}"),
            Flavor::Mpi(_) => format!("mpirun -np {n}"),
        }
    }
}

/// The `mpirun` words when MPI can be used for `cfg`, or why not.
pub(crate) fn mpi(cfg: &CTests) -> std::result::Result<Vec<String>, String> {
    if cfg.target.is_some() {
        return Err("no MPI for another target".to_owned());
    }
    if which("mpicc").is_none() || which("mpirun").is_none() {
        return Err("mpicc or mpirun is not installed (apt-get install openmpi-bin libopenmpi-dev)".to_owned());
    }
    let mut words = vec!["mpirun".to_owned()];
    let version = Cmd::new("mpirun").quiet().arg("--version").read().unwrap_or_default();
    if version.contains("Open MPI") {
        // 8 ranks on a 2-CPU machine; Open MPI refuses root unless told.
        words.push("--oversubscribe".to_owned());
        if Cmd::new("id").quiet().arg("-u").read().is_ok_and(|uid| uid.trim() == "0") {
            words.push("--allow-run-as-root".to_owned());
        }
    }
    Ok(words)
}

/// The reference example passes its communicator through `void *`, as the
/// page shows it: where `MPI_Comm` is an `int` (MPICH) that is a warning,
/// kept as the page gives it. The tests pass a pointer to the communicator.
pub(crate) fn page_casts(source: &Path) -> &'static [&'static str] {
    if source.ends_with(EXAMPLE) { &["-Wno-int-to-pointer-cast", "-Wno-pointer-to-int-cast"] } else { &[] }
}

/// Compiles one test for one flavor; the program's path.
fn compile(cfg: &CTests, flavor: &Flavor, lib: &StaticLib, source: &Path, out: &Path) -> Result<PathBuf> {
    let stem = source.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let program = out.join(format!("{stem}-{}", flavor.suffix()));
    let cmd = match flavor {
        Flavor::Launcher(_) => Cmd::new(&cfg.cc).args(CFLAGS).args(["-DKPCCL_NO_MPI", "-I", &format!("{DIR}/nompi")]),
        Flavor::Mpi(_) => Cmd::new("mpicc").args(CFLAGS).args(page_casts(source)),
    };
    cmd.args(["-I", DIR, "-I", "ffi/include"])
        .arg(source)
        .arg("-o")
        .arg(&program)
        .arg(&lib.path)
        .args(&lib.native)
        .run()?;
    Ok(program)
}

/// How one run went.
#[derive(Debug)]
pub(crate) struct Run {
    pub(crate) counts: Counts,
    pub(crate) verdict: String,
    pub(crate) elapsed: Duration,
    pub(crate) output: String,
}

/// The command line that starts `program` on `n` ranks, each through `wrap` (words before the program).
fn command_line(cfg: &CTests, flavor: &Flavor, program: &Path, n: u32, wrap: &[String]) -> Vec<String> {
    let mut argv: Vec<String> = match flavor {
        Flavor::Launcher(launcher) => {
            let mut words = launcher.clone();
            let secs = cfg.timeout().as_secs().saturating_sub(10).max(1);
            words.extend(["-n".to_owned(), n.to_string(), "--timeout".to_owned(), secs.to_string(), "--".to_owned()]);
            words.extend(wrap.iter().cloned());
            words.extend(cfg.runner.iter().cloned());
            words
        }
        Flavor::Mpi(mpirun) => {
            let mut words = mpirun.clone();
            words.extend(["-np".to_owned(), n.to_string()]);
            words.extend(wrap.iter().cloned());
            words
        }
    };
    argv.push(program.to_string_lossy().into_owned());
    argv
}

/// Each rank's `KPCCL_NODE_ID`: `node<rank / per_node>`, set by a shell
/// around the program (mpirun cannot give ranks different values). The
/// rank comes from Open MPI's variable, MPICH's, or the launcher's.
fn split_nodes(per_node: u32) -> Vec<String> {
    let script = format!(
        "r=${{OMPI_COMM_WORLD_RANK:-${{PMI_RANK:-$KPCCL_RANK}}}}; KPCCL_NODE_ID=node$((r / {per_node})) exec \"$@\""
    );
    vec!["sh".to_owned(), "-c".to_owned(), script, "kpccl-split-nodes".to_owned()]
}

/// The reference example, unchanged, on 4 ranks split into 2 simulated
/// nodes: it passes `local_rank = rank`, so node 1's local ranks (2, 3) are
/// not 0..1, and every rank must fail, not hang, with the clear error
/// logged once, by rank 2, not by every rank. (The
/// example checks no return code and then reads `win->rank` from the NULL
/// handle it got: it dies of SIGSEGV after the error; the test wants the
/// error, a non-zero exit, and no timeout.)
fn example_split(cfg: &CTests, flavor: &Flavor, program: &Path) -> Run {
    let argv = command_line(cfg, flavor, program, 4, &split_nodes(2));
    let start = Instant::now();
    let result = bounded(&argv, &[("KPCCL_LOG", "error".to_owned())], cfg.timeout());
    let elapsed = start.elapsed();
    let want = "rank 2 says local_rank 2 but node 1 has only 2 ranks";
    match result {
        Err(e) => Run {
            counts: Counts { passed: 0, failed: 1 },
            verdict: format!("FAILED: {e}"),
            elapsed,
            output: String::new(),
        },
        Ok(done) => {
            let output = format!("$ {}\n{}{}", argv.join(" "), done.stdout, done.stderr);
            let said = done.stderr.lines().filter(|l| l.contains(want)).count();
            let (counts, verdict) = if done.timed_out {
                (Counts { passed: 0, failed: 1 }, format!("FAILED: timed out after {}", Secs(cfg.timeout())))
            } else if done.success {
                (Counts { passed: 0, failed: 1 }, "FAILED: exit 0 although the local ranks are wrong".to_owned())
            } else if said != 1 {
                (Counts { passed: 0, failed: 1 }, format!("FAILED: {want:?} logged {said} times, not once"))
            } else {
                (Counts { passed: 1, failed: 0 }, format!("logged once: {want:?}"))
            };
            Run { counts, verdict, elapsed, output }
        }
    }
}

/// The line of the hybrid example's time ratio.
const HYBRID_RATIO: &str = "time ratio hybrid / MPI_Allreduce: ";

/// An MPI example that prints `verified:` when its results are right, run
/// on `ranks.0` ranks each through `ranks.1`; with `ratio`, the line that
/// starts so must be there too, and its rest is the verdict.
fn verified(
    cfg: &CTests,
    flavor: &Flavor,
    program: &Path,
    ranks: (u32, &[String]),
    args: &[&str],
    ratio: Option<&str>,
) -> Run {
    let mut argv = command_line(cfg, flavor, program, ranks.0, ranks.1);
    argv.extend(args.iter().map(|a| (*a).to_owned()));
    let start = Instant::now();
    let result = bounded(&argv, &[], cfg.timeout());
    let elapsed = start.elapsed();
    let failed =
        |verdict: String, output: String| Run { counts: Counts { passed: 0, failed: 1 }, verdict, elapsed, output };
    match result {
        Err(e) => failed(format!("FAILED: {e}"), String::new()),
        Ok(done) => {
            let output = format!("$ {}\n{}{}", argv.join(" "), done.stdout, done.stderr);
            let said = ratio.map(|p| done.stdout.lines().find_map(|l| l.strip_prefix(p)));
            match (done.success, done.stdout.lines().any(|l| l.starts_with("verified:")), said) {
                (true, true, None) => {
                    Run { counts: Counts { passed: 1, failed: 0 }, verdict: "verified".to_owned(), elapsed, output }
                }
                (true, true, Some(Some(r))) => Run {
                    counts: Counts { passed: 1, failed: 0 },
                    verdict: format!("verified; {}{r}", ratio.unwrap_or_default()),
                    elapsed,
                    output,
                },
                _ if done.timed_out => failed(format!("FAILED: timed out after {}", Secs(cfg.timeout())), output),
                (true, true, Some(None)) => {
                    failed(format!("FAILED: verified, but it printed no {:?} line", ratio.unwrap_or_default()), output)
                }
                (true, false, _) => failed("FAILED: exit 0 but no `verified:` line".to_owned(), output),
                _ => failed(format!("FAILED: {}", done.status), output),
            }
        }
    }
}

/// An MPI example given bad arguments on 4 ranks: it must exit non-zero,
/// its usage said once (by rank 0), and leave as every rank saw the same
/// arguments (MPI_Finalize, not MPI_Abort).
fn refused(cfg: &CTests, flavor: &Flavor, program: &Path, args: &[&str]) -> Run {
    let mut argv = command_line(cfg, flavor, program, 4, &[]);
    argv.extend(args.iter().map(|a| (*a).to_owned()));
    let start = Instant::now();
    let result = bounded(&argv, &[], cfg.timeout());
    let elapsed = start.elapsed();
    let (counts, verdict, output) = match result {
        Err(e) => (Counts { passed: 0, failed: 1 }, format!("FAILED: {e}"), String::new()),
        Ok(done) => {
            let output = format!("$ {}\n{}{}", argv.join(" "), done.stdout, done.stderr);
            let usages = done.stderr.lines().filter(|l| l.starts_with("usage: ")).count();
            let verdict = if done.timed_out {
                format!("FAILED: timed out after {}", Secs(cfg.timeout()))
            } else if done.success {
                "FAILED: exit 0 although the arguments are bad".to_owned()
            } else if usages != 1 {
                format!("FAILED: the usage said {usages} times, not once")
            } else if output.contains("MPI_ABORT") {
                "FAILED: MPI_Abort for arguments every rank refuses".to_owned()
            } else {
                return Run { counts: Counts { passed: 1, failed: 0 }, verdict: "refused".to_owned(), elapsed, output };
            };
            (Counts { passed: 0, failed: 1 }, verdict, output)
        }
    };
    Run { counts, verdict, elapsed, output }
}

pub(crate) fn run_one(cfg: &CTests, flavor: &Flavor, program: &Path, n: u32) -> Run {
    let timeout = cfg.timeout();
    let argv = command_line(cfg, flavor, program, n, &[]);
    let mut envs = Vec::new();
    if env::var_os("KPCCL_LOG").is_none() {
        // The tests provoke errors on purpose; they print what they check.
        envs.push(("KPCCL_LOG", "off".to_owned()));
    }
    if cfg.under_emulation() && env::var_os("KPCCL_STRESS_ROUNDS").is_none() {
        envs.push(("KPCCL_STRESS_ROUNDS", "200".to_owned()));
    }
    let start = Instant::now();
    let result = bounded(&argv, &envs, timeout);
    let elapsed = start.elapsed();
    let (counts, verdict, output) = match result {
        Err(e) => (Counts { passed: 0, failed: 1 }, format!("FAILED: {e}"), String::new()),
        Ok(done) => {
            let output = format!("$ {}\n{}{}", argv.join(" "), done.stdout, done.stderr);
            let counts = done.stdout.lines().rev().find_map(|line| {
                let (c, lines) = Counts::sum(line);
                (lines == 1).then_some(c)
            });
            let (mut counts, mut verdict) = match counts {
                Some(c) => (c, c.to_string()),
                // The reference example prints no counts: it passes by exiting 0.
                None if done.success => (Counts { passed: 1, failed: 0 }, "exit 0".to_owned()),
                None => (Counts { passed: 0, failed: 1 }, format!("FAILED: {}", done.status)),
            };
            if done.timed_out {
                counts.failed += 1;
                verdict = format!("FAILED: timed out after {} ({verdict})", Secs(timeout));
            } else if !done.success && counts.failed == 0 {
                counts.failed = 1;
                verdict = format!("FAILED: {} ({verdict})", done.status);
            }
            (counts, verdict, output)
        }
    };
    Run { counts, verdict, elapsed, output }
}

#[derive(Debug)]
struct Done {
    success: bool,
    timed_out: bool,
    status: String,
    stdout: String,
    stderr: String,
}

/// Runs `argv` in its own process group, capturing its output; after
/// `timeout` the whole group is killed.
fn bounded(argv: &[String], envs: &[(&str, String)], timeout: Duration) -> Result<Done> {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().map_err(|e| err!("could not run `{}`: {e}", argv.join(" ")))?;
    let drain = |r: Option<Box<dyn Read + Send>>| {
        thread::spawn(move || {
            let mut all = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut all);
            }
            String::from_utf8_lossy(&all).into_owned()
        })
    };
    let out = drain(child.stdout.take().map(|s| Box::new(s) as Box<dyn Read + Send>));
    let errs = drain(child.stderr.take().map(|s| Box::new(s) as Box<dyn Read + Send>));
    let deadline = Instant::now() + timeout;
    let mut timed_out = false;
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| err!("waiting for `{}`: {e}", argv.join(" ")))? {
            break status;
        }
        if Instant::now() >= deadline {
            timed_out = true;
            // The launcher or mpirun and every rank it started: first TERM,
            // which both pass on to ranks they may have put in other groups,
            // then KILL for what is left of the group.
            let group = format!("-{}", child.id());
            let _ = Command::new("kill").args(["-TERM", "--", &group]).status();
            let grace = Instant::now() + Duration::from_secs(5);
            while Instant::now() < grace && child.try_wait().ok().flatten().is_none() {
                thread::sleep(Duration::from_millis(50));
            }
            let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
            let _ = child.kill();
            break child.wait().map_err(|e| err!("waiting for `{}`: {e}", argv.join(" ")))?;
        }
        thread::sleep(Duration::from_millis(20));
    };
    Ok(Done {
        success: status.success() && !timed_out,
        timed_out,
        status: status.to_string(),
        stdout: out.join().unwrap_or_default(),
        stderr: errs.join().unwrap_or_default(),
    })
}

/// The end of a failed run's output.
fn print_tail(output: &str) {
    let lines: Vec<&str> = output.lines().collect();
    let from = lines.len().saturating_sub(60);
    for line in &lines[from..] {
        println!("    | {line}");
    }
}

/// The `kpccl-*` names in `/dev/shm` now.
fn shm_entries() -> BTreeSet<String> {
    fs::read_dir("/dev/shm")
        .map(|entries| {
            entries
                .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
                .filter(|name| name.starts_with("kpccl-"))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A launcher that ignores its arguments and prints `out`.
    fn printing(out: &str) -> Flavor {
        Flavor::Launcher(["sh", "-c", &format!("printf '{out}'"), "fake-launcher"].map(str::to_owned).to_vec())
    }

    #[test]
    fn a_missing_ratio_line_is_named() {
        let (cfg, program) = (CTests::host(), Path::new("/bin/true"));
        let run = verified(&cfg, &printing("verified: 8 sizes\\n"), program, (8, &[]), &[], Some(HYBRID_RATIO));
        assert_eq!(run.counts, Counts { passed: 0, failed: 1 });
        assert!(run.verdict.contains(HYBRID_RATIO.trim_end()), "{}", run.verdict);
        let run = verified(&cfg, &printing("done\\n"), program, (8, &[]), &[], None);
        assert!(run.counts.failed == 1 && run.verdict.contains("no `verified:` line"), "{}", run.verdict);
        let printed = format!("verified: 8 sizes\\n{HYBRID_RATIO}0.9\\n");
        let run = verified(&cfg, &printing(&printed), program, (8, &[]), &[], Some(HYBRID_RATIO));
        assert_eq!(
            (run.counts, run.verdict.as_str()),
            (Counts { passed: 1, failed: 0 }, "verified; time ratio hybrid / MPI_Allreduce: 0.9")
        );
    }
}
