//! The launcher's client reads its `KPCCL_*` numbers as the library's
//! configuration reads them: a bad `KPCCL_TIMEOUT_MS` is refused with the
//! same words under `kpccl-run` as by `Config::from_env`, and its own
//! variables in that form too; values the configuration accepts (padded,
//! empty) get past the reading. One test: the variables are process-wide.
#![allow(missing_docs, clippy::std_instead_of_core)]

use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt as _;

use kpccl_posix::Config;
use kpccl_posix::launch::RunOob;

fn set(name: &str, value: &OsStr) {
    // SAFETY: this binary's only test, which starts no thread.
    unsafe { std::env::set_var(name, value) };
}

/// What `RunOob::from_env` says with `name` set to `value` (the rest valid,
/// the socket an abstract name no launcher listens on).
fn client_error(name: &str, value: &OsStr) -> io::Error {
    set(name, value);
    let e = RunOob::from_env().expect_err("no launcher listens there");
    set(name, OsStr::new(""));
    e
}

#[test]
fn the_client_reads_its_variables_as_the_configuration_does() {
    set("KPCCL_RUN_SOCKET", OsStr::new(&format!("@kpccl-test-no-launcher-{}", std::process::id())));
    set("KPCCL_RANK", OsStr::new("0"));
    set("KPCCL_NRANKS", OsStr::new("1"));

    // KPCCL_TIMEOUT_MS, which both read: the same refusal, word for word.
    for bad in [OsStr::new("5s"), OsStr::new("-1"), OsStr::from_bytes(b"5\xff")] {
        set("KPCCL_TIMEOUT_MS", bad);
        let config = Config::from_env().expect_err("the configuration refuses it").to_string();
        let client = client_error("KPCCL_TIMEOUT_MS", bad);
        assert_eq!(client.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(client.to_string(), config, "{bad:?}");
    }
    let e = client_error("KPCCL_TIMEOUT_MS", OsStr::new("5s"));
    assert_eq!(e.to_string(), "KPCCL_TIMEOUT_MS=\"5s\" is invalid: expected milliseconds (a whole number from 0)");

    // The client's own variables, in the same form.
    let own = [
        ("KPCCL_OOB_TIMEOUT_MS", "5s", "milliseconds (a whole number from 1)"),
        ("KPCCL_OOB_TIMEOUT_MS", "0", "milliseconds (a whole number from 1)"),
        ("KPCCL_RANK", "x", "a rank (a whole number from 0)"),
        ("KPCCL_RANK", "4294967296", "a rank (a whole number from 0)"),
        ("KPCCL_NRANKS", "-2", "a rank count (a whole number)"),
    ];
    for (name, value, expected) in own {
        let keep = std::env::var_os(name).unwrap_or_default();
        let e = client_error(name, OsStr::new(value));
        set(name, &keep);
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{name}={value}");
        assert_eq!(e.to_string(), format!("{name}={value:?} is invalid: expected {expected}"));
    }

    // Accepted values get as far as the (absent) launcher.
    for (name, value) in [("KPCCL_TIMEOUT_MS", " 50 "), ("KPCCL_OOB_TIMEOUT_MS", "7"), ("KPCCL_TIMEOUT_MS", "0")] {
        let e = client_error(name, OsStr::new(value));
        assert!(e.to_string().starts_with("launcher at @kpccl-test-no-launcher-"), "{name}={value:?}: {e}");
    }
}
