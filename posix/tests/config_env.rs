//! `Config::from_env`: the words and numbers the `KPCCL_*` variables take,
//! and the error that names a bad one.

use core::time::Duration;

use kpccl_core::fence::Barrier;
use kpccl_posix::log::Level;
use kpccl_posix::{Config, Error, LayoutMode, Reserve};

fn set(name: &str, value: &str) {
    // SAFETY: this binary has one test, so no other thread reads the environment.
    unsafe { std::env::set_var(name, value) };
}

fn unset(name: &str) {
    // SAFETY: as in `set`.
    unsafe { std::env::remove_var(name) };
}

/// The error `from_env` gives with `name=value` (every other variable unset or valid).
fn refused(name: &str, value: &str) -> String {
    set(name, value);
    let e = Config::from_env().expect_err(name);
    unset(name);
    assert!(matches!(e, Error::Config { var, .. } if var == name), "{e}");
    e.to_string()
}

#[test]
fn variables_set_the_defaults_and_bad_values_are_named() {
    let vars = [
        ("KPCCL_LAYOUT", "aligned"),
        ("KPCCL_BARRIER", "flat"),
        ("KPCCL_RESERVE", "lazy"),
        ("KPCCL_SPIN", " 12 "),
        ("KPCCL_YIELD_US", "30"),
        ("KPCCL_TIMEOUT_MS", "250"),
        ("KPCCL_LOG", "Debug"),
        ("KPCCL_STATS", "1"),
    ];
    for (name, value) in vars {
        set(name, value);
    }
    let c = Config::from_env().unwrap();
    assert_eq!((c.layout, c.barrier, c.reserve), (LayoutMode::Aligned, Some(Barrier::Flat), Reserve::Lazy));
    assert_eq!((c.spins, c.yield_time), (Some(12), Some(Duration::from_micros(30))));
    assert_eq!((c.timeout, c.log, c.stats), (Some(Duration::from_millis(250)), Level::Debug, true));

    set("KPCCL_BARRIER", "auto");
    assert_eq!(Config::from_env().unwrap().barrier, None, "auto leaves the choice to the window");
    for (name, _) in vars {
        unset(name);
    }

    assert_eq!(
        refused("KPCCL_LAYOUT", "packed"),
        r#"KPCCL_LAYOUT="packed" is invalid: expected contiguous or aligned"#
    );
    assert_eq!(
        refused("KPCCL_BARRIER", "tree"),
        r#"KPCCL_BARRIER="tree" is invalid: expected auto, dissemination or flat"#
    );
    assert_eq!(refused("KPCCL_RESERVE", "Lazy"), r#"KPCCL_RESERVE="Lazy" is invalid: expected eager or lazy"#);
    // The bound too: 2^32 is a whole number from 0, but no spin count.
    for spins in ["-1", "4294967296"] {
        assert_eq!(
            refused("KPCCL_SPIN", spins),
            format!("KPCCL_SPIN={spins:?} is invalid: expected a spin count (a whole number from 0 to 4294967295)")
        );
    }
    assert_eq!(
        refused("KPCCL_TIMEOUT_MS", "1s"),
        r#"KPCCL_TIMEOUT_MS="1s" is invalid: expected milliseconds (a whole number from 0)"#
    );
    assert_eq!(refused("KPCCL_STATS", "yes"), r#"KPCCL_STATS="yes" is invalid: expected 0 or 1"#);
    assert_eq!(
        refused("KPCCL_LOG", "loud"),
        r#"KPCCL_LOG="loud" is invalid: expected off, error, warn, info or debug"#
    );

    // A value that is not UTF-8 is refused like any other bad value, never
    // taken for an unset variable (a timeout silently dropped, segments
    // silently put in /dev/shm); a directory is a path, whatever its bytes.
    let not_utf8 = |tail: &[u8]| {
        use std::os::unix::ffi::OsStrExt;
        std::ffi::OsStr::from_bytes(&[b"1", tail].concat()).to_owned()
    };
    for name in ["KPCCL_TIMEOUT_MS", "KPCCL_STATS", "KPCCL_LAYOUT", "KPCCL_LOG", "KPCCL_NODE_ID"] {
        // SAFETY: as in `set`.
        unsafe { std::env::set_var(name, not_utf8(b"\xff")) };
        let e = Config::from_env();
        unset(name);
        assert!(matches!(&e, Err(Error::Config { var, .. }) if *var == name), "{name}: {e:?}");
    }
    let dir = std::path::PathBuf::from(not_utf8(b"/caf\xe9"));
    // SAFETY: as in `set`.
    unsafe { std::env::set_var("KPCCL_SHM_DIR", &dir) };
    let c = Config::from_env();
    unset("KPCCL_SHM_DIR");
    assert_eq!(c.unwrap().shm_dir, dir);
}
