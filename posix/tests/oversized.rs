//! A window no rank could map is refused when it is laid out, on every rank,
//! naming the rank that asked for the most: not an `ENOMEM` from the
//! creator's `mmap`, blamed on the creator.
#![allow(missing_docs)]

use core::time::Duration;

use kpccl_core::threads;
use kpccl_posix::{Comm, ErrorKind};

#[test]
fn a_window_larger_than_the_address_space_names_the_rank_that_asked() {
    let outcomes = threads::run(2, Duration::from_secs(60), |rank, oob| {
        let comm = Comm::new(oob, rank, 2).expect("communicator");
        // 1 PiB: more than an x86-64 or aarch64 process can map.
        let size = if rank == 1 { 1 << 50 } else { 4096 };
        match comm.window(size).alloc() {
            Ok(_) => Err(format!("rank {rank}: a 1 PiB window was made")),
            Err(e) => Ok((e.kind(), e.to_string())),
        }
    });
    for outcome in outcomes {
        let (kind, text) = outcome.unwrap();
        assert_eq!(kind, ErrorKind::InvalidArgument, "{text}");
        assert!(text.starts_with("rank 1 asked for 1125899906842624 bytes: the window's total of "), "{text}");
        assert!(text.contains("is more than a window can span on this system"), "{text}");
    }
}
