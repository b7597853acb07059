//! `cargo xtask soak [--minutes M] [-n N]`: the bounded stress run of
//! RELIABILITY.md — N ranks (default 8) for M minutes (default 10) of windows
//! of random uneven sizes made and freed, random-pairing handoffs and window
//! fences, every word verified — in a segment directory of its own that must
//! be empty afterwards.

use std::path::PathBuf;

use crate::cmd::{Cmd, Result, bail, err};

pub(crate) fn run(minutes: u64, ranks: u32) -> Result<()> {
    Cmd::cargo().args(["build", "--release", "-p", "kpccl-run", "-p", "kpccl-tests", "--bins"]).run()?;
    let dir = PathBuf::from(format!("/dev/shm/kpccl-soak-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| err!("mkdir {dir:?}: {e}"))?;
    let seconds = minutes * 60;
    let ran = Cmd::new("target/release/kpccl-run")
        .args(["-n", &ranks.to_string(), "--timeout", &(seconds + 120).to_string(), "--"])
        .args(["target/release/kpccl-scenario", "soak", &format!("seconds={seconds}")])
        .env("KPCCL_SHM_DIR", &dir)
        .run();
    let left: Vec<String> = std::fs::read_dir(&dir)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    ran?;
    if !left.is_empty() {
        bail!("the soak left segments behind: {left:?}");
    }
    println!("soak: {ranks} ranks, {minutes} min: zero verification errors, no segment left");
    Ok(())
}
