//! A rank leaves the window while the others still use it: each wait of
//! theirs that it did not answer fails at once, naming it, although its
//! process lives on.

use std::time::{Duration, Instant};

use kpccl_core::FenceError;
use kpccl_posix::{Comm, Oob};

use crate::args::Args;
use crate::scenarios::{Res, expect, s, wait_for_victim};

/// `victim` leaves the window a moment after the others start waiting, and
/// then lives on for `hold_ms`. `how`: `drop` it; `free` it, which the
/// others' window fence meets first; or `free-unmatched`: free it while the
/// others wait for it pairwise, which fails them and the free alike. Every
/// survivor's wait `at` (see [`wait_for_victim`]) must fail naming the
/// victim within `bound_ms`, before the victim's process ends.
pub(crate) fn leave<O: Oob>(comm: &Comm<O>, args: &Args) -> Res {
    let (me, n) = (comm.rank(), comm.nranks());
    let victim: u32 = args.get("victim", n - 1)?;
    let at = args.str("at").unwrap_or("fence");
    let how = args.str("how").unwrap_or("drop");
    let hold = Duration::from_millis(args.get("hold_ms", 2_000)?);
    let bound = Duration::from_millis(args.get("bound_ms", 1_000)?);
    let win = comm.window(4096).alloc().map_err(s)?;
    let left = |e: FenceError| matches!(e, FenceError::PeerLeft { rank, waiter } if rank == victim && waiter != victim);
    let want = format!("rank {victim} left the window … while rank <a survivor> still waited for it");
    if me == victim {
        // Let the survivors start waiting (and sleep) first.
        std::thread::sleep(Duration::from_millis(100));
        match how {
            "free" => win.free().map_err(s)?,
            "free-unmatched" => {
                // Its teardown fence fails with the survivors' waits, not hangs.
                let start = Instant::now();
                expect(win.free(), left, &want, bound, start, me)?;
            }
            _ => drop(win),
        }
        println!("rank {me}: left the window ({how}), living on for {hold:?}");
        std::thread::sleep(hold);
        return Ok(());
    }
    if how == "free" {
        // Meets the victim's teardown fence.
        win.fence().map_err(s)?;
    }
    let start = Instant::now();
    let result = wait_for_victim(win, at, victim, me, n);
    expect(result, left, &want, bound, start, me)
}

/// Rank 0 drops the window and its process ends; the others go on with
/// pairwise fences among themselves, pairs (1, 2), (3, 4)…, the even rank of
/// each late by `late_ms` — long enough for the waiter's periodic look at
/// every rank's liveness. A rank that left and then ended is no dead rank:
/// nobody can be stuck behind it, so their fences succeed.
pub(crate) fn left_then_ended<O: Oob>(comm: &Comm<O>, args: &Args) -> Res {
    let (me, n) = (comm.rank(), comm.nranks());
    let late = Duration::from_millis(args.get("late_ms", 1_000)?);
    let win = comm.window(4096).alloc().map_err(s)?;
    win.fence().map_err(s)?;
    if me == 0 {
        drop(win);
        println!("rank 0: left the window, ending");
        return Ok(());
    }
    // Rank 0's process has ended by then.
    std::thread::sleep(Duration::from_millis(300));
    let partner = if me % 2 == 1 { me + 1 } else { me - 1 };
    if partner >= n {
        return Ok(());
    }
    if me % 2 == 0 {
        std::thread::sleep(late);
    }
    let start = Instant::now();
    win.peer_fence(partner).map_err(|e| format!("the fence with {partner} failed: {e}"))?;
    println!("rank {me}: fenced with {partner} after {:?}", start.elapsed());
    Ok(())
}
