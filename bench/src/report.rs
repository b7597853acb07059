//! `BENCHMARKS.md`: the machine, the targets with their ratios,
//! every measurement, the criterion micro-benchmarks, and what was tried.

use std::fmt::Write as _;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::criterion_results::Criterion;
use crate::driver::{Context, RANKS};
use crate::results::Results;
use crate::stats::Summary;

/// The hand-written analysis, kept next to the code and included verbatim.
const WHAT_WAS_TRIED: &str = include_str!("../what-was-tried.md");

/// The machine the run measured.
#[derive(Clone, Debug, Default)]
pub struct Machine {
    /// `lscpu`'s model name.
    pub model: String,
    /// Online CPUs.
    pub cpus: u32,
    /// Cores per socket × sockets, threads per core (as lscpu says).
    pub topology: String,
    /// `Hypervisor vendor`, if any.
    pub hypervisor: Option<String>,
    /// `uname -sr`.
    pub kernel: String,
    /// The date (UTC) of the run.
    pub date: String,
}

fn field<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    text.lines().find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(':')).map(str::trim))
}

impl Machine {
    /// Asks `lscpu` and `uname`.
    #[must_use]
    pub fn probe() -> Machine {
        let lscpu = Command::new("lscpu")
            .env("LC_ALL", "C")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let model = field(&lscpu, "Model name")
            .or_else(|| {
                cpuinfo
                    .lines()
                    .find_map(|l| l.split_once(':').filter(|(k, _)| k.trim() == "model name").map(|(_, v)| v.trim()))
            })
            .unwrap_or("unknown")
            .to_owned();
        let cpus = std::thread::available_parallelism().map_or(1, |n| u32::try_from(n.get()).unwrap_or(u32::MAX));
        let topology = format!(
            "{} socket(s) × {} core(s), {} thread(s) per core",
            field(&lscpu, "Socket(s)").unwrap_or("?"),
            field(&lscpu, "Core(s) per socket").unwrap_or("?"),
            field(&lscpu, "Thread(s) per core").unwrap_or("?")
        );
        let hypervisor = field(&lscpu, "Hypervisor vendor").map(str::to_owned);
        let kernel = Command::new("uname")
            .arg("-sr")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_default();
        Machine { model, cpus, topology, hypervisor, kernel, date: today() }
    }
}

/// `YYYY-MM-DD HH:MM UTC` of now.
fn today() -> String {
    let secs = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let (y, m, d) = civil(days);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02} UTC", secs % 86_400 / 3600, secs % 3600 / 60)
}

/// Days since 1970-01-01 to (year, month, day) (Howard Hinnant's algorithm).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = u32::try_from(doy - (153 * mp + 2) / 5 + 1).unwrap_or(1);
    let m = u32::try_from(if mp < 10 { mp + 3 } else { mp - 9 }).unwrap_or(1);
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// A duration in ns, in a readable unit.
#[must_use]
pub fn ns(v: f64) -> String {
    if !v.is_finite() {
        "—".to_owned()
    } else if v < 10.0 {
        format!("{v:.2} ns")
    } else if v < 1e3 {
        format!("{v:.0} ns")
    } else if v < 1e6 {
        format!("{:.1} µs", v / 1e3)
    } else if v < 1e9 {
        format!("{:.1} ms", v / 1e6)
    } else {
        format!("{:.2} s", v / 1e9)
    }
}

fn value(v: f64, unit: &str) -> String {
    match unit {
        "ns" => ns(v),
        "%" => format!("{v:.1} %"),
        u => format!("{v:.2} {u}"),
    }
}

pub(crate) fn ratio(r: Option<f64>) -> String {
    match r {
        Some(r) if r.is_finite() => format!("{r:.2}×"),
        _ => "—".to_owned(),
    }
}

pub(crate) fn size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 => format!("{} GiB", b >> 30),
        b if b >= 1 << 20 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

/// The summary of `key`, if measured.
pub(crate) fn get(r: &Results, key: &str) -> Option<Summary> {
    r.get(key).and_then(|s| Summary::of(&s.samples))
}

pub(crate) fn median(r: &Results, key: &str) -> Option<f64> {
    get(r, key).map(|s| s.median)
}

/// The median over samples of `key`'s sample over `reference`'s taken with
/// it (the programs append both series sample by sample, so index `i` of one
/// belongs to index `i` of the other).
pub(crate) fn paired(r: &Results, key: &str, reference: &str) -> Option<f64> {
    let (a, b) = (r.get(key)?, r.get(reference)?);
    if a.samples.len() != b.samples.len() {
        return None;
    }
    let ratios: Vec<f64> = a.samples.iter().zip(&b.samples).filter(|(_, b)| **b > 0.0).map(|(a, b)| a / b).collect();
    Summary::of(&ratios).map(|s| s.median)
}

/// The least a window fence of `n` ranks can cost when they outnumber the
/// CPUs: every other rank of a CPU must run once per fence, `⌈n / cpus⌉ - 1`
/// hand-offs of the CPU, and an exchange of `ref/handoff/2` is one
/// hand-off (measured: a `sched_yield` ping-pong on one CPU costs as much
/// per hand-off as the reference per exchange: when one process gets the
/// CPU, the other's store is already there). `None` when every rank has a CPU.
fn scheduler_floor(r: &Results, n: u32) -> Option<f64> {
    let cpus = std::thread::available_parallelism().map_or(1, |c| u32::try_from(c.get()).unwrap_or(u32::MAX));
    if n <= cpus {
        return None;
    }
    median(r, "ref/handoff/2").map(|handoff| handoff * f64::from(n.div_ceil(cpus) - 1))
}

/// One row of the targets table.
#[derive(Clone, Debug)]
pub struct Target {
    /// What is wanted.
    pub what: String,
    /// Which API (Rust, C).
    pub api: &'static str,
    /// The measured median, formatted.
    pub value: String,
    /// Value / reference.
    pub vs_ref: Option<f64>,
    /// Value / Open MPI.
    pub vs_mpi: Option<f64>,
    /// The target, in words.
    pub target: String,
    /// `Some(true)` met, `Some(false)` missed, `None` not measured.
    pub met: Option<bool>,
}

/// The fence, creation and copy targets, evaluated on `r`.
#[must_use]
pub fn targets(r: &Results, sizes: &[u64]) -> Vec<Target> {
    let reference = median(r, "ref/flag/2");
    let over = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    let mut rows = Vec::new();
    for (api, tag) in [("Rust", "rust"), ("C", "c")] {
        let peer2 = median(r, &format!("{tag}/peer/2"));
        // Judged against the reference that spins with `pause`, as the fences
        // do: the one exchanged by the same two ranks right after each sample
        // where the program measured it, else the separate reference run.
        let vs_pause = paired(r, &format!("{tag}/peer/2"), &format!("{tag}/peer-ref/2"))
            .or_else(|| over(peer2, median(r, "ref/flag-pause/2")));
        rows.push(Target {
            what: "`peer_fence`, 2 ranks".to_owned(),
            api,
            value: peer2.map_or_else(|| "—".to_owned(), ns),
            vs_ref: over(peer2, reference),
            vs_mpi: over(peer2, median(r, "mpi/pscw/2")),
            target: format!(
                "≤ 1.15 × reference with `pause`{}",
                vs_pause.map_or_else(String::new, |x| format!(" (measured {x:.2}×)"))
            ),
            met: vs_pause.map(|x| x <= 1.15),
        });
        for n in RANKS {
            let f = median(r, &format!("{tag}/fence/{n}"));
            let vs_ref = over(f, reference);
            let vs_mpi = over(f, median(r, &format!("mpi/winfence/{n}")));
            let (target, met) = if n == 2 {
                (
                    "≤ 1.5 × reference and ≤ 0.5 × `MPI_Win_fence`".to_owned(),
                    vs_ref.zip(vs_mpi).map(|(a, b)| a <= 1.5 && b <= 0.5),
                )
            } else {
                let floor = scheduler_floor(r, n).map_or_else(String::new, |f| {
                    let vs = over(Some(f), median(r, &format!("mpi/winfence/{n}")));
                    format!(
                        " (the scheduler's floor: {}{})",
                        ns(f),
                        vs.map_or_else(String::new, |x| format!(" = {x:.2}×"))
                    )
                });
                (format!("≤ 0.5 × `MPI_Win_fence`{floor}"), vs_mpi.map(|b| b <= 0.5))
            };
            let over_cpus = if n > 2 { format!(" ({n} ranks on 2 cores)") } else { String::new() };
            let over_cpus = if n == 8 { over_cpus } else { String::new() };
            rows.push(Target {
                what: format!("`fence()`, {n} ranks{over_cpus}"),
                api,
                value: f.map_or_else(|| "—".to_owned(), ns),
                vs_ref,
                vs_mpi,
                target,
                met,
            });
        }
        let p8 = median(r, &format!("{tag}/peer/8"));
        let vs_mpi = over(p8, median(r, "mpi/pscw/8"));
        rows.push(Target {
            what: "`peer_fence`, 8 ranks on 2 cores (4 pairs)".to_owned(),
            api,
            value: p8.map_or_else(|| "—".to_owned(), ns),
            vs_ref: over(p8, reference),
            vs_mpi,
            target: "≤ 0.5 × PSCW epoch".to_owned(),
            met: vs_mpi.map(|b| b <= 0.5),
        });
    }
    for n in RANKS {
        let idle = median(r, &format!("rust/idle/{n}"));
        rows.push(Target {
            what: format!("CPU use of a rank waiting 200 ms in `fence()`, {n} ranks"),
            api: "Rust",
            value: idle.map_or_else(|| "—".to_owned(), |v| format!("{v:.1} %")),
            vs_ref: None,
            vs_mpi: over(idle, median(r, &format!("mpi/idle/{n}"))),
            target: "sleeps: ≤ 5 % of a core".to_owned(),
            met: idle.map(|v| v <= 5.0),
        });
    }
    for (api, tag) in [
        ("C, MPI OOB", "kpccl-mpi"),
        ("C, MPI OOB, `KPCCL_RESERVE=lazy`", "kpccl-mpi-lazy"),
        ("Rust, launcher OOB", "rust"),
    ] {
        let mut worst: Option<(f64, u32, u64)> = None;
        let mut all_measured = true;
        for n in RANKS {
            for &s in sizes {
                match over(median(r, &format!("{tag}/create/{n}/{s}")), median(r, &format!("mpi/create/{n}/{s}"))) {
                    Some(x) if worst.is_none_or(|(w, _, _)| x > w) => worst = Some((x, n, s)),
                    Some(_) => {}
                    None => all_measured = false,
                }
            }
        }
        rows.push(Target {
            what: "window creation + teardown, every size and rank count".to_owned(),
            api: if tag == "rust" { "Rust" } else { "C" },
            value: worst.map_or_else(
                || "—".to_owned(),
                |(_, n, s)| {
                    format!(
                        "{api}; worst: {n} ranks, {}: {}",
                        size(s),
                        ns(median(r, &format!("{tag}/create/{n}/{s}")).unwrap_or(f64::NAN))
                    )
                },
            ),
            vs_ref: None,
            vs_mpi: worst.map(|w| w.0),
            target: "≤ 1 × `MPI_Win_allocate_shared` + `MPI_Win_free`".to_owned(),
            met: worst.filter(|_| all_measured).map(|w| w.0 <= 1.0),
        });
    }
    let write = median(r, "rust/copy/window-write");
    let vs_memcpy = over(write, median(r, "rust/copy/memcpy"));
    rows.push(Target {
        what: "copy 8 MiB into a peer's segment (`Window::write`)".to_owned(),
        api: "Rust",
        value: write
            .map_or_else(|| "—".to_owned(), |v| format!("{v:.2} GB/s ({:.2}× memcpy)", vs_memcpy.unwrap_or(f64::NAN))),
        vs_ref: None,
        vs_mpi: None,
        target: "≥ 0.95 × local `memcpy`".to_owned(),
        met: vs_memcpy.map(|x| x >= 0.95),
    });
    rows
}

/// The plots' paths as the report links them, where written.
#[derive(Clone, Copy, Debug, Default)]
pub struct Links<'a> {
    /// Fence latency vs rank count.
    pub fences: Option<&'a str>,
    /// The pipeline kernel's time vs rank count.
    pub pipeline: Option<&'a str>,
    /// The allreduce's time vs size.
    pub allreduce: Option<&'a str>,
}

/// The whole report.
#[must_use]
pub fn render(ctx: &Context, m: &Machine, crit: &[Criterion], svgs: &Links<'_>, smoke: bool) -> String {
    let svg = svgs.fences;
    let r = &ctx.results;
    let mut s = String::new();
    let w = &mut s;
    let _ = writeln!(w, "# Benchmarks\n");
    let _ = writeln!(
        w,
        "Generated by `cargo xtask bench` ({}); numbers are medians over repeated samples, with the \
         10th–90th percentile spread, all measured in the same run. Ratios compare medians. \
         The section *What was tried* is written by hand (`bench/what-was-tried.md`).\n",
        if smoke { "**smoke mode: a few iterations, the numbers mean nothing**" } else { "full run" }
    );
    let _ = writeln!(w, "## Machine and run\n");
    let _ = writeln!(w, "| | |\n|---|---|");
    let _ = writeln!(w, "| CPU | {} |", m.model);
    let _ = writeln!(w, "| CPUs | {} ({}) |", m.cpus, m.topology);
    if let Some(h) = &m.hypervisor {
        let _ = writeln!(w, "| Hypervisor | {h} (a virtual machine: vCPUs may be descheduled by the host) |");
    }
    let _ = writeln!(w, "| Kernel | {} |", m.kernel);
    let _ = writeln!(w, "| Date | {} |", m.date);
    let _ = writeln!(w, "| Duration of the measurements | {:.0} s |", ctx.elapsed.as_secs_f64());
    let _ = writeln!(w, "| Load average (start → end) | {} → {} |", ctx.load.0, ctx.load.1);
    if let Some(f) = ctx.foreign_cpu {
        let warn = if f > 5.0 { " — **other processes were busy: expect noise, mostly in the tails**" } else { "" };
        let _ = writeln!(w, "| CPU used by other processes during the run | {f:.0} % of the machine{warn} |");
    }
    match (&ctx.mpi_version, &ctx.mpi_command) {
        (Some(v), Some(c)) => {
            let _ = writeln!(w, "| Open MPI | {v}: `{c}` |");
        }
        _ => {
            let _ = writeln!(w, "| Open MPI | not measured |");
        }
    }
    let reference = get(r, "ref/flag/2");
    let _ = writeln!(
        w,
        "| Reference (bare flag exchange, 2 processes) | {} |",
        reference.map_or_else(
            || "not measured".to_owned(),
            |s| format!("{} (p10–p90 {} – {})", ns(s.median), ns(s.p10), ns(s.p90))
        )
    );
    for n in &ctx.notes {
        let _ = writeln!(w, "\n> {n}");
    }

    let _ = writeln!(w, "\n## Targets\n");
    let _ = writeln!(w, "| Target | API | Median | × reference | × Open MPI | Wanted | Met? |");
    let _ = writeln!(w, "|---|---|---|---|---|---|---|");
    for t in targets(r, &ctx.sizes) {
        let met = match t.met {
            _ if smoke => "— (smoke run)",
            Some(true) => "**met**",
            Some(false) => "**missed**",
            None => "not measured",
        };
        let _ = writeln!(
            w,
            "| {} | {} | {} | {} | {} | {} | {met} |",
            t.what,
            t.api,
            t.value,
            ratio(t.vs_ref),
            ratio(t.vs_mpi),
            t.target
        );
    }
    let _ = writeln!(
        w,
        "\nThe Open MPI counterpart of `peer_fence` is a PSCW epoch with the same partner; of `fence()`, \
         `MPI_Win_fence` at the same rank count; of the CPU use, the same 200 ms late arrival at an \
         `MPI_Win_fence`."
    );
    if let Some(svg) = svg {
        let _ =
            writeln!(w, "\n![Fence latency vs rank count]({svg})\n\n*Fence latency vs rank count* ([{svg}]({svg})).");
    }

    fence_tables(w, r);
    creation_table(w, r, &ctx.sizes);
    copy_table(w, r);
    crate::workload_report::section(w, r, smoke, [svgs.pipeline, svgs.allreduce]);
    criterion_table(w, crit);
    variants_table(w, r);
    let _ = writeln!(w, "\n{}", WHAT_WAS_TRIED.trim_end());
    let _ = writeln!(w, "\n{}", METHOD.trim_end());
    s
}

const METHOD: &str = "## Method

- **Latency** (`bench/src/measure.rs`; `bench/c/bench.h` is the same protocol in C, for the C
  API and MPI): a warm-up in doubling chunks (up to 2000 operations or 50 ms), then samples of
  k operations, k chosen from the previous chunk so that a sample lasts about 10 ms, until 9
  samples or 300 ms. Every decision is rank 0's, handed to all ranks between chunks (outside
  the timed region): fences must match. A sample is the time per operation, averaged over the
  ranks that take part.
- **Rounds**: every fence program runs once per round, 4 rounds, so that a disturbance of the
  machine (other processes, the host moving the VM's vCPUs) hits all of them alike; samples of
  all rounds are pooled. The reference runs at both ends of each round. Before each round the
  driver waits (at most a minute in all) until other processes leave the machine ≤ 10 % busy.
- **Reference** (`bench/src/reference.rs`): two processes (`fork`) share a memfd page; each
  stores `epoch + 1` to its own 128-byte-aligned word with Release and spins with Acquire
  loads (no spin hint) until the other's word reaches the same epoch — the pattern of a peer
  fence with nothing else. `ref/flag-pause` is the same with a `pause` in the spin loop.
  `ref/handoff` pins both processes to one CPU and yields between loads: one hand-off of the
  CPU per exchange, the floor of any synchronisation of ranks that outnumber the CPUs (a window
  fence of `n` ranks on `c` CPUs needs `⌈n / c⌉ − 1` hand-offs per CPU: the targets quote that
  floor).
- **Paired reference** (`*/peer-ref`): with 2 ranks the `peer_fence` programs (Rust and C)
  alternate each sample of fences with as many `pause` exchanges between the same two processes
  (not with more ranks than CPUs: their spinning would starve the other pairs), on the first
  word of each rank's segment. The 2-rank `peer_fence` target is judged on the median of the
  per-sample ratios: it does not move when the host places the two vCPUs differently between
  runs, which moves the separate reference by up to 5×.
- **Ping-pong**: both ranks of a pair call the fence in a loop; the time is per fence.
  4 and 8 ranks run 2 and 4 disjoint pairs at once; `fence()` runs over every rank.
- **kpccl** ranks are separate processes started by the kpccl launcher (no MPI, no binding);
  the C programs link `libkpccl.so`. Open MPI runs under `mpirun` with the flags shown above
  (shared memory only, no binding either).
- **Window creation**: the ranks' mean time from a barrier to the end of the collective free, for
  windows of the given total size (each rank owns size / N); 30 repetitions up to 1 MiB, 6 at
  64 MiB, 3 at 1 GiB.
- **Copy**: rank 0 copies 8 MiB from a private buffer into rank 1's segment
  (`Window::write`), and the same buffer into another private buffer (`copy_from_slice`,
  i.e. `memcpy`), alternating, 20 copies per sample.
- **Idle CPU**: rank 0 sleeps 200 ms before a window fence; every other rank's CPU time over
  its wait (`CLOCK_PROCESS_CPUTIME_ID`) divided by the wait.";

fn fence_tables(w: &mut String, r: &Results) {
    let reference = median(r, "ref/flag/2");
    let _ = writeln!(w, "\n## Fence latency (all measurements)\n");
    let _ = writeln!(w, "| Measurement | Ranks | Median | p10 – p90 | Samples | × reference |");
    let _ = writeln!(w, "|---|---|---|---|---|---|");
    let rows: &[(&str, &str)] = &[
        ("ref/flag", "reference: bare flag exchange"),
        ("ref/flag-pause", "reference with `pause` in the spin"),
        ("ref/handoff", "reference: hand-off through `sched_yield`, both on one CPU"),
        ("rust/peer", "kpccl `peer_fence` (Rust)"),
        ("rust/peer-ref", "the same ranks' `pause` exchange, paired with it"),
        ("c/peer", "kpccl `kpccl_shm_peer_fence` (C)"),
        ("c/peer-ref", "the same ranks' `pause` exchange, paired with it"),
        ("mpi/pscw", "Open MPI PSCW epoch"),
        ("rust/fence", "kpccl `fence()` (Rust)"),
        ("c/fence", "kpccl `kpccl_shm_win_fence` (C)"),
        ("mpi/winfence", "Open MPI `MPI_Win_fence`"),
        ("mpi/barrier", "Open MPI `MPI_Barrier`"),
        ("rust/idle", "kpccl: CPU use while waiting 200 ms"),
        ("mpi/idle", "Open MPI: CPU use while waiting 200 ms"),
    ];
    for (prefix, name) in rows {
        for n in RANKS {
            let key = format!("{prefix}/{n}");
            let Some(series) = r.get(&key) else { continue };
            let Some(s) = Summary::of(&series.samples) else { continue };
            let vs = if series.unit == "ns" { ratio(reference.map(|x| s.median / x)) } else { "—".to_owned() };
            let _ = writeln!(
                w,
                "| {name} | {n} | {} | {} – {} | {} | {vs} |",
                value(s.median, &series.unit),
                value(s.p10, &series.unit),
                value(s.p90, &series.unit),
                s.n
            );
        }
    }
}

pub(crate) fn spread_cell(s: Option<Summary>) -> String {
    s.map_or_else(|| "—".to_owned(), |s| format!("{} ({} – {})", ns(s.median), ns(s.p10), ns(s.p90)))
}

fn creation_table(w: &mut String, r: &Results, sizes: &[u64]) {
    let _ = writeln!(w, "\n## Window creation + teardown\n");
    let _ = writeln!(
        w,
        "Median (p10 – p90) of allocation + free, for windows of the given total size (each rank owns \
         size / N). *kpccl C, MPI OOB*: `kpccl_shm_win_alloc` / `kpccl_shm_win_free` in the same MPI \
         program, with out-of-band callbacks over `MPI_Allgather` / `MPI_Barrier` (as KPCCL programs \
         usually have them), interleaved with the MPI calls: the same collectives for both libraries. \
         *kpccl C, lazy*: the same with `KPCCL_RESERVE=lazy` (memory allocated at first touch, as MPI \
         does, after a free-space check; the default reserves it at creation so that a full directory is \
         an error then rather than a SIGBUS later). \
         *kpccl Rust, launcher OOB*: the Rust API under the kpccl launcher, whose collectives go through \
         its hub over Unix sockets. *+ touch*: every rank also writes one byte per page of its own \
         segment before the free, i.e. the cost of memory that is used.\n"
    );
    for (what, title) in [("create", "create + free"), ("create-touch", "create + touch + free")] {
        let _ = writeln!(
            w,
            "| Ranks | Size | Open MPI {title} | kpccl C, MPI OOB | × MPI | kpccl C, lazy | × MPI | kpccl Rust, launcher OOB | × MPI |"
        );
        let _ = writeln!(w, "|---|---|---|---|---|---|---|---|---|");
        for n in RANKS {
            for &sz in sizes {
                let m = get(r, &format!("mpi/{what}/{n}/{sz}"));
                let kc = get(r, &format!("kpccl-mpi/{what}/{n}/{sz}"));
                let kl = get(r, &format!("kpccl-mpi-lazy/{what}/{n}/{sz}"));
                let kr = get(r, &format!("rust/{what}/{n}/{sz}"));
                if m.is_none() && kc.is_none() && kl.is_none() && kr.is_none() {
                    continue;
                }
                let rr = |a: Option<Summary>| ratio(a.zip(m).map(|(a, b)| a.median / b.median));
                let _ = writeln!(
                    w,
                    "| {n} | {} | {} | {} | {} | {} | {} | {} | {} |",
                    size(sz),
                    spread_cell(m),
                    spread_cell(kc),
                    rr(kc),
                    spread_cell(kl),
                    rr(kl),
                    spread_cell(kr),
                    rr(kr)
                );
            }
        }
        let _ = writeln!(w);
    }
    let gathers: Vec<String> = RANKS
        .iter()
        .filter_map(|n| get(r, &format!("rust/oob-allgather/{n}")).map(|s| format!("{n} ranks: {}", ns(s.median))))
        .collect();
    if !gathers.is_empty() {
        let _ = writeln!(
            w,
            "\nA window creation makes 3 out-of-band allgathers; one allgather of 64 bytes through the kpccl \
             launcher's hub (the OOB the benchmark uses) takes (median) {}.",
            gathers.join(", ")
        );
    }
}

fn copy_table(w: &mut String, r: &Results) {
    let Some(memcpy) = get(r, "rust/copy/memcpy") else { return };
    let _ = writeln!(w, "\n## Copy bandwidth (8 MiB)\n");
    let _ = writeln!(w, "| Copy | Median | p10 – p90 | × memcpy |");
    let _ = writeln!(w, "|---|---|---|---|");
    for (key, name) in [
        ("rust/copy/memcpy", "local `memcpy` (private → private)"),
        ("rust/copy/window-write", "`Window::write` (private → peer's segment)"),
        ("rust/copy/window-read", "`Window::read` (peer's segment → private)"),
    ] {
        if let Some(s) = get(r, key) {
            let _ = writeln!(
                w,
                "| {name} | {:.2} GB/s | {:.2} – {:.2} | {:.2}× |",
                s.median,
                s.p10,
                s.p90,
                s.median / memcpy.median
            );
        }
    }
}

fn criterion_table(w: &mut String, crit: &[Criterion]) {
    if crit.is_empty() {
        return;
    }
    let _ = writeln!(w, "\n## In-process micro-benchmarks (criterion)\n");
    let _ = writeln!(
        w,
        "`cargo bench -p kpccl-bench --bench micro` (`bench/benches/micro.rs`): criterion's estimate \
         with its confidence interval.\n"
    );
    let _ = writeln!(w, "| Benchmark | Estimate | Interval |");
    let _ = writeln!(w, "|---|---|---|");
    for c in crit {
        let _ = writeln!(w, "| `{}` | {} | {} – {} |", c.id, ns(c.ns[1]), ns(c.ns[0]), ns(c.ns[2]));
    }
}

/// The key of the default measurement a variant's key (`rust-aligned/fence/2`,
/// `c-bound/peer/2`) is compared with (`rust/fence/2`, `c/peer/2`); `None`
/// for a key that is no variant.
fn default_of(key: &str) -> Option<String> {
    let (tag, rest) = key.split_once('/')?;
    let (api, _) = tag.split_once('-')?;
    ["rust", "c"].contains(&api).then(|| format!("{api}/{rest}"))
}

fn variants_table(w: &mut String, r: &Results) {
    let variants: Vec<(&String, String, Summary)> =
        r.iter().filter_map(|(k, s)| Some((k, default_of(k)?, Summary::of(&s.samples)?))).collect();
    if variants.is_empty() {
        return;
    }
    let _ = writeln!(w, "\n## Design variants measured in this run\n");
    let _ = writeln!(
        w,
        "Each beside its default of the same run: `rust-*` are `--variant`s (`KPCCL_*` settings), \
         `c-bound` the C fences with the ranks bound one per CPU (`kpccl-run --bind-to cpu`, as \
         `mpirun` binds a small job).\n"
    );
    let _ = writeln!(w, "| Variant / measurement / ranks | Median | p10 – p90 | Default | Variant / default |");
    let _ = writeln!(w, "|---|---|---|---|---|");
    for (k, default_key, s) in variants {
        let unit = r.get(k).map_or("ns", |x| x.unit.as_str());
        let d = median(r, &default_key);
        let _ = writeln!(
            w,
            "| `{k}` | {} | {} – {} | {} | {} |",
            value(s.median, unit),
            value(s.p10, unit),
            value(s.p90, unit),
            d.map_or_else(|| "—".to_owned(), |d| value(d, unit)),
            ratio(d.map(|d| s.median / d))
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paired_ratios_pair_samples_by_index() {
        let mut r = Results::new();
        let series = |v: &[f64]| crate::results::Series { unit: "ns".to_owned(), samples: v.to_vec() };
        // Placement moved between samples: both series move together, the ratio does not.
        r.insert("c/peer/2".to_owned(), series(&[110.0, 330.0, 66.0]));
        r.insert("c/peer-ref/2".to_owned(), series(&[100.0, 300.0, 60.0]));
        let ratio = paired(&r, "c/peer/2", "c/peer-ref/2").unwrap();
        assert!((ratio - 1.1).abs() < 1e-9, "{ratio}");
        // Unaligned series are not paired.
        r.insert("c/peer-ref/2".to_owned(), series(&[100.0, 300.0]));
        assert_eq!(paired(&r, "c/peer/2", "c/peer-ref/2"), None);
        assert_eq!(paired(&r, "rust/peer/2", "rust/peer-ref/2"), None);
    }

    #[test]
    fn variants_are_compared_with_their_default() {
        assert_eq!(default_of("rust-aligned/fence/2").as_deref(), Some("rust/fence/2"));
        assert_eq!(default_of("c-bound/peer-ref/2").as_deref(), Some("c/peer-ref/2"));
        assert_eq!(default_of("rust/fence/2"), None);
        assert_eq!(default_of("ref/flag-pause/2"), None);
        assert_eq!(default_of("mpi-x/fence/2"), None);
    }

    #[test]
    fn dates() {
        assert_eq!(civil(0), (1970, 1, 1));
        assert_eq!(civil(19_723), (2024, 1, 1));
        assert_eq!(civil(20_000), (2024, 10, 4));
    }

    #[test]
    fn units() {
        assert_eq!(ns(123.4), "123 ns");
        assert_eq!(ns(12_345.0), "12.3 µs");
        assert_eq!(size(1 << 30), "1 GiB");
        assert_eq!(size(4096), "4 KiB");
        assert_eq!(size(8), "8 B");
    }
}
