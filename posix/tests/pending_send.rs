//! A started fence may move to another thread, as the window it borrows
//! may: a task of a multi-threaded executor can await it (two threads as
//! two ranks, each polling its fences from a thread of its own).
#![allow(missing_docs, clippy::std_instead_of_core)]

use core::task::Poll;
use std::time::Duration;

use kpccl_core::threads::run;
use kpccl_posix::{Comm, Config, Error, PendingFence};
use kpccl_testkit::ScratchDir;

/// Polls `fence` to completion on another thread.
fn polled_elsewhere(fence: PendingFence<'_>) -> Result<(), Error> {
    std::thread::scope(|s| {
        s.spawn(move || {
            let mut fence = fence;
            loop {
                match fence.poll() {
                    Poll::Ready(done) => return done,
                    Poll::Pending => std::thread::yield_now(),
                }
            }
        })
        .join()
        .unwrap()
    })
}

#[test]
fn a_started_fence_is_polled_to_completion_on_another_thread() {
    let dir = ScratchDir::new("pending-send", "threads");
    let shm_dir = dir.path().to_owned();
    let outcomes = run(2, Duration::from_secs(30), move |rank, oob| {
        let config = Config { shm_dir: shm_dir.clone(), timeout: Some(Duration::from_secs(10)), ..Config::default() };
        let comm = Comm::builder(oob, rank, 2).config(config).build().unwrap();
        let mut win = comm.window(8).alloc().unwrap();
        win.write(rank, 0, &[u64::from(rank) + 10]).unwrap();
        polled_elsewhere(win.start_fence().unwrap()).unwrap();
        let mut theirs = [0u64];
        win.read(1 - rank, 0, &mut theirs).unwrap();
        polled_elsewhere(win.start_peer_fence(1 - rank).unwrap()).unwrap();
        win.free().unwrap();
        theirs[0]
    });
    assert_eq!(outcomes, [11, 10]);
    assert!(dir.entries().is_empty(), "left behind: {:?}", dir.entries());
}
