//! A fence inside an event loop: each rank starts the window fence, then
//! keeps doing its own work, polling the fence between work items, instead
//! of giving its thread to the wait. Ranks are threads on the reference
//! platform; the last rank arrives late, and the others get work done
//! meanwhile.
//!
//! ```text
//! cargo run -p kpccl-core --example event_loop -- [nranks]
//! ```

use core::task::Poll;
use core::time::Duration;

use kpccl_core::threads::{ThreadPlatform, run};
use kpccl_core::{Collective, NodeRanks, Placement, Record, WindowRequest, create_comm, create_window};

fn main() {
    let nranks = std::env::args().nth(1).map_or(3, |a| a.parse().expect("usage: event_loop [nranks]")).max(1);
    let platform = ThreadPlatform::new(4096);
    let p = platform.clone();
    let work = run(nranks, Duration::from_secs(60), move |rank, oob| {
        let mut table = vec![Record::default(); nranks as usize];
        create_comm(Collective::new(&p, &oob, rank, nranks, &mut table), Placement::alone(rank)).expect("communicator");
        let request = WindowRequest { size: 64, ..WindowRequest::default() };
        let mut window = create_window(Collective::new(&p, &oob, rank, nranks, &mut table), NodeRanks::All, &request)
            .expect("window");
        if rank == nranks - 1 {
            std::thread::sleep(Duration::from_millis(20)); // the late rank
        }
        // The event loop: one started fence and a queue of work items.
        let mut fence = window.start_fence().expect("start the fence");
        let mut done_items = 0u64;
        let result = loop {
            if let Poll::Ready(result) = fence.poll() {
                break result;
            }
            done_items += one_work_item();
        };
        result.expect("window fence");
        drop(fence);
        window.free().expect("free");
        done_items
    });
    for (rank, items) in work.iter().enumerate() {
        println!("rank {rank}: {items} work items done while its window fence was pending");
    }
    assert!(platform.leaked().is_empty());
}

/// Stands for a task of the runtime (a message to handle, a timer to fire).
fn one_work_item() -> u64 {
    std::thread::sleep(Duration::from_micros(100));
    1
}
