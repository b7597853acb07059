//! Nodes: which ranks share memory. Shared memory stops at the node, so a
//! communicator over many nodes groups its ranks by the node identity each
//! one contributes, and every window is laid out per node.
//!
//! Every rank judges the gathered table the same way: nodes are numbered by
//! their lowest rank, and the local ranks the callers gave must number each
//! node's ranks `0..n`, one each, else every rank returns the same error. A
//! rank that gives [`AUTO_LOCAL_RANK`] is numbered after the ranks below it
//! on its node (rank order).
//! O(n log n) in the rank count, without allocating: the ranks are sorted by
//! node in a fixed array of [`MAX_RANKS`] entries.

use super::Record;
use crate::error::CollectiveError;
use crate::layout::MAX_RANKS;
use crate::platform::CpuMask;

/// A local rank that asks to be numbered by rank order on its node.
pub const AUTO_LOCAL_RANK: u32 = u32::MAX;

/// Where one rank says it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    /// A digest of its node's identity: equal on the ranks of one node only.
    pub node: u64,
    /// Its number among its node's ranks, `0..n`, or [`AUTO_LOCAL_RANK`].
    pub local_rank: u32,
}

impl Placement {
    /// Rank `rank` of a communicator whose ranks all run on one node.
    #[must_use]
    pub const fn alone(rank: u32) -> Self {
        Self { node: 0, local_rank: rank }
    }
}

/// A rank's place among the nodes of its communicator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeInfo {
    /// How many nodes the communicator spans.
    pub nnodes: u32,
    /// This rank's node, `0..nnodes` (nodes are numbered by their lowest rank).
    pub node: u32,
    /// This rank's number on its node.
    pub local_rank: u32,
    /// Ranks on this node.
    pub local_size: u32,
    /// The CPUs this node's ranks may run on together, as a count to compare
    /// with `local_size` (ranks outnumber CPUs when it is smaller): the union
    /// of their affinities, fewer if some ranks are confined to a set of
    /// CPUs smaller than their number, or if a CPU quota allows fewer; if a
    /// rank's affinity is unknown, the fewest CPUs any rank may use.
    pub cpus: u32,
}

/// The ranks of the caller's node: a window's memory is shared by these.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeRanks<'a> {
    /// Every rank of the communicator, in rank order (a single node).
    All,
    /// These global ranks, in local-rank order; the caller is `ranks[local_rank]`.
    Some {
        /// Global rank of each local rank.
        ranks: &'a [u32],
        /// The caller's local rank.
        local_rank: u32,
    },
}

impl NodeRanks<'_> {
    /// Ranks on the node, given the communicator's size.
    #[allow(clippy::cast_possible_truncation)] // at most MAX_RANKS entries
    pub(crate) fn size(&self, nranks: u32) -> u32 {
        match self {
            Self::All => nranks,
            Self::Some { ranks, .. } => ranks.len() as u32,
        }
    }

    /// The global rank of local rank `l`.
    pub(crate) fn global(&self, l: u32) -> u32 {
        match self {
            Self::All => l,
            Self::Some { ranks, .. } => ranks[l as usize],
        }
    }

    /// [`NodeRanks::global`], or `l` itself if it is no local rank (a
    /// poison word another rank wrote may name anything).
    pub(crate) fn global_or_same(&self, l: u32) -> u32 {
        match self {
            Self::All => l,
            Self::Some { ranks, .. } => ranks.get(l as usize).copied().unwrap_or(l),
        }
    }

    /// The caller's local rank, given its global rank.
    pub(crate) fn local(&self, rank: u32) -> u32 {
        match self {
            Self::All => rank,
            Self::Some { local_rank, .. } => *local_rank,
        }
    }

    /// Whether the caller's arguments describe a node it belongs to.
    pub(crate) fn is_valid(&self, rank: u32, nranks: u32) -> bool {
        match self {
            Self::All => true,
            Self::Some { ranks, local_rank } => {
                !ranks.is_empty()
                    && ranks.len() <= nranks as usize
                    && ranks.get(*local_rank as usize) == Some(&rank)
                    && ranks.iter().all(|&r| r < nranks)
            }
        }
    }
}

impl Record {
    /// Where the rank that sent this (Stage::Comm) record runs.
    #[must_use]
    pub fn placement(&self) -> Placement {
        Placement { node: self.node, local_rank: self.local_rank }
    }
}

/// A table's ranks sorted by node, then rank: each node's ranks are one run,
/// in rank order. Sorting keeps creation's checks O(n log n) per rank (they
/// compared every pair of ranks: 1024 ranks took 3 to 4 ms on every rank); a
/// fixed array, as creation allocates nothing.
struct ByNode {
    order: [u16; MAX_RANKS as usize],
    len: usize,
}

const _: () = assert!(MAX_RANKS <= 1 << 16, "a rank fits a u16");

impl ByNode {
    /// # Panics
    /// If the table has more than [`MAX_RANKS`] records.
    #[allow(clippy::cast_possible_truncation)] // at most MAX_RANKS ranks
    fn new(table: &[Record]) -> Self {
        let len = table.len();
        assert!(len <= MAX_RANKS as usize, "at most MAX_RANKS ranks");
        let mut order = [0u16; MAX_RANKS as usize];
        for (r, o) in order[..len].iter_mut().enumerate() {
            *o = r as u16;
        }
        order[..len].sort_unstable_by_key(|&r| (table[usize::from(r)].node, r));
        Self { order, len }
    }

    /// Each node's ranks, in rank order (the nodes in no useful order).
    fn nodes<'a>(&'a self, table: &'a [Record]) -> impl Iterator<Item = &'a [u16]> + 'a {
        self.order[..self.len].chunk_by(|&a, &b| table[usize::from(a)].node == table[usize::from(b)].node)
    }

    /// The index of the node of `ranks`: nodes are numbered by their lowest rank.
    #[allow(clippy::cast_possible_truncation)] // at most MAX_RANKS ranks
    fn index(&self, table: &[Record], ranks: &[u16]) -> u32 {
        self.nodes(table).filter(|other| other[0] < ranks[0]).count() as u32
    }
}

/// Every rank's node index and local rank, from a table that
/// [`create_comm`](super::create_comm) accepted.
///
/// # Panics
/// If the slices are not as long as the table, or it has more than
/// [`MAX_RANKS`] records.
pub fn map_nodes(table: &[Record], node_of: &mut [u32], local_of: &mut [u32]) {
    assert!(node_of.len() == table.len() && local_of.len() == table.len(), "one entry per rank");
    let by_node = ByNode::new(table);
    for ranks in by_node.nodes(table) {
        for (l, &r) in (0u32..).zip(ranks) {
            node_of[usize::from(r)] = u32::from(ranks[0]);
            local_of[usize::from(r)] = local_rank(table[usize::from(r)].local_rank, l);
        }
    }
    // Each rank's lowest rank becomes its node's index: a node's lowest rank
    // comes first in rank order, and is numbered before the others read it.
    let mut nodes = 0;
    for r in 0..table.len() {
        let lowest = node_of[r] as usize;
        node_of[r] = if lowest == r {
            nodes += 1;
            nodes - 1
        } else {
            node_of[lowest]
        };
    }
}

/// A rank's local rank: as given, or its place `l` among its node's ranks
/// (then every rank of the node is AUTO; see [`place`]).
fn local_rank(given: u32, l: u32) -> u32 {
    if given == AUTO_LOCAL_RANK { l } else { given }
}

/// Checks the local ranks of a gathered Stage::Comm table and places rank `me`.
#[allow(clippy::cast_possible_truncation)] // at most MAX_RANKS ranks
pub(crate) fn place(table: &[Record], me: u32) -> Result<NodeInfo, CollectiveError> {
    let by_node = ByNode::new(table);
    let mut seen = [0u64; MAX_RANKS as usize / 64];
    // The lowest rank that fails, whichever node it is on: every rank names the same.
    let bad = by_node.nodes(table).filter_map(|ranks| misnumbered(table, ranks, &mut seen)).min_by_key(|b| b.0);
    if let Some((rank, clash, ranks)) = bad {
        return Err(CollectiveError::LocalRank {
            rank,
            local_rank: table[rank as usize].local_rank,
            node: by_node.index(table, ranks),
            local_size: ranks.len() as u32,
            clash,
        });
    }
    let mine = |ranks: &&[u16]| ranks.binary_search(&(me as u16)).is_ok();
    let ranks = by_node.nodes(table).find(mine).expect("every rank is on a node");
    let l = ranks.iter().position(|&r| u32::from(r) == me).unwrap_or(0) as u32;
    Ok(NodeInfo {
        nnodes: by_node.nodes(table).count() as u32,
        node: by_node.index(table, ranks),
        local_rank: local_rank(table[me as usize].local_rank, l),
        local_size: ranks.len() as u32,
        cpus: node_cpus(table, ranks),
    })
}

/// The lowest of a node's `ranks` (in rank order) whose local rank is wrong,
/// the earlier rank it clashes with, and `ranks`. A node numbers itself
/// (every rank AUTO: valid by construction) or is numbered by its callers
/// (each local rank below the node's size, and given once: `seen` marks
/// them); a node that mixes both fails at its first AUTO rank, which names
/// the first rank that gives one.
fn misnumbered<'a>(table: &[Record], ranks: &'a [u16], seen: &mut [u64]) -> Option<(u32, Option<u32>, &'a [u16])> {
    let given = |r: u16| table[usize::from(r)].local_rank;
    let first_auto = ranks.iter().copied().find(|&r| given(r) == AUTO_LOCAL_RANK);
    let first_given = ranks.iter().copied().find(|&r| given(r) != AUTO_LOCAL_RANK);
    let (bad, clash) = match (first_auto, first_given) {
        (_, None) => return None,
        (Some(auto), Some(first)) => (auto, Some(first)),
        (None, Some(_)) => {
            let seen = &mut seen[..ranks.len().div_ceil(64)];
            seen.fill(0);
            ranks.iter().copied().find_map(|r| {
                let l = given(r) as usize;
                if l >= ranks.len() {
                    return Some((r, None));
                }
                let (word, bit) = (l / 64, 1 << (l % 64));
                if seen[word] & bit != 0 {
                    // The earlier rank: found once, on the failing path only.
                    return Some((r, ranks.iter().copied().find(|&s| given(s) == given(r))));
                }
                seen[word] |= bit;
                None
            })?
        }
    };
    Some((u32::from(bad), clash.map(u32::from), ranks))
}

/// [`NodeInfo::cpus`] of the node of `ranks`, as a count the node's rank count
/// is compared with: ranks outnumber it exactly when some of them must share
/// a CPU as far as their affinities tell (ranks confined to a set of CPUs
/// smaller than their number), or when they outnumber the node's CPUs or
/// its quota. Ranks pinned each to a CPU of their own (`mpirun` binds 2
/// ranks to cores by default, Slurm binds tasks) see one CPU each, yet
/// share none.
#[allow(clippy::cast_possible_truncation)] // at most MAX_RANKS ranks
fn node_cpus(table: &[Record], ranks: &[u16]) -> u32 {
    let rec = |r: &u16| &table[usize::from(*r)];
    let node = || ranks.iter().map(rec);
    let quota = node().map(|t| t.quota).filter(|&q| q != 0).min().unwrap_or(u32::MAX);
    if node().any(|t| CpuMask(t.cpus).count() == 0) {
        // An affinity unknown: the fewest CPUs any rank may use.
        return node().map(|t| t.parallelism).min().unwrap_or(1).min(quota).max(1);
    }
    let union = node().fold(CpuMask::UNKNOWN, |u, t| u.union(&CpuMask(t.cpus)));
    // For each rank's set, the ranks confined to it: k ranks within c < k
    // CPUs make the node count as c + (the ranks outside) < its ranks.
    // Each distinct set once (ranks that are not bound all have the same
    // one), against the smaller sets only (a set within another is smaller,
    // or the same): sorted by size, then set, the distinct sets are runs,
    // each after every smaller one. 1024 ranks pinned each to a CPU: 8 ms
    // comparing every pair, on every rank.
    let mut by_set = [0u16; MAX_RANKS as usize];
    let by_set = &mut by_set[..ranks.len()];
    by_set.copy_from_slice(ranks);
    let size = |r: &u16| CpuMask(rec(r).cpus).count();
    by_set.sort_unstable_by_key(|r| (size(r), rec(r).cpus));
    let sets = || by_set.chunk_by(|a, b| rec(a).cpus == rec(b).cpus);
    let crowded = sets()
        .map(|same| {
            let set = CpuMask(rec(&same[0]).cpus);
            let smaller = sets().take_while(|t| size(&t[0]) < set.count());
            let within = smaller.filter(|t| CpuMask(rec(&t[0]).cpus).within(&set)).map(<[u16]>::len).sum::<usize>();
            set.count() + (ranks.len() - same.len() - within) as u32
        })
        .min()
        .unwrap_or(u32::MAX);
    union.count().min(crowded).min(quota).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(placements: &[(u64, u32)]) -> std::vec::Vec<Record> {
        placements
            .iter()
            .map(|&(node, local_rank)| {
                let mut r = Record::default();
                (r.node, r.local_rank) = (node, local_rank);
                r
            })
            .collect()
    }

    #[test]
    fn nodes_are_numbered_by_their_lowest_rank() {
        // Round-robin placement over two nodes, and a third node of one rank.
        let t = table(&[(7, 0), (3, 0), (7, 1), (3, 1), (9, 0)]);
        let info = |me| place(&t, me).unwrap();
        assert_eq!(info(0), NodeInfo { nnodes: 3, node: 0, local_rank: 0, local_size: 2, cpus: 1 });
        assert_eq!(info(3), NodeInfo { nnodes: 3, node: 1, local_rank: 1, local_size: 2, cpus: 1 });
        assert_eq!(info(4), NodeInfo { nnodes: 3, node: 2, local_rank: 0, local_size: 1, cpus: 1 });
    }

    #[test]
    fn local_ranks_may_be_any_permutation() {
        let t = table(&[(1, 1), (1, 0), (2, 0)]);
        assert_eq!(place(&t, 0).unwrap().local_rank, 1);
    }

    #[test]
    fn automatic_local_ranks_follow_rank_order() {
        let a = AUTO_LOCAL_RANK;
        let t = table(&[(5, a), (6, a), (5, a), (5, a), (6, a)]);
        assert_eq!(
            place(&table(&[(5, 1), (5, a)]), 0),
            Err(CollectiveError::LocalRank { rank: 1, local_rank: a, node: 0, local_size: 2, clash: Some(0) })
        );
        assert_eq!(place(&t, 3).unwrap(), NodeInfo { nnodes: 2, node: 0, local_rank: 2, local_size: 3, cpus: 1 });
        let (mut node_of, mut local_of) = ([0; 5], [0; 5]);
        map_nodes(&t, &mut node_of, &mut local_of);
        assert_eq!((node_of, local_of), ([0, 1, 0, 0, 1], [0, 0, 1, 2, 1]));
    }

    /// A node's ranks with these affinities (CPU numbers), counts and quotas.
    fn with_cpus(ranks: &[(&[u32], u32, u32)]) -> std::vec::Vec<Record> {
        ranks
            .iter()
            .map(|&(cpus, parallelism, quota)| {
                let mut r = Record::default();
                for &c in cpus {
                    r.cpus[c as usize / 64] |= 1 << (c % 64);
                }
                (r.parallelism, r.quota, r.local_rank) = (parallelism, quota, AUTO_LOCAL_RANK);
                r
            })
            .collect()
    }

    #[test]
    fn a_node_has_the_union_of_its_ranks_cpus() {
        let cpus = |t: &[Record]| place(t, 0).unwrap().cpus;
        // Pinned each to a CPU of its own: 2 CPUs for 2 ranks, not 1.
        assert_eq!(cpus(&with_cpus(&[(&[0], 1, 0), (&[1], 1, 0)])), 2);
        // Pinned to the same CPU, or free on a 2-CPU machine: shared.
        assert_eq!(cpus(&with_cpus(&[(&[3], 1, 0), (&[3], 1, 0), (&[3], 1, 0)])), 1);
        let free: (&[u32], u32, u32) = (&[0, 1], 2, 0);
        assert_eq!(cpus(&with_cpus(&[free; 4])), 2);
        // CPUs past the first word, and overlapping sets.
        assert_eq!(cpus(&with_cpus(&[(&[0, 70], 2, 0), (&[70, 1023], 2, 0)])), 3);
        // Two ranks confined to one CPU share it, whatever the third has.
        let wide: &[u32] = &[0, 1, 2, 3, 4, 5, 6, 7];
        assert_eq!(cpus(&with_cpus(&[(&[0], 1, 0), (&[0], 1, 0), (wide, 8, 0)])), 2);
        // A quota caps the node, pinned ranks included.
        assert_eq!(cpus(&with_cpus(&[(&[0], 1, 2), (&[1], 1, 2), (&[2], 1, 2), (&[3], 1, 2)])), 2);
        // An unknown affinity: the fewest CPUs any rank may use.
        assert_eq!(cpus(&with_cpus(&[(&[0, 1], 2, 0), (&[], 3, 0)])), 2);
        assert_eq!(cpus(&with_cpus(&[(&[], 0, 0)])), 1);
    }

    /// The checks as they were, pair by pair (quadratic): the verdicts to keep.
    #[allow(clippy::cast_possible_truncation)]
    fn reference(table: &[Record], me: u32) -> Result<(u32, u32, u32, u32), CollectiveError> {
        let leader = |r: usize| (0..r).find(|&s| table[s].node == table[r].node).unwrap_or(r);
        let index = |l: usize| (0..l).filter(|&s| leader(s) == s).count() as u32;
        let size = |r: usize| table.iter().filter(|t| t.node == table[r].node).count() as u32;
        for r in 0..table.len() {
            let (first, local_size, given) = (leader(r), size(r), table[r].local_rank);
            let same_node = |s: &usize| table[*s].node == table[r].node;
            let clash = if given == AUTO_LOCAL_RANK {
                (first..table.len()).filter(same_node).find(|&s| table[s].local_rank != AUTO_LOCAL_RANK)
            } else {
                (first..r).filter(same_node).find(|&s| table[s].local_rank == given)
            };
            let mixed = given != AUTO_LOCAL_RANK
                && (first..table.len()).filter(same_node).any(|s| table[s].local_rank == AUTO_LOCAL_RANK);
            if !mixed && ((given != AUTO_LOCAL_RANK && given >= local_size) || clash.is_some()) {
                let (rank, node, clash) = (r as u32, index(first), clash.map(|s| s as u32));
                return Err(CollectiveError::LocalRank { rank, local_rank: given, node, local_size, clash });
            }
        }
        let me = me as usize;
        let auto = table[..me].iter().filter(|t| t.node == table[me].node).count() as u32;
        let local = if table[me].local_rank == AUTO_LOCAL_RANK { auto } else { table[me].local_rank };
        Ok(((0..table.len()).filter(|&s| leader(s) == s).count() as u32, index(leader(me)), local, size(me)))
    }

    /// Local ranks in and out of small nodes' range, and AUTO.
    fn local_ranks() -> impl proptest::strategy::Strategy<Value = u32> {
        proptest::prop_oneof![0u32..6, proptest::strategy::Just(AUTO_LOCAL_RANK)]
    }

    proptest::proptest! {
        // Fewer cases interpreted: each runs both checks for every rank.
        #![proptest_config(proptest::test_runner::Config {
            cases: if cfg!(miri) { 4 } else { 256 },
            failure_persistence: None,
            ..proptest::test_runner::Config::default()
        })]
        #[test]
        fn sorting_by_node_keeps_every_verdict(
            ranks in proptest::collection::vec((0u64..4, local_ranks()), 1..14),
            all_auto in proptest::bool::ANY,
        ) {
            let ranks: std::vec::Vec<(u64, u32)> =
                ranks.into_iter().map(|(n, l)| (n, if all_auto { AUTO_LOCAL_RANK } else { l })).collect();
            let t = table(&ranks);
            let (mut node_of, mut local_of) = (std::vec![0; t.len()], std::vec![0; t.len()]);
            for me in 0..u32::try_from(t.len()).unwrap() {
                let got = place(&t, me).map(|i| (i.nnodes, i.node, i.local_rank, i.local_size));
                proptest::prop_assert_eq!(got, reference(&t, me));
                if got.is_ok() {
                    map_nodes(&t, &mut node_of, &mut local_of);
                    let (_, node, local, _) = got.unwrap();
                    proptest::prop_assert_eq!((node_of[me as usize], local_of[me as usize]), (node, local));
                }
            }
        }
    }

    #[test]
    fn a_duplicate_or_out_of_range_local_rank_fails_every_rank_alike() {
        // The reference example split in two nodes: local_rank = rank.
        let t = table(&[(1, 0), (1, 1), (2, 2), (2, 3)]);
        for me in 0..4 {
            assert_eq!(
                place(&t, me),
                Err(CollectiveError::LocalRank { rank: 2, local_rank: 2, node: 1, local_size: 2, clash: None })
            );
        }
        let t = table(&[(1, 0), (2, 0), (1, 1), (2, 0)]);
        let e = place(&t, 0).unwrap_err();
        assert_eq!(e, CollectiveError::LocalRank { rank: 3, local_rank: 0, node: 1, local_size: 2, clash: Some(1) });
        let text = std::format!("{e}");
        assert!(text.contains("rank 3 says local_rank 0 but node 1 already has local_rank 0 (rank 1)"), "{text}");
    }
}
