//! Two ranks as two threads of one process, through the C ABI, with an
//! in-process out-of-band allgather: so that a fence really waits, and a
//! second thread can try the same window meanwhile. The header forbids two
//! threads in one window's fences at once; the library refuses the second.
#![allow(missing_docs, clippy::undocumented_unsafe_blocks, clippy::multiple_unsafe_ops_per_block)]

use core::ffi::{CStr, c_int, c_void};
use core::ptr::null_mut;
use core::time::Duration;
use std::sync::{Arc, Barrier, Mutex};

use kpccl::*;

/// What the ranks share: a meeting point and the gathered bytes.
struct Shared {
    barrier: Barrier,
    gathered: Mutex<Vec<u8>>,
}

/// One rank's `group` argument.
struct Group {
    rank: usize,
    shared: Arc<Shared>,
}

unsafe extern "C" fn allgather(
    send: *const c_void,
    recv: *mut c_void,
    size: c_int,
    group: *mut c_void,
    _: kpccl_shm_datatype_t,
) -> c_int {
    let g = unsafe { &*group.cast::<Group>() };
    let size = usize::try_from(size).unwrap();
    let n = 2;
    {
        let mut all = g.shared.gathered.lock().unwrap();
        all.resize(n * size, 0);
        all[g.rank * size..][..size].copy_from_slice(unsafe { core::slice::from_raw_parts(send.cast::<u8>(), size) });
    }
    g.shared.barrier.wait();
    let all = g.shared.gathered.lock().unwrap().clone();
    unsafe { core::ptr::copy_nonoverlapping(all.as_ptr(), recv.cast::<u8>(), n * size) };
    // Nobody writes the next round before everyone has read this one.
    g.shared.barrier.wait();
    0
}

unsafe extern "C" fn barrier(group: *mut c_void) -> c_int {
    unsafe { &*group.cast::<Group>() }.shared.barrier.wait();
    0
}

fn last_error() -> String {
    unsafe { CStr::from_ptr(kpccl_last_error()) }.to_string_lossy().into_owned()
}

/// Handles cross threads as integers (raw pointers are not `Send`).
#[derive(Clone, Copy, Debug)]
struct Rank {
    comm: usize,
    win: usize,
}

/// Rank `rank`'s communicator and a window of 64 bytes with a fence timeout,
/// so that nothing here can wait for ever.
fn join(rank: usize, shared: &Arc<Shared>) -> Rank {
    let group = Box::leak(Box::new(Group { rank, shared: Arc::clone(shared) }));
    let mut cbs = kpccl_shm_oob_cb_t { oob_allgather: Some(allgather), oob_barrier: Some(barrier) };
    let r = c_int::try_from(rank).unwrap();
    let mut comm = null_mut();
    let rc = unsafe { kpccl_shm_comm_create(2, r, r, &mut cbs, core::ptr::from_mut(group).cast(), &mut comm) };
    assert_eq!(rc, KPCCL_OK, "{}", last_error());
    let mut attr = core::mem::MaybeUninit::<kpccl_shm_win_attr_t>::uninit();
    assert_eq!(unsafe { kpccl_shm_win_attr_init(attr.as_mut_ptr()) }, KPCCL_OK);
    let mut attr = unsafe { attr.assume_init() };
    attr.timeout_ms = 10_000;
    let (mut base, mut win) = (null_mut(), null_mut());
    assert_eq!(unsafe { kpccl_shm_win_alloc_ex(64, comm, &attr, &mut base, &mut win) }, KPCCL_OK, "{}", last_error());
    Rank { comm: comm as usize, win: win as usize }
}

fn win(r: Rank) -> kpccl_shm_win_h {
    r.win as kpccl_shm_win_h
}

#[test]
fn a_second_thread_fencing_a_busy_window_is_refused() {
    let shared = Arc::new(Shared { barrier: Barrier::new(2), gathered: Mutex::new(Vec::new()) });
    let other = std::thread::spawn({
        let shared = Arc::clone(&shared);
        move || join(1, &shared)
    });
    let me = join(0, &shared);
    let peer = other.join().unwrap();

    // Rank 0's first thread waits in a fence for rank 1, which comes later
    // (it retries while the probes below hold the window for an instant).
    let busy = "is in use by another thread";
    let waiting = std::thread::spawn(move || {
        loop {
            let rc = unsafe { kpccl_shm_peer_fence(win(me), 1) };
            if rc == KPCCL_OK || !last_error().contains(busy) {
                return (rc, last_error());
            }
        }
    });
    // Until it is in: a fence with oneself returns at once, or is refused
    // while the window is busy.
    let mut tries = 0;
    while unsafe { kpccl_shm_peer_fence(win(me), 0) } == KPCCL_OK {
        tries += 1;
        assert!(tries < 10_000, "the first thread never entered its fence");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(last_error().contains(busy), "{}", last_error());
    assert!(!waiting.is_finished(), "the fence waits for rank 1");
    // Rank 0's second thread: refused at once, and nothing disturbed.
    for rc in [unsafe { kpccl_shm_peer_fence(win(me), 1) }, unsafe { kpccl_shm_win_fence(win(me)) }] {
        assert_eq!(rc, KPCCL_ERROR);
        assert!(last_error().contains(busy) && last_error().contains("kpccl_shm_"), "{}", last_error());
    }
    assert_eq!(unsafe { kpccl_shm_win_free(win(me)) }, KPCCL_ERROR);
    assert!(last_error().starts_with("kpccl_shm_win_free: window handle 0x"), "{}", last_error());
    assert!(last_error().contains(busy), "{}", last_error());
    // A query may run beside the fence.
    let (mut size, mut base) = (0usize, null_mut());
    assert_eq!(unsafe { kpccl_shm_win_query(win(me), 1, &mut size, &mut base) }, KPCCL_OK, "{}", last_error());
    assert_eq!(size, 64);

    // Rank 1 arrives: the waiting fence completes, and the window still works.
    assert_eq!(unsafe { kpccl_shm_peer_fence(win(peer), 0) }, KPCCL_OK, "{}", last_error());
    let (rc, text) = waiting.join().unwrap();
    assert_eq!(rc, KPCCL_OK, "{text}");
    let second = std::thread::spawn(move || unsafe { kpccl_shm_win_fence(win(peer)) });
    assert_eq!(unsafe { kpccl_shm_win_fence(win(me)) }, KPCCL_OK, "{}", last_error());
    assert_eq!(second.join().unwrap(), KPCCL_OK);

    let other = std::thread::spawn(move || unsafe { kpccl_shm_win_free(win(peer)) });
    assert_eq!(unsafe { kpccl_shm_win_free(win(me)) }, KPCCL_OK, "{}", last_error());
    assert_eq!(other.join().unwrap(), KPCCL_OK);
    for r in [me, peer] {
        assert_eq!(unsafe { kpccl_shm_comm_destroy(r.comm as kpccl_shm_comm_h) }, KPCCL_OK);
    }
}
