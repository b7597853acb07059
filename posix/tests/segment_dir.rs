//! A segment directory that cannot be used fails window creation with an
//! error that names it, says what is wrong, and what to do.
#![allow(missing_docs, clippy::std_instead_of_core)]

use std::os::unix::fs::PermissionsExt;

use kpccl_posix::{Comm, Config, Error};
use kpccl_testkit::{ScratchDir, Solo};

#[test]
fn a_node_directory_open_to_others_is_named_with_its_mode_and_the_fix() {
    let scratch = ScratchDir::new("dirtest", "open");
    let shm = scratch.path().to_owned();
    let config = Config { shm_dir: shm.clone(), node_id: Some("dirtest".into()), ..Config::default() };
    let comm = Comm::builder(Solo, 0, 1).config(config).build().unwrap();
    let node_dir = comm.segment_dir().to_owned();
    assert!(node_dir.starts_with(&shm) && node_dir != shm, "{}", node_dir.display());
    // Left open to others, and not empty (creation sweeps an empty one of this user's away).
    std::fs::create_dir(&node_dir).unwrap();
    std::fs::set_permissions(&node_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(node_dir.join("stray"), b"").unwrap();
    let e = comm.window(4096).alloc().unwrap_err();
    assert!(matches!(e, Error::SegmentDir(_)), "{e:?}");
    let text = e.to_string();
    let path = node_dir.display().to_string();
    for part in [path.as_str(), "0755", "chmod 700"] {
        assert!(text.contains(part), "{part:?} missing from: {text}");
    }
    // Another user's (only root can hand it over; else this part is skipped).
    std::fs::set_permissions(&node_dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    if std::os::unix::fs::chown(&node_dir, Some(65534), None).is_ok() {
        let text = comm.window(4096).alloc().unwrap_err().to_string();
        assert!(text.contains("belongs to uid 65534") && text.contains("KPCCL_SHM_DIR"), "{text}");
        std::os::unix::fs::chown(&node_dir, Some(0), None).unwrap();
    } else {
        eprintln!("SKIPPED the other user's directory: chown needs root");
    }
    // Fixed as the message says, it works.
    std::fs::set_permissions(&node_dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    comm.window(4096).alloc().unwrap().free().unwrap();
}

#[test]
fn a_failed_system_call_names_the_directory_the_reason_and_its_class() {
    // Not there: made by no one.
    let scratch = ScratchDir::new("dirtest", "missing");
    let shm = scratch.path().join("missing");
    let config = Config { shm_dir: shm.clone(), ..Config::default() };
    let e = match Comm::builder(Solo, 0, 1).config(config).build() {
        Ok(comm) => comm.window(4096).alloc().unwrap_err(),
        Err(e) => e,
    };
    let text = e.to_string();
    assert!(!shm.exists(), "{} was created", shm.display());
    assert!(text.contains(&shm.display().to_string()) && text.contains("No such file or directory"), "{text}");
    assert_eq!(e.kind(), kpccl_posix::ErrorKind::System, "{e:?}");
}

/// Over simulated nodes, a rank of another node whose segment could not be
/// made is named without this node's directory, which is not where it failed.
#[test]
fn another_nodes_failure_does_not_name_this_nodes_directory() {
    use core::time::Duration;
    let scratch = ScratchDir::new("dirtest", "other-node");
    let shm = scratch.path().to_owned();
    let outcomes = kpccl_core::threads::run(4, Duration::from_secs(60), move |rank, oob| {
        // Round robin: node 0 holds ranks 0 and 2, node 1 ranks 1 and 3.
        let config = Config { shm_dir: shm.clone(), node_id: Some(format!("node{}", rank % 2)), ..Config::default() };
        let comm = Comm::builder(oob, rank, 4).config(config).build().expect("communicator");
        let dir = comm.segment_dir().to_owned();
        if rank == 1 {
            // Node 1's creator finds its directory open to others.
            std::fs::create_dir(&dir).unwrap();
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
            std::fs::write(dir.join("stray"), b"").unwrap();
        }
        comm.barrier().expect("barrier");
        let e = comm.window(4096).alloc().expect_err("node 1 cannot create");
        (dir, e)
    });
    let (node1_dir, node1_error) = &outcomes[1];
    assert!(matches!(node1_error, Error::SegmentDir(_)), "{node1_error:?}");
    let _ = std::fs::remove_dir_all(node1_dir);
    for (dir, e) in [&outcomes[0], &outcomes[2]] {
        let text = e.to_string();
        assert!(text.contains("rank 1"), "{text}");
        assert!(!text.contains(&dir.display().to_string()), "names node 0's directory: {text}");
        assert_eq!(e.kind(), kpccl_posix::ErrorKind::Permission, "{e:?}");
    }
}
