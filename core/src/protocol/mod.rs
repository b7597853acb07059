//! The collective protocol of communicator and window creation (DESIGN.md,
//! "The window protocol"), generic over [`Platform`] and [`Oob`].
//!
//! 1. Every rank checks its own request and allgathers it, failed or not.
//! 2. Every rank judges the gathered table the same way, so all ranks reach
//!    the same verdict: one bad request fails every rank, and none is left
//!    waiting in a collective.
//! 3. Rank 0 creates the segment (exclusive, private), publishes it
//!    ([`Platform::publish`]: on Linux the name goes at once, and the others
//!    open the creator's file descriptor), writes the header and rank table,
//!    and allgathers the way in.
//! 4. Every rank attaches, checks the header against its own view, reserves
//!    its own pages, and allgathers the result.
//! 5. Rank 0 unlinks the name if publishing left one: from here on nothing
//!    can leak.
//! 6. A window fence in shared memory confirms that every rank is in.
//!
//! Over several nodes (see [`NodeRanks`]) the collectives still span every rank,
//! so that every rank reaches one verdict, but the segment, its layout and
//! the confirming fence are per node: each node's local rank 0 creates its
//! node's segment, and a last allgather (`Stage::Ready`) carries the fences'
//! results across nodes.
//!
//! When a rank's out-of-band call fails, it makes exactly one more "flush"
//! allgather with its failure ([`lockstep`]): that call either completes the
//! collective the others are still in (the callback failed before taking
//! part) or is their next one (it failed after), so every rank learns of the
//! failure and the counts of collective calls still match. After the last
//! allgather, the failing rank asks for the flush through the window's poison
//! word instead.

pub mod lockstep;
mod nodes;
mod record;

use core::fmt;

use lockstep::LockstepRecord as _;
pub use nodes::{AUTO_LOCAL_RANK, NodeInfo, NodeRanks, Placement, map_nodes};
use record::Stage;
pub use record::{NAME_LEN, Record};

use crate::error::{ArgError, AttachError, CollectiveError, Failure, FenceError, Field, LayoutError, PlatformError};
use crate::fence::{Barrier, Poison, PoisonKind, WaitPolicy};
use crate::layout::shared::{Header, RankEntry};
use crate::layout::{Digest, Layout, LayoutMode, LayoutParams, MAX_RANKS, Region};
use crate::oob::Oob;
use crate::platform::{Platform, Segment, Step};
use crate::window::Window;

/// What one rank asks for when a window is created.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowRequest {
    /// This rank's segment size in bytes (0 is legal).
    pub size: u64,
    /// How segments are placed (the same on every rank).
    pub mode: LayoutMode,
    /// The alignment of every segment (the same on every rank; a power of two).
    pub align: u64,
    /// How this rank waits in the window's fences.
    pub policy: WaitPolicy,
    /// The window fence this rank would choose (e.g. [`Barrier::for_load`]);
    /// the window runs [`Barrier::Flat`] if any rank asks for it.
    pub barrier: Barrier,
    /// Where the data lives (the same on every rank): a device window still
    /// has its fence slots here.
    pub memory_kind: MemoryKind,
}

/// What a window's data is, as a tag the ranks compare: ranks asking for
/// different kinds fail together. The core knows only host memory; a
/// backend that keeps the data elsewhere (device memory, reached through
/// its own runtime) builds its windows over a host window tagged with a
/// kind of its own (`kpccl_ascend::MEMORY_KIND`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MemoryKind(pub u32);

impl MemoryKind {
    /// Host shared memory: the data segments are the window's own pages.
    pub const HOST: Self = Self(0);
}

impl Default for WindowRequest {
    fn default() -> Self {
        Self {
            size: 0,
            mode: LayoutMode::Contiguous,
            align: 64,
            policy: WaitPolicy::DEFAULT,
            barrier: Barrier::Dissemination,
            memory_kind: MemoryKind::HOST,
        }
    }
}

/// Checks that `nranks` can be a communicator size, before any collective.
pub fn check_nranks(nranks: u32) -> Result<(), CollectiveError> {
    if nranks == 0 || nranks > MAX_RANKS {
        return Err(CollectiveError::Local(Failure::Argument(ArgError::Layout(LayoutError::RankCount {
            nranks,
            max: MAX_RANKS,
        }))));
    }
    Ok(())
}

/// Allgathers `mine` into `table`; on failure, flushes (see the module docs).
fn exchange<O: Oob + ?Sized>(oob: &O, mine: &Record, table: &mut [Record]) -> Result<(), CollectiveError> {
    lockstep::exchange(oob, mine, table, || ()).map_err(CollectiveError::Local)
}

/// The identical verdict every rank reaches on a gathered table: the lowest
/// failing rank's failure, else the first disagreement with rank 0.
fn verdict(table: &[Record], me: u32, stage: Stage) -> Result<(), CollectiveError> {
    if let Some((r, failure)) = lockstep::first_failure(table) {
        // This rank's own record, also where a rank out of range landed.
        let own = r == me || (me as usize >= table.len() && table[r as usize].rank == me);
        return Err(if own { CollectiveError::Local(failure) } else { CollectiveError::Peer { rank: r, failure } });
    }
    let first = &table[0];
    for (r, rec) in (0u32..).zip(table) {
        if *rec == Record::default() {
            return Err(CollectiveError::NoRecord { rank: r });
        }
        let field = if !rec.is_ours() {
            Field::Version
        } else if !rec.is(stage) {
            Field::Step
        } else if rec.nranks != first.nranks || rec.nranks as usize != table.len() {
            Field::RankCount
        } else if rec.rank != r {
            return Err(CollectiveError::rank_claim(r, rec.rank, table.iter().map(|t| t.rank)));
        } else if rec.uid != first.uid {
            Field::User
        } else if rec.mode != first.mode {
            Field::Mode
        } else if rec.align != first.align {
            Field::Alignment
        } else if rec.page != first.page {
            Field::PageSize
        } else if rec.memory_kind != first.memory_kind {
            Field::MemoryKind
        } else if stage == Stage::Request && Barrier::from_code(rec.barrier).is_none() {
            Field::Barrier
        } else {
            continue;
        };
        return Err(CollectiveError::Mismatch { rank: r, field });
    }
    Ok(())
}

/// One rank's side of a collective creation: how it reaches the platform
/// and the other ranks, who it is, and what it thinks of its own arguments.
pub struct Collective<'a, P: ?Sized, O: ?Sized> {
    /// Where segments, clocks and liveness come from.
    pub platform: &'a P,
    /// The out-of-band collectives of the ranks.
    pub oob: &'a O,
    /// This rank, `0..nranks`.
    pub rank: u32,
    /// The ranks taking part (on every node).
    pub nranks: u32,
    /// Scratch space for the allgathers: one record per rank (no allocator).
    pub table: &'a mut [Record],
    /// This rank's own verdict on its arguments: a rank whose arguments are
    /// bad still takes part, so that every rank fails together.
    pub local: Result<(), ArgError>,
}

impl<'a, P: ?Sized, O: ?Sized> Collective<'a, P, O> {
    /// Rank `rank` of `nranks`, with `table.len() == nranks` records of scratch.
    pub fn new(platform: &'a P, oob: &'a O, rank: u32, nranks: u32, table: &'a mut [Record]) -> Self {
        Self { platform, oob, rank, nranks, table, local: Ok(()) }
    }

    /// The same, with this rank's verdict on its own arguments.
    #[must_use]
    pub fn local(self, local: Result<(), ArgError>) -> Self {
        Self { local, ..self }
    }
}

impl<P: ?Sized, O: ?Sized> fmt::Debug for Collective<'_, P, O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Collective")
            .field("rank", &self.rank)
            .field("nranks", &self.nranks)
            .field("local", &self.local)
            .finish()
    }
}

/// Communicator creation (collective): ranks exchange identities and agree
/// on the rank count and numbering, each saying where it runs (`me`;
/// [`Placement::alone`] on one node). `table.len()` must be `nranks`. The
/// ranks are grouped by node; the local ranks must number each node's ranks
/// `0..n`, else every rank fails with [`CollectiveError::LocalRank`].
/// Afterwards `table[r].placement()` is where rank `r` runs.
pub fn create_comm<P, O>(c: Collective<'_, P, O>, me: Placement) -> Result<NodeInfo, CollectiveError>
where
    P: Platform + ?Sized,
    O: Oob + ?Sized,
{
    let Collective { platform, oob, rank, nranks, table, local } = c;
    check_nranks(nranks)?;
    assert_eq!(table.len(), nranks as usize, "one record per rank");
    let mut mine = Record::new(Stage::Comm, rank, nranks, &platform.identity());
    (mine.node, mine.local_rank) = (me.node, me.local_rank);
    (mine.parallelism, mine.cpus) = (platform.cpu_count(), platform.affinity().0);
    mine.quota = platform.cpu_quota().unwrap_or(0);
    let in_range = if rank < nranks { Ok(()) } else { Err(ArgError::Rank { rank, nranks }) };
    let refused = local.and(in_range);
    if let Err(e) = refused {
        mine.fail(Failure::Argument(e));
    }
    exchange(oob, &mine, table)?;
    verdict(table, rank, Stage::Comm)?;
    // A rank whose record fell outside the table (its group is larger than
    // `nranks`) found no failure there, its own included.
    refused.map_err(|e| CollectiveError::Local(Failure::Argument(e)))?;
    nodes::place(table, rank)
}

/// The digest of the layout and of the identities in the rank table: what
/// every rank must find in the header.
fn window_digest(layout: &Layout, barrier: Barrier, entries: impl Iterator<Item = RankEntry>) -> u64 {
    entries
        .fold(Digest::default().u64(layout.digest()).u64(u64::from(barrier.code())), |d, e| {
            d.u64(e.offset).u64(e.size).u64(e.pid).u64(e.start_time).u64(u64::from(e.uid))
        })
        .finish()
}

/// Window creation (collective over all `nranks` ranks): the window spans
/// the ranks of the caller's node, `node` ([`NodeRanks::All`] on one node),
/// and its [`Window`] numbers them by local rank. One node's failure fails
/// every node.
#[allow(clippy::too_many_lines)] // one protocol, step by step
pub fn create_window<P, O>(
    c: Collective<'_, P, O>,
    node: NodeRanks<'_>,
    request: &WindowRequest,
) -> Result<Window<P>, CollectiveError>
where
    P: Platform + Clone,
    O: Oob + ?Sized,
{
    let Collective { platform, oob, rank, nranks, table, local } = c;
    check_nranks(nranks)?;
    assert_eq!(table.len(), nranks as usize, "one record per rank");
    let who = platform.identity();
    let page = platform.page_size();
    let valid_node = node.is_valid(rank, nranks);
    let node = if valid_node { node } else { NodeRanks::All };
    let (me, local_size) = (node.local(rank), node.size(nranks));
    let leader = node.global(0);
    let multi_node = local_size != nranks;

    // 1-2. Requests, checked locally, then together.
    let mut mine = Record::new(Stage::Request, rank, nranks, &who);
    mine.size = request.size;
    mine.mode = request.mode.code();
    mine.align = request.align;
    mine.page = page;
    mine.barrier = request.barrier.code();
    mine.memory_kind = request.memory_kind.0;
    let node_ok = if valid_node { Ok(()) } else { Err(ArgError::Caller) };
    let refused = local.and(node_ok).and_then(|()| check_request(rank, nranks, request, page));
    if let Err(e) = refused {
        mine.fail(Failure::Argument(e));
    }
    exchange(oob, &mine, table)?;
    platform.checkpoint(Step::Requested, rank);
    verdict(table, rank, Stage::Request)?;
    // As in `create_comm`: a rank whose record fell outside the table.
    refused.map_err(|e| CollectiveError::Local(Failure::Argument(e)))?;
    let params = LayoutParams { nranks: local_size, mode: request.mode, align: request.align, page };
    let size_of = |l: u32| table[node.global(l) as usize].size;
    let laid_out = Layout::new(params, size_of);
    let layout = match laid_out.and_then(|l| l.within(platform.max_window_len(), size_of)) {
        Ok(layout) => layout,
        Err(e) => {
            // `new` fails alike on every rank of the node; `within` only on
            // the ranks that can map less (a lower `RLIMIT_AS`).
            let alike = laid_out.is_err();
            // The layout numbers the node's ranks; the caller, every rank.
            let (e, culprit) = match e {
                // `new` measures against `MAX_TOTAL`, the most any system
                // maps; the limit to quote is this one's, if lower.
                LayoutError::TooLarge { rank, size, total, max } => {
                    let max = max.min(platform.max_window_len());
                    (LayoutError::TooLarge { rank: node.global(rank), size, total, max }, node.global(rank))
                }
                e => (e, leader),
            };
            if multi_node || !alike {
                // The ranks that found no error (other nodes, which lay out
                // their own segments; ranks that can map more) go on to step
                // 3's allgather: they learn of it there, from the rank to
                // blame or from each rank that cannot map, so every rank fails.
                let mut mine = Record::new(Stage::Create, rank, nranks, &who);
                if rank == culprit || !alike {
                    mine.fail(Failure::Argument(ArgError::Layout(e)));
                }
                exchange(oob, &mine, table)?;
            }
            return Err(CollectiveError::Layout(e));
        }
    };
    let own = layout.segments(size_of).nth(me as usize).expect("one segment per rank of the node");
    let barrier = agreed_barrier(table, node);
    let digest = window_digest(&layout, barrier, entries(&layout, table, node));
    let header = Header { digest, barrier: barrier.code(), ..layout.header() };

    // 3. Each node's local rank 0 creates.
    let mut mine = Record::new(Stage::Create, rank, nranks, &who);
    let mut name = heapless::String::<{ NAME_LEN - 1 }>::new();
    let mut way_in = heapless::String::<{ NAME_LEN - 1 }>::new();
    let mut created = None;
    if me == 0 {
        match create_segment(platform, &layout, header, table, node, &mut name, &mut way_in) {
            Ok(s) => {
                platform.checkpoint(Step::Created, rank);
                mine.set_name(&way_in);
                created = Some(s);
            }
            Err(e) => mine.fail(Failure::Platform(e)),
        }
    }
    let unlink = |name: &str| {
        if me == 0 && !name.is_empty() {
            let _ = platform.unlink(name);
        }
    };
    if let Err(e) = exchange(oob, &mine, table).and_then(|()| verdict(table, rank, Stage::Create)) {
        unlink(&name);
        return Err(e);
    }
    // A creator's name is judged by its node alone, so a bad one fails the
    // attach, which every node reports in the next allgather.
    let way_in = table[leader as usize]
        .name()
        .and_then(|n| heapless::String::<{ NAME_LEN - 1 }>::try_from(n).ok())
        .ok_or(Failure::Attach(AttachError::Name { rank: leader }));

    // 4. Everyone attaches to its node's segment.
    let mut mine = Record::new(Stage::Attach, rank, nranks, &who);
    let attached = match created {
        Some(s) => Ok(s),
        None => way_in.and_then(|way_in| {
            platform.open(&way_in, layout.total()).map_err(|e| {
                // The way in may be the creator's own descriptor: if the creator
                // died after sharing it, that is what went wrong, and whom to name.
                if platform.is_alive(&table[leader as usize].identity()) {
                    Failure::Platform(e)
                } else {
                    Failure::Fence(FenceError::PeerDead { rank: leader })
                }
            })
        }),
    }
    .and_then(|s| {
        whole(&s, &layout).map_err(Failure::Platform)?;
        let w = Window::new(platform.clone(), s, layout, me, own, request.policy, barrier);
        verify(&w, &layout, &header)?;
        claim(&w, &layout, me, own).map_err(Failure::Platform)?;
        Ok(w)
    });
    let window = match attached {
        Ok(w) => {
            platform.checkpoint(Step::Attached, rank);
            Ok(w)
        }
        Err(f) => {
            mine.fail(f);
            Err(f)
        }
    };
    let gathered = lockstep::allgather(oob, &mine, table);

    // 5. The name goes (if publishing left one), whatever happened.
    unlink(&name);
    platform.checkpoint(Step::Unlinked, rank);
    if let Err(e) = gathered {
        // The others may have finished this allgather and be waiting in the
        // window fence below: ask them, through the poison word, to flush too
        // (over several nodes, the flush meets the others' `Ready` allgather).
        if let Ok(w) = &window {
            w.poison(Poison { kind: PoisonKind::Flush, rank: me });
        }
        lockstep::flush(oob, &mine, Failure::Oob(e), table);
        return Err(CollectiveError::Local(Failure::Oob(e)));
    }
    verdict(table, rank, Stage::Attach)?;
    // The table may have lost this rank's own failure (an out-of-band layer
    // that delivered another record for it): the rank still fails. Over
    // several nodes the others' next collective is `Ready`: this flush is
    // it, and fails them too. On one node none comes: they wait for this rank
    // in the fence below, until it leaves (a window it dropped) or, if it
    // never mapped one, their timeout.
    let mut window = match window {
        Ok(w) => w,
        Err(f) => {
            if multi_node {
                lockstep::flush(oob, &mine, f, table);
            }
            return Err(CollectiveError::Local(f));
        }
    };
    window.join();

    // 6. Everyone is in: the node's fence, then (several nodes) its result to every node.
    let fenced = window.fence();
    if fenced.is_ok() {
        window.settle_wakes();
    }
    // The window numbers the node's ranks; the caller, every rank.
    let fenced = fenced.map_err(|e| global_fence_error(e, node));
    if multi_node {
        let mut mine = Record::new(Stage::Ready, rank, nranks, &who);
        if let Err(e) = fenced {
            mine.fail(Failure::Fence(e));
        }
        exchange(oob, &mine, table)?;
        verdict(table, rank, Stage::Ready)?;
        platform.checkpoint(Step::Ready, rank);
        return Ok(window);
    }
    match fenced {
        Ok(()) => {
            platform.checkpoint(Step::Ready, rank);
            Ok(window)
        }
        Err(e) => match window.poisoned() {
            Some(Poison { kind: PoisonKind::Flush, rank: failed }) => {
                let failed = node.global_or_same(failed);
                lockstep::flush(oob, &mine, Failure::Fence(e), table);
                // The failed rank's record of the flush says why, unless the
                // flush itself failed (then the table holds no failure).
                let failure = table.get(failed as usize).and_then(|r| r.failure());
                let failure = failure.unwrap_or(Failure::Oob(crate::error::OobError { code: -1 }));
                Err(CollectiveError::Peer { rank: failed, failure })
            }
            _ => Err(CollectiveError::Local(Failure::Fence(e))),
        },
    }
}

/// `e`, from a fence of the node's window, with the ranks it names renamed
/// to the communicator's.
fn global_fence_error(e: FenceError, node: NodeRanks<'_>) -> FenceError {
    e.renamed(|l| node.global_or_same(l))
}

/// The window fence every rank of a node runs: flat if any rank of the node
/// asked for it (on a table the verdict accepted, so every code is valid).
fn agreed_barrier(table: &[Record], node: NodeRanks<'_>) -> Barrier {
    let size = node.size(u32::try_from(table.len()).unwrap_or(u32::MAX));
    let flat = (0..size).any(|l| table[node.global(l) as usize].barrier == Barrier::Flat.code());
    if flat { Barrier::Flat } else { Barrier::Dissemination }
}

/// The local checks of a window request.
fn check_request(rank: u32, nranks: u32, request: &WindowRequest, page: u64) -> Result<(), ArgError> {
    if rank >= nranks {
        return Err(ArgError::Rank { rank, nranks });
    }
    LayoutParams { nranks, mode: request.mode, align: request.align, page }.validate().map_err(ArgError::Layout)?;
    if isize::try_from(request.size).is_err() {
        return Err(ArgError::Size { size: request.size });
    }
    Ok(())
}

/// The rank-table entries a node's layout implies, from the request table.
fn entries<'a>(layout: &Layout, table: &'a [Record], node: NodeRanks<'a>) -> impl Iterator<Item = RankEntry> + 'a {
    let rec = move |l: u32| &table[node.global(l) as usize];
    layout.segments(move |l| rec(l).size).zip((0..layout.nranks()).map(rec)).map(|(seg, rec)| RankEntry {
        offset: seg.offset,
        size: seg.len,
        pid: rec.pid,
        start_time: rec.start_time,
        uid: rec.uid,
        ..RankEntry::default()
    })
}

/// Rank 0's part: an exclusive segment, published at once (`way_in` is what
/// the others open), with the creator's share reserved and the header and
/// rank table written. Unlinks what it made if it fails.
fn create_segment<P: Platform>(
    platform: &P,
    layout: &Layout,
    header: Header,
    table: &[Record],
    node: NodeRanks<'_>,
    name: &mut heapless::String<{ NAME_LEN - 1 }>,
    way_in: &mut heapless::String<{ NAME_LEN - 1 }>,
) -> Result<P::Segment, PlatformError> {
    let mut random = [0u8; 8];
    platform.random(&mut random)?;
    let who = platform.identity();
    name.clear();
    // `kpccl-<uid>-<pid>-<start time, hex>-<random>`: the creator's identity lets a
    // sweep tell a leftover of a dead creator from a live job's segment. At most
    // 6 + 10 + 1 + 20 + 1 + 16 + 1 + 16 = 71 bytes with absurd pids; `write` fails
    // (and creation with it) rather than truncate.
    core::fmt::write(
        name,
        format_args!("kpccl-{}-{}-{:x}-{:016x}", who.uid, who.pid, who.start_time, u64::from_le_bytes(random)),
    )
    .map_err(|_| PlatformError { op: crate::error::PlatformOp::Create, code: 36 /* ENAMETOOLONG */ })?;
    let segment = platform.create(name, layout.total()).inspect_err(|_| name.clear())?;
    // The creator is the node's local rank 0.
    platform.checkpoint(Step::Made, node.global(0));
    // Published before the slow steps (reserving can take milliseconds per
    // GiB): a platform that drops the name here leaves nothing to a crash.
    way_in.clear();
    let prefix = layout.shared_prefix();
    let published = whole(&segment, layout).and_then(|()| platform.publish(&segment, name, way_in));
    if let Err(e) = published.and_then(|()| segment.reserve(prefix.offset, prefix.len)) {
        drop(segment);
        let _ = platform.unlink(name);
        name.clear();
        return Err(e);
    }
    let mem = Window::<P>::view(&segment);
    mem.write(0, header);
    for (r, e) in (0u32..).zip(entries(layout, table, node)) {
        mem.write(layout.rank_entry(r), e);
    }
    Ok(segment)
}

/// Refuses a mapping shorter than the window, or whose address is not
/// aligned to the page (a platform that broke the contract of `create` or
/// `open`): the window's views would panic on it (its header and atomics
/// out of reach), or misplace its lines and data segments.
fn whole<S: Segment>(segment: &S, layout: &Layout) -> Result<(), PlatformError> {
    let len = segment.len();
    if !u64::try_from(len).is_ok_and(|len| len >= layout.total()) {
        return Err(PlatformError { op: crate::error::PlatformOp::Size, code: i64::try_from(len).unwrap_or(i64::MAX) });
    }
    let (address, page) = (segment.base().as_ptr().addr() as u64, layout.params().page);
    if !address.is_multiple_of(page) {
        // The largest power of two dividing the (non-null) address.
        return Err(PlatformError::misaligned(1 << address.trailing_zeros(), page));
    }
    Ok(())
}

/// Checks the shared header and rank table against this rank's own view.
fn verify<P: Platform>(w: &Window<P>, layout: &Layout, expected: &Header) -> Result<(), Failure> {
    let digest = expected.digest;
    let found = w.header();
    if found.magic != crate::layout::shared::MAGIC {
        return Err(Failure::Attach(AttachError::Magic));
    }
    if found.version != crate::layout::VERSION {
        return Err(Failure::Attach(AttachError::Version { found: found.version, expected: crate::layout::VERSION }));
    }
    if found.digest != digest {
        return Err(Failure::Attach(AttachError::Digest));
    }
    if (Header { poison: 0, ..found }) != *expected {
        return Err(Failure::Attach(AttachError::Header));
    }
    let shared = (0..layout.nranks()).map(|r| w.rank_entry(r).expect("rank in range"));
    if window_digest(layout, w.barrier(), shared) != digest {
        return Err(Failure::Attach(AttachError::Digest));
    }
    Ok(())
}

/// Reserves what this rank owns, its sync block and its data segment, from
/// this rank, so the platform places the memory for it (NUMA first touch:
/// `fallocate` on tmpfs allocates on the caller's node). No page is touched:
/// pre-faulting doubled the creation time of large windows.
fn claim<P: Platform>(w: &Window<P>, layout: &Layout, rank: u32, data: Region) -> Result<(), PlatformError> {
    for region in [layout.sync_region(rank), data] {
        if region.len > 0 {
            w.segment_handle().reserve(region.offset, region.len)?;
        }
    }
    Ok(())
}
