//! One rank of a multi-process scenario, run under `kpccl-run` by the
//! integration tests: `kpccl-scenario <scenario> [key=value ...]`.
//!
//! Exit codes: 0 the scenario held, 1 a check failed (printed), 2 bad usage.
// Test code: std throughout, and counts that fit any pointer width.
#![allow(missing_docs, clippy::std_instead_of_core, clippy::alloc_instead_of_core, clippy::cast_possible_truncation)]

mod args;
mod checks;
mod churn;
mod fork;
mod leave;
mod nodes;
mod pipeline;
mod polled;
mod scenarios;
mod signals;
mod wakes;

use std::process::ExitCode;

fn main() -> ExitCode {
    let mut argv = std::env::args().skip(1);
    let Some(name) = argv.next() else {
        let names = scenarios::NAMES.join("|");
        return kpccl_tests::usage_error(format_args!("usage: kpccl-scenario <{names}> [key=value ...]"));
    };
    let args = match args::Args::parse(argv) {
        Ok(a) => a,
        Err(e) => return kpccl_tests::usage_error(format_args!("kpccl-scenario: {e}")),
    };
    let oob = match kpccl_tests::launched_oob("kpccl-scenario") {
        Ok(oob) => oob,
        Err(code) => return code,
    };
    let rank = oob.rank();
    match scenarios::run(&name, oob, &args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kpccl-scenario {name}: rank {rank}: {e}");
            ExitCode::from(1)
        }
    }
}
