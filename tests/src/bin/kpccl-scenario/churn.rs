//! `churn`: the rank the chaos test kills or stops. Writes its pid where the
//! test can find it, then creates a communicator and makes, fences and frees
//! windows until something fails (then writes the error for the test to read
//! and fails) or, with `cycles=N`, for `N` windows (an ordinary job).
//!
//! `dir=` (required) holds `pid-<rank>` and `err-<rank>`; `size=` bytes per
//! rank (default 1 MiB); `seconds=` bounds a run that nothing interrupts.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kpccl_posix::launch::RunOob;
use kpccl_posix::{Comm, Oob};

use crate::args::Args;

type Res = Result<(), String>;

pub(crate) fn churn(oob: RunOob, args: &Args) -> Res {
    let (rank, n) = (oob.rank(), oob.nranks());
    let dir = PathBuf::from(args.str("dir").ok_or("churn needs dir=")?);
    write_atomically(&dir, &format!("pid-{rank}"), &std::process::id().to_string())?;
    let cycles: u64 = args.get("cycles", 0)?;
    let size: usize = args.get("size", 1 << 20)?;
    let limit = Duration::from_secs(args.get("seconds", 20)?);
    let failed = |e: String| {
        let _ = write_atomically(&dir, &format!("err-{rank}"), &e);
        Err(e)
    };
    let comm = match Comm::new(oob, rank, n) {
        Ok(c) => c,
        Err(e) => return failed(e.to_string()),
    };
    let start = Instant::now();
    let mut made = 0u64;
    while cycles == 0 || made < cycles {
        if start.elapsed() > limit {
            return failed(format!("nothing failed within {limit:?}"));
        }
        if let Err(e) = one_window(&comm, size) {
            return failed(e);
        }
        made += 1;
    }
    Ok(())
}

/// Makes a window, writes into the right neighbour's segment, fences, frees.
fn one_window<O: Oob>(comm: &Comm<O>, size: usize) -> Res {
    let (me, n) = (comm.rank(), comm.nranks());
    let win = comm.window(size).alloc().map_err(|e| e.to_string())?;
    win.write((me + 1) % n, 0, &[u64::from(me)]).map_err(|e| e.to_string())?;
    win.fence().map_err(|e| e.to_string())?;
    win.free().map_err(|e| e.to_string())
}

/// Writes `name` in `dir` whole or not at all (the test polls for it).
fn write_atomically(dir: &Path, name: &str, text: &str) -> Res {
    let tmp = dir.join(format!(".{name}"));
    std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, dir.join(name))).map_err(|e| format!("{name}: {e}"))
}
