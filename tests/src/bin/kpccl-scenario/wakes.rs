//! Light wake-ups: whether a window uses them, and that no wake-up is lost
//! with them (a lost one leaves its sleeper asleep until its next liveness
//! check: that round then takes the whole `KPCCL_LIVENESS_MS`).

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use kpccl_core::Platform;
use kpccl_posix::{Comm, Oob, PosixPlatform};

use crate::args::Args;
use crate::scenarios::{Res, s};

/// The CPUs the ranks were pinned over (`pin=1`), if they were.
static PINNED_OVER: OnceLock<usize> = OnceLock::new();

/// Whether a CPU quota held this process below its affinity before it was
/// pinned (`pin=1`).
static QUOTA: OnceLock<bool> = OnceLock::new();

/// Whether a CPU quota holds this process below the CPUs of its affinity.
fn under_quota() -> Result<bool, String> {
    let affinity = kpccl_tests::allowed_cpus().map_err(|e| e.to_string())?.len();
    Ok(std::thread::available_parallelism().map_or(1, |c| c.get()) < affinity)
}

/// Binds this process to the CPU numbered `rank` modulo the count among
/// those it may use, before the communicator is made, as `mpirun` binds two
/// ranks to cores: each rank then sees one CPU, though the ranks share none
/// while they are no more than the CPUs.
pub(crate) fn pin(rank: u32) -> Result<(), String> {
    let err = |e: std::io::Error| format!("pinning rank {rank}: {e}");
    // Before pinning: with a CPU quota below the CPUs, the quota counts (as
    // the library counts it).
    let usable = std::thread::available_parallelism().map_or(1, |c| c.get());
    let _ = QUOTA.set(under_quota()?);
    let cpus = kpccl_tests::allowed_cpus().map_err(err)?;
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpus[rank as usize % cpus.len()]);
    rustix::thread::sched_setaffinity(None, &set).map_err(|e| err(e.into()))?;
    let _ = PINNED_OVER.set(cpus.len().min(usable));
    Ok(())
}

/// Checks that the window uses light wake-ups exactly when it should (asked
/// for with `KPCCL_LIGHT_WAKES=1`, no more ranks than CPUs, `membarrier`'s
/// global expedited barrier at hand), then makes `rounds` hand-offs between
/// rank pairs, none longer than `bound_ms`: a peer fence, then a signal and
/// a wait each way, one side napping `nap_us` first (the sides take turns),
/// so that the other's wait ends asleep.
pub(crate) fn wakes<O: Oob>(comm: &Comm<O>, args: &Args) -> Res {
    let (me, n) = (comm.rank(), comm.nranks());
    let asked = std::env::var("KPCCL_LIGHT_WAKES").is_ok_and(|v| v == "1");
    // Pinned ranks share as many CPUs as they are pinned to, not one each.
    let cpus = PINNED_OVER
        .get()
        .map_or_else(|| std::thread::available_parallelism().map_or(1, |c| c.get()), |&m| m.min(n as usize));
    // The count the library reports agrees on whether ranks outnumber CPUs.
    // Not under a CPU quota: std rounds a fractional one down, the library up.
    let node_cpus = comm.node_cpus() as usize;
    let quota = match QUOTA.get() {
        Some(&q) => q,
        None => under_quota()?,
    };
    if !quota && (n as usize <= node_cpus) != (n as usize <= cpus) {
        return Err(format!("rank {me}: the communicator counts {node_cpus} CPUs for {n} ranks, this test {cpus}"));
    }
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
    let mut slowest = Duration::ZERO;
    if peer < n {
        for round in 0..rounds {
            let start = Instant::now();
            if round % 2 == u64::from(me % 2) {
                std::thread::sleep(nap);
            }
            win.peer_fence(peer).map_err(s)?;
            if me % 2 == 0 {
                win.signal(peer).and_then(|()| win.wait(peer)).map_err(s)?;
            } else {
                win.wait(peer).and_then(|()| win.signal(peer)).map_err(s)?;
            }
            slowest = slowest.max(start.elapsed());
        }
    }
    let sleeps = win.stats().map(|st| st.sleeps);
    win.free().map_err(s)?;
    println!("rank {me}: {rounds} rounds, the slowest {slowest:?}, light wake-ups {light}, sleeps {sleeps:?}");
    if slowest > bound { Err(format!("rank {me}: a round took {slowest:?}, more than {bound:?}")) } else { Ok(()) }
}
