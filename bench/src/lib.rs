//! # kpccl-bench
//!
//! The benchmark suite, run by `cargo xtask bench`: kpccl's
//! fences, window creation and copies, measured in one run against a bare
//! flag exchange between two processes (the hardware's limit) and against
//! Open MPI, written up as `BENCHMARKS.md` and `docs/fence-latency.svg`.
//!
//! - [`reference`](mod@reference): the bare flag exchange (two processes, `fork`);
//! - [`ranks`]: the Rust-API benchmarks, one rank per process under the
//!   kpccl launcher; `bench/c/kpccl_bench.c` does the same through the C
//!   API, `bench/c/mpi_bench.c` measures Open MPI under `mpirun`;
//! - [`driver`]: builds the C programs and runs everything in rounds;
//! - [`workloads`]: the real workloads against Open MPI, the pipeline kernel
//!   of the Parallel Research Kernels (`bench/c/pipeline.c`) and the window
//!   allreduce example (`examples/kpccl_allreduce.c`);
//! - [`report`], [`workload_report`] and [`svg`]: the tables, targets and plots;
//! - [`criterion_results`]: the micro-benchmarks' estimates, from criterion's JSON.
//!
//! The criterion benchmarks of fences between threads (`benches/micro.rs`)
//! run on the heap sync area of `kpccl-testkit`.
#![allow(clippy::std_instead_of_core, clippy::alloc_instead_of_core)]

pub mod criterion_results;
pub mod driver;
pub mod measure;
pub mod ranks;
pub mod reference;
pub mod report;
pub mod results;
pub mod stats;
pub mod svg;
pub mod workload_report;
pub mod workloads;
