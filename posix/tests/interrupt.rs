//! A creation interrupted in its shared-memory fence (the last step, once
//! every rank has attached): the interrupt hook's check ends the wait, the
//! window is abandoned, and the late rank's creation fails naming this one
//! instead of succeeding without it (two threads as two ranks).
#![allow(missing_docs, clippy::std_instead_of_core)]

use std::time::{Duration, Instant};

use kpccl_core::threads::{ThreadOob, run};
use kpccl_core::{Oob, OobError};
use kpccl_posix::{Comm, interrupt};

/// Rank 1's collectives: its `late`-th allgather returns only after a pause,
/// so rank 0 waits for it in the fence that follows.
struct Late {
    inner: ThreadOob,
    calls: std::cell::Cell<u32>,
    late: u32,
}

impl Oob for Late {
    fn allgather(&self, send: &[u8], recv: &mut [u8]) -> Result<(), OobError> {
        let done = self.inner.allgather(send, recv);
        self.calls.set(self.calls.get() + 1);
        if self.calls.get() == self.late {
            std::thread::sleep(Duration::from_secs(1));
        }
        done
    }
    fn barrier(&self) -> Result<(), OobError> {
        self.inner.barrier()
    }
}

/// A check that ends the waits at once: Ctrl-C, as the first sleep sees it.
fn give_up(_: usize) -> bool {
    true
}

#[test]
fn an_interrupted_creation_fence_abandons_the_window_and_names_this_rank() {
    let outcomes = run(2, Duration::from_secs(30), |rank, oob| {
        // The communicator's allgather, then the window's three: the last
        // (attach) comes before the fence.
        let late = if rank == 1 { 4 } else { 0 };
        let comm = Comm::new(Late { inner: oob, calls: Default::default(), late }, rank, 2).unwrap();
        let start = Instant::now();
        let made = if rank == 0 {
            interrupt::while_sleeping(Duration::from_millis(5), give_up, 0, || comm.window(64).alloc())
        } else {
            comm.window(64).alloc()
        };
        (made.map(drop), start.elapsed())
    });
    // Both fail as rank 0's abandoning (its own error, the late rank's poison).
    for (rank, (made, _)) in outcomes.iter().enumerate() {
        let said = format!("{:?}", made.as_ref().expect_err("a window made although rank 0 gave up"));
        assert!(said.contains("Aborted { rank: 0 }"), "rank {rank}: {said}");
    }
    let waited = outcomes[0].1;
    assert!(waited < Duration::from_millis(900), "rank 0 waited {waited:?} for the late rank");
}
