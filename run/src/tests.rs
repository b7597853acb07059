//! The hub and its clients in one process, ranks as threads.

use std::os::unix::process::CommandExt as _;
use std::thread;
use std::time::{Duration, Instant};

use kpccl_core::{Oob, OobError};

use crate::{Ending, Hub, RunOob, code};

/// Generous for a test, short enough that a bug fails instead of hanging.
const T: Duration = Duration::from_secs(5);

fn connect(hub: &Hub, rank: u32) -> RunOob {
    RunOob::connect(hub.socket(), rank, hub.nranks(), T).unwrap()
}

/// Runs `f(rank, oob)` on one thread per rank and returns the results in rank order.
fn ranks<R: Send + 'static>(hub: &Hub, f: impl Fn(u32, RunOob) -> R + Send + Sync + Copy + 'static) -> Vec<R> {
    let threads: Vec<_> = (0..hub.nranks())
        .map(|r| {
            let oob = connect(hub, r);
            thread::spawn(move || f(r, oob))
        })
        .collect();
    threads.into_iter().map(|t| t.join().unwrap()).collect()
}

#[test]
fn allgather_and_barrier_over_many_rounds() {
    let hub = Hub::start(4).unwrap();
    let results = ranks(&hub, |rank, oob| {
        for round in 0u8..50 {
            let mine = [u8::try_from(rank).unwrap(), round, 7];
            let mut all = [0u8; 12];
            oob.allgather(&mine, &mut all)?;
            for r in 0..4u8 {
                assert_eq!(all[usize::from(r) * 3..][..3], [r, round, 7]);
            }
            oob.barrier()?;
            oob.allgather(&[], &mut [])?;
        }
        Ok::<_, OobError>(())
    });
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    assert_eq!(hub.failure(), None);
}

#[test]
fn ranks_connecting_before_serve_wait_in_the_backlog() {
    let mut hub = Hub::bind(2).unwrap();
    let socket = hub.socket().to_owned();
    let early = thread::spawn(move || RunOob::connect(&socket, 0, 2, T).map(|oob| oob.barrier()));
    thread::sleep(Duration::from_millis(100));
    assert_eq!(hub.never_connected(), [0, 1], "nobody is welcomed before serve");
    hub.serve().unwrap();
    let deadline = Instant::now() + T;
    while hub.never_connected() != [1] {
        assert!(Instant::now() < deadline, "rank 0 was not welcomed after serve");
        thread::sleep(Duration::from_millis(5));
    }
    connect(&hub, 1).barrier().unwrap();
    assert!(matches!(early.join().unwrap(), Ok(Ok(()))));
    assert_eq!(hub.never_connected(), Vec::<u32>::new());
}

/// The launcher welcomes no rank before it has started them all: a rank
/// started first waits for that too, even past its timeout and the second
/// it gives a stuck launcher. Before, it gave up: a job of 512 ranks with
/// `KPCCL_TIMEOUT_MS=1000`, whose start took 3 s, lost half its ranks at
/// once ("launcher at @…: timed out").
#[test]
fn a_rank_started_first_waits_for_the_launcher_to_start_the_others() {
    const N: u32 = 64;
    let mut hub = Hub::bind(N).unwrap();
    let socket = hub.socket().to_owned();
    let timeout = Duration::from_millis(100);
    let first = thread::spawn(move || RunOob::connect(&socket, 0, N, timeout).map(|_| ()));
    // The other 63 ranks take 1.5 s to start: more than 100 ms and a second.
    thread::sleep(Duration::from_millis(1500));
    hub.serve().unwrap();
    let welcomed = first.join().unwrap();
    assert!(welcomed.is_ok(), "{welcomed:?}");
}

#[test]
fn disagreeing_ranks_all_fail_and_the_job_goes_on() {
    let hub = Hub::start(3).unwrap();
    let results = ranks(&hub, |rank, oob| {
        let send = vec![1u8; if rank == 1 { 3 } else { 2 }];
        let mut recv = vec![0u8; send.len() * 3];
        let first = oob.allgather(&send, &mut recv).map_err(|e| e.code);
        let kind = if rank == 2 { oob.barrier() } else { oob.allgather(&[1], &mut [0; 3]) }.map_err(|e| e.code);
        let wrong_buffer = if rank == 0 { &mut [0u8; 2][..] } else { &mut [0u8; 3][..] };
        let buffer = oob.allgather(&[9], wrong_buffer).map_err(|e| e.code);
        let after = oob.barrier().map_err(|e| e.code);
        (first, kind, buffer, after)
    });
    for (rank, (first, kind, buffer, after)) in results.into_iter().enumerate() {
        assert_eq!(first, Err(code::MISMATCH), "rank {rank}");
        assert_eq!(kind, Err(code::MISMATCH), "rank {rank}");
        assert_eq!(buffer, Err(if rank == 0 { code::BUFFER } else { code::MISMATCH }), "rank {rank}");
        assert_eq!(after, Ok(()), "rank {rank}");
    }
    let failure = hub.failure().unwrap();
    assert!(failure.contains("collective #0") && failure.contains("rank 1 allgather 3 of 9 bytes"), "{failure}");
}

#[test]
fn a_rank_that_leaves_fails_every_waiting_and_later_collective() {
    let hub = Hub::start(3).unwrap();
    let leaver = connect(&hub, 2);
    let start = Instant::now();
    let waiting: Vec<_> = (0..2)
        .map(|r| {
            let oob = connect(&hub, r);
            thread::spawn(move || {
                let first = oob.barrier().map_err(|e| e.code);
                let later = oob.allgather(&[1], &mut [0; 3]).map_err(|e| e.code);
                (first, later)
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(50));
    drop(leaver);
    for t in waiting {
        assert_eq!(t.join().unwrap(), (Err(code::RANK_LOST), Err(code::RANK_LOST)));
    }
    assert!(start.elapsed() < T, "took {:?}", start.elapsed());
    assert!(hub.failure().unwrap().contains("rank 2 left"), "{:?}", hub.failure());
}

#[test]
fn a_rank_that_never_connects_but_exits_fails_the_others() {
    let hub = Hub::start(2).unwrap();
    let oob = connect(&hub, 0);
    let t = thread::spawn(move || oob.barrier().map_err(|e| e.code));
    thread::sleep(Duration::from_millis(20));
    hub.rank_exited(1);
    assert_eq!(t.join().unwrap(), Err(code::RANK_LOST));
}

#[test]
fn hellos_are_checked() {
    let hub = Hub::start(2).unwrap();
    let _zero = connect(&hub, 0);
    let refused = |rank, nranks| RunOob::connect(hub.socket(), rank, nranks, T).unwrap_err().to_string();
    assert!(refused(0, 2).contains("another process is that rank"), "{}", refused(0, 2));
    assert!(refused(1, 3).contains("not a rank of its job"));
    assert!(RunOob::connect(hub.socket(), 2, 2, T).is_err(), "rank out of range, refused locally");
    let _one = connect(&hub, 1);
}

/// A rank that left the job (its connection closed, or its process exited)
/// and comes back is told so: no other process is that rank. Before, it
/// read "another process is that rank", sending its user to look for one.
#[test]
fn a_rank_that_left_and_comes_back_is_told_it_left() {
    let hub = Hub::start(3).unwrap();
    let _stays = connect(&hub, 2);
    drop(connect(&hub, 0));
    hub.rank_exited(1);
    let want = |rank| format!("refused rank {rank} of 3: that rank already left the job (a process joins once)");
    for rank in [0, 1] {
        // The hub sees rank 0's connection close a moment later.
        let deadline = Instant::now() + T;
        let mut e = RunOob::connect(hub.socket(), rank, 3, T).unwrap_err().to_string();
        while !e.ends_with(&want(rank)) && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(10));
            e = RunOob::connect(hub.socket(), rank, 3, T).unwrap_err().to_string();
        }
        assert!(e.ends_with(&want(rank)), "{e}");
    }
}

/// Connections that end (strays that never say hello, ranks that left)
/// hold nothing in the hub: a job would otherwise run out of descriptors.
#[test]
fn ended_connections_hold_no_descriptor() {
    let hub = Hub::start(1).unwrap();
    for _ in 0..200 {
        drop(raw(&hub));
    }
    // Every one accepted (some may still wait in the backlog), and ended.
    assert_eq!(connections_once(&hub, |c| c == (200, 0)), (200, 0), "(accepted, still held)");
    connect(&hub, 0).barrier().unwrap();
}

#[test]
fn a_silent_peer_is_named_at_the_waiting_ranks_timeout() {
    let hub = Hub::start(2).unwrap();
    let _silent = connect(&hub, 1);
    let oob = RunOob::connect(hub.socket(), 0, 2, Duration::from_millis(100)).unwrap();
    let start = Instant::now();
    assert_eq!(oob.barrier(), Err(OobError { code: code::UNRESPONSIVE }));
    assert!(start.elapsed() < T);
    let d = oob.departure().expect("the hub names the late rank");
    assert_eq!(
        (d.rank, d.pid, d.ending),
        (1, Some(std::process::id()), Ending::Unresponsive(Duration::from_millis(100)))
    );
    // The job is broken from then on, and says why.
    assert_eq!(oob.barrier(), Err(OobError { code: code::UNRESPONSIVE }));
    assert!(hub.failure().unwrap().contains("rank 1 did not reach collective #0 within 100 ms"), "{:?}", hub.failure());
}

#[test]
fn the_hub_going_away_is_an_error_not_a_hang() {
    let hub = Hub::start(2).unwrap();
    let oob = connect(&hub, 0);
    let socket = hub.socket().to_owned();
    let t = thread::spawn(move || oob.barrier().map_err(|e| e.code));
    thread::sleep(Duration::from_millis(20));
    drop(hub);
    assert_eq!(t.join().unwrap(), Err(code::DISCONNECTED));
    assert!(RunOob::connect(&socket, 1, 2, T).is_err(), "the name is released");
}

#[test]
fn the_hub_stops_once_every_rank_is_gone() {
    let hub = Hub::start(2).unwrap();
    let results = ranks(&hub, |_, oob| oob.barrier());
    assert!(results.iter().all(Result::is_ok));
    let start = Instant::now();
    while !hub.finished() {
        assert!(start.elapsed() < T, "the hub did not see the ranks leave");
        thread::sleep(Duration::from_millis(1));
    }
    // Rank 1 reached barrier #0's end before rank 0 left: nothing failed.
    assert_eq!(hub.failure(), None);
}

/// Once every rank is gone, a late connection (a process a rank left
/// behind, started with the job's variables) is refused at once. Before, it
/// waited in the backlog of a listener nobody served any more, for its
/// timeout and a second, and then blamed a stuck launcher.
#[test]
fn a_connection_after_every_rank_left_is_refused_at_once() {
    let hub = Hub::start(1).unwrap();
    connect(&hub, 0).barrier().unwrap();
    let deadline = Instant::now() + T;
    while !hub.finished() {
        assert!(Instant::now() < deadline, "the hub did not see the rank leave");
        thread::sleep(Duration::from_millis(1));
    }
    // At once, even when this connection queues just behind the one that
    // wakes the acceptor to see that every rank is gone: that one is closed,
    // the next refused.
    loop {
        let start = Instant::now();
        let e = RunOob::connect(hub.socket(), 0, 1, T).unwrap_err();
        assert!(start.elapsed() < T, "refused after {:?}: {e}", start.elapsed());
        if e.kind() == std::io::ErrorKind::ConnectionRefused {
            break;
        }
        assert!(Instant::now() < deadline, "never refused: {e}");
        thread::sleep(Duration::from_millis(10));
    }
}

/// Set in the re-executed test process: the hub socket to knock on as another user.
const FOREIGN_SOCKET: &str = "KPCCL_TEST_FOREIGN_SOCKET";

/// The hub admits only processes of its own user (`SO_PEERCRED`): this test
/// runs itself again as `nobody` against a live hub (root only; else it skips).
#[test]
fn another_users_process_is_refused() {
    if let Some(socket) = std::env::var_os(FOREIGN_SOCKET) {
        let e = RunOob::connect(socket.to_str().unwrap(), 0, 1, T).expect_err("another user must be refused");
        assert!(e.to_string().contains("another user"), "{e}");
        return;
    }
    if crate::cred::my_uid() != 0 {
        eprintln!("SKIPPED another_users_process_is_refused: only root can run a process as another user");
        return;
    }
    let hub = Hub::start(1).unwrap();
    // `nobody` may not reach the test binary where it is (a 0700 checkout):
    // run a world-readable copy of it.
    let copy = ExeCopy::new();
    let status = kpccl_posix::launch::runner::command(copy.exe())
        .args(["--exact", "tests::another_users_process_is_refused", "--test-threads=1"])
        .env(FOREIGN_SOCKET, hub.socket())
        .current_dir("/")
        .uid(65534)
        .gid(65534)
        .status()
        .unwrap();
    assert!(status.success(), "the foreign process was not refused as expected: {status}");
    // The job's own rank still gets in.
    connect(&hub, 0).barrier().unwrap();
}

/// A copy of this test binary in a fresh world-readable directory, removed on drop.
struct ExeCopy(kpccl_testkit::ScratchDir);

impl ExeCopy {
    fn new() -> Self {
        use std::os::unix::fs::PermissionsExt;
        let copy = ExeCopy(kpccl_testkit::ScratchDir::under(&std::env::temp_dir(), "foreign", "test"));
        let readable = || std::fs::Permissions::from_mode(0o755);
        std::fs::set_permissions(copy.0.path(), readable()).unwrap();
        std::fs::copy(std::env::current_exe().unwrap(), copy.exe()).unwrap();
        std::fs::set_permissions(copy.exe(), readable()).unwrap();
        copy
    }

    fn exe(&self) -> std::path::PathBuf {
        self.0.path().join("test")
    }
}

/// A raw connection to `hub`, as a hand-written client would open one.
/// The hub's (accepted, held) connection counts once `done` holds of them,
/// or after [`T`].
fn connections_once(hub: &Hub, done: impl Fn((u64, usize)) -> bool) -> (u64, usize) {
    let start = Instant::now();
    while !done(hub.connections()) && start.elapsed() < T {
        thread::sleep(Duration::from_millis(5));
    }
    hub.connections()
}

fn raw(hub: &Hub) -> std::os::unix::net::UnixStream {
    let addr = kpccl_posix::launch::addr::parse(hub.socket()).unwrap();
    std::os::unix::net::UnixStream::connect_addr(&addr).unwrap()
}

/// A refused peer that trickles bytes after its hello (one every 100 ms)
/// is cut off at one deadline of a few seconds. Before, each read had 30 s
/// and up to 64 KiB were read: a thread and two descriptors held for days.
#[test]
fn a_refused_peer_that_trickles_is_cut_off_within_seconds() {
    use kpccl_posix::launch::wire::{Msg, Reason, VERSION};
    use std::io::Write as _;
    let hub = Hub::start(2).unwrap();
    let mut peer = raw(&hub);
    Msg::Hello { version: VERSION + 1, rank: 0, nranks: 2, timeout_ms: 0 }.write_to(&peer).unwrap();
    assert_eq!(Msg::read_from(&peer).unwrap(), Some(Msg::fail(Reason::BadVersion)));
    let start = Instant::now();
    while hub.connections().1 > 0 && start.elapsed() < 2 * T {
        let _ = peer.write_all(b"x");
        thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(hub.connections().1, 0, "the refused connection is still held after {:?}", start.elapsed());
}

/// Strays that never say hello (another user's flood) are served at most
/// 64 more than the job's ranks at a time; the rest wait in the listen
/// backlog. Before, each got a thread and two descriptors, without bound.
#[test]
fn connections_awaiting_their_hello_are_bounded() {
    let hub = Hub::start(1).unwrap();
    let strays: Vec<_> = (0..80).map(|_| raw(&hub)).collect();
    connections_once(&hub, |(accepted, _)| accepted >= 65);
    // Time for the acceptor to take more, if it would.
    thread::sleep(Duration::from_millis(200));
    assert_eq!(hub.connections(), (65, 65), "(accepted, held)");
    drop(strays);
    assert_eq!(connections_once(&hub, |c| c == (80, 0)), (80, 0), "(accepted, held) once the strays left");
    connect(&hub, 0).barrier().unwrap();
}

/// A first frame that announces more than a hello can be (a 1 GiB
/// "hello", or an allgather) is refused at its header: the connection is
/// dropped at once, its body neither awaited nor read. Before, the hub
/// waited up to 30 s for the gigabyte, buffering what came, in each of up
/// to 64 such connections at a time.
#[test]
fn a_first_frame_larger_than_a_hello_is_refused_at_its_header() {
    use kpccl_posix::launch::wire::{MAX_BODY, Msg, Reason, VERSION};
    use std::borrow::Cow;
    use std::io::{ErrorKind, Read as _, Write as _};
    let hub = Hub::start(1).unwrap();
    let hello = Msg::Hello { version: VERSION, rank: 0, nranks: 1, timeout_ms: 0 };
    let allgather = Msg::Allgather { recv_len: 1 << 30, data: Cow::Borrowed(&[]) };
    for first in [hello, allgather] {
        // The frame's header only (length and tag), announcing the largest body.
        let mut header = Vec::new();
        first.write_to(&mut header).unwrap();
        header.truncate(5);
        header[..4].copy_from_slice(&u32::try_from(MAX_BODY).unwrap().to_le_bytes());
        let mut peer = raw(&hub);
        peer.set_read_timeout(Some(T)).unwrap();
        peer.write_all(&header).unwrap();
        let start = Instant::now();
        let got = peer.read(&mut [0u8; 1]);
        let dropped = matches!(&got, Ok(0)) || got.as_ref().is_err_and(|e| e.kind() == ErrorKind::ConnectionReset);
        assert!(dropped, "{first:?} announcing {MAX_BODY} bytes: {got:?} after {:?}", start.elapsed());
    }
    assert_eq!(connections_once(&hub, |(_, held)| held == 0), (2, 0), "(accepted, held)");
    // Version 1's shorter hello (no timeout field) is still read, and refused by its version.
    let mut old = Vec::new();
    Msg::Hello { version: 1, rank: 0, nranks: 1, timeout_ms: 0 }.write_to(&mut old).unwrap();
    old.truncate(old.len() - 4);
    old[..4].copy_from_slice(&17u32.to_le_bytes());
    let mut peer = raw(&hub);
    peer.write_all(&old).unwrap();
    assert_eq!(Msg::read_from(&peer).unwrap(), Some(Msg::fail(Reason::BadVersion)));
    connect(&hub, 0).barrier().unwrap();
}
