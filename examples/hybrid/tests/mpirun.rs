//! The Rust hybrid example (`kpccl-hybrid`) under a real `mpirun`: 8 ranks as
//! one node and split into 2 and 4 simulated nodes (`KPCCL_NODE_ID` per rank,
//! set by a shell around each rank), verified against `MPI_Allreduce`.
//! Skipped, saying so, when the example was built without MPI (no `mpicc`,
//! or another target) or there is no `mpirun`.
#![allow(missing_docs, clippy::std_instead_of_core)]

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `argv` in its own process group; kills the group after `limit`.
fn bounded(argv: &[String], limit: Duration) -> (bool, String) {
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("mpirun starts");
    let mut out = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
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
    let stdout = reader.join().unwrap_or_default();
    (status.is_some_and(|s| s.success()), stdout)
}

#[test]
fn hybrid_allreduce_on_1_2_and_4_simulated_nodes() {
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
        argv.push(format!("KPCCL_NODE_ID=node$((OMPI_COMM_WORLD_RANK / {per_node})) exec \"$@\""));
        argv.push("kpccl-split-nodes".to_owned());
        argv.push(env!("CARGO_BIN_EXE_kpccl-hybrid").to_owned());
        argv.extend(["262144", "3"].map(str::to_owned));
        let (ok, stdout) = bounded(&argv, Duration::from_secs(120));
        println!("{stdout}");
        let nodes = 8 / per_node;
        assert!(ok, "kpccl-hybrid on {nodes} nodes failed:\n{stdout}");
        assert!(stdout.contains(&format!("8 ranks on {nodes} node")), "{stdout}");
        assert!(stdout.lines().any(|l| l.starts_with("verified: 0 wrong")), "{stdout}");
    }
}
