//! A peer whose record lies: one byte of one rank's record, as every rank
//! receives it, flipped in one of the five allgathers of communicator and
//! window creation over two simulated nodes. Whatever the byte, every rank
//! reaches the same outcome (all fail, or all make the window and free it),
//! and none panics, hangs or leaves a name behind.
#![cfg(not(loom))] // the window API is compiled out under loom

use core::time::Duration;
use std::vec;
use std::vec::Vec;

use kpccl_core::threads::{ThreadPlatform, run};
use kpccl_core::{
    Collective, CollectiveError, NodeRanks, Placement, Record, WaitPolicy, WindowRequest, create_comm, create_window,
};
use kpccl_testkit::Tampering;
use proptest::prelude::*;

/// A hang shows as a panic of `run` after this long (Miri reports deadlocks itself).
const LIMIT: Duration = Duration::from_secs(if cfg!(miri) { 1 << 40 } else { 20 });

/// A lie: in allgather number `call` (from 1), byte `byte` of rank `liar`'s
/// record is XORed with `xor` in every rank's table.
#[derive(Clone, Copy, Debug)]
struct Lie {
    call: u32,
    liar: usize,
    byte: usize,
    xor: u8,
}

/// Four ranks on two nodes (rank r on node r % 2) make a communicator and a
/// window, and free it, under `lie`.
fn create(lie: Lie) -> (ThreadPlatform, Vec<Result<(), CollectiveError>>) {
    let platform = ThreadPlatform::new(4096);
    let p = platform.clone();
    let results = run(4, LIMIT, move |rank, oob| {
        let oob = Tampering::new(oob, |call, len, recv: &mut [u8]| {
            if call == lie.call {
                recv[lie.liar * len + lie.byte] ^= lie.xor;
            }
        });
        let mut table = vec![Record::default(); 4];
        let me = Placement { node: u64::from(rank % 2), local_rank: rank / 2 };
        let info = create_comm(Collective::new(&p, &oob, rank, 4, &mut table), me)?;
        let ranks: Vec<u32> = (0..info.local_size).map(|l| l * 2 + rank % 2).collect();
        let node = NodeRanks::Some { ranks: &ranks, local_rank: info.local_rank };
        // A lie that makes a fence wait for ever would show as a hang.
        let policy = WaitPolicy { timeout_ns: 10_000_000_000, ..WaitPolicy::DEFAULT };
        let request = WindowRequest { size: 64 + u64::from(rank), policy, ..WindowRequest::default() };
        let w = create_window(Collective::new(&p, &oob, rank, 4, &mut table), node, &request)?;
        w.free().map_err(CollectiveError::from)
    });
    (platform, results)
}

fn check(lie: Lie) {
    let (platform, results) = create(lie);
    let failed = results.iter().filter(|r| r.is_err()).count();
    assert!(failed == 0 || failed == results.len(), "{lie:?}: {results:?}");
    assert!(platform.leaked().is_empty(), "{lie:?}: names left behind: {:?}", platform.leaked());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    #[cfg_attr(miri, ignore = "a lie may ask for terabytes, more than Miri allocates")]
    fn a_lying_record_fails_every_rank_alike(
        call in 1u32..=5,
        liar in 0usize..4,
        byte in 0usize..size_of::<Record>(),
        xor in 1u8..=255,
    ) {
        check(Lie { call, liar, byte, xor });
    }
}

/// The segment name of node 1's creator (rank 1), every byte in turn.
#[test]
fn every_byte_of_a_creators_record_is_checked() {
    let bytes = if cfg!(miri) { 96..100 } else { 0..size_of::<Record>() };
    for byte in bytes {
        check(Lie { call: 3, liar: 1, byte, xor: 0xff });
    }
}
