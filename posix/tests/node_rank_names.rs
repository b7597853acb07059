//! A window over several (simulated) nodes names the communicator's ranks
//! wherever it reports them, its poison included (four threads as four
//! ranks, two per node).
#![allow(missing_docs)]

use core::time::Duration;

use kpccl_core::fence::{Poison, PoisonKind};
use kpccl_core::threads::run;
use kpccl_posix::{Comm, Config, Error};
use kpccl_testkit::ScratchDir;

#[test]
fn a_left_poison_names_the_communicators_ranks() {
    let dir = ScratchDir::new("node-names", "left-poison");
    let shm_dir = dir.path().to_owned();
    let outcomes = run(4, Duration::from_secs(60), move |rank, oob| {
        // Round robin: node 0 holds ranks 0 and 2, node 1 ranks 1 and 3.
        let config =
            Config { shm_dir: shm_dir.clone(), node_id: Some(format!("node{}", rank % 2)), ..Config::default() };
        let comm = Comm::builder(oob, rank, 4).config(config).build().expect("communicator");
        let win = comm.window(64).alloc().expect("window");
        comm.barrier().expect("barrier");
        match rank {
            // Rank 1 leaves while rank 3 waits for it in a peer fence.
            1 => {
                drop(win);
                comm.barrier().expect("barrier");
                None
            }
            3 => {
                let fenced = win.peer_fence(1);
                comm.barrier().expect("barrier");
                Some((fenced, win.poisoned()))
            }
            _ => {
                comm.barrier().expect("barrier");
                None
            }
        }
    });
    let (fenced, poisoned) = outcomes[3].clone().expect("rank 3's outcome");
    assert!(matches!(fenced, Err(Error::Fence(kpccl_core::FenceError::PeerLeft { rank: 1, waiter: 3 }))), "{fenced:?}");
    assert_eq!(poisoned, Some(Poison { kind: PoisonKind::Left { waiter: 3 }, rank: 1 }));
}
