//! Device windows across real processes: this test binary starts itself as
//! the ranks (through the `kpccl-run` launcher library), on the simulator,
//! each rank on its own simulated device. Every case runs in a private
//! segment directory and simulator registry, both checked empty afterwards.
#![allow(missing_docs, clippy::std_instead_of_core, clippy::alloc_instead_of_core)]
// Test patterns: bytes cut from counters on purpose.
#![allow(clippy::cast_possible_truncation)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use kpccl_ascend::codes::{
    ACL_ERROR_INVALID_PARAM, ACL_ERROR_REPEAT_INITIALIZE, ACL_ERROR_RT_CONTEXT_RELEASE_ERROR,
    ACL_ERROR_RT_DRV_INTERNAL_ERROR, ACL_ERROR_RT_FEATURE_NOT_SUPPORT, ACL_ERROR_RT_INVALID_DEVICEID,
    ACL_MEM_MALLOC_HUGE_FIRST, ACL_MEMCPY_DEVICE_TO_DEVICE, ACL_MEMCPY_HOST_TO_DEVICE,
};
use kpccl_ascend::sim::Chip;
use kpccl_ascend::window::{Call, Collective, Error, Failure, Fault, STAGE_MAX, Setting};
use kpccl_ascend::{AclResult, AclStream, DeviceWindow, Memcpy, sim::HostSim};
use kpccl_core::OobError;
use kpccl_posix::{Comm, Oob};
use kpccl_run::{Launch, RunOob};
use kpccl_testkit::{FailingOob, INJECTED, ScratchDir, When, entries};

/// The variable naming the case a rank process runs.
const CASE_ENV: &str = "KPCCL_ASCEND_TEST_CASE";

/// Runs `case` on `n` rank processes; asserts they all exit 0 and leave no
/// segment and no simulator state behind.
fn launch(n: u32, case: &str, env: &[(&str, &str)]) {
    let shm = ScratchDir::new("test-shm", case);
    // Made by the simulator, which must remove it: not there beforehand.
    let scratch = ScratchDir::new("test-sim", case);
    let sim = scratch.path().join("sim");
    let mut l = Launch::new(n)
        .timeout(Duration::from_secs(120))
        .env(CASE_ENV, case)
        .env("KPCCL_ASCEND", "sim")
        .env("KPCCL_LOG", "off")
        .env("KPCCL_SHM_DIR", shm.path())
        .env("ASCEND_SIM_DIR", &sim);
    for (k, v) in env {
        l = l.env(k, v);
    }
    let exe = std::env::current_exe().unwrap();
    let report = l.run(&exe, ["--exact", "rank_main", "--nocapture", "--test-threads=1"]).expect("launch");
    assert!(report.success(), "{case} on {n} ranks: {report}");
    assert_eq!(shm.entries(), Vec::<String>::new(), "{case}: segments left in {}", shm.path().display());
    assert!(!sim.exists(), "{case}: simulator state left in {}: {:?}", sim.display(), entries(&sim));
}

/// The entry point of a rank process (a no-op in the normal test run).
#[test]
fn rank_main() {
    let Ok(case) = std::env::var(CASE_ENV) else { return };
    let oob = RunOob::from_env().expect("reach the launcher").expect("started by the launcher");
    let (rank, n) = (oob.rank(), oob.nranks());
    // Cases that make their own communicator, over an out-of-band double.
    let own_comm: Option<fn(RunOob) -> Result<(), String>> = match case.as_str() {
        "flaky_oob" => Some(flaky_oob),
        "death_in_creation" => Some(death_in_creation),
        "bad_record" => Some(bad_record),
        _ => None,
    };
    if let Some(case_fn) = own_comm {
        if let Err(e) = case_fn(oob).and_then(|()| balanced()) {
            eprintln!("rank {rank}: {case}: {e}");
            std::process::exit(1);
        }
        std::process::exit(0);
    }
    let comm = Comm::new(oob, rank, n).expect("communicator");
    let result = match case.as_str() {
        "handoff" => handoff(&comm),
        "large_copy" => large_copy(&comm),
        "user_devices" => user_devices(&comm),
        "mixed_kinds" => mixed_kinds(&comm),
        "unwhitelisted" => unwhitelisted(&comm),
        "bad_device" => bad_device(&comm),
        "no_runtime" => no_runtime(&comm),
        "dead_peer" => dead_peer(&comm),
        "free_unmatched" => free_unmatched(&comm),
        "dropped" => dropped(&comm),
        "no_validation" => no_validation(&comm),
        "stream_fence" => stream_fence(&comm),
        "no_p2p_policy" => no_p2p_policy(&comm),
        "sync_copy_is_logged" => sync_copy_is_logged(&comm),
        "no_ipc_chip" => no_ipc_chip(&comm),
        "fence_device_failure" => device_failure(&comm, |w| w.fence_on(Some(BAD_STREAM)), |w| w.fence()),
        "peer_fence_device_failure" => {
            device_failure(&comm, |w| w.peer_fence_on(0, Some(BAD_STREAM)), |w| w.peer_fence(1))
        }
        "signal_device_failure" => device_failure(&comm, signal_after_a_faulting_copy, |w| w.wait(1)),
        other => Err(format!("unknown case {other}")),
    };
    if let Err(e) = result.and_then(|()| balanced()) {
        eprintln!("rank {rank}: {case}: {e}");
        std::process::exit(1);
    }
    std::process::exit(0);
}

/// Every allocation, import, stream and device count the case took in this
/// process's simulator was given back, on its error paths too.
fn balanced() -> Result<(), String> {
    let held = kpccl_ascend::sim::held();
    if held == kpccl_ascend::sim::Held::default() { Ok(()) } else { Err(format!("the simulator still holds {held:?}")) }
}

/// One `#[test]` per row, named by it: it runs the row's `(ranks, case, env…)`
/// in turn through [`launch`].
macro_rules! launch_tests {
    ($($(#[$doc:meta])* $name:ident: $(($n:expr, $case:expr $(, $env:expr)*)),+;)+) => {
        $(
            $(#[$doc])*
            #[test]
            fn $name() {
                $(launch($n, $case, &[$($env),*]);)+
            }
        )+
    };
}

launch_tests! {
    a_fence_that_fails_on_one_ranks_device_fails_every_rank: (2, "fence_device_failure");
    a_peer_fence_that_fails_on_one_ranks_device_fails_the_peer: (2, "peer_fence_device_failure");
    a_signal_that_fails_on_the_senders_device_fails_the_wait: (2, "signal_device_failure");
    handoff_on_2_and_4_ranks_on_distinct_devices: (2, "handoff"), (4, "handoff");
    a_copy_across_devices_is_staged_in_pieces_whole_and_in_order: (2, "large_copy");
    windows_on_two_devices_of_one_thread_leave_the_users_device_current: (2, "user_devices");
    host_and_device_requests_fail_together: (3, "mixed_kinds");
    a_failed_import_fails_every_rank_with_the_acl_code: (2, "unwhitelisted"), (4, "unwhitelisted");
    a_bad_device_fails_every_rank_with_the_acl_code: (3, "bad_device");
    no_runtime_fails_every_rank_and_names_the_simulator: (2, "no_runtime", ("KPCCL_ASCEND", "auto"));
    a_dead_peer_during_free_is_an_error_not_a_hang: (2, "dead_peer");
    a_free_that_meets_a_peer_fence_fails_both_not_hangs: (2, "free_unmatched");
    dropped_windows_release_everything: (3, "dropped");
    pid_validation_can_be_disabled_on_every_rank: (3, "no_validation");
    a_fence_given_a_stream_covers_the_work_queued_on_it:
        (2, "stream_fence"), (3, "stream_fence", ("ASCEND_SIM_CHIP", "inference"));
    the_inference_chip_refuses_segments_without_a_p2p_policy: (2, "no_p2p_policy", ("ASCEND_SIM_CHIP", "inference"));
    a_chip_without_ipc_or_an_unknown_model_fails_every_rank:
        (2, "no_ipc_chip", ("ASCEND_SIM_CHIP", "200I/500 A2")), (2, "no_ipc_chip", ("ASCEND_SIM_CHIP", "A5"));
}

const SEG: usize = 3 * 4096 + 100;

fn pattern(writer: u32, round: u32) -> Vec<u8> {
    (0..SEG).map(|i| (i as u32).wrapping_mul(31).wrapping_add(writer * 7 + round * 13) as u8).collect()
}

fn e(e: Error) -> String {
    e.to_string()
}

/// Pairwise fences with both ring neighbours, ordered so the ring cannot
/// deadlock (even ranks right first, odd ranks left first).
fn neighbours(w: &DeviceWindow) -> Result<(), String> {
    let (me, n) = (w.rank(), w.nranks());
    let (left, right) = ((me + n - 1) % n, (me + 1) % n);
    let order = if me % 2 == 0 { [right, left] } else { [left, right] };
    for p in order {
        w.peer_fence(p).map_err(e)?;
    }
    Ok(())
}

/// Each rank writes into its right neighbour's device segment (a copy to
/// another device, through its import), peer fences, then every rank reads
/// every segment through its own address for it and checks it.
fn handoff<O: Oob>(comm: &Comm<O>) -> Result<(), String> {
    let (me, n) = (comm.rank(), comm.nranks());
    // The runtime KPCCL_ASCEND names: the simulator, in process or as a library.
    let w = DeviceWindow::builder(comm, SEG).device(me as i32).alloc().map_err(e)?;
    for p in 0..n {
        let s = w.segment(p).map_err(e)?;
        if s.ptr.is_null() || s.len != SEG || s.device != p as i32 {
            return Err(format!("rank {p}'s segment is {s:?}"));
        }
        if p != me && s.ptr == w.segment(me).map_err(e)?.ptr {
            return Err("a peer's import aliases this rank's own address".into());
        }
    }
    let left_of = |p: u32| (p + n - 1) % n;
    let mut got = vec![0u8; SEG];
    for round in 0..10 {
        w.write((me + 1) % n, 0, &pattern(me, round)).map_err(e)?;
        neighbours(&w)?;
        w.read(me, 0, &mut got).map_err(e)?;
        if got != pattern(left_of(me), round) {
            return Err(format!("round {round}: own segment does not hold rank {}'s data", left_of(me)));
        }
        w.fence().map_err(e)?;
        for p in 0..n {
            w.read(p, 0, &mut got).map_err(e)?;
            if got != pattern(left_of(p), round) {
                return Err(format!("round {round}: rank {p}'s segment, read through its import, is wrong"));
            }
        }
        w.fence().map_err(e)?;
    }
    match w.read(me, SEG - 1, &mut [0u8; 2]) {
        Err(Error::OutOfBounds { .. }) => {}
        other => return Err(format!("a read past the end gave {other:?}")),
    }
    w.free().map_err(e)
}

/// A copy to and from another device's segment larger than the staging
/// limit: it arrives whole and in order, and no block of device memory it
/// takes is larger than the limit (before, the staging buffer was as large as
/// the copy: a 1 GiB write took 1 GiB more of a full device, or failed).
fn large_copy<O: Oob>(comm: &Comm<O>) -> Result<(), String> {
    let (me, n) = (comm.rank(), comm.nranks());
    // One whole piece and part of another.
    let len = STAGE_MAX + 4099;
    let data = |writer: u32| -> Vec<u8> {
        (0..len).map(|i| ((i as u32).wrapping_mul(2_654_435_761).wrapping_add(writer) >> 24) as u8).collect()
    };
    let w = DeviceWindow::builder(comm, len).device(me as i32).alloc().map_err(e)?;
    kpccl_ascend::sim::take_largest_malloc();
    let mine = data(me);
    w.write((me + 1) % n, 0, &mine).map_err(e)?;
    let mut got = vec![0u8; len];
    w.read((me + 1) % n, 0, &mut got).map_err(e)?;
    let staged = kpccl_ascend::sim::take_largest_malloc();
    if got != mine {
        return Err("a copy to and back from the next device's segment came back changed".into());
    }
    drop(mine);
    w.fence().map_err(e)?;
    w.read(me, 0, &mut got).map_err(e)?;
    if got != data((me + n - 1) % n) {
        return Err("this rank's segment does not hold what the previous rank wrote".into());
    }
    if staged == 0 || staged > STAGE_MAX {
        return Err(format!("copies of {len} bytes across devices staged {staged} bytes at once (limit {STAGE_MAX})"));
    }
    w.free().map_err(e)
}

/// Two windows on two devices of one thread, while the thread's own current
/// device is a third: each call makes its window's device current, then sets
/// the user's back, and neither window disturbs the other.
fn user_devices<O: Oob>(comm: &Comm<O>) -> Result<(), String> {
    let (me, n) = (comm.rank(), comm.nranks());
    let rt = kpccl_ascend::backend::from_env().map_err(|err| err.to_string())?;
    let acl = |what: &str, r: AclResult<()>| r.map_err(|err| format!("the user's {what}: {err}"));
    acl("aclInit", rt.init().or_else(|err| if err.code() == ACL_ERROR_REPEAT_INITIALIZE { Ok(()) } else { Err(err) }))?;
    acl("aclrtSetDevice", rt.set_device(7))?;
    let users = rt.get_current_context().map_err(|err| format!("the user's context: {err}"))?;
    let still_users = |after: &str| match rt.get_current_context() {
        Ok(c) if c == users => Ok(()),
        other => Err(format!("after {after}, the thread's context is {other:?}, not the user's {users:?}")),
    };
    let windows = [0, 1].map(|d| DeviceWindow::builder(comm, SEG).device(2 * me as i32 + d).alloc());
    let [a, b] = windows.map(|w| w.map_err(e));
    let windows = [a?, b?];
    still_users("creating the windows")?;
    let mut got = vec![0u8; SEG];
    for round in 0..3 {
        for (i, w) in (0..).zip(&windows) {
            w.write((me + 1) % n, 0, &pattern(me, round * 2 + i)).map_err(e)?;
            w.fence().map_err(e)?;
            w.read(me, 0, &mut got).map_err(e)?;
            if got != pattern((me + n - 1) % n, round * 2 + i) {
                return Err(format!("round {round}: window {i} holds the wrong data"));
            }
            w.fence().map_err(e)?;
            still_users(&format!("round {round} on window {i}"))?;
        }
    }
    for w in windows {
        w.free().map_err(e)?;
        still_users("a free")?;
    }
    // Each window gave back its count of its device: a reset finds none left.
    for d in [0, 1].map(|d| 2 * me as i32 + d) {
        match rt.reset_device(d) {
            Err(err) if err.code() == ACL_ERROR_RT_CONTEXT_RELEASE_ERROR => {}
            other => return Err(format!("device {d} after its window's free: a reset gave {other:?}, not 507007")),
        }
    }
    acl("aclrtResetDevice", rt.reset_device(7))
}

/// Rank 0 asks for a host window, the others for device windows: all fail.
fn mixed_kinds<O: Oob>(comm: &Comm<O>) -> Result<(), String> {
    let me = comm.rank();
    let text = if me == 0 {
        match comm.window(4096).alloc() {
            Ok(_) => return Err("a host window was made while peers asked for device memory".into()),
            Err(err) => err.to_string(),
        }
    } else {
        match DeviceWindow::builder(comm, 4096).device(me as i32).runtime(HostSim::new()).alloc() {
            Ok(_) => return Err("a device window was made while rank 0 asked for host memory".into()),
            Err(err) => err.to_string(),
        }
    };
    if !text.contains("memory kind") {
        return Err(format!("the error does not name the memory kind: {text}"));
    }
    Ok(())
}

fn expect_acl(result: Result<DeviceWindow, Error>, code: i32, what: &str) -> Result<Error, String> {
    match result {
        Ok(_) => Err(format!("{what}: the window was made")),
        Err(err) if err.acl_code() == Some(code) => Ok(err),
        Err(err) => Err(format!("{what}: expected ACL error {code}, got: {err}")),
    }
}

/// The last rank never whitelists its peers: their imports fail with 507899, and
/// every rank fails with that code.
fn unwhitelisted<O: Oob>(comm: &Comm<O>) -> Result<(), String> {
    let (me, n) = (comm.rank(), comm.nranks());
    let mut b = DeviceWindow::builder(comm, 8192).device(me as i32).runtime(HostSim::new());
    if me == n - 1 {
        b = b.fault(Fault::SkipWhitelist);
    }
    let err = expect_acl(b.alloc(), ACL_ERROR_RT_DRV_INTERNAL_ERROR, "import without whitelist")?;
    let text = err.to_string();
    if !text.contains("aclrtIpcMemImportByKey failed: ACL error 507899") {
        return Err(format!("unexpected text: {text}"));
    }
    if me != n - 1
        && !matches!(err, Error::Collective(Collective::Local(Failure::Acl { call: Call::ImportByKey, peer: Some(p), .. })) if p == n - 1)
    {
        return Err(format!("rank {me} should report its own failed import of rank {}'s segment: {err:?}", n - 1));
    }
    Ok(())
}

/// Rank 1 picks a device that does not exist: every rank fails with 107001.
fn bad_device<O: Oob>(comm: &Comm<O>) -> Result<(), String> {
    let me = comm.rank();
    let dev = if me == 1 { 99 } else { me as i32 };
    let err = expect_acl(
        DeviceWindow::builder(comm, 4096).device(dev).runtime(HostSim::new()).alloc(),
        ACL_ERROR_RT_INVALID_DEVICEID,
        "device 99",
    )?;
    if me != 1 && !matches!(err, Error::Collective(Collective::Peer { rank: 1, .. })) {
        return Err(format!("expected rank 1's failure, got {err:?}"));
    }
    Ok(())
}

/// `KPCCL_ASCEND=auto` without CANN: the error says how to pick the simulator,
/// on every rank, and no rank is left waiting.
fn no_runtime<O: Oob>(comm: &Comm<O>) -> Result<(), String> {
    let me = comm.rank();
    let mut b = DeviceWindow::builder(comm, 4096).device(me as i32);
    if me != 0 {
        b = b.runtime(HostSim::new());
    }
    match b.alloc() {
        Ok(_) => Err("a window without a runtime".into()),
        Err(err) if me == 0 && err.to_string().contains("set KPCCL_ASCEND=sim") => Ok(()),
        Err(Error::Collective(Collective::Peer { rank: 0, failure: Failure::NoRuntime })) if me != 0 => Ok(()),
        Err(err) => Err(format!("unexpected error: {err}")),
    }
}

/// Rank 1 frees while rank 0 waits for it in a peer fence (a fence count
/// that does not match): no timeout is set, yet both fail within a second,
/// naming rank 1 and rank 0's wait, and rank 0's free still releases.
fn free_unmatched<O: Oob>(comm: &Comm<O>) -> Result<(), String> {
    let me = comm.rank();
    let w = DeviceWindow::builder(comm, 4096).device(me as i32).runtime(HostSim::new()).alloc().map_err(e)?;
    let start = std::time::Instant::now();
    let result = if me == 1 {
        w.free()
    } else {
        let fenced = w.peer_fence(1);
        let _ = w.free();
        fenced
    };
    let text = match result {
        Ok(()) => return Err("succeeded although rank 1 freed the window unmatched".into()),
        Err(err) => err.to_string(),
    };
    if !text.contains("rank 1 left the window") || !text.contains("while rank 0 still waited") {
        return Err(format!("expected 'rank 1 left the window … while rank 0 still waited', got: {text}"));
    }
    if start.elapsed() > Duration::from_secs(1) {
        return Err(format!("the error took {:?}: {text}", start.elapsed()));
    }
    Ok(())
}

/// Rank 1 dies with the window live: rank 0's free returns an error, quickly,
/// and releases everything.
fn dead_peer<O: Oob>(comm: &Comm<O>) -> Result<(), String> {
    let me = comm.rank();
    let w = DeviceWindow::builder(comm, 4096).device(me as i32).runtime(HostSim::new()).alloc().map_err(e)?;
    w.fence().map_err(e)?;
    if me == 1 {
        // Dies holding its key and its import: no destructor runs.
        std::process::exit(0);
    }
    let start = std::time::Instant::now();
    match w.free() {
        Ok(()) => Err("free succeeded with a dead peer".into()),
        Err(err) if start.elapsed() < Duration::from_secs(30) => {
            println!("rank 0: free with a dead peer: {err}");
            Ok(())
        }
        Err(err) => Err(format!("free took {:?}: {err}", start.elapsed())),
    }
}

/// Rank 1's allgather fails at a device stage (`FLAKY=<call>,<before|after>`;
/// call 1 makes the communicator, 2-4 the host window, 5-7 the device
/// stages): every rank fails, none hangs, and the next window works.
fn flaky_oob(oob: RunOob) -> Result<(), String> {
    let spec = std::env::var("FLAKY").map_err(|_| "FLAKY unset")?;
    let (call, when) = spec.split_once(',').ok_or("FLAKY=<call>,<before|after>")?;
    let (rank, n) = (oob.rank(), oob.nranks());
    let call = call.parse().map_err(|_| "call")?;
    let when = if when == "after" { When::After } else { When::Before };
    let flaky = if rank == 1 { FailingOob::new(oob, call, when) } else { FailingOob::passing(oob) };
    let comm = Comm::new(flaky, rank, n).map_err(|e| e.to_string())?;
    match DeviceWindow::builder(&comm, 4096).device(rank as i32).alloc() {
        Ok(_) => return Err(format!("the window was made though rank 1's allgather {call} failed")),
        Err(Error::Collective(Collective::Local(Failure::Oob(INJECTED)))) if rank == 1 => {}
        Err(Error::Collective(Collective::Peer { rank: 1, failure: Failure::Oob(_) })) if rank != 1 => {}
        Err(err) => return Err(format!("unexpected error: {err:?}")),
    }
    // The ranks are still in step.
    let w = DeviceWindow::builder(&comm, 4096).device(rank as i32).alloc().map_err(e)?;
    w.fence().map_err(e)?;
    w.free().map_err(e)
}

#[test]
fn a_failing_oob_call_at_any_device_stage_fails_every_rank() {
    for call in ["5", "6", "7"] {
        for when in ["before", "after"] {
            launch(3, "flaky_oob", &[("FLAKY", &format!("{call},{when}"))]);
        }
    }
}

/// Windows dropped without `free` release their imports, keys and memory.
fn dropped<O: Oob>(comm: &Comm<O>) -> Result<(), String> {
    let me = comm.rank();
    for round in 0..3 {
        let w = DeviceWindow::builder(comm, 4096 << round).device(me as i32).alloc().map_err(e)?;
        w.fence().map_err(e)?;
        drop(w);
    }
    Ok(())
}

/// Keys exported without a PID whitelist are imported all the same; a rank
/// that keeps the whitelist while the others do not fails every rank.
fn no_validation<O: Oob>(comm: &Comm<O>) -> Result<(), String> {
    let me = comm.rank();
    let w = DeviceWindow::builder(comm, 4096).device(me as i32).disable_pid_validation(true).alloc().map_err(e)?;
    w.write(me, 0, &[me as u8; 16]).map_err(e)?;
    w.fence().map_err(e)?;
    let mut got = [0u8; 16];
    w.read((me + 1) % comm.nranks(), 0, &mut got).map_err(e)?;
    if got != [((me + 1) % comm.nranks()) as u8; 16] {
        return Err(format!("read {got:?}"));
    }
    w.free().map_err(e)?;
    match DeviceWindow::builder(comm, 4096).device(me as i32).disable_pid_validation(me != 0).alloc() {
        Err(err @ Error::Collective(Collective::Mismatch { rank: 1, field: Setting::PidValidation }))
            if err.to_string() == "rank 1 disagrees with rank 0 on the PID validation setting" =>
        {
            Ok(())
        }
        other => Err(format!("disagreeing validation settings gave {other:?}")),
    }
}

/// The directory holding the simulator library cargo built next to this test, if any.
fn simlib_dir() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let deps = exe.parent()?.to_path_buf();
    [deps.clone(), deps.join("..")].into_iter().find(|d| d.join("libascendcl.so").exists())
}

#[test]
fn handoff_and_user_devices_through_the_simulator_library_as_libascendcl() {
    let Some(dir) = simlib_dir() else {
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "SKIP: libascendcl.so (kpccl-ascend-simlib) is not built");
        return;
    };
    let dir = dir.to_string_lossy().into_owned();
    let through_library = [("KPCCL_ASCEND", "acl"), ("LD_LIBRARY_PATH", dir.as_str())];
    launch(2, "handoff", &through_library);
    launch(4, "handoff", &through_library);
    launch(2, "user_devices", &through_library);
}

/// Runs `case` on `n` ranks under `chip`, with the simulator's copy log on; the
/// log must stay empty: no synchronous copy of imported memory was made.
fn launch_logged(n: u32, case: &str, chip: Chip, env: &[(&str, &str)]) {
    let scratch = ScratchDir::new("test-copylog", case);
    let log = scratch.path().join("copies");
    let path = log.to_string_lossy().into_owned();
    let mut all = vec![("ASCEND_SIM_CHIP", chip.name()), ("ASCEND_SIM_COPY_LOG", path.as_str())];
    all.extend_from_slice(env);
    launch(n, case, &all);
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(text.is_empty(), "{case} under {chip}: synchronous copies of imported memory:\n{text}");
}

#[test]
fn handoff_under_each_chip_model_makes_no_synchronous_copy_of_imports() {
    for chip in [Chip::Inference, Chip::A2, Chip::A3] {
        launch_logged(3, "handoff", chip, &[]);
    }
}

#[test]
fn handoff_through_the_library_under_the_strictest_chip_model() {
    let Some(dir) = simlib_dir() else { return };
    let dir = dir.to_string_lossy().into_owned();
    launch_logged(2, "handoff", Chip::Inference, &[("KPCCL_ASCEND", "acl"), ("LD_LIBRARY_PATH", &dir)]);
}

/// Work a rank queues on its own stream (an asynchronous copy into the right
/// neighbour's segment) is not covered by a plain fence — the simulator runs it
/// only when the stream is synchronised — and is by a fence given that stream.
fn stream_fence<O: Oob>(comm: &Comm<O>) -> Result<(), String> {
    let (me, n) = (comm.rank(), comm.nranks());
    let right = (me + 1) % n;
    let w = DeviceWindow::builder(comm, 4096).device(me as i32).alloc().map_err(e)?;
    let rt = w.runtime();
    let local = rt.malloc(4096, ACL_MEM_MALLOC_HUGE_FIRST).map_err(|x| x.to_string())?;
    let bytes = [0x40 + me as u8; 4096];
    // SAFETY: `local` is 4096 bytes of this rank's own device memory.
    unsafe { rt.memcpy(Memcpy::exact(local, bytes.as_ptr().cast(), 4096, ACL_MEMCPY_HOST_TO_DEVICE)) }
        .map_err(|x| x.to_string())?;
    let s = rt.create_stream().map_err(|x| x.to_string())?;
    let peer = w.segment(right).map_err(e)?.ptr;
    // SAFETY: `peer` is the neighbour's imported segment of 4096 bytes and `local`
    // 4096 bytes, both alive until the stream is synchronised below.
    unsafe { rt.memcpy_async(Memcpy::exact(peer, local, 4096, ACL_MEMCPY_DEVICE_TO_DEVICE), s) }
        .map_err(|x| x.to_string())?;
    let left = u8::try_from((me + n - 1) % n).unwrap();
    let mut got = [0u8; 4096];
    w.fence().map_err(e)?;
    w.read(me, 0, &mut got).map_err(e)?;
    if got != [0u8; 4096] {
        return Err("the plain fence ran work queued on the caller's stream".into());
    }
    w.fence().map_err(e)?;
    w.fence_on(Some(s)).map_err(e)?;
    w.read(me, 0, &mut got).map_err(e)?;
    if got != [0x40 + left; 4096] {
        return Err(format!("after a fence on the stream, own segment holds {:#x}", got[0]));
    }
    rt.destroy_stream(s).map_err(|x| x.to_string())?;
    rt.free(local).map_err(|x| x.to_string())?;
    w.free().map_err(e)
}

/// Under the inference chip model, segments allocated without a P2P policy
/// cannot be imported by another device: every rank fails with 507899.
fn no_p2p_policy<O: Oob>(comm: &Comm<O>) -> Result<(), String> {
    let me = comm.rank();
    let b = DeviceWindow::builder(comm, 4096).device(me as i32).p2p_policy(false);
    expect_acl(b.alloc(), ACL_ERROR_RT_DRV_INTERNAL_ERROR, "import of non-P2P memory").map(drop)
}

/// The control of the copy log: a synchronous copy out of a peer's import
/// (which the page leaves open across devices) is logged.
fn sync_copy_is_logged<O: Oob>(comm: &Comm<O>) -> Result<(), String> {
    let (me, n) = (comm.rank(), comm.nranks());
    let w = DeviceWindow::builder(comm, 4096).device(me as i32).alloc().map_err(e)?;
    let rt = w.runtime();
    let local = rt.malloc(4096, ACL_MEM_MALLOC_HUGE_FIRST).map_err(|x| x.to_string())?;
    let peer = w.segment((me + 1) % n).map_err(e)?.ptr;
    // SAFETY: both are 4096-byte device blocks.
    unsafe { rt.memcpy(Memcpy::exact(local, peer, 4096, ACL_MEMCPY_DEVICE_TO_DEVICE)) }.map_err(|x| x.to_string())?;
    if kpccl_ascend::sim::sync_import_copies() != 1 {
        return Err("the in-process counter missed the copy".into());
    }
    rt.free(local).map_err(|x| x.to_string())?;
    w.free().map_err(e)
}

#[test]
fn the_copy_log_records_a_synchronous_copy_of_an_import() {
    let scratch = ScratchDir::new("test-copylog", "control");
    let log = scratch.path().join("copies");
    let path = log.to_string_lossy().into_owned();
    launch(2, "sync_copy_is_logged", &[("ASCEND_SIM_COPY_LOG", path.as_str())]);
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(text.lines().count(), 2, "one line per rank:\n{text}");
    assert!(text.lines().all(|l| l.contains("aclrtMemcpy") && l.ends_with("-> 0")), "{text}");
}

/// A chip without IPC memory sharing fails every rank's export with 207000; an
/// unknown chip model fails every rank's `aclInit` with 100000.
fn no_ipc_chip<O: Oob>(comm: &Comm<O>) -> Result<(), String> {
    let me = comm.rank() as i32;
    let code = if std::env::var("ASCEND_SIM_CHIP").as_deref() == Ok("200I/500 A2") {
        ACL_ERROR_RT_FEATURE_NOT_SUPPORT
    } else {
        ACL_ERROR_INVALID_PARAM
    };
    expect_acl(DeviceWindow::builder(comm, 4096).device(me).alloc(), code, "no IPC").map(drop)
}

/// A stream handle no runtime gave: synchronising it fails (107000).
const BAD_STREAM: AclStream = AclStream(0xdead_0000);

type Step = fn(&DeviceWindow) -> Result<(), kpccl_ascend::window::Error>;

/// Rank 1's signal after a copy on the window's stream whose destination was
/// freed before the stream ran it: the synchronisation fails (507000).
fn signal_after_a_faulting_copy(w: &DeviceWindow) -> Result<(), kpccl_ascend::window::Error> {
    let rt = w.runtime();
    let gone = rt.malloc(4096, ACL_MEM_MALLOC_HUGE_FIRST).expect("malloc");
    let src = w.segment(w.rank()).expect("own segment").ptr;
    // SAFETY: both are 4096 bytes of this rank's device memory; the simulator
    // drops the copy when it finds `gone` freed at the synchronisation.
    unsafe { rt.memcpy_async(Memcpy::exact(gone, src, 4096, ACL_MEMCPY_DEVICE_TO_DEVICE), w.stream()) }.expect("queue");
    rt.free(gone).expect("free");
    w.signal(0)
}

/// Rank 1's half of a fence or signal fails on its device (its stream cannot
/// be synchronised), then it stays a while and frees the window; rank 0's
/// half must fail at once, naming rank 1, neither waiting for rank 1 nor
/// completing against rank 1's free as if rank 1 had taken part.
fn device_failure<O: Oob>(comm: &Comm<O>, failing: Step, waiting: Step) -> Result<(), String> {
    let me = comm.rank();
    let w = DeviceWindow::builder(comm, 4096).device(me as i32).alloc().map_err(|e| e.to_string())?;
    if me == 1 {
        if failing(&w).is_ok() {
            return Err("a fence on a stream that does not exist succeeded".into());
        }
        std::thread::sleep(Duration::from_secs(2));
        let _ = w.free();
        return Ok(());
    }
    let start = Instant::now();
    let result = waiting(&w);
    let _ = w.free();
    match result {
        Ok(()) => Err("the fence succeeded although rank 1's half of it failed".into()),
        Err(e) if !e.to_string().contains("rank 1") => Err(format!("the error does not name rank 1: {e}")),
        Err(e) if start.elapsed() > Duration::from_secs(1) => Err(format!("took {:?}: {e}", start.elapsed())),
        Err(_) => Ok(()),
    }
}

/// Rank 1's process ends, without running a destructor, at its allgather
/// number `DIE_AT` (1 makes the communicator, 2-4 the host window, 5-7 the
/// device stages), before or after taking part (`DIE_WHEN`).
struct DyingOob {
    inner: RunOob,
    die_at: Option<(u32, bool)>,
    calls: core::cell::Cell<u32>,
}

impl Oob for DyingOob {
    fn allgather(&self, send: &[u8], recv: &mut [u8]) -> Result<(), OobError> {
        let call = self.calls.get() + 1;
        self.calls.set(call);
        match self.die_at {
            Some((at, false)) if at == call => std::process::exit(0),
            Some((at, true)) if at == call => {
                let _ = self.inner.allgather(send, recv);
                std::process::exit(0)
            }
            _ => self.inner.allgather(send, recv),
        }
    }

    fn barrier(&self) -> Result<(), OobError> {
        self.inner.barrier()
    }
}

/// The others fail the creation, naming rank 1, and release what they hold.
fn death_in_creation(oob: RunOob) -> Result<(), String> {
    let (rank, n) = (oob.rank(), oob.nranks());
    let at: u32 = std::env::var("DIE_AT").map_err(|_| "DIE_AT unset")?.parse().map_err(|_| "DIE_AT")?;
    let after = std::env::var("DIE_WHEN").as_deref() == Ok("after");
    let die_at = (rank == 1).then_some((at, after));
    let comm = Comm::new(DyingOob { inner: oob, die_at, calls: core::cell::Cell::new(0) }, rank, n)
        .map_err(|e| e.to_string())?;
    match DeviceWindow::builder(&comm, 4096).device(rank as i32).alloc() {
        Ok(w) => {
            let _ = w.free();
            Err(format!("the window was made though rank 1 died at allgather {at}"))
        }
        Err(e) if e.to_string().contains("rank 1") => {
            println!("rank {rank}: {e}");
            Ok(())
        }
        Err(e) => Err(format!("the error does not name rank 1: {e}")),
    }
}

#[test]
fn a_rank_that_dies_at_any_device_stage_of_creation_fails_the_others_and_leaks_nothing() {
    for at in ["5", "6", "7"] {
        for when in ["before", "after"] {
            launch(3, "death_in_creation", &[("DIE_AT", at), ("DIE_WHEN", when)]);
        }
    }
}

/// Rank 1 sends a record that breaks the protocol's rules at allgather
/// `CORRUPT` (5: `Ident`, its size made `u64::MAX`; 6: `Export`, its key
/// zeroed) and is otherwise sound.
struct CorruptingOob {
    inner: RunOob,
    at: Option<u32>,
    calls: core::cell::Cell<u32>,
}

/// Where the size and the key sit in a creation record (`src/window/record.rs`).
const RECORD_SIZE_AT: usize = 48;
const RECORD_KEY: core::ops::Range<usize> = 56..121;

impl Oob for CorruptingOob {
    fn allgather(&self, send: &[u8], recv: &mut [u8]) -> Result<(), OobError> {
        let call = self.calls.get() + 1;
        self.calls.set(call);
        let mut sent = send.to_vec();
        match self.at {
            Some(5) if call == 5 => sent[RECORD_SIZE_AT..RECORD_SIZE_AT + 8].copy_from_slice(&u64::MAX.to_le_bytes()),
            Some(6) if call == 6 => sent[RECORD_KEY].fill(0),
            _ => {}
        }
        self.inner.allgather(&sent, recv)
    }

    fn barrier(&self) -> Result<(), OobError> {
        self.inner.barrier()
    }
}

/// Every rank, rank 1 included, refuses rank 1's record, naming it, instead
/// of making a window whose copies to rank 1 reach no import.
fn bad_record(oob: RunOob) -> Result<(), String> {
    let (rank, n) = (oob.rank(), oob.nranks());
    let at: u32 = std::env::var("CORRUPT").map_err(|_| "CORRUPT unset")?.parse().map_err(|_| "CORRUPT")?;
    let corrupt = CorruptingOob { inner: oob, at: (rank == 1).then_some(at), calls: core::cell::Cell::new(0) };
    let comm = Comm::new(corrupt, rank, n).map_err(|e| e.to_string())?;
    match DeviceWindow::builder(&comm, 4096).device(rank as i32).alloc() {
        Ok(w) => {
            let copied = w.write(1, 8192, &[1; 16]);
            let _ = w.free();
            Err(format!("the window was made with rank 1's bad record (a write past its segment: {copied:?})"))
        }
        Err(Error::BadRecord { rank: 1, .. }) => {
            // The ranks are still in step.
            let w = DeviceWindow::builder(&comm, 4096).device(rank as i32).alloc().map_err(e)?;
            w.fence().map_err(e)?;
            w.free().map_err(e)
        }
        Err(err) => Err(format!("unexpected error: {err}")),
    }
}

#[test]
fn a_peer_record_with_an_impossible_size_or_a_missing_key_fails_every_rank() {
    for at in ["5", "6"] {
        launch(3, "bad_record", &[("CORRUPT", at)]);
    }
}
