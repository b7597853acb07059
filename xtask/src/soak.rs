//! `cargo xtask soak [--minutes M] [-n N]`: the bounded stress run of
//! RELIABILITY.md — N ranks (default 8) for M minutes (default 10) of windows
//! of random uneven sizes made and freed, random-pairing handoffs and window
//! fences, every word verified — in a segment directory of its own that must
//! be empty afterwards.

use std::path::{Path, PathBuf};

use crate::cmd::{Cmd, Result, bail, err};
use crate::staticlib::target_dir;

pub(crate) fn run(minutes: u64, ranks: u32) -> Result<()> {
    Cmd::cargo().args(["build", "--release", "-p", "kpccl-run", "-p", "kpccl-tests", "--bins"]).run()?;
    let dir = PathBuf::from(format!("/dev/shm/kpccl-soak-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| err!("mkdir {dir:?}: {e}"))?;
    let ran = soak_cmd(&target_dir(), &dir, ranks, minutes * 60).run();
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

/// The soak job, run by the programs just built under `target`.
fn soak_cmd(target: &Path, dir: &Path, ranks: u32, seconds: u64) -> Cmd {
    let release = target.join("release");
    Cmd::new(release.join("kpccl-run"))
        .args(["-n", &ranks.to_string(), "--timeout", &(seconds + 120).to_string(), "--"])
        .arg(release.join("kpccl-scenario"))
        .args(["soak", &format!("seconds={seconds}")])
        .env("KPCCL_SHM_DIR", dir)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    #[test]
    fn runs_the_programs_cargo_built() {
        // With CARGO_TARGET_DIR elsewhere, a stale target/release must not be run.
        let cmd = super::soak_cmd(Path::new("/t/x"), Path::new("/dev/shm/s"), 3, 60).to_string();
        assert_eq!(
            cmd,
            "KPCCL_SHM_DIR=/dev/shm/s /t/x/release/kpccl-run -n 3 --timeout 180 -- \
             /t/x/release/kpccl-scenario soak seconds=60"
        );
    }
}
