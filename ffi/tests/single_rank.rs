//! The C ABI driven from Rust with one rank and an in-process out-of-band
//! "allgather" (a copy): the whole life cycle, and the refusals, without
//! MPI or a launcher, so that `cargo test` (also under qemu) covers it. The
//! multi-rank behaviour is the C tests' job (`ffi/tests/c`).
#![allow(missing_docs, clippy::undocumented_unsafe_blocks, clippy::multiple_unsafe_ops_per_block)]

use core::ffi::{c_int, c_void};
use core::ptr::null_mut;

use kpccl::*;

mod support;
use support::{GOOD, alloc, create, fails, last_error};

#[test]
fn a_window_lives_and_dies() {
    let (rc, comm) = create(GOOD);
    assert_eq!(rc, KPCCL_OK, "{}", last_error());
    let (base, win) = alloc(comm, 4000);
    assert!(!base.is_null());
    let public = unsafe { &*win };
    assert_eq!((public.rank, public.nranks), (0, 1));
    unsafe { core::ptr::write_bytes(base, 7, 4000) };
    assert_eq!(unsafe { kpccl_shm_win_fence(win) }, KPCCL_OK);
    assert_eq!(unsafe { kpccl_shm_peer_fence(win, 0) }, KPCCL_OK);
    let (mut size, mut ptr) = (0usize, null_mut());
    assert_eq!(unsafe { kpccl_shm_win_query(win, 0, &mut size, &mut ptr) }, KPCCL_OK);
    assert_eq!((size, ptr.cast()), (4000, base));
    assert_eq!(unsafe { kpccl_shm_peer_fence(win, 1) }, KPCCL_ERROR);
    assert!(last_error().contains("remote_rank"), "{}", last_error());
    assert_eq!(unsafe { kpccl_shm_win_free(win) }, KPCCL_OK);
    assert_eq!(unsafe { kpccl_shm_win_free(win) }, KPCCL_ERROR);
    let stale = format!("kpccl_shm_win_free: window handle {win:p} (`win`) was freed (stale handle)");
    assert_eq!(last_error(), stale);
    assert_eq!(unsafe { kpccl_shm_comm_destroy(comm) }, KPCCL_OK);
    assert_eq!(unsafe { kpccl_shm_comm_destroy(comm) }, KPCCL_ERROR);
}

/// The attributes `kpccl_shm_win_attr_init` gives.
fn default_attr() -> kpccl_shm_win_attr_t {
    let mut attr = core::mem::MaybeUninit::<kpccl_shm_win_attr_t>::uninit();
    assert_eq!(unsafe { kpccl_shm_win_attr_init(attr.as_mut_ptr()) }, KPCCL_OK);
    unsafe { attr.assume_init() }
}

#[test]
fn size_zero_has_no_base_and_attributes_apply() {
    let (_, comm) = create(GOOD);
    let mut attr = default_attr();
    attr.layout = kpccl_shm_layout_t::KPCCL_SHM_LAYOUT_ALIGNED as c_int;
    let (mut base, mut win) = (core::ptr::dangling_mut::<c_void>(), null_mut());
    assert_eq!(unsafe { kpccl_shm_win_alloc_ex(0, comm, &attr, &mut base, &mut win) }, KPCCL_OK, "{}", last_error());
    assert!(base.is_null() && !win.is_null());
    assert_eq!(unsafe { kpccl_shm_win_free(win) }, KPCCL_OK);
    // A device window has no layout of its own to choose: refused, not ignored.
    attr.memory_kind = kpccl_shm_memory_kind_t::KPCCL_SHM_MEMORY_ASCEND as c_int;
    assert_eq!(unsafe { kpccl_shm_win_alloc_ex(64, comm, &attr, &mut base, &mut win) }, KPCCL_ERROR);
    assert!(base.is_null() && win.is_null());
    assert_eq!(
        last_error(),
        "kpccl_shm_win_alloc_ex: `attr->layout` is invalid: only for host memory: must be left at the default for \
         KPCCL_SHM_MEMORY_ASCEND"
    );
    let host_only: [fn(&mut kpccl_shm_win_attr_t); 4] =
        [|a| a.spin_count = 10, |a| a.reserve = 2, |a| a.barrier = 1, |a| a.alignment = 256];
    for set in host_only {
        let mut device = default_attr();
        device.memory_kind = kpccl_shm_memory_kind_t::KPCCL_SHM_MEMORY_ASCEND as c_int;
        set(&mut device);
        assert_eq!(unsafe { kpccl_shm_win_alloc_ex(64, comm, &device, &mut base, &mut win) }, KPCCL_ERROR);
        assert!(last_error().contains("only for host memory"), "{}", last_error());
    }
    attr.layout = kpccl_shm_layout_t::KPCCL_SHM_LAYOUT_DEFAULT as c_int;
    assert_eq!(unsafe { kpccl_shm_win_alloc_ex(64, comm, &attr, &mut base, &mut win) }, KPCCL_ERROR);
    assert!(base.is_null() && win.is_null());
    // Without KPCCL_ASCEND, and without CANN, the error says how to simulate.
    #[cfg(feature = "ascend")]
    if std::env::var_os("KPCCL_ASCEND").is_none() {
        assert!(last_error().contains("set KPCCL_ASCEND=sim"), "{}", last_error());
    }
    assert_eq!(unsafe { kpccl_shm_comm_destroy(comm) }, KPCCL_OK);
}

/// A host-only libkpccl (`--no-default-features`) has every C function; a
/// device window fails with a text naming the missing feature and the class
/// of a missing device runtime, and the communicator stays usable.
#[cfg(not(feature = "ascend"))]
#[test]
fn a_host_only_library_refuses_device_windows() {
    let (_, comm) = create(GOOD);
    let mut attr = default_attr();
    attr.memory_kind = kpccl_shm_memory_kind_t::KPCCL_SHM_MEMORY_ASCEND as c_int;
    let (mut base, mut win) = (core::ptr::dangling_mut::<c_void>(), core::ptr::dangling_mut());
    assert_eq!(unsafe { kpccl_shm_win_alloc_ex(64, comm, &attr, &mut base, &mut win) }, KPCCL_ERROR);
    assert!(base.is_null() && win.is_null());
    assert_eq!(
        last_error(),
        "kpccl_shm_win_alloc_ex: this libkpccl was built without the Ascend backend (cargo feature `ascend`)"
    );
    assert_eq!(kpccl_last_error_code(), kpccl_error_code_t::KPCCL_ERR_DEVICE_RUNTIME);
    // The refusal took part in the window collective: the next window is made.
    assert_eq!(unsafe { kpccl_shm_win_alloc(64, comm, &mut base, &mut win) }, KPCCL_OK, "{}", last_error());
    assert_eq!(unsafe { kpccl_shm_win_fence_stream(win, core::ptr::dangling_mut()) }, KPCCL_ERROR);
    assert!(last_error().contains("a host window has no device stream"), "{}", last_error());
    assert_eq!(unsafe { kpccl_shm_win_fence_stream(win, null_mut()) }, KPCCL_OK, "{}", last_error());
    assert_eq!(unsafe { kpccl_shm_win_free(win) }, KPCCL_OK);
    assert_eq!(unsafe { kpccl_shm_comm_destroy(comm) }, KPCCL_OK);
}

#[test]
fn a_failing_callback_fails_the_call() {
    let (rc, comm) = create(kpccl_shm_oob_cb_t { oob_allgather: Some(fails), ..GOOD });
    assert_eq!(rc, KPCCL_ERROR);
    assert!(comm.is_null());
    assert!(last_error().contains("returned 42"), "{}", last_error());
    let (rc, comm) = create(kpccl_shm_oob_cb_t { oob_allgather: None, ..GOOD });
    assert_eq!(rc, KPCCL_ERROR);
    assert!(comm.is_null());
    assert!(last_error().contains("oob->oob_allgather"), "{}", last_error());
}

#[test]
fn nothing_is_dereferenced_before_it_is_checked() {
    let mut local = [0u64; 4];
    let foreign: kpccl_shm_win_h = local.as_mut_ptr().cast();
    assert_eq!(unsafe { kpccl_shm_win_fence(foreign) }, KPCCL_ERROR);
    assert_eq!(unsafe { kpccl_shm_win_fence(null_mut()) }, KPCCL_ERROR);
    assert_eq!(unsafe { kpccl_shm_comm_destroy(foreign.cast()) }, KPCCL_ERROR);
    assert_eq!(local, [0; 4]);
    assert_eq!(unsafe { kpccl_log_error(core::ptr::null()) }, KPCCL_ERROR);
    assert_eq!(kpccl_version(), KPCCL_VERSION);
}

#[test]
fn one_rank_is_one_node() {
    let cbs = GOOD;
    let mut comm = null_mut();
    let rc = unsafe { kpccl_shm_comm_create(1, 0, KPCCL_LOCAL_RANK_AUTO, &cbs, 0x5eed as *mut c_void, &mut comm) };
    assert_eq!(rc, KPCCL_OK, "{}", last_error());
    let mut info = kpccl_shm_comm_info_t::default();
    assert_eq!(unsafe { kpccl_shm_comm_query(comm, &mut info) }, KPCCL_OK);
    let got = (info.rank, info.nranks, info.nnodes, info.node, info.local_rank, info.local_size);
    assert_eq!(got, (0, 1, 1, 0, 0, 1));
    let mut ranks = [-1; 2];
    assert_eq!(unsafe { kpccl_shm_comm_node_ranks(comm, ranks.as_mut_ptr(), 2) }, KPCCL_OK);
    assert_eq!(ranks, [0, -1]);
    assert_eq!(unsafe { kpccl_shm_comm_node_ranks(comm, ranks.as_mut_ptr(), 0) }, KPCCL_ERROR);
    assert!(last_error().contains("capacity"), "{}", last_error());
    // In the words of one rank: it said "this node has 1 ranks, so at least 1 are needed".
    assert!(last_error().ends_with("this node has 1 rank, so at least 1 is needed"), "{}", last_error());
    assert_eq!(unsafe { kpccl_shm_comm_query(comm, null_mut()) }, KPCCL_ERROR);
    assert!(last_error().contains("`info` is NULL"), "{}", last_error());
    let mut cpus = -1;
    assert_eq!(unsafe { kpccl_shm_comm_node_cpus(comm, &mut cpus) }, KPCCL_OK);
    // One rank: the CPUs of its affinity, fewer only under a quota.
    // SAFETY: a zeroed cpu_set_t is a valid empty set; the size is its own.
    let mut set: libc::cpu_set_t = unsafe { core::mem::zeroed() };
    // SAFETY: `set` is writable and `size_of` bytes long.
    assert_eq!(unsafe { libc::sched_getaffinity(0, core::mem::size_of_val(&set), &mut set) }, 0);
    // SAFETY: `set` was filled above.
    let mine = unsafe { libc::CPU_COUNT(&set) };
    assert!((1..=mine).contains(&cpus), "{cpus} node CPUs, {mine} in this process's affinity");
    assert_eq!(unsafe { kpccl_shm_comm_node_cpus(comm, null_mut()) }, KPCCL_ERROR);
    assert!(last_error().contains("`cpus` is NULL"), "{}", last_error());
    assert_eq!(unsafe { kpccl_shm_comm_destroy(comm) }, KPCCL_OK);
    assert_eq!(unsafe { kpccl_shm_comm_query(comm, &mut info) }, KPCCL_ERROR);
    // A local rank beyond the node: refused on every rank (here, the only one).
    let rc = unsafe { kpccl_shm_comm_create(1, 0, -2, &cbs, 0x5eed as *mut c_void, &mut comm) };
    assert_eq!(rc, KPCCL_ERROR);
    assert!(last_error().contains("local_rank"), "{}", last_error());
}

/// The failure the handle checks give: the function, the handle, and why.
fn refused(rc: c_int, function: &str, why: &str) {
    assert_eq!(rc, KPCCL_ERROR);
    let text = last_error();
    assert!(text.starts_with(function) && text.contains(why), "{function}, {why}: {text}");
}

#[test]
fn a_freed_window_is_refused_and_its_successor_untouched() {
    let (_, comm) = create(GOOD);
    let (_, old) = alloc(comm, 64);
    assert_eq!(unsafe { kpccl_shm_win_free(old) }, KPCCL_OK);
    // A heap allocator would give the freed block to the next window.
    let (base, win) = alloc(comm, 64);
    assert_ne!(old, win, "a freed handle's value is never handed out again");
    unsafe { core::ptr::write_bytes(base, 0x5a, 64) };
    let (mut size, mut ptr) = (0usize, null_mut());
    let stale = "was freed (stale handle)";
    refused(unsafe { kpccl_shm_peer_fence(old, 0) }, "kpccl_shm_peer_fence: window handle 0x", stale);
    refused(unsafe { kpccl_shm_win_fence(old) }, "kpccl_shm_win_fence", stale);
    refused(unsafe { kpccl_shm_peer_signal(old, 0) }, "kpccl_shm_peer_signal", stale);
    refused(unsafe { kpccl_shm_peer_wait(old, 0) }, "kpccl_shm_peer_wait", stale);
    refused(unsafe { kpccl_shm_win_query(old, 0, &mut size, &mut ptr) }, "kpccl_shm_win_query", stale);
    refused(unsafe { kpccl_shm_win_free(old) }, "kpccl_shm_win_free", stale);
    assert_eq!((size, ptr), (0, null_mut()), "a refused query writes nothing");
    // The live window: its data intact, its calls working.
    assert_eq!(unsafe { kpccl_shm_peer_fence(win, 0) }, KPCCL_OK, "{}", last_error());
    assert_eq!(unsafe { kpccl_shm_win_fence(win) }, KPCCL_OK, "{}", last_error());
    assert_eq!(unsafe { kpccl_shm_win_query(win, 0, &mut size, &mut ptr) }, KPCCL_OK);
    assert_eq!((size, ptr.cast::<u8>()), (64, base));
    assert!(unsafe { core::slice::from_raw_parts(base, 64) }.iter().all(|&b| b == 0x5a));
    assert_eq!(unsafe { (*win).rank }, 0);
    // A communicator is not a window, and the other way round.
    refused(unsafe { kpccl_shm_win_free(comm.cast()) }, "kpccl_shm_win_free", "is a communicator handle");
    refused(unsafe { kpccl_shm_comm_destroy(win.cast()) }, "kpccl_shm_comm_destroy", "is a window handle");
    assert_eq!(unsafe { kpccl_shm_win_free(win) }, KPCCL_OK, "{}", last_error());
    assert_eq!(unsafe { kpccl_shm_comm_destroy(comm) }, KPCCL_OK);
}

#[test]
fn a_destroyed_communicator_is_refused_and_its_successor_untouched() {
    let (_, old) = create(GOOD);
    assert_eq!(unsafe { kpccl_shm_comm_destroy(old) }, KPCCL_OK);
    let (_, comm) = create(GOOD);
    assert_ne!(old, comm);
    let mut info = kpccl_shm_comm_info_t::default();
    let (mut ranks, mut cpus) = ([-1; 1], -1);
    let (mut base, mut win) = (null_mut(), null_mut());
    let stale = "was freed (stale handle)";
    refused(unsafe { kpccl_shm_comm_query(old, &mut info) }, "kpccl_shm_comm_query: communicator handle 0x", stale);
    refused(unsafe { kpccl_shm_comm_node_ranks(old, ranks.as_mut_ptr(), 1) }, "kpccl_shm_comm_node_ranks", stale);
    refused(unsafe { kpccl_shm_comm_node_cpus(old, &mut cpus) }, "kpccl_shm_comm_node_cpus", stale);
    refused(unsafe { kpccl_shm_win_alloc(64, old, &mut base, &mut win) }, "kpccl_shm_win_alloc", stale);
    refused(unsafe { kpccl_shm_comm_destroy(old) }, "kpccl_shm_comm_destroy", stale);
    assert_eq!((ranks, cpus), ([-1], -1));
    assert_eq!(unsafe { kpccl_shm_comm_query(comm, &mut info) }, KPCCL_OK);
    assert_eq!((info.rank, info.nranks), (0, 1));
    let (_, win) = alloc(comm, 8);
    assert_eq!(unsafe { kpccl_shm_win_free(win) }, KPCCL_OK);
    assert_eq!(unsafe { kpccl_shm_comm_destroy(comm) }, KPCCL_OK);
}

#[test]
fn a_free_racing_queries_and_fences_is_refused_or_refuses_them() {
    let (_, comm) = create(GOOD);
    let (base, win) = alloc(comm, 128);
    let (h, base) = (win as usize, base as usize);
    // Each thread says so once its first call succeeded.
    let (ran, first_calls) = std::sync::mpsc::channel();
    let query_ran = ran.clone();
    let query = std::thread::spawn(move || {
        let (mut size, mut ptr) = (0usize, null_mut());
        let mut ok = 0u64;
        while unsafe { kpccl_shm_win_query(h as kpccl_shm_win_h, 0, &mut size, &mut ptr) } == KPCCL_OK {
            assert_eq!((size, ptr as usize), (128, base));
            ok += 1;
            if ok == 1 {
                let _ = query_ran.send(());
            }
        }
        (ok, last_error())
    });
    let fence = std::thread::spawn(move || {
        let mut ok = 0u64;
        loop {
            if unsafe { kpccl_shm_peer_fence(h as kpccl_shm_win_h, 0) } == KPCCL_OK {
                ok += 1;
                if ok == 1 {
                    let _ = ran.send(());
                }
            } else if !last_error().contains("in use by another thread") {
                // Only the free's own claim can make it busy: a try during it.
                return (ok, last_error());
            }
        }
    });
    // The free races both threads only once both run: a fixed pause could
    // end before a loaded machine had started them.
    for _ in 0..2 {
        let waited = first_calls.recv_timeout(core::time::Duration::from_secs(60));
        waited.expect("the query and fence threads did not both succeed once within 60 s");
    }
    let mut refusals = 0;
    while unsafe { kpccl_shm_win_free(win) } == KPCCL_ERROR {
        assert!(last_error().contains("is in use by another thread"), "{}", last_error());
        refusals += 1;
        assert!(refusals < 1_000_000, "the fencing thread never let the free in");
    }
    for (who, t) in [("query", query), ("fence", fence)] {
        let (ok, end) = t.join().unwrap();
        assert!(ok > 0, "{who} never ran before the free");
        assert!(end.contains("was freed (stale handle)"), "{who} ended with: {end}");
    }
    eprintln!("the free was refused {refusals} times while a fence ran");
    assert_eq!(unsafe { kpccl_shm_comm_destroy(comm) }, KPCCL_OK);
}

/// Put and get copy as `memmove` does: a buffer in the window, even one
/// overlapping the bytes copied (shifting data within one's own segment).
#[test]
fn put_and_get_may_overlap_the_bytes_they_copy() {
    let (_, comm) = create(GOOD);
    let (base, win) = alloc(comm, 256);
    let fill = || {
        let seg = unsafe { core::slice::from_raw_parts_mut(base, 256) };
        for (b, i) in seg.iter_mut().zip(0..=255u8) {
            *b = i;
        }
    };
    let seg = || unsafe { core::slice::from_raw_parts(base, 256) }.to_vec();
    let memmove = |from: usize, to: usize, len: usize| {
        let mut want: Vec<u8> = (0..=255).collect();
        want.copy_within(from..from + len, to);
        want
    };
    for (from, to) in [(0, 16), (16, 0), (0, 1), (1, 0), (40, 40), (0, 100)] {
        fill();
        let src = unsafe { base.add(from) };
        assert_eq!(unsafe { kpccl_shm_win_put(win, 0, to, src.cast(), 150) }, KPCCL_OK, "{}", last_error());
        assert_eq!(seg(), memmove(from, to, 150), "put of 150 bytes from {from} to {to}");
        fill();
        let dst = unsafe { base.add(to) };
        assert_eq!(unsafe { kpccl_shm_win_get(win, 0, from, dst.cast(), 150) }, KPCCL_OK, "{}", last_error());
        assert_eq!(seg(), memmove(from, to, 150), "get of 150 bytes from {from} to {to}");
    }
    // Out of the segment: refused, nothing copied, overlapping or not.
    fill();
    assert_eq!(unsafe { kpccl_shm_win_put(win, 0, 200, base.cast(), 100) }, KPCCL_ERROR);
    assert!(last_error().contains("outside") || last_error().contains("out of"), "{}", last_error());
    assert_eq!(seg(), memmove(0, 0, 0));
    assert_eq!(unsafe { kpccl_shm_win_free(win) }, KPCCL_OK);
    assert_eq!(unsafe { kpccl_shm_comm_destroy(comm) }, KPCCL_OK);
}

/// A rank count larger than the callbacks' group (a job's count given with
/// a node's communicator) leaves records unwritten: the error says how many
/// ranks answered. The
/// callbacks are taken `const`, as a C `static const` table is.
#[test]
fn a_rank_count_larger_than_the_group_says_so() {
    let mut comm = core::ptr::dangling_mut();
    let group = support::GROUP as *mut c_void;
    let rc = unsafe { kpccl_shm_comm_create(3, 0, KPCCL_LOCAL_RANK_AUTO, &GOOD, group, &mut comm) };
    assert_eq!(rc, KPCCL_ERROR);
    assert!(comm.is_null());
    assert_eq!(
        last_error(),
        "kpccl_shm_comm_create: nranks is 3, but only 1 rank answered the out-of-band allgather: every rank must \
         pass the size of the callbacks' group (the size of the MPI communicator)"
    );
    assert_eq!(kpccl_last_error_code(), kpccl_error_code_t::KPCCL_ERR_INVALID_ARGUMENT);
    // The right count works.
    let rc = unsafe { kpccl_shm_comm_create(1, 0, KPCCL_LOCAL_RANK_AUTO, &GOOD, group, &mut comm) };
    assert_eq!(rc, KPCCL_OK, "{}", last_error());
    assert_eq!(unsafe { kpccl_shm_comm_destroy(comm) }, KPCCL_OK);
}

/// An alignment that is no power of two is refused as such, even past the
/// page size: it said "larger than the page size (not supported yet)",
/// as if a later version could take it.
#[test]
fn an_alignment_that_is_no_power_of_two_is_called_so_past_the_page_too() {
    let (_, comm) = create(GOOD);
    let mut attr = default_attr();
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap();
    let (mut base, mut win) = (null_mut(), null_mut());
    for (alignment, said) in [(3 * page, "power of two"), (2 * page, "larger than the page size")] {
        attr.alignment = alignment;
        assert_eq!(unsafe { kpccl_shm_win_alloc_ex(64, comm, &attr, &mut base, &mut win) }, KPCCL_ERROR);
        assert!(last_error().contains(said), "alignment {alignment}: {}", last_error());
    }
    assert_eq!(unsafe { kpccl_shm_comm_destroy(comm) }, KPCCL_OK);
}
