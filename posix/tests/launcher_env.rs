//! The launcher's variables read by a rank: an empty `KPCCL_TIMEOUT_MS` or
//! `KPCCL_OOB_TIMEOUT_MS` is unset, as the library's configuration reads it
//! (`export KPCCL_TIMEOUT_MS=$T` with `T` unset), not a value that keeps
//! the rank out of its job.
#![allow(missing_docs, clippy::std_instead_of_core)]

use std::os::unix::net::UnixListener;

use kpccl_posix::Config;
use kpccl_posix::launch::wire::Msg;
use kpccl_posix::launch::{DEFAULT_TIMEOUT, RunOob};
use kpccl_testkit::ScratchDir;

#[test]
fn empty_timeouts_are_unset() {
    let dir = ScratchDir::new("launcher-env", "empty");
    let path = dir.path().join("hub.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let vars = [
        ("KPCCL_RUN_SOCKET", path.to_str().unwrap()),
        ("KPCCL_RANK", "0"),
        ("KPCCL_NRANKS", "1"),
        ("KPCCL_TIMEOUT_MS", ""),
        ("KPCCL_OOB_TIMEOUT_MS", ""),
    ];
    for (name, value) in vars {
        // SAFETY: set before any other thread of this binary exists (one test).
        unsafe { std::env::set_var(name, value) };
    }
    assert_eq!(Config::from_env().unwrap().timeout, None, "the library's reading");
    let hub = std::thread::spawn(move || {
        let (conn, _) = listener.accept().unwrap();
        assert!(matches!(Msg::read_from(&conn).unwrap(), Some(Msg::Hello { .. })));
        Msg::Welcome.write_to(&conn).unwrap();
    });
    let oob = RunOob::from_env().expect("empty timeouts refused").expect("under the launcher");
    assert_eq!(oob.timeout(), DEFAULT_TIMEOUT);
    hub.join().unwrap();
}
