//! The real workloads, each against Open MPI in the same `mpirun` job: the
//! pipeline kernel of the Parallel Research Kernels (`bench/c/pipeline.c`)
//! and the window allreduce users copy (`examples/kpccl_allreduce.c`).
//! Their command lines and result keys; the tables are in
//! [`workload_report`](crate::workload_report).

use std::path::Path;

/// The allreduce example, built and run by the suite as users would.
pub const ALLREDUCE_SOURCE: &str = "examples/kpccl_allreduce.c";

/// The pipeline's hand-off variants: the program's name for each, and the
/// report's (short: it labels a plot's legend too).
pub const PIPELINE_VARIANTS: [(&str, &str); 4] = [
    ("mpi", "MPI send/recv"),
    ("mpi-flag", "MPI flag + `MPI_Win_sync`"),
    ("kpccl-fence", "kpccl `peer_fence`"),
    ("kpccl-signal", "kpccl signal/wait"),
];

/// The pipeline run with no hand-off at all: the time of its arithmetic
/// alone, the floor under every variant (its results are wrong and not
/// checked).
pub const PIPELINE_FLOOR: &str = "unsynced";

/// The pipeline's grid (rows, columns), timed sweeps and repetitions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PipelineRun {
    /// Rows (split among the ranks).
    pub m: u32,
    /// Columns (one hand-off each).
    pub n: u32,
    /// Timed sweeps (after one warm-up sweep).
    pub sweeps: u32,
    /// Repetitions of every variant, interleaved.
    pub reps: u32,
}

/// The full run: PRK's 2000 x 2000 grid, 20 sweeps, 5 repetitions.
pub const PIPELINE_FULL: PipelineRun = PipelineRun { m: 2000, n: 2000, sweeps: 20, reps: 5 };
/// The smoke run: a small grid, enough to validate every variant.
pub const PIPELINE_SMOKE: PipelineRun = PipelineRun { m: 64, n: 64, sweeps: 2, reps: 1 };

/// The largest allreduce of a full run (16 MiB) and of a smoke run (64 KiB:
/// both of the example's algorithms run).
pub const ALLREDUCE_MAX: [u64; 2] = [16 << 20, 64 << 10];

/// Samples of each allreduce size in a full run (each about 5 ms of calls).
pub const ALLREDUCE_ROUNDS: u32 = 7;

/// The pipeline program's arguments.
#[must_use]
pub fn pipeline_args(smoke: bool, out: &Path) -> Vec<String> {
    let p = if smoke { PIPELINE_SMOKE } else { PIPELINE_FULL };
    let mut args: Vec<String> = [p.m, p.n, p.sweeps, p.reps].iter().map(u32::to_string).collect();
    args.push(out.to_string_lossy().into_owned());
    args.push(PIPELINE_VARIANTS.map(|(v, _)| v).into_iter().chain([PIPELINE_FLOOR]).collect::<Vec<_>>().join(","));
    args
}

/// The allreduce example's arguments.
#[must_use]
pub fn allreduce_args(smoke: bool, out: &Path) -> Vec<String> {
    let (max, rounds) = if smoke { (ALLREDUCE_MAX[1], 1) } else { (ALLREDUCE_MAX[0], ALLREDUCE_ROUNDS) };
    ["--max".to_owned(), max.to_string(), "--rounds".to_owned(), rounds.to_string(), "--results".to_owned()]
        .into_iter()
        .chain([out.to_string_lossy().into_owned()])
        .collect()
}

/// The vector sizes the example measures up to `max` bytes: 8, then 16, 64,
/// 256… (powers of 4), as its loop does.
#[must_use]
pub fn allreduce_sizes(max: u64) -> Vec<u64> {
    let mut sizes = Vec::new();
    let mut b = 8;
    while b <= max {
        sizes.push(b);
        b = if b == 8 { 16 } else { b * 4 };
    }
    sizes
}

/// The result key of a pipeline variant at `n` ranks (ns per sweep).
#[must_use]
pub fn pipeline_key(variant: &str, n: u32) -> String {
    format!("pipeline/{variant}/{n}")
}

/// The result key of one allreduce (`lib`: `kpccl` or `mpi`; ns per call).
#[must_use]
pub fn allreduce_key(lib: &str, n: u32, bytes: u64) -> String {
    format!("allreduce/{lib}/{n}/{bytes}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_run_from_8_bytes_to_16_mib_in_powers_of_4() {
        let s = allreduce_sizes(ALLREDUCE_MAX[0]);
        assert_eq!(s[..4], [8, 16, 64, 256]);
        assert_eq!(s.last(), Some(&(16 << 20)));
        assert_eq!(s.len(), 12);
        assert!(s.contains(&(1 << 20)));
    }

    #[test]
    fn arguments() {
        let out = Path::new("/tmp/r.tsv");
        assert_eq!(
            pipeline_args(false, out),
            ["2000", "2000", "20", "5", "/tmp/r.tsv", "mpi,mpi-flag,kpccl-fence,kpccl-signal,unsynced"]
        );
        assert_eq!(allreduce_args(true, out), ["--max", "65536", "--rounds", "1", "--results", "/tmp/r.tsv"]);
    }
}
