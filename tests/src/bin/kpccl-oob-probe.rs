//! One rank of the launcher's own tests: `kpccl-oob-probe [mode]` under
//! `kpccl-run` (or `Launch`) exercises `RunOob` alone, without windows.
//!
//! Modes:
//! - `ok` (default): allgather of each rank's rank and a payload, barrier,
//!   an empty allgather, a second barrier; every rank checks every byte.
//! - `die-early`: rank 1 exits (code 0) before the allgather; every other
//!   rank must get the "rank lost" `OobError`.
//! - `killed`: rank 1 aborts (`SIGABRT`) before the allgather; every other
//!   rank must get the "rank lost" `OobError`, and hear from the launcher
//!   that rank 1 died of signal 6.
//! - `mismatch`: rank r sends r + 1 bytes; every rank must get the
//!   "mismatch" `OobError`.
//! - `hang`: rank 0 sleeps for a minute before the allgather (for the
//!   launcher's timeout).
//! - `wrapper`: rank 0 starts a program (`sleep 60`), writes its pid to the
//!   file `PROBE_PIDFILE` names, and waits for it, as a wrapper script does
//!   (for the launcher's killing of a rank's whole tree).
//! - `affinity`: as `ok`, after writing the CPUs the rank may run on
//!   (`3` or `0,1`) to the file `affinity-<rank>` in the directory
//!   `PROBE_DIR` names (for the launcher's binding).
//!
//! Exit codes: 0 the mode's expectations held with no error; 3 the expected
//! `OobError` arrived (printed on stdout); 4 another `OobError` arrived;
//! 1 a check failed; 2 usage, or not under the launcher.
#![allow(clippy::std_instead_of_core)]

use std::process::ExitCode;
use std::time::Duration;

use kpccl_posix::launch::{Ending, RunOob, code};
use kpccl_posix::{Oob, OobError};

const PAYLOAD: usize = 28;

fn main() -> ExitCode {
    let mode = std::env::args().nth(1).unwrap_or_else(|| "ok".into());
    if !["ok", "die-early", "killed", "mismatch", "hang", "wrapper", "affinity"].contains(&mode.as_str()) {
        return kpccl_tests::usage_error("usage: kpccl-oob-probe [ok|die-early|killed|mismatch|hang|wrapper|affinity]");
    }
    let oob = match kpccl_tests::launched_oob("kpccl-oob-probe") {
        Ok(oob) => oob,
        Err(code) => return code,
    };
    let rank = oob.rank();
    let expected = match mode.as_str() {
        "die-early" if rank == 1 => {
            println!("rank 1: exiting before the allgather");
            return ExitCode::SUCCESS;
        }
        "killed" if rank == 1 => std::process::abort(),
        "hang" if rank == 0 => {
            std::thread::sleep(Duration::from_secs(60));
            None
        }
        "wrapper" if rank == 0 => {
            let mut program = std::process::Command::new("sleep").arg("60").spawn().expect("sleep starts");
            if let Some(file) = std::env::var_os("PROBE_PIDFILE") {
                std::fs::write(file, program.id().to_string()).expect("the pid file is written");
            }
            let _ = program.wait();
            None
        }
        "affinity" => {
            let cpus: Vec<String> =
                kpccl_tests::allowed_cpus().expect("the affinity is readable").iter().map(usize::to_string).collect();
            let dir = std::env::var_os("PROBE_DIR").expect("PROBE_DIR is set");
            let file = std::path::Path::new(&dir).join(format!("affinity-{rank}"));
            std::fs::write(file, cpus.join(",")).expect("the affinity file is written");
            None
        }
        "die-early" | "killed" => Some(code::RANK_LOST),
        "mismatch" => Some(code::MISMATCH),
        _ => None,
    };
    match (probe(&oob, &mode), expected) {
        (Ok(Ok(())), None) => ExitCode::SUCCESS,
        (Ok(Ok(())), Some(c)) => {
            eprintln!("rank {rank}: {mode}: every collective succeeded, expected error {c}");
            ExitCode::from(1)
        }
        (Ok(Err(check)), _) => {
            eprintln!("rank {rank}: {mode}: {check}");
            ExitCode::from(1)
        }
        (Err(e), want) => {
            println!("rank {rank}: {mode}: {e}: {}", code::describe(e.code));
            let departure = oob.departure();
            if mode == "killed" && departure.is_none_or(|d| (d.rank, d.ending) != (1, Ending::Signal(libc::SIGABRT))) {
                eprintln!("rank {rank}: killed: the launcher should name rank 1 and SIGABRT, said {departure:?}");
                return ExitCode::from(1);
            }
            if let Some(d) = departure {
                println!("rank {rank}: {mode}: {}", d.during("the probe"));
            }
            if want == Some(e.code) { ExitCode::from(3) } else { ExitCode::from(4) }
        }
    }
}

/// The collectives of one mode: an `OobError`, or the outcome of the checks.
fn probe(oob: &RunOob, mode: &str) -> Result<Result<(), String>, OobError> {
    let (rank, n) = (oob.rank(), oob.nranks() as usize);
    let mut mine = rank.to_le_bytes().to_vec();
    mine.extend((0..PAYLOAD).map(|i| byte(rank, i)));
    if mode == "mismatch" {
        mine.truncate(rank as usize + 1);
    }
    let mut all = vec![0u8; mine.len() * n];
    oob.allgather(&mine, &mut all)?;
    oob.barrier()?;
    oob.allgather(&[], &mut [])?;
    oob.barrier()?;
    for (r, got) in (0..).zip(all.chunks_exact(mine.len())) {
        if got[..4] != u32::to_le_bytes(r) {
            return Ok(Err(format!("slot {r} holds rank {:?}", &got[..4])));
        }
        if let Some(i) = (0..PAYLOAD).find(|&i| got[4 + i] != byte(r, i)) {
            return Ok(Err(format!("rank {r}'s payload differs at byte {i}")));
        }
    }
    Ok(Ok(()))
}

/// Byte `i` of rank `r`'s payload.
fn byte(r: u32, i: usize) -> u8 {
    r.to_le_bytes()[0].wrapping_mul(31) ^ i.to_le_bytes()[0].wrapping_add(7)
}
