//! Handles and processes: a forked child refuses its parent's handles (the
//! windows' memory is not mapped there) and makes its own; the handle table
//! leaves most of an address-space limit (`ulimit -v`) to the program.
//! In a binary of their own: one forks, the other runs in a fresh process.
#![allow(missing_docs, clippy::undocumented_unsafe_blocks, clippy::multiple_unsafe_ops_per_block)]

use core::ffi::c_int;
use core::ptr::null_mut;
use std::process::Command;

use kpccl::*;

mod support;
use support::{GOOD, alloc, create, last_error};

/// In the child: every call on the parent's handles fails, naming the
/// parent, and the child makes, uses and frees its own. `Err` says what went
/// wrong (the child cannot panic its way out: it shares the harness's state).
fn child(comm: kpccl_shm_comm_h, win: kpccl_shm_win_h, parent: u32) -> Result<(), String> {
    let refused = |rc: c_int, function: &str, what: &str, h: usize| -> Result<(), String> {
        let want = format!(
            "{function}: {what} {h:#x} (`{}`) was made by the parent process (pid {parent}); a forked child cannot use it",
            if what == "window handle" { "win" } else { "comm" }
        );
        let text = last_error();
        if rc != KPCCL_ERROR || !text.starts_with(&want) {
            return Err(format!("{function}: rc {rc}, {text:?}, wanted {want:?}"));
        }
        if kpccl_last_error_code() != kpccl_error_code_t::KPCCL_ERR_INVALID_ARGUMENT {
            return Err(format!("{function}: class {:?}", kpccl_last_error_code()));
        }
        Ok(())
    };
    let (w, c) = (win as usize, comm as usize);
    let (mut size, mut ptr) = (0usize, null_mut());
    refused(unsafe { kpccl_shm_win_free(win) }, "kpccl_shm_win_free", "window handle", w)?;
    refused(unsafe { kpccl_shm_win_fence(win) }, "kpccl_shm_win_fence", "window handle", w)?;
    refused(unsafe { kpccl_shm_peer_fence(win, 0) }, "kpccl_shm_peer_fence", "window handle", w)?;
    refused(unsafe { kpccl_shm_win_query(win, 0, &mut size, &mut ptr) }, "kpccl_shm_win_query", "window handle", w)?;
    let byte = [1u8];
    refused(unsafe { kpccl_shm_win_put(win, 0, 0, byte.as_ptr().cast(), 1) }, "kpccl_shm_win_put", "window handle", w)?;
    let mut info = kpccl_shm_comm_info_t::default();
    refused(unsafe { kpccl_shm_comm_query(comm, &mut info) }, "kpccl_shm_comm_query", "communicator handle", c)?;
    let (mut base, mut other) = (null_mut(), null_mut());
    let rc = unsafe { kpccl_shm_win_alloc(64, comm, &mut base, &mut other) };
    refused(rc, "kpccl_shm_win_alloc", "communicator handle", c)?;
    refused(unsafe { kpccl_shm_comm_destroy(comm) }, "kpccl_shm_comm_destroy", "communicator handle", c)?;
    // Twice: still refused (nothing was freed or changed by the refusals).
    refused(unsafe { kpccl_shm_win_free(win) }, "kpccl_shm_win_free", "window handle", w)?;
    // The child's own: the table is usable, its lock free.
    let (rc, mine) = create(GOOD);
    if rc != KPCCL_OK {
        return Err(format!("the child's communicator: {}", last_error()));
    }
    let rc = unsafe { kpccl_shm_win_alloc(64, mine, &mut base, &mut other) };
    if rc != KPCCL_OK || unsafe { kpccl_shm_win_fence(other) } != KPCCL_OK {
        return Err(format!("the child's window: {}", last_error()));
    }
    if unsafe { kpccl_shm_win_free(other) } != KPCCL_OK || unsafe { kpccl_shm_comm_destroy(mine) } != KPCCL_OK {
        return Err(format!("the child's free: {}", last_error()));
    }
    Ok(())
}

#[test]
fn a_forked_child_refuses_the_parents_handles_and_makes_its_own() {
    let (rc, comm) = create(GOOD);
    assert_eq!(rc, KPCCL_OK, "{}", last_error());
    let (base, win) = alloc(comm, 64);
    unsafe { core::ptr::write_bytes(base, 3, 64) };
    let parent = std::process::id();
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
    if pid == 0 {
        let code = match child(comm, win, parent) {
            Ok(()) => 0,
            Err(why) => {
                eprintln!("child: {why}");
                1
            }
        };
        // No destructors, no harness: the parent's state is not the child's.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "the child failed (status {status:#x})");
    // The parent's handles are untouched and work.
    assert_eq!(unsafe { kpccl_shm_win_fence(win) }, KPCCL_OK, "{}", last_error());
    assert!(unsafe { core::slice::from_raw_parts(base, 64) }.iter().all(|&b| b == 3));
    assert_eq!(unsafe { kpccl_shm_win_free(win) }, KPCCL_OK, "{}", last_error());
    assert_eq!(unsafe { kpccl_shm_comm_destroy(comm) }, KPCCL_OK, "{}", last_error());
}

/// Set in the process that runs [`under_an_address_space_limit`] alone.
const LIMITED: &str = "KPCCL_TEST_ADDRESS_SPACE_LIMITED";

/// This process's address space in bytes (`VmSize`).
fn address_space() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kib = status.lines().find_map(|l| l.strip_prefix("VmSize:")).unwrap();
    kib.trim().trim_end_matches("kB").trim().parse::<u64>().unwrap() * 1024
}

/// The test proper, in a process whose handle table is not reserved yet:
/// under a limit of 512 MiB more than it uses, the table takes little of it
/// (before, it took the largest power of two that fit: 256 MiB), and a
/// mapping of 384 MiB still fits.
fn under_an_address_space_limit() {
    const MIB: u64 = 1 << 20;
    let limit = address_space() + 512 * MIB;
    let rl = libc::rlimit { rlim_cur: limit, rlim_max: libc::RLIM_INFINITY };
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &rl) }, 0, "{}", std::io::Error::last_os_error());
    let before = address_space();
    let (rc, comm) = create(GOOD);
    assert_eq!(rc, KPCCL_OK, "{}", last_error());
    let (_, win) = alloc(comm, 64);
    let taken = address_space() - before;
    eprintln!("the first handles took {} KiB of a {} MiB limit", taken >> 10, limit / MIB);
    assert!(
        taken <= limit / 64 + 32 * MIB,
        "the first handles took {} MiB of a {} MiB limit",
        taken / MIB,
        limit / MIB
    );
    let len = usize::try_from(384 * MIB).unwrap();
    let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE;
    let p = unsafe { libc::mmap(null_mut(), len, libc::PROT_READ, flags, -1, 0) };
    assert_ne!(p, libc::MAP_FAILED, "384 MiB no longer fit: {}", std::io::Error::last_os_error());
    assert_eq!(unsafe { libc::munmap(p, len) }, 0);
    assert_eq!(unsafe { kpccl_shm_win_free(win) }, KPCCL_OK, "{}", last_error());
    assert_eq!(unsafe { kpccl_shm_comm_destroy(comm) }, KPCCL_OK);
}

#[test]
fn the_handle_table_leaves_an_address_space_limit_to_the_program() {
    if std::env::var_os(LIMITED).is_some() {
        return under_an_address_space_limit();
    }
    if cfg!(target_arch = "aarch64") && std::env::var_os("CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER").is_some() {
        // qemu-user ignores a guest's RLIMIT_AS (the limit would bind the
        // emulator's own memory): there is no limit to see under it.
        return;
    }
    // A fresh process, this test alone: the table is reserved at its first handle.
    let me = std::env::current_exe().unwrap();
    let name = "the_handle_table_leaves_an_address_space_limit_to_the_program";
    let out =
        Command::new(me).args([name, "--exact", "--test-threads=1", "--nocapture"]).env(LIMITED, "1").output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{text}");
    assert!(text.contains("1 passed"), "the test ran: {text}");
}
