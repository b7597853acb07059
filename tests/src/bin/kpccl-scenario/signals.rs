//! Signals delivered to a rank sleeping in a fence: the futex wait returns
//! EINTR, and the fence must go back to waiting, not fail or return early.
#![allow(unsafe_code)]

use std::time::{Duration, Instant};

use kpccl_posix::{Comm, Oob};

extern "C" fn ignore(_: libc::c_int) {}

/// Installs a no-op SIGUSR1 handler without SA_RESTART, so a sleeping futex
/// wait is interrupted (EINTR) rather than restarted.
fn catch_sigusr1() -> Result<(), String> {
    // SAFETY: a zeroed sigaction is valid; the handler is async-signal-safe (it does nothing).
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    action.sa_sigaction = ignore as extern "C" fn(libc::c_int) as usize;
    // SAFETY: `action` is initialised; the old action is not needed.
    if unsafe { libc::sigaction(libc::SIGUSR1, &action, std::ptr::null_mut()) } != 0 {
        return Err(format!("sigaction: {}", std::io::Error::last_os_error()));
    }
    Ok(())
}

fn interrupt(pid: u64) {
    // SAFETY: sending SIGUSR1 to a rank that installed a handler for it.
    unsafe { libc::kill(pid as libc::pid_t, libc::SIGUSR1) };
}

/// Rank 0 sleeps in fences while rank 1 showers it with signals for `ms`
/// before arriving; every fence must succeed, and only after rank 1 arrives.
pub(crate) fn interrupted_waits<O: Oob>(comm: &Comm<O>, args: &crate::args::Args) -> Result<(), String> {
    let me = comm.rank();
    let hold = Duration::from_millis(args.get("ms", 300)?);
    let rounds = args.get("rounds", 3u32)?;
    catch_sigusr1()?;
    let win = comm.window(64).spins(0).alloc().map_err(|e| e.to_string())?;
    for round in 0..rounds {
        // Rank 1 writes it once its signals are sent, just before its fence.
        let came = [u64::from(round) + 1];
        match me {
            0 => {
                win.peer_fence(1).map_err(|e| format!("round {round}: {e}"))?;
                // A fence ended by an EINTR returns before rank 1 came, so it
                // finds the previous round's mark. (Not a clock: rank 0 may be
                // woken late on a loaded machine, and measure a short wait.)
                let mut mark = [0u64];
                win.read(1, 0, &mut mark).map_err(|e| e.to_string())?;
                if mark != came {
                    return Err(format!("round {round}: the fence returned before rank 1 came (its mark: {mark:?})"));
                }
            }
            1 => {
                let pid = win.raw().rank_entry(0).map_err(|e| e.to_string())?.pid;
                let start = Instant::now();
                while start.elapsed() < hold {
                    interrupt(pid);
                    std::thread::sleep(Duration::from_millis(2));
                }
                win.write(1, 0, &came).map_err(|e| e.to_string())?;
                win.peer_fence(0).map_err(|e| e.to_string())?;
            }
            _ => {}
        }
    }
    win.free().map_err(|e| e.to_string())
}
