//! A child forked from a rank shares the rank's connection to the launcher:
//! its collectives fail at once (`code::FORKED`), sending nothing, so that
//! nothing it does is taken for the rank's part; the rank's own collectives
//! go on (one rank, with a hub of the test's that counts the barriers).
#![allow(missing_docs, clippy::std_instead_of_core)]

use std::os::unix::net::UnixListener;
use std::time::Duration;

use kpccl_core::Oob;
use kpccl_posix::launch::wire::Msg;
use kpccl_posix::launch::{RunOob, code};
use kpccl_testkit::ScratchDir;

/// A hub for one rank: answers every barrier; returns how many came.
fn hub(listener: UnixListener) -> usize {
    let (conn, _) = listener.accept().unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let Some(Msg::Hello { .. }) = Msg::read_from(&conn).unwrap() else { panic!("no hello") };
    Msg::Welcome.write_to(&conn).unwrap();
    let mut barriers = 0;
    while let Ok(Some(Msg::Barrier)) = Msg::read_from(&conn) {
        barriers += 1;
        Msg::Done { data: Vec::new().into() }.write_to(&conn).unwrap();
    }
    barriers
}

#[test]
fn a_forked_child_cannot_speak_for_its_rank() {
    let dir = ScratchDir::new("forked-oob", "child");
    let path = dir.path().join("hub.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let hub = std::thread::spawn(move || hub(listener));
    let oob = RunOob::connect(path.to_str().unwrap(), 0, 1, Duration::from_secs(10)).unwrap();
    oob.barrier().unwrap();
    // `barrier` refuses in the child before it takes a lock or allocates.
    let code = kpccl_testkit::in_forked_child(|| i32::from(!oob.barrier().is_err_and(|e| e.code == code::FORKED)));
    assert_eq!(code, 0, "the child's barrier was not refused");
    oob.barrier().unwrap();
    drop(oob);
    assert_eq!(hub.join().unwrap(), 2, "only the rank's own barriers reach the hub");
}
