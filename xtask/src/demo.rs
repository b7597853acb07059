//! `cargo xtask demo`: the main job — N ranks without MPI share a window,
//! hand data around with fences, verify it and print a summary.

use crate::cmd::{Cmd, Result};

pub(crate) fn run(ranks: u32, rest: &[String]) -> Result<()> {
    Cmd::cargo()
        .args(["run", "--release", "-p", "kpccl-run", "--example", "demo", "--", "-n"])
        .arg(ranks.to_string())
        .args(rest)
        .run()
}
