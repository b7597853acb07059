//! The Rust API over MPI (`kpccl-posix`'s feature `mpi`, the `mpi` crate):
//! linted, then `posix/examples/mpi_window.rs` run under `mpirun` on 4 ranks.
//! Skipped without MPI; the `mpi` crate also needs libclang (`.ci/run`
//! installs both).

use crate::{
    c_tests::{self, CTests, Flavor},
    cmd::{Cmd, Result, bail},
    report::Done,
    staticlib::target_dir,
};

const RANKS: u32 = 4;

pub(crate) fn step() -> Result<Done> {
    let cfg = CTests::host();
    let mpirun = match c_tests::mpi(&cfg) {
        Ok(words) => words,
        Err(why) => return Ok(Done::Skipped(why)),
    };
    let feature = ["-p", "kpccl-posix", "--features", "mpi"];
    Cmd::cargo().arg("clippy").args(feature).args(["--all-targets", "--", "-D", "warnings"]).run()?;
    Cmd::cargo().arg("build").args(feature).args(["--example", "mpi_window"]).run()?;
    let program = target_dir().join("debug").join("examples").join("mpi_window");
    let run = c_tests::run_one(&cfg, &Flavor::Mpi(mpirun), &program, RANKS);
    println!("mpi_window, mpirun -np {RANKS}: {}", run.verdict);
    if run.counts.failed > 0 || run.counts.passed == 0 {
        print!("{}", run.output);
        bail!("mpi_window under mpirun: {}", run.verdict);
    }
    Ok(Done::Ran(format!("mpi_window, {RANKS} ranks: {}", run.counts)))
}
