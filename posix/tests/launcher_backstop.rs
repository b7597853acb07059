//! A launcher that stops answering cannot hold a rank for good, even one
//! whose thread is interrupted by a signal every few milliseconds (a
//! profiler's timer): the wait for a reply, for the answer to the hello, and
//! a write the launcher does not read each have one deadline in all, the
//! collective's timeout plus a second, which signals do not restart.
#![allow(missing_docs, clippy::std_instead_of_core)]

use std::os::unix::net::UnixListener;
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use kpccl_core::sync::{AtomicU32, Ordering};

use kpccl_posix::Oob;
use kpccl_posix::interrupt;
use kpccl_posix::launch::wire::Msg;
use kpccl_posix::launch::{RunOob, code};
use kpccl_testkit::ScratchDir;

extern "C" fn ignore(_: libc::c_int) {}

/// Installs a handler for SIGUSR1 that interrupts system calls (no
/// `SA_RESTART`), so that every signal ends a blocking read with EINTR.
#[allow(unsafe_code)]
fn interrupting_sigusr1() {
    // SAFETY: a zeroed sigaction is a valid "no flags, empty mask" value.
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    action.sa_sigaction = ignore as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: a valid action; its handler does nothing, which is async-signal-safe.
    assert_eq!(unsafe { libc::sigaction(libc::SIGUSR1, &action, std::ptr::null_mut()) }, 0);
}

/// A launcher's socket for test `case`, which nothing accepts on yet (a
/// launcher stopped before it could): its directory, the listener and the
/// address ranks connect to.
fn listening(case: &str) -> (ScratchDir, UnixListener, String) {
    let dir = ScratchDir::new("backstop", case);
    let path = dir.path().join("hub.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let socket = path.to_str().unwrap().to_owned();
    (dir, listener, socket)
}

/// A launcher that welcomes one rank and then stops: it neither reads nor
/// answers, and keeps the connection open, as a stopped process does.
fn stopped_launcher(listener: UnixListener) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let (conn, _) = listener.accept().unwrap();
        assert!(matches!(Msg::read_from(&conn).unwrap(), Some(Msg::Hello { .. })));
        Msg::Welcome.write_to(&conn).unwrap();
        std::thread::sleep(Duration::from_secs(30));
        drop(conn);
    })
}

#[test]
fn a_silent_launcher_times_out_a_rank_under_a_signal_storm() {
    let (_dir, listener, socket) = listening("hub");
    // Never answers (and keeps the connection open, as a stopped process would).
    let hub = stopped_launcher(listener);
    interrupting_sigusr1();
    let timeout = Duration::from_millis(300);
    let oob = RunOob::connect(&socket, 0, 1, timeout).unwrap();
    // SAFETY: pthread_self has no preconditions.
    #[allow(unsafe_code)]
    let me = unsafe { libc::pthread_self() };
    let done = Arc::new(AtomicU32::new(0));
    let storm = {
        let done = Arc::clone(&done);
        std::thread::spawn(move || {
            // Relaxed: a stop flag; nothing is published through it.
            while done.load(Ordering::Relaxed) == 0 {
                // SAFETY: `me` is the test's thread, alive until `done` is set.
                #[allow(unsafe_code)]
                unsafe {
                    libc::pthread_kill(me, libc::SIGUSR1);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    let start = Instant::now();
    let result = oob.barrier();
    let took = start.elapsed();
    // Relaxed: as above.
    done.store(1, Ordering::Relaxed);
    storm.join().unwrap();
    assert!(result.is_err(), "a barrier nobody answered succeeded");
    assert!(took >= timeout, "gave up after {took:?}, before the timeout");
    assert!(took < Duration::from_secs(5), "the signals held the rank for {took:?}");
    drop(hub);
}

/// Runs `f` on a thread of its own that a signal interrupts every 5 ms, and
/// returns what it returned and how long it took; `None` if it has not
/// returned within 10 s (it is then left behind: a hang is a failure, never
/// a stuck test).
fn under_a_signal_storm<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<(T, Duration)> {
    interrupting_sigusr1();
    let (tx, rx) = mpsc::channel();
    let (started_tx, started_rx) = mpsc::channel();
    let worker = std::thread::spawn(move || {
        // SAFETY: pthread_self has no preconditions.
        #[allow(unsafe_code)]
        let me = unsafe { libc::pthread_self() };
        started_tx.send(me).unwrap();
        let start = Instant::now();
        let out = f();
        let _ = tx.send((out, start.elapsed()));
    });
    let me = started_rx.recv().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match rx.recv_timeout(Duration::from_millis(5)) {
            Ok(done) => {
                worker.join().unwrap();
                return Some(done);
            }
            Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() < deadline => {
                // SAFETY: `worker` is not joined yet, so `me` names a thread
                // (alive, or ended but not reaped).
                #[allow(unsafe_code)]
                unsafe {
                    libc::pthread_kill(me, libc::SIGUSR1);
                }
            }
            Err(_) => return None,
        }
    }
}

#[test]
fn a_launcher_that_never_answers_the_hello_times_out_a_rank_under_a_signal_storm() {
    // The launcher: listens, but never accepts (stopped before it could):
    // the connection waits in its backlog, the hello unread.
    let (_dir, listener, socket) = listening("hello");
    let timeout = Duration::from_millis(300);
    let outcome = under_a_signal_storm(move || RunOob::connect(&socket, 0, 1, timeout).map(drop));
    let (result, took) = outcome.expect("the signals held the rank in its hello for good");
    let e = result.expect_err("a hello nobody answered was welcomed");
    assert_eq!(e.kind(), std::io::ErrorKind::TimedOut, "{e}");
    assert!(took >= timeout, "gave up after {took:?}, before the timeout");
    assert!(took < Duration::from_secs(5), "the signals held the rank for {took:?}");
    drop(listener);
}

/// A check that ends the waits at once: Ctrl-C, as the first look sees it.
fn give_up(_: usize) -> bool {
    true
}

#[test]
fn an_interrupt_ends_the_wait_for_the_launchers_welcome() {
    let (_dir, listener, socket) = listening("hello-interrupted");
    let start = Instant::now();
    let joined = interrupt::while_sleeping(Duration::from_millis(5), give_up, 0, || {
        RunOob::connect(&socket, 0, 1, Duration::from_secs(3))
    });
    let took = start.elapsed();
    let e = joined.expect_err("a hello nobody answered was welcomed");
    assert!(e.to_string().contains("the wait for the launcher was interrupted"), "{e}");
    assert!(took < Duration::from_secs(1), "the interrupted rank waited {took:?} for the launcher");
    drop(listener);
}

#[test]
fn a_launcher_that_stops_reading_times_out_a_rank_under_a_signal_storm() {
    let (_dir, listener, socket) = listening("write");
    // Reads nothing more.
    let hub = stopped_launcher(listener);
    let timeout = Duration::from_millis(300);
    let oob = RunOob::connect(&socket, 0, 1, timeout).unwrap();
    // Far more than the socket's buffers hold: the write blocks.
    let outcome = under_a_signal_storm(move || {
        let send = vec![7u8; 16 << 20];
        let mut recv = vec![0u8; send.len()];
        oob.allgather(&send, &mut recv)
    });
    let (result, took) = outcome.expect("the signals held the rank in its write for good");
    let e = result.expect_err("an allgather nobody read succeeded");
    assert_eq!(e.code, code::TIMEOUT, "{e}");
    assert!(took >= timeout, "gave up after {took:?}, before the timeout");
    assert!(took < Duration::from_secs(5), "the signals held the rank for {took:?}");
    drop(hub);
}
