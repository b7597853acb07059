//! `KPCCL_STATS=1`: a window counts its fences, signals and waits, and the
//! waits that slept for a late peer and for how long (two threads as two
//! ranks).
#![allow(missing_docs, clippy::std_instead_of_core)]

use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

use kpccl_posix::{Comm, Config, Oob, OobError};

/// The out-of-band collectives of threads of this process.
struct Threads {
    rank: usize,
    slots: Arc<Mutex<Vec<Vec<u8>>>>,
    barrier: Arc<Barrier>,
}

impl Oob for Threads {
    fn allgather(&self, send: &[u8], recv: &mut [u8]) -> Result<(), OobError> {
        self.slots.lock().unwrap()[self.rank] = send.to_vec();
        self.barrier.wait();
        recv.copy_from_slice(&self.slots.lock().unwrap().concat());
        self.barrier.wait();
        Ok(())
    }
    fn barrier(&self) -> Result<(), OobError> {
        self.barrier.wait();
        Ok(())
    }
}

#[test]
fn a_window_counts_its_calls_and_its_sleeps() {
    // SAFETY: set before any other thread of this binary exists (one test).
    unsafe { std::env::set_var("KPCCL_STATS", "1") };
    let (slots, barrier) = (Arc::new(Mutex::new(vec![Vec::new(); 2])), Arc::new(Barrier::new(2)));
    let ranks: Vec<_> = (0..2u32)
        .map(|rank| {
            let oob = Threads { rank: rank as usize, slots: Arc::clone(&slots), barrier: Arc::clone(&barrier) };
            std::thread::spawn(move || {
                // No spinning: a wait for a late peer sleeps at once.
                let config = Config { spins: Some(0), ..Config::from_env().unwrap() };
                let comm = Comm::builder(oob, rank, 2).config(config).build().unwrap();
                let win = comm.window(4096).alloc().unwrap();
                let fresh = win.stats().expect("KPCCL_STATS=1 keeps counters");
                if rank == 1 {
                    std::thread::sleep(Duration::from_millis(200));
                }
                win.fence().unwrap();
                win.peer_fence(1 - rank).unwrap();
                win.signal(1 - rank).unwrap();
                win.wait(1 - rank).unwrap();
                let after = win.stats().unwrap();
                win.free().unwrap();
                (fresh, after)
            })
        })
        .collect();
    let stats: Vec<_> = ranks.into_iter().map(|t| t.join().unwrap()).collect();
    for (rank, (fresh, after)) in stats.iter().enumerate() {
        assert_eq!((fresh.fences, fresh.peer_fences, fresh.signals, fresh.waits), (0, 0, 0, 0), "rank {rank}");
        assert_eq!((after.fences, after.peer_fences, after.signals, after.waits), (1, 1, 1, 1), "rank {rank}");
    }
    let (_, waited) = stats[0];
    assert!(waited.sleeps >= 1, "rank 0 waited 200 ms for rank 1 without sleeping: {waited:?}");
    assert!(waited.slept >= Duration::from_millis(100), "{waited:?}");
    assert!(waited.slept < Duration::from_secs(10), "{waited:?}");
}
