//! A communicator's barrier that fails under the launcher names the rank the
//! launcher lost and how, as a failed creation does, and is classed as a
//! dead peer: not a bare "the out-of-band collective failed (returned -5)"
//! (two threads as two ranks, with a hub of the test's that loses rank 1
//! at the first barrier).
#![allow(missing_docs, clippy::std_instead_of_core)]

use std::borrow::Cow;
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::Duration;

use kpccl_posix::launch::wire::{Culprit, Msg, Reason};
use kpccl_posix::launch::{Departure, Ending, RunOob};
use kpccl_posix::{Comm, Config, Error, ErrorKind};
use kpccl_testkit::ScratchDir;

/// A hub for `n` ranks: answers allgathers with the concatenation, and
/// fails the first barrier on every rank, saying that rank 1 was killed.
fn hub(listener: UnixListener, n: usize) {
    let mut conns: Vec<Option<UnixStream>> = (0..n).map(|_| None).collect();
    for _ in 0..n {
        let (conn, _) = listener.accept().unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let Some(Msg::Hello { rank, .. }) = Msg::read_from(&conn).unwrap() else { panic!("no hello") };
        Msg::Welcome.write_to(&conn).unwrap();
        conns[rank as usize] = Some(conn);
    }
    let conns: Vec<UnixStream> = conns.into_iter().map(Option::unwrap).collect();
    loop {
        let ops: Vec<_> = conns.iter().map(|c| Msg::read_from(c).ok().flatten()).collect();
        let reply = match &ops[0] {
            Some(Msg::Allgather { .. }) => {
                let mut all = Vec::new();
                for op in &ops {
                    let Some(Msg::Allgather { data, .. }) = op else { panic!("ranks disagree: {ops:?}") };
                    all.extend_from_slice(data);
                }
                Msg::Done { data: Cow::Owned(all) }
            }
            Some(Msg::Barrier) => {
                let culprit = Culprit { rank: 1, pid: 4242, status: 9, waited_ms: 0 };
                Msg::Fail { reason: Reason::RankLost, culprit: Some(culprit) }
            }
            _ => return,
        };
        for c in &conns {
            let _ = reply.write_to(c);
        }
    }
}

#[test]
fn a_failed_barrier_names_the_lost_rank() {
    let dir = ScratchDir::new("comm-barrier", "lost");
    let path = dir.path().join("hub.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let hub = std::thread::spawn(move || hub(listener, 2));
    let ranks: Vec<_> = (0..2u32)
        .map(|rank| {
            let (socket, shm_dir) = (path.to_str().unwrap().to_owned(), dir.path().to_owned());
            std::thread::spawn(move || {
                let oob = RunOob::connect(&socket, rank, 2, Duration::from_secs(10)).unwrap();
                let config = Config { shm_dir, ..Config::default() };
                let comm = Comm::builder(oob, rank, 2).config(config).build().unwrap();
                comm.barrier()
            })
        })
        .collect();
    let outcomes: Vec<_> = ranks.into_iter().map(|t| t.join().unwrap()).collect();
    hub.join().unwrap();
    let e = outcomes[0].clone().expect_err("a barrier the launcher failed succeeded");
    let killed = Departure { rank: 1, pid: Some(4242), ending: Ending::Signal(9) };
    assert!(matches!(e, Error::RankLost { departure, .. } if departure == killed), "{e:?}");
    assert_eq!(e.kind(), ErrorKind::DeadPeer, "{e}");
    let text = e.to_string();
    assert!(text.starts_with("rank 1 died during a barrier (pid 4242, signal 9)"), "{text}");
}
