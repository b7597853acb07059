//! The record of synchronous copies (`aclrtMemcpy`) that touch imported memory:
//! a per-process count, and one line per copy appended to `$ASCEND_SIM_COPY_LOG`
//! when it is set, so that a multi-process run can show that a code path made none.

use std::io::Write;

use super::state::{self, Proc};

/// The variable naming the log file.
pub const COPY_LOG_ENV: &str = "ASCEND_SIM_COPY_LOG";

/// How many synchronous copies touching imported memory this process attempted
/// (allowed or refused).
pub fn sync_import_copies() -> u64 {
    state::proc().as_ref().map_or(0, |p| p.sync_import_copies)
}

/// Records one such copy, with the simulator's verdict (`0` or the error code).
pub(crate) fn record(p: &mut Proc, dst: usize, src: usize, count: usize, kind: u32, verdict: i32) {
    p.sync_import_copies += 1;
    let Some(path) = std::env::var_os(COPY_LOG_ENV) else { return };
    let line = format!(
        "pid {} aclrtMemcpy dst {dst:#x} src {src:#x} count {count} kind {kind} -> {verdict}\n",
        std::process::id()
    );
    // One write of a short line to an O_APPEND file: lines of concurrent
    // processes do not interleave.
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
        let _ = f.write_all(line.as_bytes());
    }
}
