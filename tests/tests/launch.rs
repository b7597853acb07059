//! The launcher end to end: real rank processes of `kpccl-oob-probe` under
//! `Launch`, each with a bounded wait (the `kpccl-run` binary's own tests
//! are in its crate).
#![allow(missing_docs, clippy::std_instead_of_core)]

use std::time::{Duration, Instant};

use kpccl_run::{Binding, Launch, Report};

const PROBE: &str = env!("CARGO_BIN_EXE_kpccl-oob-probe");
/// No launch here may take longer (the launcher kills what is left).
const BOUND: Duration = Duration::from_secs(20);

/// A launch with a bounded wait, whose ranks also give up on the hub early.
fn launch(n: u32) -> Launch {
    Launch::new(n).timeout(BOUND).env("KPCCL_OOB_TIMEOUT_MS", "10000")
}

fn run(n: u32, mode: &str) -> Report {
    let report = launch(n).run(PROBE, [mode]).expect("the launcher starts");
    assert_eq!(report.status.len(), n as usize);
    assert!(!report.timed_out, "{mode} on {n} ranks hit the timeout: {report}");
    report
}

fn codes(report: &Report) -> Vec<Option<i32>> {
    report.status.iter().map(|s| s.code()).collect()
}

#[test]
fn allgather_and_barrier_on_1_2_4_8_ranks() {
    for n in [1, 2, 4, 8] {
        let report = run(n, "ok");
        assert!(report.success(), "{n} ranks: {report}");
        assert_eq!(report.oob_failure, None);
    }
}

#[test]
fn a_rank_that_exits_early_fails_the_others_promptly() {
    for n in [2, 4, 8] {
        let report = run(n, "die-early");
        let want: Vec<_> = (0..n).map(|r| Some(if r == 1 { 0 } else { 3 })).collect();
        assert_eq!(codes(&report), want, "{n} ranks: {report}");
        assert_eq!(report.exit_code(), 3);
        let why = report.oob_failure.as_deref().unwrap_or_default();
        assert!(why.contains("rank 1 left"), "{why}");
        // The survivors learn it from the hub, not from their 10 s timeout.
        assert!(report.elapsed < Duration::from_secs(8), "{n} ranks took {:?}", report.elapsed);
    }
}

#[test]
fn ranks_that_disagree_on_the_length_all_fail() {
    for n in [2, 4, 8] {
        let report = run(n, "mismatch");
        assert_eq!(codes(&report), vec![Some(3); n as usize], "{n} ranks: {report}");
        let why = report.oob_failure.as_deref().unwrap_or_default();
        assert!(why.contains("disagree") && why.contains("rank 1 allgather 2 of"), "{why}");
    }
}

#[test]
fn the_timeout_kills_a_hung_job() {
    let start = Instant::now();
    let report = launch(3).timeout(Duration::from_millis(500)).run(PROBE, ["hang"]).unwrap();
    assert!(report.timed_out, "{report}");
    // Rank 0 sleeps, so it is killed; the others may hear that from the hub and exit first.
    assert_eq!(report.killed.first(), Some(&0), "{report}");
    assert_eq!(report.exit_code(), 128 + 9);
    assert!(report.to_string().contains("killed at timeout"), "{report}");
    assert!(start.elapsed() < Duration::from_secs(5), "took {:?}", start.elapsed());
}

#[test]
fn a_program_that_cannot_start_is_an_error() {
    match launch(2).run("/nonexistent/kpccl-no-such-program", [""; 0]) {
        Err(e) => {
            assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
            assert!(e.to_string().contains("cannot start rank 0"), "{e}");
        }
        // Through a runner (qemu) the runner starts, then fails to load the program.
        Ok(report) => assert!(!report.success(), "{report}"),
    }
}

#[test]
fn ranks_left_running_after_a_failure_are_killed_after_the_grace() {
    let start = Instant::now();
    // Rank 0 sleeps a minute; the others give up on it after 300 ms and fail.
    let grace = Duration::from_millis(500);
    let report = Launch::new(3)
        .timeout(BOUND)
        .env("KPCCL_OOB_TIMEOUT_MS", "300")
        .abort_after(Some(grace))
        .run(PROBE, ["hang"])
        .unwrap();
    assert!(!report.timed_out, "{report}");
    assert_eq!(report.killed, [0], "{report}");
    assert!(report.unstarted.is_empty(), "rank 0 ran its program: {report}");
    assert!(matches!(report.abandoned, Some(1 | 2)), "{report}");
    assert!(report.to_string().contains("rank 0: killed 0.500s after rank"), "{report}");
    // What it was doing when killed (connected or not, under load): its command line says what it runs.
    assert_eq!(report.stuck.len(), 1, "{report}");
    assert!(report.stuck[0].starts_with("rank 0") && report.stuck[0].contains("kpccl-oob-probe hang]"), "{report}");
    assert!(start.elapsed() < Duration::from_secs(5), "took {:?}", start.elapsed());
    // Without the grace, only the timeout ends it.
    let report = launch(2)
        .timeout(Duration::from_millis(1500))
        .env("KPCCL_OOB_TIMEOUT_MS", "300")
        .abort_after(None)
        .run(PROBE, ["hang"])
        .unwrap();
    assert!(report.timed_out && report.abandoned.is_none(), "{report}");
}

/// Whether process `pid` still runs (a zombie has ended: its parent, init
/// here, has yet to reap it).
fn runs(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| stat.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')))
}

#[test]
fn a_rank_killed_at_the_timeout_takes_what_it_started_with_it() {
    // A rank that started a program and waits for it, as a wrapper does.
    let dir = kpccl_testkit::ScratchDir::new("launch", "wrapped");
    let pidfile = dir.path().join("program.pid");
    let report = Launch::new(1)
        .timeout(Duration::from_millis(1500))
        .env("PROBE_PIDFILE", &pidfile)
        .run(PROBE, ["wrapper"])
        .unwrap();
    assert!(report.timed_out, "{report}");
    assert_eq!(report.killed, [0], "{report}");
    let program: u32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
    let start = Instant::now();
    while runs(program) && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!runs(program), "the wrapped program (pid {program}) outlived its killed rank");
}

#[test]
fn bound_ranks_each_run_on_one_cpu_in_turn() {
    let cpus = kpccl_tests::allowed_cpus().unwrap();
    let all = cpus.iter().map(usize::to_string).collect::<Vec<_>>().join(",");
    // One rank more than the CPUs: the last wraps around to the first CPU.
    let n = u32::try_from(cpus.len() + 1).unwrap().min(8);
    for binding in [Binding::Cpu, Binding::None] {
        let dir = kpccl_testkit::ScratchDir::new("launch", "bound");
        let report = launch(n).binding(binding).env("PROBE_DIR", dir.path()).run(PROBE, ["affinity"]).unwrap();
        assert!(report.success(), "{binding:?}: {report}");
        for r in 0..n {
            let got = std::fs::read_to_string(dir.path().join(format!("affinity-{r}"))).unwrap();
            let want = match binding {
                Binding::Cpu => cpus[r as usize % cpus.len()].to_string(),
                Binding::None => all.clone(),
            };
            assert_eq!(got, want, "{binding:?}: rank {r} of {n}");
        }
    }
}
