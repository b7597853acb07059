//! A child forked from a rank does not inherit the rank's windows
//! (MADV_DONTFORK): touching one faults in the child, and the parent's window
//! goes on untouched.
#![allow(unsafe_code)]

use kpccl_posix::{Comm, Oob};

/// Rank 0 forks a child that reads the window: the child must die of SIGSEGV
/// (unless `expect_fault=false`: qemu-user ignores MADV_DONTFORK); then the
/// ranks hand data over as usual.
pub(crate) fn child_does_not_share_the_window<O: Oob>(comm: &Comm<O>, args: &crate::args::Args) -> Result<(), String> {
    let expect_fault: bool = args.get("expect_fault", true)?;
    let me = comm.rank();
    let win = comm.window(4096).alloc().map_err(|e| e.to_string())?;
    let seg = win.local_segment();
    if me == 0 {
        // SAFETY: the child only reads memory and calls _exit (no locks, no allocation).
        match unsafe { libc::fork() } {
            -1 => return Err(format!("fork: {}", std::io::Error::last_os_error())),
            0 => {
                // SAFETY: reads this rank's own segment pointer: a fault unless inherited.
                let v = unsafe { seg.ptr.as_ptr().read_volatile() };
                // SAFETY: leaves the child at once, running no destructor of the parent's state.
                unsafe { libc::_exit(i32::from(v) + 10) };
            }
            child => {
                let mut status = 0;
                // SAFETY: waits for our own child; `status` is writable.
                unsafe { libc::waitpid(child, &mut status, 0) };
                let faulted = libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGSEGV;
                if !faulted && !expect_fault {
                    println!("rank 0: the forked child read the window (qemu-user ignores MADV_DONTFORK)");
                } else if !faulted {
                    return Err(format!("the forked child could read the window (wait status {status:#x})"));
                } else {
                    println!("rank 0: the forked child faulted on the window, as documented");
                }
            }
        }
    }
    let n = comm.nranks();
    win.write((me + 1) % n, 0, &[u64::from(me) + 100]).map_err(|e| e.to_string())?;
    win.fence().map_err(|e| e.to_string())?;
    let mut got = [0u64];
    win.read(me, 0, &mut got).map_err(|e| e.to_string())?;
    let left = (me + n - 1) % n;
    if got[0] != u64::from(left) + 100 {
        return Err(format!("after the fork the window holds {}, expected {}", got[0], left + 100));
    }
    win.free().map_err(|e| e.to_string())
}
