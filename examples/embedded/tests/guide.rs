//! The code of `docs/EMBEDDING.md`, compiled and run: every line of the
//! guide's Rust blocks must appear in this file, so the guide shows code
//! that builds, and `guide_rank` runs it on ranks that are threads.

use core::error::Error;
use std::sync::OnceLock;
use std::time::Instant;

use kpccl_embedded_example::{Arena, Group, Page, StaticOob, StaticPlatform};

const GUIDE: &str = include_str!("../../../docs/EMBEDDING.md");
const THIS: &str = include_str!("guide.rs");

/// The guide's `MAX`: the most ranks the runtime runs.
const MAX: usize = kpccl_embedded_example::MAX_RANKS;

static PAGES: [Page; 32] = [const { Page::new() }; 32];
static ARENA: Arena = Arena::new(&PAGES);

fn clock_ns() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    u64::try_from(START.get_or_init(Instant::now).elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// The guide's "other work" of an event loop.
fn run_one_task() {
    std::thread::yield_now();
}

/// §3 and §4 of the guide as one rank runs them, then a free.
#[rustfmt::skip] // the guide's lines, as the guide spells them
fn guide_rank(platform: StaticPlatform, oob: StaticOob, rank: u32, nranks: u32) -> Result<(), Box<dyn Error>> {
    // §3. Creating a communicator and a window
    use kpccl_core::fence::Barrier;
    use kpccl_core::{Collective, NodeRanks, Placement, Record, WaitPolicy, WindowRequest, create_comm, create_window};

    let mut table = [Record::default(); MAX]; // MAX: the most ranks you run (on the stack: no allocator)
    let table = &mut table[..nranks as usize];
    let info = create_comm(Collective::new(&platform, &oob, rank, nranks, table), Placement::alone(rank))?;
    let (policy, barrier) = (WaitPolicy::for_load(nranks, info.cpus), Barrier::for_load(nranks, info.cpus));
    let request = WindowRequest { size: 64, policy, barrier, ..WindowRequest::default() };
    let mut window = create_window(Collective::new(&platform, &oob, rank, nranks, table), NodeRanks::All, &request)?;
    // window.segment(r): rank r's memory; window.peer_fence(r), window.signal(r),
    // window.wait(r), window.fence(); window.free() (collective). `mut`: §4's started fences.

    // §4. Fences in an event loop
    use core::task::Poll;

    let mut fence = window.start_fence()?;
    let result = loop {
        if let Poll::Ready(result) = fence.poll() { break result; }
        run_one_task(); // the runtime's other work
    };

    drop(fence);
    result?;
    window.free()?;
    Ok(())
}

/// The lines of the guide's ```rust blocks, trimmed, blank ones left out.
fn guide_lines() -> Vec<&'static str> {
    let mut inside = false;
    let mut lines = Vec::new();
    for line in GUIDE.lines() {
        match line.trim() {
            "```rust" => inside = true,
            "```" => inside = false,
            code if inside && !code.is_empty() => lines.push(code),
            _ => {}
        }
    }
    lines
}

#[test]
fn every_line_of_the_guides_code_is_compiled_here() {
    let lines = guide_lines();
    assert!(lines.len() >= 10, "the guide's Rust blocks were not found ({} lines)", lines.len());
    let missing: Vec<_> = lines.iter().filter(|&&code| !THIS.lines().any(|l| l.trim() == code)).collect();
    assert!(missing.is_empty(), "docs/EMBEDDING.md shows code that tests/guide.rs does not compile: {missing:#?}");
}

#[test]
fn the_guides_code_runs_on_three_ranks() {
    static GROUP: Group = Group::new();
    let nranks = 3;
    let platform = StaticPlatform::new(&ARENA, clock_ns, 2).with_relax(std::thread::yield_now);
    let results: Vec<_> = std::thread::scope(|s| {
        let ranks: Vec<_> = (0..nranks)
            .map(|rank| {
                s.spawn(move || {
                    guide_rank(platform, StaticOob::new(&GROUP, rank, nranks), rank, nranks).map_err(|e| e.to_string())
                })
            })
            .collect();
        ranks.into_iter().map(|h| h.join().expect("rank panicked")).collect()
    });
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    assert_eq!(ARENA.in_use(), 0, "the window's segment is gone after free");
}
