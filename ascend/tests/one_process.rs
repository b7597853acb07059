//! Ranks that are threads of one process cannot share device memory (a
//! process imports other processes' exports, not its own): every rank
//! refuses the window alike, naming two ranks of the process, and none waits.
#![allow(missing_docs)]

use core::time::Duration;

use kpccl_ascend::DeviceWindow;
use kpccl_ascend::sim::HostSim;
use kpccl_ascend::window::Error;
use kpccl_core::threads;
use kpccl_posix::Comm;

#[test]
fn ranks_in_one_process_are_refused_together() {
    let outcomes = threads::run(3, Duration::from_secs(60), |rank, oob| {
        let comm = Comm::new(oob, rank, 3).expect("communicator");
        let sim = HostSim::faithful();
        match DeviceWindow::builder(&comm, 4096).device(rank as i32).runtime(sim).alloc() {
            Ok(w) => Err(format!("rank {rank}: a window was made ({w:?})")),
            Err(e @ Error::SharedProcess { .. }) => Ok(e.to_string()),
            Err(e) => Err(format!("rank {rank}: {e}")),
        }
    });
    let tgid = std::process::id();
    let want = format!(
        "ranks 0 and 1 run in one process (tgid {tgid}): a device window needs each rank in a process of its own"
    );
    for outcome in outcomes {
        assert_eq!(outcome, Ok(want.clone()));
    }
}

/// A negative device or a size no address space holds is named on the rank
/// that gave it; the others fail with it, naming that rank, and none waits.
#[test]
fn a_bad_device_or_size_is_named_and_fails_every_rank() {
    for (device, size) in [(-1, 4096), (1, usize::MAX)] {
        let outcomes = threads::run(3, Duration::from_secs(60), move |rank, oob| {
            let comm = Comm::new(oob, rank, 3).expect("communicator");
            let (device, size) = if rank == 1 { (device, size) } else { (rank as i32, 4096) };
            match DeviceWindow::builder(&comm, size).device(device).runtime(HostSim::faithful()).alloc() {
                Ok(w) => Err(format!("rank {rank}: a window was made ({w:?})")),
                Err(e) => Ok(e.to_string()),
            }
        });
        let own = if device < 0 {
            "device -1 is invalid: devices are numbered from 0".to_owned()
        } else {
            format!("a device segment of {size} bytes is more than an address space can map")
        };
        for (rank, outcome) in (0..).zip(outcomes) {
            let message = outcome.unwrap();
            if rank == 1 {
                assert_eq!(message, own);
            } else {
                assert!(message.contains("rank 1"), "rank {rank}: {message}");
            }
        }
    }
}
