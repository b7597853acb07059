//! Ranks in different pid namespaces of one machine (containers, pods with
//! the host's network and so its hostname) cannot share a window: a rank
//! names its process and reaches a segment by pid, which means another
//! process, or none, in the other namespace. They are ranks of different
//! nodes, not one node whose window creation fails or whose waits take a
//! dead peer for a live one (as root, through `unshare`; else it says it
//! skipped).
#![allow(missing_docs, clippy::std_instead_of_core)]

use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::process::Command;
use std::time::Duration;

use kpccl_core::{Oob, OobError};
use kpccl_posix::Comm;
use kpccl_testkit::ScratchDir;

/// Set in the child, to the socket it reaches rank 0 by.
const CHILD: &str = "KPCCL_TEST_PIDNS_SOCKET";
const NAME: &str = "ranks_in_two_pid_namespaces_are_two_nodes";

/// The out-of-band collectives of two ranks over a connected socket.
struct Pair {
    stream: UnixStream,
    rank: usize,
}

impl Pair {
    fn swap(&self, send: &[u8], other: &mut [u8]) -> std::io::Result<()> {
        (&self.stream).write_all(send)?;
        (&self.stream).read_exact(other)
    }
}

impl Oob for Pair {
    fn allgather(&self, send: &[u8], recv: &mut [u8]) -> Result<(), OobError> {
        let n = send.len();
        recv[self.rank * n..][..n].copy_from_slice(send);
        let mut other = vec![0; n];
        self.swap(send, &mut other).map_err(|_| OobError { code: -1 })?;
        recv[(1 - self.rank) * n..][..n].copy_from_slice(&other);
        Ok(())
    }
    fn barrier(&self) -> Result<(), OobError> {
        self.swap(&[0], &mut [0]).map_err(|_| OobError { code: -1 })
    }
}

fn nnodes(stream: UnixStream, rank: u32) -> u32 {
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let comm = Comm::new(Pair { stream, rank: rank as usize }, rank, 2).expect("communicator");
    comm.nnodes()
}

#[test]
fn ranks_in_two_pid_namespaces_are_two_nodes() {
    if let Some(socket) = std::env::var_os(CHILD) {
        // Rank 1, in a pid namespace of its own: says how many nodes it sees.
        let n = nnodes(UnixStream::connect(socket).unwrap(), 1);
        std::process::exit(i32::try_from(n).unwrap());
    }
    let dir = ScratchDir::new("pidns", "two-nodes");
    let socket = dir.path().join("oob.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    // This test again, alone (through the target's runner, e.g. qemu).
    let alone = kpccl_posix::launch::runner::test_alone(NAME);
    let child = Command::new("unshare")
        .args(["--pid", "--fork", "--kill-child"])
        .arg(alone.get_program())
        .args(alone.get_args())
        .env(CHILD, &socket)
        .spawn();
    let Ok(mut child) = child else {
        eprintln!("skipped: no unshare(1) to run a rank in a pid namespace of its own");
        return;
    };
    listener.set_nonblocking(true).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let stream = loop {
        match listener.accept() {
            Ok((stream, _)) => break stream,
            Err(_) if std::time::Instant::now() < deadline => {
                if let Some(status) = child.try_wait().unwrap() {
                    eprintln!("skipped: no pid namespace for the child ({status}: not root?)");
                    return;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => panic!("the child never connected: {e}"),
        }
    };
    stream.set_nonblocking(false).unwrap();
    let here = nnodes(stream, 0);
    let status = kpccl_testkit::wait_or_kill(&mut child, Duration::from_secs(30)).expect("the child hung");
    assert_eq!((here, status.code()), (2, Some(2)), "two pid namespaces taken for one node");
}
