//! A pipeline 0 -> 1 -> ... -> n-1 ordered only by one-way signals: each
//! round rank r waits for r-1's data, reads and acknowledges it, writes its
//! own, and signals r+1; it rewrites its segment only after r+1's
//! acknowledgement of the last round. Every few rounds a peer fence with
//! each neighbour and a window fence run in between, and must neither send
//! nor consume a signal. Odd rounds take the data's signal with tests (the
//! wait that never waits) instead. Then a burst of signals sent before any
//! wait must satisfy exactly as many waits, and a test after it find none.
//! Every word is verified.

use kpccl_posix::{Comm, Error, Oob, Window};

use crate::args::Args;
use crate::checks::verify;
use crate::scenarios::{Res, s, words};

pub(crate) fn pipeline<O: Oob>(comm: &Comm<O>, args: &Args) -> Res {
    let (me, n) = (comm.rank(), comm.nranks());
    let rounds = args.rounds("rounds", 1000)?;
    let len: usize = args.get("words", 32)?;
    let burst: u32 = args.get("burst", 5)?;
    let win = comm.window(len * 8).alloc().map_err(s)?;
    let (prev, next) = (me.checked_sub(1), Some(me + 1).filter(|&r| r < n));
    let mut got = vec![0u64; len];
    for round in 0..rounds {
        if let (Some(next), true) = (next, round > 0) {
            win.wait(next).map_err(s)?; // next is done reading round - 1
        }
        if let Some(prev) = prev {
            if round % 2 == 1 { tested_wait(&win, prev) } else { win.wait(prev) }.map_err(s)?;
            win.read(prev, 0, &mut got).map_err(s)?;
            verify(&got, round, prev)?;
            win.signal(prev).map_err(s)?;
        }
        win.write(me, 0, &words(round, me, len)).map_err(s)?;
        if let Some(next) = next {
            win.signal(next).map_err(s)?;
        }
        if round % 16 == 15 {
            // Upwards first: n-1 fences with n-2 only, so the chain unwinds from the top.
            for peer in [next, prev].into_iter().flatten() {
                win.peer_fence(peer).map_err(s)?;
            }
            win.fence().map_err(s)?;
        }
    }
    if let (Some(next), true) = (next, rounds > 0) {
        win.wait(next).map_err(s)?;
    }
    // Counting: a burst sent ahead satisfies exactly `burst` waits; the
    // window fence after it would fail to match if any signal were left over
    // and consumed by it (it is not: fences and signals are separate).
    if let Some(next) = next {
        (0..burst).try_for_each(|_| win.signal(next)).map_err(s)?;
    }
    if let Some(prev) = prev {
        (0..burst).try_for_each(|_| win.wait(prev)).map_err(s)?;
    }
    win.fence().map_err(s)?;
    if let Some(prev) = prev
        && win.try_wait(prev).map_err(s)?
    {
        return Err(format!("rank {me}: a test took a signal rank {prev} never sent"));
    }
    assert_eq!(win.signal(me).and(win.wait(me)).map_err(s), Ok(()), "signals to oneself are no-ops");
    if me == 0 {
        println!("pipeline: {rounds} rounds, {n} ranks, bursts of {burst}, all words verified");
    }
    win.free().map_err(s)
}

/// [`Window::wait`] made of [`Window::try_wait`]s: polls until one takes a signal.
fn tested_wait(win: &Window, peer: u32) -> Result<(), Error> {
    while !win.try_wait(peer)? {
        kpccl_core::sync::spin_loop();
    }
    Ok(())
}
