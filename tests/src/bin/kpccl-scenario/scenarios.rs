//! The scenarios. Each returns `Err` with a message when a check fails.

use std::time::{Duration, Instant};

use kpccl_core::{CollectiveError, FenceError};
use kpccl_posix::launch::RunOob;
use kpccl_posix::{Comm, Error, LayoutMode, Oob, Window};
use kpccl_testkit::{FailingOob, When};

use crate::args::Args;
use crate::checks::{Rng, resources, verify, word};

pub(crate) const NAMES: &[&str] = &[
    "layout",
    "handoff",
    "pipeline",
    "polled",
    "abandoned",
    "fence",
    "cycle",
    "bad-align",
    "bad-size",
    "bad-mode",
    "bad-nranks",
    "oob-fail",
    "die",
    "leave",
    "left-ended",
    "wakes",
    "stall",
    "full",
    "nodes",
    "churn",
];

pub(crate) type Res = Result<(), String>;

pub(crate) fn s(e: impl std::fmt::Display) -> String {
    e.to_string()
}

pub(crate) fn run(name: &str, oob: RunOob, args: &Args) -> Res {
    let (rank, n) = (oob.rank(), oob.nranks());
    if name == "bad-nranks" {
        return bad_nranks(oob, rank, n);
    }
    if name == "oob-fail" {
        return oob_fail(oob, args);
    }
    if name == "nodes" {
        return crate::nodes::nodes(oob, args);
    }
    if name == "churn" {
        return crate::churn::churn(oob, args);
    }
    if args.get("pin", 0)? == 1 {
        crate::wakes::pin(rank)?;
    }
    let comm = Comm::new(oob, rank, n).map_err(s)?;
    match name {
        "layout" => layout(&comm, args),
        "handoff" => handoff(&comm, args),
        "pipeline" => crate::pipeline::pipeline(&comm, args),
        "polled" => crate::polled::polled(&comm, args),
        "abandoned" => crate::polled::abandoned(&comm, args),
        "fence" => fence(&comm, args),
        "cycle" => cycle(&comm, args),
        "bad-align" => {
            expect_failure(&comm, Some(n - 1), |c, me| c.window(64).align(if me == n - 1 { 3 } else { 64 }).alloc())
        }
        "bad-size" => expect_failure(&comm, None, |c, me| c.window(if me == n - 1 { 1 << 62 } else { 64 }).alloc()),
        "bad-mode" => expect_failure(&comm, Some(1.min(n - 1)), |c, me| {
            c.window(64).layout(if me == 0 { LayoutMode::Aligned } else { LayoutMode::Contiguous }).alloc()
        }),
        "die" => die(&comm, args),
        "wakes" => crate::wakes::wakes(&comm, args),
        "stall" => stall(&comm, args),
        "full" => full(&comm, args),
        "crash" => crash(&comm),
        "soak" => soak(&comm, args),
        "fork" => crate::fork::child_does_not_share_the_window(&comm, args),
        "signals" => crate::signals::interrupted_waits(&comm, args),
        "leave" => crate::leave::leave(&comm, args),
        "left-ended" => crate::leave::left_then_ended(&comm, args),
        _ => Err(format!("unknown scenario {name:?}; known: {}", NAMES.join(", "))),
    }
}

pub(crate) fn words(round: u64, writer: u32, len: usize) -> Vec<u64> {
    (0..len).map(|i| word(round, writer, i)).collect()
}

/// Every rank checks every segment's size, alignment and place, agrees with
/// every other rank on them, and reads every peer's data after a fence.
fn layout<O: Oob>(comm: &Comm<O>, args: &Args) -> Res {
    let (me, n) = (comm.rank(), comm.nranks());
    let sizes: Vec<usize> = args
        .str("sizes")
        .unwrap_or("4096")
        .split(',')
        .map(|v| v.parse().map_err(|_| format!("bad size {v:?}")))
        .collect::<Result<_, _>>()?;
    let size = |r: u32| sizes[r as usize % sizes.len()];
    let mode = match args.str("mode").unwrap_or("contiguous") {
        "aligned" => LayoutMode::Aligned,
        _ => LayoutMode::Contiguous,
    };
    let align: usize = args.get("align", 64)?;
    let win = comm.window(size(me)).layout(mode).align(align).alloc().map_err(s)?;
    let page = 4096.max(kpccl_posix_page());
    let want_align = if mode == LayoutMode::Aligned { align.max(page) } else { align.max(64) };
    let base0 = win.raw().rank_entry(0).map_err(s)?.offset;
    let mut view = Vec::new();
    let mut prev_end = 0u64;
    for r in 0..n {
        let seg = win.segment(r).map_err(s)?;
        let entry = win.raw().rank_entry(r).map_err(s)?;
        if seg.len != size(r) {
            return Err(format!("rank {r}'s segment has {} bytes, expected {}", seg.len, size(r)));
        }
        if !(seg.ptr.as_ptr() as usize).is_multiple_of(want_align) {
            return Err(format!("rank {r}'s segment at {:p} is not {want_align}-aligned", seg.ptr));
        }
        let rel = seg.ptr.as_ptr() as u64 - win.segment(0).map_err(s)?.ptr.as_ptr() as u64;
        if rel != entry.offset - base0 {
            return Err(format!("rank {r}'s segment pointer disagrees with its table offset"));
        }
        if entry.offset < prev_end {
            return Err(format!("rank {r}'s segment overlaps rank {}'s", r - 1));
        }
        prev_end = entry.offset + entry.size;
        view.extend([entry.offset, entry.size]);
    }
    // Every rank must see the same table: gather everyone's view and compare.
    let mine: Vec<u8> = view.iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut all = vec![0u8; mine.len() * n as usize];
    comm.oob().allgather(&mine, &mut all).map_err(s)?;
    if all.chunks(mine.len()).any(|c| c != mine) {
        return Err("ranks disagree on the segment table".into());
    }
    let len = size(me) / 8;
    win.write(me, 0, &words(1, me, len)).map_err(s)?;
    win.fence().map_err(s)?;
    for r in 0..n {
        let mut got = vec![0u64; size(r) / 8];
        win.read(r, 0, &mut got).map_err(s)?;
        verify(&got, 1, r)?;
    }
    win.free().map_err(s)
}

fn kpccl_posix_page() -> usize {
    use kpccl_core::Platform;
    kpccl_posix::PosixPlatform::new("/dev/shm").page_size() as usize
}

/// Random pairings each round; data ordered only by `peer_fence`.
fn handoff<O: Oob>(comm: &Comm<O>, args: &Args) -> Res {
    let (me, n) = (comm.rank(), comm.nranks());
    let rounds = args.rounds("rounds", 2000)?;
    let len: usize = args.get("words", 64)?;
    let win = comm.window(len * 8).alloc().map_err(s)?;
    let fences = handoff_rounds(&win, 0..rounds, args.get("seed", 7)?)?;
    if me == 0 {
        println!("handoff: {rounds} rounds, {n} ranks, rank 0 made {fences} peer fences, all words verified");
    }
    win.free().map_err(s)
}

/// The words a rank can hand to `peer` and back: what fits both segments.
fn shared_words(win: &Window, a: u32, b: u32) -> Result<usize, String> {
    Ok(win.segment(a).map_err(s)?.len.min(win.segment(b).map_err(s)?.len) / 8)
}

/// Random pairings for `rounds`, data ordered only by `peer_fence`; returns the fences made.
fn handoff_rounds(win: &Window, rounds: std::ops::Range<u64>, seed: u64) -> Result<u64, String> {
    let (me, n) = (win.rank(), win.nranks());
    let mut fences = 0u64;
    for round in rounds {
        let perm = Rng::new(seed.wrapping_add(round)).permutation(n);
        let pos = perm.iter().position(|&r| r == me).expect("every rank is in the permutation");
        let Some(&peer) = perm.get(pos ^ 1) else { continue };
        let len = shared_words(win, me, peer)?;
        let mut got = vec![0u64; len];
        // Even rounds: write my own segment, the peer reads it. Odd rounds:
        // write into the peer's segment, I read mine; a leading fence first
        // makes sure the peer is done with its segment from earlier rounds.
        let (dst, src) = if round % 2 == 0 { (me, peer) } else { (peer, me) };
        if dst == peer {
            win.peer_fence(peer).map_err(s)?;
            fences += 1;
        }
        win.write(dst, 0, &words(round, me, len)).map_err(s)?;
        win.peer_fence(peer).map_err(s)?;
        win.read(src, 0, &mut got).map_err(s)?;
        verify(&got, round, peer)?;
        // The second fence keeps the peer from overwriting what I still read.
        win.peer_fence(peer).map_err(s)?;
        fences += 2;
    }
    Ok(fences)
}

/// Every rank writes, `fence()`, every rank reads every segment.
fn fence<O: Oob>(comm: &Comm<O>, args: &Args) -> Res {
    let rounds = args.rounds("rounds", 1000)?;
    let len: usize = args.get("words", 32)?;
    let win = comm.window(len * 8).alloc().map_err(s)?;
    fence_rounds(&win, 0..rounds)?;
    win.free().map_err(s)
}

/// Each round every rank fills its own segment, `fence()`, and every rank
/// checks every segment.
fn fence_rounds(win: &Window, rounds: std::ops::Range<u64>) -> Res {
    let (me, n) = (win.rank(), win.nranks());
    for round in rounds {
        let len = win.local_segment().len / 8;
        win.write(me, 0, &words(round, me, len)).map_err(s)?;
        win.fence().map_err(s)?;
        for r in 0..n {
            let mut got = vec![0u64; win.segment(r).map_err(s)?.len / 8];
            win.read(r, 0, &mut got).map_err(s)?;
            verify(&got, round, r)?;
        }
        win.fence().map_err(s)?;
    }
    Ok(())
}

/// Minutes of everything at once: windows of random uneven sizes made and
/// freed over and over, random-pairing handoffs and window fences in each,
/// every word verified; runs `seconds` by rank 0's clock.
fn soak<O: Oob>(comm: &Comm<O>, args: &Args) -> Res {
    let me = comm.rank();
    let seconds: u64 = args.get("seconds", 5)?;
    let start = Instant::now();
    let (mut cycle, mut round, mut fences) = (0u64, 0u64, 0u64);
    loop {
        // Rank 0's clock decides for everyone, so every rank makes the same number of cycles.
        let go = u8::from(me != 0 || start.elapsed().as_secs() < seconds);
        let mut all = vec![0u8; comm.nranks() as usize];
        comm.oob().allgather(&[go], &mut all).map_err(s)?;
        if all[0] == 0 {
            break;
        }
        let mut rng = Rng::new(cycle * 1000 + u64::from(me));
        let size = (rng.next() % 16_384) as usize * 8 * usize::from(!rng.next().is_multiple_of(8));
        let mode = if cycle.is_multiple_of(3) { LayoutMode::Aligned } else { LayoutMode::Contiguous };
        let win = comm.window(size).layout(mode).alloc().map_err(s)?;
        fences += handoff_rounds(&win, round..round + 50, cycle)?;
        fence_rounds(&win, round + 50..round + 60)?;
        win.free().map_err(s)?;
        round += 60;
        cycle += 1;
    }
    if me == 0 {
        println!("soak: {cycle} windows, {round} rounds, rank 0 made {fences} peer fences, all words verified");
    }
    Ok(())
}

/// Many alloc/free cycles: no growth in fds, mappings or segments.
fn cycle<O: Oob>(comm: &Comm<O>, args: &Args) -> Res {
    let me = comm.rank();
    let iters = args.rounds("iters", 1000)?;
    let dir = comm.config().shm_dir.clone();
    let one = |i: u64| -> Res {
        let size = ((i * 7 + u64::from(me) * 3) % 64 * 4096 + i % 100) as usize;
        let win = comm.window(size).alloc().map_err(s)?;
        if size >= 8 {
            win.write(me, 0, &[i]).map_err(s)?;
        }
        win.free().map_err(s)
    };
    for i in 0..10 {
        one(i)?;
    }
    let before = resources(&dir);
    for i in 0..iters {
        one(i)?;
    }
    let after = resources(&dir);
    let (fds, maps, shm) = (after.0 as i64 - before.0 as i64, after.1 as i64 - before.1 as i64, after.2);
    if fds != 0 || maps > 8 || shm != 0 {
        return Err(format!("after {iters} cycles: {fds:+} fds, {maps:+} mappings, {shm} segments left"));
    }
    Ok(())
}

/// One rank's request is bad: every rank must get an error, naming `culprit` if given.
fn expect_failure<O: Oob>(
    comm: &Comm<O>,
    culprit: Option<u32>,
    alloc: impl Fn(&Comm<O>, u32) -> Result<Window, Error>,
) -> Res {
    let me = comm.rank();
    let e = match alloc(comm, me) {
        Ok(_) => return Err("the window was created although a rank's request was bad".into()),
        Err(e) => e,
    };
    println!("rank {me}: refused as expected: {e}");
    let named = match (&e, culprit) {
        (_, None) => true,
        (Error::Collective(CollectiveError::Local(_)), Some(c)) => c == me,
        (Error::Collective(CollectiveError::Peer { rank, .. }), Some(c)) => *rank == c,
        (Error::Collective(CollectiveError::Mismatch { rank, .. }), Some(c)) => *rank == c,
        _ => false,
    };
    if named { Ok(()) } else { Err(format!("the error does not name rank {culprit:?}: {e:?}")) }
}

/// Rank 0 claims one rank more than there are: every rank must fail, at
/// communicator creation or at the first window.
fn bad_nranks(oob: RunOob, me: u32, n: u32) -> Res {
    let claimed = if me == 0 { n + 1 } else { n };
    match Comm::new(oob, me, claimed) {
        Err(e) => {
            println!("rank {me}: communicator refused as expected: {e}");
            Ok(())
        }
        Ok(comm) => match comm.window(64).alloc() {
            Ok(_) => Err("ranks disagreeing on the rank count still made a window".into()),
            Err(e) => {
                println!("rank {me}: window refused as expected: {e}");
                Ok(())
            }
        },
    }
}

/// `victim` exits at `at` (alloc, or a wait of [`wait_for_victim`]); every
/// survivor must get an error naming it, within `bound_ms`.
fn die<O: Oob>(comm: &Comm<O>, args: &Args) -> Res {
    let (me, n) = (comm.rank(), comm.nranks());
    let victim: u32 = args.get("victim", n - 1)?;
    let at = args.str("at").unwrap_or("fence").to_owned();
    let bound = Duration::from_millis(args.get("bound_ms", 10_000)?);
    let exit_now = || -> ! {
        println!("rank {me}: exiting on purpose before {at}");
        std::process::exit(0)
    };
    if me == victim && at == "alloc" {
        exit_now();
    }
    let start = Instant::now();
    let win = match comm.window(4096).alloc() {
        Ok(w) => w,
        Err(e) if at == "alloc" => return within(bound, start, me, &e.to_string()),
        Err(e) => return Err(s(e)),
    };
    if me == victim {
        // Let the survivors start waiting first.
        std::thread::sleep(Duration::from_millis(100));
        exit_now();
    }
    let start = Instant::now();
    let result = wait_for_victim(win, &at, victim, me, n);
    let want = FenceError::PeerDead { rank: victim };
    expect(result, |e| e == want, &want.to_string(), bound, start, me)
}

/// A survivor's wait that `victim` will never answer, the one `at` names
/// (fence, peer, wait, test, test-both, polled, free); then the window is
/// freed, which still works (its fence fails fast: poisoned).
pub(crate) fn wait_for_victim(mut win: Window, at: &str, victim: u32, me: u32, n: u32) -> Result<(), Error> {
    let result = match at {
        "peer" => win.peer_fence(victim),
        "wait" => win.wait(victim),
        "test" => loop {
            match win.try_wait(victim) {
                Ok(false) => kpccl_core::sync::spin_loop(),
                taken => break taken.map(drop),
            }
        },
        "test-both" => {
            // Each test of the victim follows one of a live rank that never
            // signals, which comes first to every look for dead ranks.
            let live = (0..n).find(|&r| r != me && r != victim).unwrap_or(me);
            loop {
                match win.try_wait(live).and_then(|_| win.try_wait(victim)) {
                    Ok(false) => kpccl_core::sync::spin_loop(),
                    taken => break taken.map(drop),
                }
            }
        }
        "polled" => crate::polled::drive(win.start_fence()).map(drop),
        "free" => return win.free(),
        _ => win.fence(),
    };
    let _ = win.free();
    result
}

/// The wait failed with an error `wanted` accepts (`want` says which),
/// within `bound` of `start`.
pub(crate) fn expect(
    result: Result<(), Error>,
    wanted: impl Fn(FenceError) -> bool,
    want: &str,
    bound: Duration,
    start: Instant,
    me: u32,
) -> Res {
    match result {
        Ok(()) => Err(format!("rank {me}: the wait succeeded although it should have failed with '{want}'")),
        Err(Error::Fence(got)) if wanted(got) => within(bound, start, me, &got.to_string()),
        Err(e) => Err(format!("rank {me}: expected '{want}', got: {e}")),
    }
}

fn within(bound: Duration, start: Instant, me: u32, what: &str) -> Res {
    let took = start.elapsed();
    println!("rank {me}: error after {took:?}: {what}");
    if took > bound { Err(format!("the error took {took:?}, more than {bound:?}")) } else { Ok(()) }
}

/// A callback fails on one rank at the `call`-th allgather (1: communicator
/// creation; 2, 3, 4: the window's request, create and attach stages), before
/// or after taking part: every rank must get an error, none may hang.
fn oob_fail(oob: RunOob, args: &Args) -> Res {
    let (me, n) = (oob.rank(), oob.nranks());
    let victim: u32 = args.get("victim", n - 1)?;
    let call: u32 = args.get("call", 2)?;
    let when = if args.str("mode") == Some("before") { When::Before } else { When::After };
    let flaky = if me == victim { FailingOob::new(oob, call, when) } else { FailingOob::passing(oob) };
    // `nodes=K`: K simulated nodes (blocks of ranks), whose window creation
    // makes one more allgather (Ready), five in all.
    let nodes: u32 = args.get("nodes", 1)?;
    let mut config = kpccl_posix::Config::from_env().map_err(s)?;
    if nodes > 1 {
        config.node_id = Some(format!("sim-node-{}", me / n.div_ceil(nodes)));
    }
    let collectives = if nodes > 1 { 5 } else { 4 };
    let comm = match Comm::builder(flaky, me, n).config(config).build() {
        Err(e) => {
            println!("rank {me}: communicator failed as expected: {e}");
            return Ok(());
        }
        Ok(c) => c,
    };
    match comm.window(4096).alloc() {
        Err(e) => {
            println!("rank {me}: window failed as expected: {e}");
            Ok(())
        }
        Ok(w) if call > collectives => w.free().map_err(s),
        Ok(_) => Err(format!("rank {me}: the window was made although rank {victim}'s callback failed")),
    }
}

/// `victim` stays alive but never fences (nor signals): every other rank's
/// fence (`op=fence`) or wait for it (`op=wait`) must end with an error
/// after its timeout (`timeout_ms`), within `bound_ms`.
fn stall<O: Oob>(comm: &Comm<O>, args: &Args) -> Res {
    let (me, n) = (comm.rank(), comm.nranks());
    let victim: u32 = args.get("victim", n - 1)?;
    let timeout = Duration::from_millis(args.get("timeout_ms", 300)?);
    let bound = Duration::from_millis(args.get("bound_ms", 5_000)?);
    let win = comm.window(64).timeout(Some(timeout)).alloc().map_err(s)?;
    if me == victim {
        // Until the others gave up, which poisons the window. (A fixed pause
        // could end first on a loaded machine: the free's fence would then
        // meet theirs, or end their wait, instead of their timeout.)
        let start = Instant::now();
        while win.poisoned().is_none() {
            if start.elapsed() > bound {
                return Err(format!("rank {me}: the others did not give up on it within {bound:?}"));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        // The window is poisoned: free still unmaps it.
        return match win.free() {
            Err(Error::Fence(_)) => Ok(()),
            other => Err(format!("the stalled rank's free should fail fast, got {other:?}")),
        };
    }
    let start = Instant::now();
    let result = match args.str("op").unwrap_or("fence") {
        "wait" => win.wait(victim),
        _ => win.fence(),
    };
    let own_timeout = match result {
        Ok(()) => return Err("the wait succeeded although a rank never came".into()),
        Err(e) => {
            within(bound, start, me, &e.to_string())?;
            // Every survivor's error names the stalled rank: its own timeout
            // waiting for it, or the report of a rank that timed out on it.
            match e {
                Error::Fence(FenceError::Timeout { peer }) if peer == victim => true,
                Error::Fence(FenceError::GaveUp { waited_for, .. }) if waited_for == victim => false,
                e => return Err(format!("rank {me}: expected an error naming rank {victim}, got: {e}")),
            }
        }
    };
    // A rank that timed out itself waited the whole timeout; one that was
    // told by a rank that started waiting earlier may end a little sooner.
    if own_timeout && start.elapsed() < timeout {
        return Err(format!("gave up after {:?}, before the {timeout:?} timeout", start.elapsed()));
    }
    let _ = win.free();
    Ok(())
}

/// A window too big for the segment directory (a tiny tmpfs): every rank
/// gets an error at allocation — never SIGBUS later — and a small window
/// still fits afterwards (nothing was left behind).
fn full<O: Oob>(comm: &Comm<O>, args: &Args) -> Res {
    let me = comm.rank();
    let size: usize = args.get("size", 512 * 1024)?;
    // Lazily reserved, the creator's free-space check says how much is free.
    let lazy = std::env::var("KPCCL_RESERVE").is_ok_and(|r| r == "lazy");
    match comm.window(size).alloc() {
        Ok(_) => return Err(format!("a window of {size} bytes per rank fit although it should not")),
        Err(e) if e.kind() == kpccl_posix::ErrorKind::NoSpace && (!lazy || e.to_string().contains(" bytes free")) => {
            println!("rank {me}: refused as expected: {e}");
        }
        Err(e) => return Err(format!("rank {me}: refused, but not as out of space: {e}")),
    }
    let win = comm.window(4096).alloc().map_err(s)?;
    win.write(me, 0, &[1u64]).map_err(s)?;
    win.free().map_err(s)
}

/// Run with `KPCCL_TEST_CRASH=<step>:<rank>`: that rank aborts during window
/// creation; every other rank must get an error — from the creation, or from
/// its first fence if the window was already made — and never hang.
fn crash<O: Oob>(comm: &Comm<O>) -> Res {
    let me = comm.rank();
    // Every survivor's error names the rank that crashed.
    let victim = std::env::var("KPCCL_TEST_CRASH").ok().and_then(|v| v.split_once(':').map(|(_, r)| r.to_owned()));
    let names = |e: &str| victim.as_ref().is_none_or(|v| e.contains(&format!("rank {v}")));
    let win = match comm.window(4096).alloc() {
        Err(e) if names(&e.to_string()) => {
            println!("rank {me}: creation failed as expected: {e}");
            return Ok(());
        }
        Err(e) => return Err(format!("rank {me}: the creation error does not name the crashed rank: {e}")),
        Ok(w) => w,
    };
    match win.fence() {
        Err(e) if names(&e.to_string()) => {
            println!("rank {me}: fence failed as expected: {e}");
            let _ = win.free();
            Ok(())
        }
        Err(e) => Err(format!("rank {me}: the fence error does not name the crashed rank: {e}")),
        Ok(()) => Err(format!("rank {me}: the fence succeeded although a rank crashed")),
    }
}
