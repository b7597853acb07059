//! A launcher that stops answering cannot hold a rank for good, even one
//! whose thread is interrupted by a signal every few milliseconds (a
//! profiler's timer): the wait for a reply has one deadline in all, the
//! collective's timeout plus a second, which signals do not restart.
#![allow(missing_docs, clippy::std_instead_of_core)]

use std::os::unix::net::UnixListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kpccl_core::sync::{AtomicU32, Ordering};

use kpccl_posix::Oob;
use kpccl_posix::launch::RunOob;
use kpccl_posix::launch::wire::Msg;
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

#[test]
fn a_silent_launcher_times_out_a_rank_under_a_signal_storm() {
    let dir = ScratchDir::new("backstop", "hub");
    let path = dir.path().join("hub.sock");
    let listener = UnixListener::bind(&path).unwrap();
    // The launcher: welcomes the rank, then never answers (and keeps the
    // connection open, as a stopped process would).
    let hub = std::thread::spawn(move || {
        let (conn, _) = listener.accept().unwrap();
        assert!(matches!(Msg::read_from(&conn).unwrap(), Some(Msg::Hello { .. })));
        Msg::Welcome.write_to(&conn).unwrap();
        std::thread::sleep(Duration::from_secs(30));
        drop(conn);
    });
    interrupting_sigusr1();
    let timeout = Duration::from_millis(300);
    let oob = RunOob::connect(path.to_str().unwrap(), 0, 1, timeout).unwrap();
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
