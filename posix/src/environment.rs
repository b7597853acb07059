//! The environment variables kpccl reads, in one table. The README's
//! configuration table is generated from it and from the device crate's
//! (`kpccl_ascend::ENVIRONMENT`); a test checks that the README is current.

/// One environment variable: its name, what it does, and its default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EnvVar {
    /// The variable's name.
    pub name: &'static str,
    /// What it does (Markdown).
    pub meaning: &'static str,
    /// Its default (Markdown).
    pub default: &'static str,
}

/// The variables of the host library: communicators, windows, and the
/// rank's side of the launcher.
pub const ENVIRONMENT: &[EnvVar] = &[
    EnvVar { name: "KPCCL_SHM_DIR", meaning: "directory for window segments (a tmpfs)", default: "`/dev/shm`" },
    EnvVar {
        name: "KPCCL_LAYOUT",
        meaning: "`contiguous` (MPI-like) or `aligned` (page per rank, NUMA first touch)",
        default: "`contiguous`",
    },
    EnvVar {
        name: "KPCCL_TIMEOUT_MS",
        meaning: "fence waits give up after this long, and so do the out-of-band collectives of `kpccl-run` (communicator and window creation) when it is shorter than `KPCCL_OOB_TIMEOUT_MS`; `0` = never (a dead peer still ends them)",
        default: "`0`",
    },
    EnvVar {
        name: "KPCCL_OOB_TIMEOUT_MS",
        meaning: "under `kpccl-run`: how long a collective waits for the other ranks; then it fails on every rank, naming the rank that did not come (under MPI the callbacks block: see [Reliability](#reliability))",
        default: "`60000`",
    },
    EnvVar {
        name: "KPCCL_SPIN",
        meaning: "polls with a spin hint before yielding",
        default: "64; when ranks outnumber CPUs, 0 in fences (one-way waits keep 64)",
    },
    EnvVar {
        name: "KPCCL_YIELD_US",
        meaning: "after spinning, a waiting rank keeps yielding its CPU this long before it sleeps (a partner waiting for the CPU gets it, and a hand-off needs no wake-up call; but beside CPU-bound processes a yielder waits out their time slice, where a woken sleeper would preempt them)",
        default: "`0`: a few yields, then sleep",
    },
    EnvVar {
        name: "KPCCL_BARRIER",
        meaning: "window fence: `dissemination` (⌈log2 n⌉ pairwise rounds), `flat` (one shared counter, one hand-off per rank: for more ranks than CPUs) or `auto`; the window runs flat if any rank asks",
        default: "`auto`: flat when ranks outnumber CPUs",
    },
    EnvVar {
        name: "KPCCL_RESERVE",
        meaning: "`eager`: a window's memory is allocated at creation (a full `/dev/shm` is an error then, never a `SIGBUS`); `lazy`: at first touch, like MPI, after a free-space check (faster creation of large windows)",
        default: "`eager`",
    },
    EnvVar {
        name: "KPCCL_LIVENESS_MS",
        meaning: "how often a sleeping waiter checks that its peer lives",
        default: "`50`",
    },
    EnvVar { name: "KPCCL_LOG", meaning: "`off`, `error`, `warn`, `info`, `debug`", default: "`warn`" },
    EnvVar {
        name: "KPCCL_STATS",
        meaning: "`1`: each window counts its fences, peer fences, signals, waits, and the waits that slept and for how long; printed on stderr at free, read in Rust with `Window::stats()`; `0`: off, with no counters and nothing added to the fence path but a test; another value fails communicator creation",
        default: "off",
    },
    EnvVar {
        name: "KPCCL_LIGHT_WAKES",
        meaning: "`1`: in a window whose ranks all ask for it, have no more ranks than CPUs and can register for `membarrier`'s global expedited barrier, a signal orders its look at a sleeping partner's flag with a compiler fence instead of a full one (30–60 ns less per fence on an Intel Xeon, nothing on an AMD EPYC), and each wait that ends asleep pays a `membarrier` call instead, again each time it goes back to sleep (an interrupt to every CPU running a process registered for it, this job's or another's: about 10 µs when they run); for latency-bound fence loops whose waits rarely sleep. `0`: full fences",
        default: "`0`",
    },
    EnvVar {
        name: "KPCCL_NODE_ID",
        meaning: "the node this process runs on, for kpccl: ranks with equal ids share memory (to simulate nodes on one machine; each simulated node keeps its segments in `KPCCL_SHM_DIR/kpccl-node-<uid>-<digest>/`, removed when empty)",
        default: "boot id + hostname + pid namespace",
    },
    EnvVar {
        name: "KPCCL_RUNNER",
        meaning: "`kpccl-run`: words put in front of the program, split on white space (to run another architecture's ranks, e.g. `qemu-aarch64 -L /usr/aarch64-linux-gnu`; set empty for none)",
        default: "none (a `kpccl-run` built for aarch64: `CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER`)",
    },
];

/// The Markdown table of `vars`, as the README shows it.
pub fn markdown_table<'a>(vars: impl IntoIterator<Item = &'a EnvVar>) -> String {
    let mut table = String::from("| variable | meaning | default |\n|---|---|---|\n");
    for v in vars {
        table.push_str(&format!("| `{}` | {} | {} |\n", v.name, v.meaning, v.default));
    }
    table
}
