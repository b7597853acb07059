//! The Rust hybrid example (`kpccl-hybrid`) under a real `mpirun`: 8 ranks as
//! one node and split into 2 and 4 simulated nodes (`KPCCL_NODE_ID` per rank,
//! set by a shell around each rank), verified against `MPI_Allreduce`.
//! Skipped, saying so, when the example was built without MPI (no `mpicc`,
//! or another target) or there is no `mpirun`; fails when `mpicc` is there
//! but did not build the MPI shim. Open MPI's `mpirun` and MPICH's alike.
#![allow(missing_docs, clippy::std_instead_of_core)]

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `argv` in its own process group; kills the group after `limit`.
/// Whether it succeeded, its stdout and its stderr (both drained as they
/// come: a full pipe would stop the ranks).
fn bounded(argv: &[String], limit: Duration) -> (bool, String, String) {
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("mpirun starts");
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = Vec::new();
            let _ = r.read_to_end(&mut s);
            String::from_utf8_lossy(&s).into_owned()
        })
    };
    let out = drain(Box::new(child.stdout.take().expect("piped")));
    let err = drain(Box::new(child.stderr.take().expect("piped")));
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = Command::new("kill").args(["-KILL", "--", &format!("-{}", child.id())]).status();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (stdout, stderr) = (out.join().unwrap_or_default(), err.join().unwrap_or_default());
    (status.is_some_and(|s| s.success()), stdout, stderr)
}

#[test]
fn hybrid_allreduce_on_1_2_and_4_simulated_nodes() {
    if cfg!(kpccl_mpi_broken) {
        panic!("mpicc is there but did not build kpccl-hybrid's MPI shim (see cargo's warning): built without MPI");
    }
    if !cfg!(kpccl_mpi) {
        eprintln!("SKIPPED hybrid_allreduce: kpccl-hybrid was built without MPI");
        return;
    }
    let Ok(version) = Command::new("mpirun").arg("--version").output() else {
        eprintln!("SKIPPED hybrid_allreduce: no mpirun");
        return;
    };
    let mut mpirun = vec!["mpirun".to_owned()];
    if String::from_utf8_lossy(&version.stdout).contains("Open MPI") {
        mpirun.push("--oversubscribe".to_owned());
        // Open MPI refuses root unless told.
        if Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.starts_with(b"0\n")) {
            mpirun.push("--allow-run-as-root".to_owned());
        }
    }
    for per_node in [8, 4, 2] {
        let mut argv = mpirun.clone();
        argv.extend(["-np", "8", "sh", "-c"].map(str::to_owned));
        // The rank: Open MPI's variable, else MPICH's (Hydra's).
        argv.push(format!(
            "KPCCL_NODE_ID=node$((${{OMPI_COMM_WORLD_RANK:-${{PMI_RANK:?no rank variable}}}} / {per_node})) exec \"$@\""
        ));
        argv.push("kpccl-split-nodes".to_owned());
        argv.push(env!("CARGO_BIN_EXE_kpccl-hybrid").to_owned());
        argv.extend(["262144", "3"].map(str::to_owned));
        let (ok, stdout, stderr) = bounded(&argv, Duration::from_secs(120));
        println!("{stdout}");
        let nodes = 8 / per_node;
        assert!(ok, "kpccl-hybrid on {nodes} nodes failed:\n{stdout}\n{stderr}");
        assert!(stdout.contains(&format!("8 ranks on {nodes} node")), "{stdout}");
        assert!(stdout.lines().any(|l| l.starts_with("verified: 0 wrong")), "{stdout}");
    }
}

#[test]
fn bad_arguments_are_refused_not_replaced() {
    if !cfg!(kpccl_mpi) {
        eprintln!("SKIPPED bad_arguments: kpccl-hybrid was built without MPI");
        return;
    }
    // Refused before MPI starts, so no mpirun is needed.
    for args in [&["0"][..], &["many"], &["16", "0"], &["16", "1", "extra"]] {
        let out = Command::new(env!("CARGO_BIN_EXE_kpccl-hybrid")).args(args).output().expect("kpccl-hybrid starts");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}{stderr}", String::from_utf8_lossy(&out.stdout));
        assert!(stderr.starts_with("usage: kpccl-hybrid"), "{args:?}: {stderr}");
    }
}
