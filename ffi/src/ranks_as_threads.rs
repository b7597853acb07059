//! Two ranks as two threads of this process, through the C functions, with
//! an in-process out-of-band allgather:
//! - a rank that cannot have a handle for the object a collective makes
//!   fails with the others, not alone after them (the others' next
//!   collective would then wait for it for ever); the refusal is forced
//!   with a test hook (`handle::tests::REFUSE_RESERVE`): the table of a
//!   test process is never full;
//! - a fence really waits, so a second thread can try the same window
//!   meanwhile: the header forbids two threads in one window's fences at
//!   once, and the library refuses the second.
#![allow(clippy::undocumented_unsafe_blocks, clippy::multiple_unsafe_ops_per_block)]

use core::ffi::{CStr, c_int, c_void};
use core::ptr::null_mut;
use core::time::Duration;
use std::sync::mpsc;
use std::sync::{Arc, Barrier, Mutex};

use kpccl_core::sync::AtomicU32;
use kpccl_core::sync::Ordering::Relaxed;

use crate::handle::tests::REFUSE_RESERVE;
use crate::*;

/// What the two ranks share: a meeting point and the gathered bytes.
#[derive(Debug)]
struct Shared {
    barrier: Barrier,
    gathered: Mutex<Vec<u8>>,
}

/// One rank's `group`.
#[derive(Debug)]
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
    {
        let mut all = g.shared.gathered.lock().unwrap();
        all.resize(2 * size, 0);
        all[g.rank * size..][..size].copy_from_slice(unsafe { core::slice::from_raw_parts(send.cast::<u8>(), size) });
    }
    g.shared.barrier.wait();
    let all = g.shared.gathered.lock().unwrap().clone();
    unsafe { core::ptr::copy_nonoverlapping(all.as_ptr(), recv.cast::<u8>(), 2 * size) };
    g.shared.barrier.wait();
    0
}

/// Out-of-band barriers called (none: see `kpccl_shm_oob_cb_t`).
static BARRIERS: AtomicU32 = AtomicU32::new(0);

unsafe extern "C" fn barrier(_: *mut c_void) -> c_int {
    // Relaxed: a count read after the ranks' threads are joined.
    BARRIERS.fetch_add(1, Relaxed);
    -1
}

fn last_error() -> String {
    unsafe { CStr::from_ptr(kpccl_last_error()) }.to_string_lossy().into_owned()
}

/// Runs `rank(0)` and `rank(1)` on two threads; their results, or a panic
/// if either has not returned after 30 s (a rank left waiting).
fn two_ranks<R: Send + 'static>(rank: impl Fn(usize, *mut c_void) -> R + Send + Sync + 'static) -> [R; 2] {
    let shared = Arc::new(Shared { barrier: Barrier::new(2), gathered: Mutex::new(Vec::new()) });
    let rank = Arc::new(rank);
    let (tx, rx) = mpsc::channel();
    for r in 0..2 {
        let (tx, rank) = (tx.clone(), Arc::clone(&rank));
        let group = Box::leak(Box::new(Group { rank: r, shared: Arc::clone(&shared) })) as *mut Group as usize;
        std::thread::spawn(move || tx.send((r, rank(r, group as *mut c_void))).unwrap());
    }
    // Only the ranks' senders are left: a rank that panics ends the wait.
    drop(tx);
    let mut out = [None, None];
    for _ in 0..2 {
        let (r, result) = rx.recv_timeout(Duration::from_secs(30)).expect("a rank panicked or was left waiting");
        out[r] = Some(result);
    }
    // Relaxed: the ranks are done.
    assert_eq!(BARRIERS.load(Relaxed), 0, "the library calls no out-of-band barrier");
    out.map(Option::unwrap)
}

fn create(rank: usize, group: *mut c_void) -> (c_int, kpccl_shm_comm_h, String) {
    let cbs = kpccl_shm_oob_cb_t { oob_allgather: Some(allgather), oob_barrier: Some(barrier) };
    let r = c_int::try_from(rank).unwrap();
    let mut comm = null_mut();
    let rc = unsafe { kpccl_shm_comm_create(2, r, KPCCL_LOCAL_RANK_AUTO, &cbs, group, &mut comm) };
    (rc, comm, last_error())
}

#[test]
fn a_rank_without_a_communicator_handle_fails_every_rank() {
    let [zero, one] = two_ranks(|rank, group| {
        REFUSE_RESERVE.with(|r| r.set(rank == 1));
        let (rc, comm, text) = create(rank, group);
        (rc, comm as usize, text)
    });
    assert_eq!((zero.0, zero.1), (KPCCL_ERROR, 0), "rank 0 made no communicator: {}", zero.2);
    assert_eq!((one.0, one.1), (KPCCL_ERROR, 0));
    assert!(one.2.starts_with("kpccl_shm_comm_create: cannot make a communicator handle"), "{}", one.2);
    assert!(
        zero.2.contains("rank 1 refused its part (it passed an invalid argument, or could not have a handle)"),
        "{}",
        zero.2
    );
}

/// A `NULL` barrier callback is a bad argument like any other: the rank
/// still has its allgather, so it takes part refused and every rank fails,
/// instead of leaving the others inside their allgather.
#[test]
fn a_rank_without_a_barrier_callback_fails_every_rank() {
    let [zero, one] = two_ranks(|rank, group| {
        let barrier = if rank == 1 { None } else { Some(barrier as unsafe extern "C" fn(*mut c_void) -> c_int) };
        let cbs = kpccl_shm_oob_cb_t { oob_allgather: Some(allgather), oob_barrier: barrier };
        let r = c_int::try_from(rank).unwrap();
        let mut comm = null_mut();
        let rc = unsafe { kpccl_shm_comm_create(2, r, KPCCL_LOCAL_RANK_AUTO, &cbs, group, &mut comm) };
        (rc, comm as usize, last_error())
    });
    assert_eq!((zero.0, zero.1), (KPCCL_ERROR, 0), "rank 0 made no communicator: {}", zero.2);
    assert_eq!((one.0, one.1), (KPCCL_ERROR, 0));
    assert_eq!(one.2, "kpccl_shm_comm_create: `oob->oob_barrier` is NULL");
    assert!(zero.2.contains("rank 1 refused its part (it passed an invalid argument"), "{}", zero.2);
}

/// Callbacks at an odd address (a member of a packed C struct) are read
/// where they are: refusing them kept that rank out of the allgather, and
/// the other waited in it for ever.
#[test]
fn callbacks_at_an_odd_address_are_read_and_every_rank_gets_through() {
    let [zero, one] = two_ranks(|rank, group| {
        let cbs = kpccl_shm_oob_cb_t { oob_allgather: Some(allgather), oob_barrier: Some(barrier) };
        // Aligned storage, so that one byte in is an odd address.
        let mut packed = [0u64; size_of::<kpccl_shm_oob_cb_t>() / 8 + 1];
        #[allow(clippy::cast_ptr_alignment)] // misaligned on purpose: only read and written unaligned
        let odd = packed.as_mut_ptr().cast::<u8>().wrapping_add(1).cast::<kpccl_shm_oob_cb_t>();
        unsafe { odd.write_unaligned(cbs) };
        let oob = if rank == 1 { odd.cast_const() } else { &raw const cbs };
        let mut comm = null_mut();
        let r = c_int::try_from(rank).unwrap();
        let rc = unsafe { kpccl_shm_comm_create(2, r, KPCCL_LOCAL_RANK_AUTO, oob, group, &mut comm) };
        let text = last_error();
        if rc == KPCCL_OK {
            assert_eq!(unsafe { kpccl_shm_comm_destroy(comm) }, KPCCL_OK);
        }
        (rc, text)
    });
    assert_eq!(zero.0, KPCCL_OK, "rank 0: {}", zero.1);
    assert_eq!(one.0, KPCCL_OK, "rank 1: {}", one.1);
}

/// A rank count out of range on one rank: that rank still takes part,
/// refused, so that the other fails instead of waiting in its allgather;
/// both are in step afterwards.
#[test]
fn a_rank_with_an_invalid_rank_count_fails_every_rank() {
    for bad in [0, -1, 1 << 20] {
        let [zero, one] = two_ranks(move |rank, group| {
            let cbs = kpccl_shm_oob_cb_t { oob_allgather: Some(allgather), oob_barrier: Some(barrier) };
            let (r, n) = (c_int::try_from(rank).unwrap(), if rank == 1 { bad } else { 2 });
            let mut comm = null_mut();
            let rc = unsafe { kpccl_shm_comm_create(n, r, KPCCL_LOCAL_RANK_AUTO, &cbs, group, &mut comm) };
            let text = last_error();
            // Still in step: the next communicator is made.
            let (again, made, _) = create(rank, group);
            assert_eq!(again, KPCCL_OK, "rank {rank} after nranks {bad}: {}", last_error());
            assert_eq!(unsafe { kpccl_shm_comm_destroy(made) }, KPCCL_OK);
            (rc, comm as usize, text)
        });
        assert_eq!((zero.0, zero.1), (KPCCL_ERROR, 0), "nranks {bad}: rank 0 made no communicator: {}", zero.2);
        assert_eq!((one.0, one.1), (KPCCL_ERROR, 0));
        assert!(one.2.starts_with(&format!("kpccl_shm_comm_create: nranks {bad} is out of range")), "{}", one.2);
        assert!(zero.2.contains("rank 1 refused its part (it passed an invalid argument"), "{}", zero.2);
    }
}

#[test]
fn a_rank_without_a_window_handle_fails_every_rank_and_the_next_window_is_made() {
    let [zero, one] = two_ranks(|rank, group| {
        let (rc, comm, text) = create(rank, group);
        assert_eq!(rc, KPCCL_OK, "{text}");
        let (mut base, mut win) = (core::ptr::dangling_mut::<c_void>(), core::ptr::dangling_mut());
        REFUSE_RESERVE.with(|r| r.set(rank == 1));
        let refused = unsafe { kpccl_shm_win_alloc(64, comm, &mut base, &mut win) };
        let text = last_error();
        assert!(base.is_null() && win.is_null(), "rank {rank}: outputs cleared");
        // Both ranks are still in step: the next window is made.
        let rc = unsafe { kpccl_shm_win_alloc(64, comm, &mut base, &mut win) };
        assert_eq!(rc, KPCCL_OK, "rank {rank}: {}", last_error());
        assert_eq!(unsafe { kpccl_shm_win_free(win) }, KPCCL_OK, "{}", last_error());
        assert_eq!(unsafe { kpccl_shm_comm_destroy(comm) }, KPCCL_OK);
        (refused, text)
    });
    assert_eq!(zero.0, KPCCL_ERROR, "rank 0 made no window");
    assert_eq!(one.0, KPCCL_ERROR);
    assert!(one.1.starts_with("kpccl_shm_win_alloc: cannot make a window handle"), "{}", one.1);
    assert!(
        zero.1.contains("rank 1 refused its part (it passed an invalid argument, or could not have a handle)"),
        "{}",
        zero.1
    );
}

/// Handles cross threads as integers (raw pointers are not `Send`).
#[derive(Clone, Copy, Debug)]
struct Rank {
    comm: usize,
    win: usize,
}

fn win(r: Rank) -> kpccl_shm_win_h {
    r.win as kpccl_shm_win_h
}

/// Rank `rank`'s communicator and a window of 64 bytes with a fence timeout,
/// so that nothing here can wait for ever.
fn join(rank: usize, group: *mut c_void) -> Rank {
    let (rc, comm, text) = create(rank, group);
    assert_eq!(rc, KPCCL_OK, "{text}");
    let mut attr = core::mem::MaybeUninit::<kpccl_shm_win_attr_t>::uninit();
    assert_eq!(unsafe { kpccl_shm_win_attr_init(attr.as_mut_ptr()) }, KPCCL_OK);
    let mut attr = unsafe { attr.assume_init() };
    attr.timeout_ms = 10_000;
    let (mut base, mut win) = (null_mut(), null_mut());
    assert_eq!(unsafe { kpccl_shm_win_alloc_ex(64, comm, &attr, &mut base, &mut win) }, KPCCL_OK, "{}", last_error());
    Rank { comm: comm as usize, win: win as usize }
}

#[test]
fn a_second_thread_fencing_a_busy_window_is_refused() {
    let [me, peer] = two_ranks(join);

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
