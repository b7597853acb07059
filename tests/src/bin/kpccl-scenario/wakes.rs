//! Light wake-ups: whether a window uses them, and that no wake-up is lost
//! with them (a lost one would leave a sleeper asleep until its next
//! liveness check, 50 ms: many hand-offs would then take far too long).

use std::time::{Duration, Instant};

use kpccl_core::Platform;
use kpccl_posix::{Comm, Oob, PosixPlatform};

use crate::args::Args;
use crate::scenarios::{Res, s};

/// Checks that the window uses light wake-ups exactly when it should (asked
/// for with `KPCCL_LIGHT_WAKES=1`, no more ranks than CPUs, `membarrier`'s
/// global expedited barrier at hand), then makes `rounds` hand-offs between rank pairs within `bound_ms`: a peer
/// fence, then a signal and a wait each way, one side napping `nap_us`
/// first (the sides take turns), so that the other's wait ends asleep.
pub(crate) fn wakes<O: Oob>(comm: &Comm<O>, args: &Args) -> Res {
    let (me, n) = (comm.rank(), comm.nranks());
    let asked = std::env::var("KPCCL_LIGHT_WAKES").is_ok_and(|v| v == "1");
    let cpus = std::thread::available_parallelism().map_or(1, |c| c.get());
    let light = asked
        && n as usize <= cpus
        && PosixPlatform::new(kpccl_posix::DEFAULT_SHM_DIR).with_light_wakes(true).register_global_heavy_fence();
    let rounds = args.rounds("rounds", 2_000)?;
    let bound = Duration::from_millis(args.get("bound_ms", 20_000)?);
    let nap = Duration::from_micros(args.get("nap_us", 100)?);
    let win = comm.window(64).alloc().map_err(s)?;
    if win.light_wakes() != light {
        return Err(format!(
            "rank {me}: light wake-ups are {}, not {light} ({n} ranks, {cpus} CPUs)",
            win.light_wakes()
        ));
    }
    let peer = me ^ 1;
    let start = Instant::now();
    if peer < n {
        for round in 0..rounds {
            if round % 2 == u64::from(me % 2) {
                std::thread::sleep(nap);
            }
            win.peer_fence(peer).map_err(s)?;
            if me % 2 == 0 {
                win.signal(peer).and_then(|()| win.wait(peer)).map_err(s)?;
            } else {
                win.wait(peer).and_then(|()| win.signal(peer)).map_err(s)?;
            }
        }
    }
    let took = start.elapsed();
    let sleeps = win.stats().map(|st| st.sleeps);
    win.free().map_err(s)?;
    println!("rank {me}: {rounds} rounds in {took:?}, light wake-ups {light}, sleeps {sleeps:?}");
    if took > bound { Err(format!("rank {me}: {rounds} rounds took {took:?}, more than {bound:?}")) } else { Ok(()) }
}
