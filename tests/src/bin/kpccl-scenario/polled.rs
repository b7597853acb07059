//! Fences started without blocking and polled to completion, mixed with
//! blocking ones on the other ranks: each round a window fence (polled on
//! even ranks, blocking on odd ones) publishes every rank's words, every
//! rank verifies everyone's, a second window fence lets them be
//! overwritten; then a one-way pipeline 0 -> 1 -> ... whose waits are
//! polled, and pairwise fences between pairs of ranks, polled on one side.

use std::task::{Context, Poll, Waker};

use std::time::Duration;

use kpccl_core::{CollectiveError, Failure, FenceError};
use kpccl_posix::{Comm, Error, Oob, PendingFence, Window};

use crate::args::Args;
use crate::checks::verify;
use crate::scenarios::{Res, s, words};

/// Polls `started` to completion, yielding between polls as an event loop
/// would run other work; returns how many polls found it pending.
pub(crate) fn drive(started: Result<PendingFence<'_>, Error>) -> Result<u64, Error> {
    let mut fence = started?;
    let mut pending = 0u64;
    loop {
        match fence.poll() {
            Poll::Ready(result) => return result.map(|()| pending),
            Poll::Pending => {
                pending += 1;
                std::thread::yield_now();
            }
        }
    }
}

pub(crate) fn polled<O: Oob>(comm: &Comm<O>, args: &Args) -> Res {
    let (me, n) = (comm.rank(), comm.nranks());
    let rounds = args.rounds("rounds", 200)?;
    let len: usize = args.get("words", 16)?;
    let mut win = comm.window(len * 8).alloc().map_err(s)?;
    let polls = me.is_multiple_of(2);
    let mut got = vec![0u64; len];
    let mut pending = 0u64;
    for round in 0..rounds {
        win.write(me, 0, &words(round, me, len)).map_err(s)?;
        pending += window_fence(&mut win, polls)?;
        for r in (0..n).filter(|&r| r != me) {
            win.read(r, 0, &mut got).map_err(s)?;
            verify(&got, round, r)?;
        }
        pending += window_fence(&mut win, polls)?;
    }
    // A pipeline ordered by signals, every wait polled.
    let (prev, next) = (me.checked_sub(1), Some(me + 1).filter(|&r| r < n));
    for round in rounds..2 * rounds {
        if let Some(prev) = prev {
            pending += drive(win.start_wait(prev)).map_err(s)?;
            win.read(prev, 0, &mut got).map_err(s)?;
            verify(&got, round, prev)?;
            win.signal(prev).map_err(s)?; // done reading
        }
        if let (Some(next), true) = (next, round > rounds) {
            pending += drive(win.start_wait(next)).map_err(s)?; // next is done reading round - 1
        }
        win.write(me, 0, &words(round, me, len)).map_err(s)?;
        if let Some(next) = next {
            win.signal(next).map_err(s)?;
        }
    }
    if let Some(next) = next.filter(|_| rounds > 0) {
        drive(win.start_wait(next)).map_err(s)?;
    }
    // Pairwise fences in pairs (0, 1), (2, 3)..., awaited as futures by the
    // even rank (on a minimal executor), blocking on the odd one.
    if let Some(peer) = Some(me ^ 1).filter(|&p| p < n) {
        for _ in 0..rounds.min(50) {
            pending += if polls {
                {
                    let (result, pending) = block_on(win.start_peer_fence(peer).map_err(s)?);
                    result.map_err(s)?;
                    pending
                }
            } else {
                win.peer_fence(peer).map(|()| 0).map_err(s)?
            };
        }
    }
    if me == 0 {
        println!("polled: {rounds} rounds, {n} ranks, all words verified; rank 0 polled {pending} times in vain");
    }
    win.free().map_err(s)
}

/// Runs `future` to completion on this thread, as the simplest executor
/// would; returns how many polls found it pending.
fn block_on<F: Future>(future: F) -> (F::Output, u64) {
    let mut future = std::pin::pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    let mut pending = 0u64;
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return (out, pending);
        }
        pending += 1;
        std::thread::yield_now();
    }
}

fn window_fence(win: &mut Window, polls: bool) -> Result<u64, String> {
    if polls { drive(win.start_fence()).map_err(s) } else { win.fence().map(|()| 0).map_err(s) }
}

/// Rank 0 starts a window fence and drops it before the others arrive
/// (with the flat barrier: after its arrival). Every rank's next fence must
/// fail naming rank 0, never pass without it (its next arrival must not be
/// counted in the abandoned fence). Rank 0 may leave creation's last
/// barrier, and abandon, while another rank is still waiting there: that
/// rank's creation then fails naming rank 0, as its fence would.
pub(crate) fn abandoned<O: Oob>(comm: &Comm<O>, _args: &Args) -> Res {
    let me = comm.rank();
    let mut win = match comm.window(64).alloc() {
        Ok(win) => win,
        Err(Error::Collective(CollectiveError::Local(Failure::Fence(FenceError::Aborted { rank: 0 })))) if me != 0 => {
            println!("rank {me}: creation failed, naming rank 0");
            return Ok(());
        }
        Err(e) => return Err(s(e)),
    };
    if me == 0 {
        drop(win.start_fence().map_err(s)?);
    } else {
        std::thread::sleep(Duration::from_millis(100)); // rank 0 abandons first
    }
    match win.fence() {
        Err(Error::Fence(FenceError::Aborted { rank: 0 })) => {
            println!("rank {me}: the fence failed, naming rank 0");
            let _ = win.free();
            Ok(())
        }
        other => Err(format!("rank {me}: expected 'rank 0 abandoned the window', got {other:?}")),
    }
}
