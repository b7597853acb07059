//! Communicators: a group of ranks and the out-of-band collectives that
//! connect them.

use std::sync::Arc;
use std::time::Duration;

use kpccl_core::error::ArgError;
use kpccl_core::fence::Barrier;
use kpccl_core::protocol::{AUTO_LOCAL_RANK, NodeInfo, NodeRanks, Placement, Record};
use kpccl_core::{LayoutMode, MemoryKind, Oob, ProcessIdentity, WaitPolicy, WindowRequest};

use crate::log::{self, Level};
use crate::platform::{PosixPlatform, Reserve};
use crate::{Config, Error, Window, node};

/// A communicator: `nranks` processes, on one node or on many, that create
/// windows together through an [`Oob`]. Ranks keep their numbers in every
/// call; a window's memory is shared by the ranks of one node only.
#[derive(Debug)]
pub struct Comm<O: Oob> {
    oob: O,
    rank: u32,
    nranks: u32,
    config: Config,
    platform: PosixPlatform,
    nodes: Arc<Nodes>,
}

/// A communicator being configured (see [`Comm::builder`]).
#[derive(Debug)]
#[must_use = "nothing is created until `build` (a collective) is called"]
pub struct CommBuilder<O: Oob> {
    oob: O,
    rank: u32,
    nranks: u32,
    local_rank: Option<u32>,
    config: Option<Config>,
}

impl<O: Oob> CommBuilder<O> {
    /// This rank's number among its node's ranks: `Some(l)` with `l` in
    /// `0..n` (`n` ranks on the node, each with its own `l`, else every rank
    /// fails), or `None` (the default) to be numbered in rank order.
    pub fn local_rank(mut self, local_rank: Option<u32>) -> Self {
        self.local_rank = local_rank;
        self
    }

    /// An explicit configuration instead of the `KPCCL_*` variables'.
    pub fn config(mut self, config: Config) -> Self {
        self.config = Some(config);
        self
    }

    /// Creates the communicator (collective: every rank calls it).
    pub fn build(self) -> Result<Comm<O>, Error> {
        let Self { oob, rank, nranks, local_rank, config } = self;
        let config = match config.map_or_else(Config::from_env, Ok) {
            Ok(config) => config,
            Err(e) => {
                // KPCCL_LOG holds even when another variable is refused.
                if let Ok(Some(level)) = crate::config::log_level() {
                    log::set_level(level);
                }
                log::log(Level::Error, format_args!("rank {rank}: {e}"));
                Comm::fail(&oob, rank, nranks);
                return Err(e);
            }
        };
        log::set_level(config.log);
        let digest = match node::digest(&config) {
            Ok(digest) => digest,
            Err(e) => {
                log::log(Level::Error, format_args!("rank {rank}: {e}"));
                Comm::fail(&oob, rank, nranks);
                return Err(e);
            }
        };
        let platform = match node::segment_dir(&config, digest) {
            (dir, true) => PosixPlatform::with_node_dir(dir),
            (dir, false) => PosixPlatform::new(dir),
        }
        .with_light_wakes(config.light_wakes);
        let me = Placement { node: digest, local_rank: local_rank.unwrap_or(AUTO_LOCAL_RANK) };
        let nodes = Arc::new(create(&platform, &oob, rank, nranks, me, Ok(()))?);
        // From now on the node's CPUs, not this rank's: ranks pinned each to
        // a CPU of its own do not outnumber them.
        let platform = platform.with_node_cpus(nodes.info.cpus);
        if nodes.info.local_rank == 0 {
            // One rank per node removes what crashed jobs left (as window creation does).
            crate::sweep::reap(&config.shm_dir);
        }
        if nodes.info.nnodes > 1 {
            let i = nodes.info;
            log::log(
                Level::Info,
                format_args!(
                    "rank {rank}: node {} of {}, local rank {} of {}; windows span this node's ranks {:?}",
                    i.node, i.nnodes, i.local_rank, i.local_size, nodes.ranks
                ),
            );
        }
        Ok(Comm { oob, rank, nranks, config, platform, nodes })
    }
}

/// How a communicator's ranks are spread over nodes.
#[derive(Debug)]
pub(crate) struct Nodes {
    pub(crate) info: NodeInfo,
    /// Node index of every rank.
    node_of: Vec<u32>,
    /// Local rank of every rank.
    local_of: Vec<u32>,
    /// This node's ranks, by local rank.
    pub(crate) ranks: Vec<u32>,
    /// The other ranks of this node and their processes (to name one that dies).
    peers: Vec<(u32, ProcessIdentity)>,
}

impl Nodes {
    fn new(table: &[Record], info: NodeInfo) -> Self {
        let (mut node_of, mut local_of) = (vec![0; table.len()], vec![0; table.len()]);
        kpccl_core::protocol::map_nodes(table, &mut node_of, &mut local_of);
        let mut ranks = vec![0; info.local_size as usize];
        for (r, (&n, &l)) in (0u32..).zip(node_of.iter().zip(&local_of)) {
            if n == info.node {
                ranks[l as usize] = r;
            }
        }
        let me = ranks.get(info.local_rank as usize).copied();
        let peers = ranks.iter().filter(|&&r| Some(r) != me).map(|&r| (r, table[r as usize].identity())).collect();
        Self { info, node_of, local_of, ranks, peers }
    }

    /// `rank`'s local rank, if it is on this node.
    #[inline]
    pub(crate) fn local(&self, rank: u32) -> Result<u32, Error> {
        let nranks = u32::try_from(self.node_of.len()).unwrap_or(u32::MAX);
        match self.node_of.get(rank as usize) {
            None => Err(Error::Fence(kpccl_core::FenceError::InvalidRank { rank, nranks })),
            Some(&node) if node != self.info.node => Err(Error::OtherNode { rank, node, this_node: self.info.node }),
            Some(_) => Ok(self.local_of[rank as usize]),
        }
    }

    /// The global rank of local rank `l` (itself if out of range).
    #[inline]
    pub(crate) fn global(&self, l: u32) -> u32 {
        self.ranks.get(l as usize).copied().unwrap_or(l)
    }

    pub(crate) fn nranks(&self) -> u32 {
        u32::try_from(self.node_of.len()).unwrap_or(u32::MAX)
    }
}

impl<O: Oob> Comm<O> {
    /// Creates a communicator (collective: every rank calls it) with the
    /// configuration of the `KPCCL_*` environment variables, each node's
    /// ranks numbered in rank order: `Comm::builder(oob, rank, nranks).build()`.
    ///
    /// A bad `KPCCL_*` variable on one rank fails the creation on every rank.
    pub fn new(oob: O, rank: u32, nranks: u32) -> Result<Self, Error> {
        Self::builder(oob, rank, nranks).build()
    }

    /// A communicator to create (collective) as rank `rank` of `nranks`,
    /// reaching the others through `oob`; set the local rank or the
    /// configuration, then [`CommBuilder::build`].
    pub fn builder(oob: O, rank: u32, nranks: u32) -> CommBuilder<O> {
        CommBuilder { oob, rank, nranks, local_rank: None, config: None }
    }

    /// Takes part in communicator creation as a rank whose arguments the
    /// caller refused, so that every rank fails together instead of waiting
    /// for this one (the C API uses it for NULL pointers and the like).
    pub fn fail(oob: &O, rank: u32, nranks: u32) {
        let platform = PosixPlatform::new(crate::DEFAULT_SHM_DIR);
        let me = Placement { node: 0, local_rank: AUTO_LOCAL_RANK };
        let _ = create(&platform, oob, rank, nranks, me, Err(ArgError::Caller));
    }

    /// How many nodes the communicator spans.
    pub fn nnodes(&self) -> u32 {
        self.nodes.info.nnodes
    }

    /// This rank's node, `0..nnodes()` (nodes are numbered by their lowest rank).
    pub fn node(&self) -> u32 {
        self.nodes.info.node
    }

    /// This rank's number among its node's ranks.
    pub fn local_rank(&self) -> u32 {
        self.nodes.info.local_rank
    }

    /// Ranks on this node: the ranks a window's memory is shared by.
    pub fn local_size(&self) -> u32 {
        self.nodes.info.local_size
    }

    /// The CPU count this node's rank count is compared with, taken at
    /// creation: the CPUs the ranks' affinities cover, fewer where some
    /// ranks are confined to fewer CPUs than they number, at most the
    /// control groups' CPU quota (rounded up). More ranks than this on the
    /// node make waits hand the CPU over instead of spinning; a program
    /// making the same choice (spin or yield, one algorithm or another)
    /// compares with it rather than with the CPUs the machine has, which a
    /// cpuset, a quota or pinned ranks make too many.
    pub fn node_cpus(&self) -> u32 {
        self.nodes.info.cpus
    }

    /// The ranks on this node, by local rank.
    pub fn node_ranks(&self) -> &[u32] {
        &self.nodes.ranks
    }

    /// The node of `rank`, if it is a rank of the communicator.
    pub fn node_of(&self, rank: u32) -> Option<u32> {
        self.nodes.node_of.get(rank as usize).copied()
    }

    /// This process's rank.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// Ranks in the communicator.
    pub fn nranks(&self) -> u32 {
        self.nranks
    }

    /// The configuration windows start from.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Where this node's window segments are created: `KPCCL_SHM_DIR`, or
    /// under `KPCCL_NODE_ID` the simulated node's own directory in it.
    pub fn segment_dir(&self) -> &std::path::Path {
        self.platform.dir()
    }

    /// The out-of-band collectives.
    pub fn oob(&self) -> &O {
        &self.oob
    }

    /// The out-of-band barrier. Its failure names its cause as a creation's
    /// does: the rank the launcher lost ([`Error::RankLost`]) or the rank of
    /// this node whose process is gone, else the launcher's code in words
    /// ([`Error::Launcher`]).
    pub fn barrier(&self) -> Result<(), Error> {
        self.in_its_process()?;
        self.oob.barrier().map_err(|e| {
            let e = kpccl_core::CollectiveError::Local(kpccl_core::Failure::Oob(e));
            crate::explain::creation_error(e, "a barrier", &self.nodes.peers, None)
        })
    }

    /// Refuses a collective in a child forked from the process that made the
    /// communicator ([`Error::ForkedChild`]): the child would publish its
    /// parent's identity and speak for it in the other ranks' collectives.
    pub fn in_its_process(&self) -> Result<(), Error> {
        use kpccl_core::Platform;
        let (parent, child) = (self.platform.identity().pid, u64::from(std::process::id()));
        if parent == child { Ok(()) } else { Err(Error::ForkedChild { parent, child }) }
    }

    /// Starts describing a window in which this rank owns `size` bytes; finish
    /// with [`WindowBuilder::alloc`] (collective).
    pub fn window(&self, size: usize) -> WindowBuilder<'_, O> {
        WindowBuilder {
            comm: self,
            size: size as u64,
            mode: self.config.layout,
            align: kpccl_core::layout::MIN_SEGMENT_ALIGN,
            timeout: self.config.timeout,
            spins: self.config.spins,
            barrier: self.config.barrier,
            reserve: self.config.reserve,
            memory_kind: MemoryKind::HOST,
        }
    }
}

fn create<O: Oob>(
    platform: &PosixPlatform,
    oob: &O,
    rank: u32,
    nranks: u32,
    me: Placement,
    local: Result<(), ArgError>,
) -> Result<Nodes, Error> {
    kpccl_core::protocol::check_nranks(nranks)?;
    let mut table = vec![Record::default(); nranks as usize];
    let info =
        kpccl_core::create_comm(kpccl_core::Collective::new(platform, oob, rank, nranks, &mut table).local(local), me)
            .map_err(|e| crate::explain::creation_error(e, "communicator creation", &[], None))
            .inspect_err(|e| {
                let level = crate::explain::failure_level(e, rank);
                log::log(level, format_args!("rank {rank}: communicator creation failed: {e}"));
            })?;
    Ok(Nodes::new(&table, info))
}

/// The options a binding (C attributes, Python keywords) collects for a
/// window; each `None` keeps the communicator's default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WindowOptions {
    /// See [`WindowBuilder::layout`].
    pub layout: Option<LayoutMode>,
    /// See [`WindowBuilder::align`].
    pub align: Option<usize>,
    /// See [`WindowBuilder::timeout`] (`Some(None)`: never time out).
    pub timeout: Option<Option<Duration>>,
    /// See [`WindowBuilder::spins`].
    pub spins: Option<u32>,
    /// See [`WindowBuilder::reserve`].
    pub reserve: Option<Reserve>,
    /// See [`WindowBuilder::barrier`].
    pub barrier: Option<Barrier>,
}

/// Options of one window; every rank must give the same mode and alignment.
#[derive(Debug)]
#[must_use = "call .alloc() to create the window"]
pub struct WindowBuilder<'c, O: Oob> {
    comm: &'c Comm<O>,
    size: u64,
    mode: LayoutMode,
    align: u64,
    timeout: Option<Duration>,
    spins: Option<u32>,
    barrier: Option<Barrier>,
    reserve: Reserve,
    memory_kind: MemoryKind,
}

impl<O: Oob> WindowBuilder<'_, O> {
    /// Every option `o` sets.
    pub fn options(mut self, o: &WindowOptions) -> Self {
        if let Some(mode) = o.layout {
            self = self.layout(mode);
        }
        if let Some(align) = o.align {
            self = self.align(align);
        }
        if let Some(timeout) = o.timeout {
            self = self.timeout(timeout);
        }
        if let Some(spins) = o.spins {
            self = self.spins(spins);
        }
        if let Some(reserve) = o.reserve {
            self = self.reserve(reserve);
        }
        if let Some(barrier) = o.barrier {
            self = self.barrier(barrier);
        }
        self
    }

    /// How segments are placed (default: `KPCCL_LAYOUT`, else contiguous).
    pub fn layout(mut self, mode: LayoutMode) -> Self {
        self.mode = mode;
        self
    }

    /// The alignment of every segment, a power of two (default 64).
    pub fn align(mut self, align: usize) -> Self {
        self.align = align as u64;
        self
    }

    /// Fence waits give up after `timeout` (default: `KPCCL_TIMEOUT_MS`, else never).
    /// `None` never gives up, as `KPCCL_TIMEOUT_MS=0` and C's `timeout_ms = 0`
    /// do; `Some(Duration::ZERO)` gives up as soon as a wait stops spinning.
    pub fn timeout(mut self, timeout: Option<Duration>) -> Self {
        self.timeout = timeout;
        self
    }

    /// Spin polls before yielding (default: `KPCCL_SPIN`, else by load).
    pub fn spins(mut self, spins: u32) -> Self {
        self.spins = Some(spins);
        self
    }

    /// The window fence to ask for (default: `KPCCL_BARRIER`, else flat when
    /// ranks outnumber CPUs). The window runs flat if any rank asks for it.
    pub fn barrier(mut self, barrier: Barrier) -> Self {
        self.barrier = Some(barrier);
        self
    }

    /// When the window's memory is allocated (default: `KPCCL_RESERVE`, else eager).
    pub fn reserve(mut self, reserve: Reserve) -> Self {
        self.reserve = reserve;
        self
    }

    /// What the window's data is, the same on every rank (default: host
    /// memory). Device kinds are built by their crate (`kpccl-ascend`) over a
    /// host window of this kind, so ranks asking for different kinds fail together.
    pub fn memory_kind(mut self, kind: MemoryKind) -> Self {
        self.memory_kind = kind;
        self
    }

    fn policy(&self) -> WaitPolicy {
        use kpccl_core::Platform;
        let c = self.comm;
        let mut p = WaitPolicy::for_load(c.local_size(), c.platform.cpu_count());
        if let Some(s) = self.spins {
            (p.spins, p.signal_spins) = (s, s);
        }
        if let Some(t) = c.config.yield_time {
            p.yield_ns = u64::try_from(t.as_nanos()).unwrap_or(u64::MAX);
        }
        p.timeout_ns = self.timeout.map_or(0, |t| u64::try_from(t.as_nanos()).unwrap_or(u64::MAX).max(1));
        // At least a millisecond, as `KPCCL_LIVENESS_MS` is read: at 0 a
        // sleeping wait would never sleep, reading `/proc` in a loop.
        let liveness = c.config.liveness.max(Duration::from_millis(1));
        p.liveness_ns = u64::try_from(liveness.as_nanos()).unwrap_or(u64::MAX);
        p
    }

    /// Creates the window (collective: every rank of the communicator calls it).
    /// If any rank's request is invalid, or any rank fails, every rank gets an error.
    pub fn alloc(self) -> Result<Window, Error> {
        self.create(Ok(()))
    }

    /// Takes part in window creation as a rank whose arguments the caller
    /// refused, so that every rank fails together; returns the collective's error.
    pub fn fail(self) -> Error {
        match self.create(Err(ArgError::Caller)) {
            Err(e) => e,
            Ok(_) => unreachable!("a refused request never makes a window"),
        }
    }

    fn create(self, local: Result<(), ArgError>) -> Result<Window, Error> {
        let c = self.comm;
        c.in_its_process()?;
        let barrier = self.barrier.unwrap_or_else(|| {
            use kpccl_core::Platform;
            Barrier::for_load(c.local_size(), c.platform.cpu_count())
        });
        let request = WindowRequest {
            size: self.size,
            mode: self.mode,
            align: self.align,
            policy: self.policy(),
            barrier,
            memory_kind: self.memory_kind,
        };
        let mut table = vec![Record::default(); c.nranks as usize];
        let stats = c.config.stats.then(Arc::default);
        let platform = c.platform.clone().with_reserve(self.reserve).with_stats(stats.clone());
        let node = NodeRanks::Some { ranks: &c.nodes.ranks, local_rank: c.nodes.info.local_rank };
        let inner = kpccl_core::create_window(
            kpccl_core::Collective::new(&platform, &c.oob, c.rank, c.nranks, &mut table).local(local),
            node,
            &request,
        )
        .map_err(|e| {
            let dir = Some((platform.dir(), platform.is_node_dir()));
            crate::explain::creation_error(e, "window creation", &c.nodes.peers, dir)
        })
        .inspect_err(|e| {
            let level = crate::explain::failure_level(e, c.rank);
            log::log(level, format_args!("rank {}: window creation failed: {e}", c.rank));
        })?;
        log::log(Level::Info, format_args!("rank {}: window of {} bytes ready", c.rank, inner.layout().total()));
        if c.config.light_wakes && !inner.light_wakes() {
            let (n, cpus) = (c.nodes.info.local_size, c.nodes.info.cpus);
            let why = if n > cpus {
                format!("{n} ranks share this node's {cpus} CPUs")
            } else {
                "a rank did not ask for them, or cannot use membarrier's global barrier".to_owned()
            };
            log::log(
                Level::Info,
                format_args!("rank {}: light wake-ups asked for, but not in this window: {why}", c.rank),
            );
        }
        Ok(Window::new(inner, Arc::clone(&c.nodes), stats))
    }
}
