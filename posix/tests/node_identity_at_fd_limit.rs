//! A rank that creates its communicator with no descriptor left cannot
//! read what tells its node from others (the boot id): it must fail the
//! creation, naming what it could not read, rather than take itself for
//! the only rank of another node (its windows then shared with nobody, its
//! neighbours "on another node").
#![allow(missing_docs)]

use core::time::Duration;
use std::sync::{Arc, Barrier, Once};

use kpccl_core::threads::{self, ThreadOob};
use kpccl_core::{Oob, OobError};
use kpccl_posix::Comm;
use kpccl_testkit::{LoweredLimit, lowest_free_descriptor};
use rustix::process::Resource;

/// Rank 1's side: says when its first collective starts (its node read by
/// then), before joining it.
struct Tells {
    inner: ThreadOob,
    started: Arc<Barrier>,
    told: Once,
}

impl Oob for Tells {
    fn allgather(&self, send: &[u8], recv: &mut [u8]) -> Result<(), OobError> {
        self.told.call_once(|| {
            self.started.wait();
        });
        self.inner.allgather(send, recv)
    }
    fn barrier(&self) -> Result<(), OobError> {
        self.inner.barrier()
    }
}

/// One test in this binary: the limit is the process's.
#[test]
fn a_rank_without_descriptors_fails_instead_of_being_a_node_of_its_own() {
    let started = Arc::new(Barrier::new(2));
    let outcomes = threads::run(2, Duration::from_secs(60), move |rank, oob| {
        let made = if rank == 1 {
            let oob = Tells { inner: oob, started: Arc::clone(&started), told: Once::new() };
            Comm::new(oob, rank, 2).map(|c| c.nnodes())
        } else {
            // Rank 1 has read its node: now none is left for rank 0's reading.
            started.wait();
            let lowered = LoweredLimit::new(Resource::Nofile, lowest_free_descriptor());
            let made = Comm::new(oob, rank, 2).map(|c| c.nnodes());
            drop(lowered);
            made
        };
        made.map_err(|e| e.to_string())
    });
    for (rank, outcome) in outcomes.into_iter().enumerate() {
        match outcome {
            Ok(nnodes) => assert_eq!(nnodes, 1, "rank {rank}: two ranks of one machine on {nnodes} nodes"),
            Err(text) if rank == 0 => {
                assert!(text.contains("/proc/sys/kernel/random/boot_id") && text.contains("os error 24"), "{text}");
            }
            Err(text) => assert!(text.contains("rank 0"), "{text}"),
        }
    }
}
