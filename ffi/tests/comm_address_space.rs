//! `kpccl_shm_comm_create` under an address-space limit (`ulimit -v`) too
//! low for the first allgather's buffer (room for 65 536 ranks' records,
//! 19 MiB): the call fails with a sentence and `KPCCL_ERR_NO_SPACE` instead
//! of aborting the process. The test runs in a fresh process of its own:
//! the limit is the process's.
#![allow(missing_docs, clippy::undocumented_unsafe_blocks, clippy::multiple_unsafe_ops_per_block)]

use core::time::Duration;
use std::process::Command;

use kpccl::*;

mod support;
use support::{GOOD, create, last_error};

/// Set in the process that runs [`under_the_limit`] alone.
const LIMITED: &str = "KPCCL_TEST_ROOM_LIMITED";

/// This process's address space in bytes (`VmSize`).
fn address_space() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kib = status.lines().find_map(|l| l.strip_prefix("VmSize:")).unwrap();
    kib.trim().trim_end_matches("kB").trim().parse::<u64>().unwrap() * 1024
}

/// `RLIMIT_AS`'s soft limit set to `soft`.
fn limit_address_space(soft: libc::rlim_t) {
    let rl = libc::rlimit { rlim_cur: soft, rlim_max: libc::RLIM_INFINITY };
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &rl) }, 0, "{}", std::io::Error::last_os_error());
}

/// The test proper: 4 MiB more than the process uses is room for the
/// call's small allocations, not for the 19 MiB buffer.
fn under_the_limit() {
    limit_address_space(address_space() + (4 << 20));
    let (rc, comm) = create(GOOD);
    assert_eq!((rc, comm.is_null()), (KPCCL_ERROR, true), "created under the limit");
    assert_eq!(
        last_error(),
        "kpccl_shm_comm_create: cannot allocate 19922944 bytes for the records \
         of the first out-of-band allgather (room for up to 65536 ranks)"
    );
    assert_eq!(kpccl_last_error_code(), kpccl_error_code_t::KPCCL_ERR_NO_SPACE);
    // Nothing is left broken: with the limit lifted, the same call succeeds.
    limit_address_space(libc::RLIM_INFINITY);
    let (rc, comm) = create(GOOD);
    assert_eq!(rc, KPCCL_OK, "{}", last_error());
    assert_eq!(unsafe { kpccl_shm_comm_destroy(comm) }, KPCCL_OK);
}

/// Before, the buffer was allocated with `vec!`, whose failure aborts the
/// process ("memory allocation of 19922944 bytes failed").
#[test]
fn comm_create_without_room_for_the_first_allgather_fails_with_a_sentence() {
    if std::env::var_os(LIMITED).is_some() {
        return under_the_limit();
    }
    if cfg!(target_arch = "aarch64") && std::env::var_os("CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER").is_some() {
        // qemu-user ignores a guest's RLIMIT_AS (as in `process.rs`).
        return;
    }
    let me = std::env::current_exe().unwrap();
    let name = "comm_create_without_room_for_the_first_allgather_fails_with_a_sentence";
    // One malloc arena: a thread's own arena grows inside address space it
    // reserved at its first allocation (64 MiB), where a limit set later
    // does not bind; the main arena grows with brk or mmap, which it does.
    let mut run = Command::new(me);
    run.args([name, "--exact", "--test-threads=1", "--nocapture"]).env(LIMITED, "1").env("MALLOC_ARENA_MAX", "1");
    let mut child = run.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    let status = wait_bounded(&mut child);
    let out = child.wait_with_output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(status.success(), "{status}: {text}");
    assert!(text.contains("1 passed"), "the test ran: {text}");
}

/// Waits for `child` at most 60 s (it waits for no peer: a hang would be a bug).
fn wait_bounded(child: &mut std::process::Child) -> std::process::ExitStatus {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the limited process did not finish in 60 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
