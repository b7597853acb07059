//! Word patterns and the helpers that verify them.

/// A word no other (round, writer, index) produces: the round and writer in
/// the high half, the index in the low half, mixed so neighbours differ.
pub(crate) fn word(round: u64, writer: u32, index: usize) -> u64 {
    (round << 40 | u64::from(writer) << 32 | index as u64) ^ 0x9e37_79b9_7f4a_7c15
}

/// splitmix64: a tiny deterministic generator, identical on every rank.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A uniformly shuffled `0..n`.
    pub(crate) fn permutation(&mut self, n: u32) -> Vec<u32> {
        let mut p: Vec<u32> = (0..n).collect();
        for i in (1..p.len()).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            p.swap(i, j);
        }
        p
    }
}

/// Compares `got` with the words `(round, writer, 0..)`; the first mismatch is an error.
pub(crate) fn verify(got: &[u64], round: u64, writer: u32) -> Result<(), String> {
    match got.iter().enumerate().find(|&(i, &w)| w != word(round, writer, i)) {
        None => Ok(()),
        Some((i, &w)) => {
            Err(format!("round {round}: word {i} from rank {writer} is {w:#x}, expected {:#x}", word(round, writer, i)))
        }
    }
}

/// Open file descriptors, mappings, and kpccl entries in the segment directory.
pub(crate) fn resources(dir: &std::path::Path) -> (usize, usize, usize) {
    let count = |p: &str| std::fs::read_dir(p).map_or(0, |d| d.count());
    let maps = std::fs::read_to_string("/proc/self/maps").map_or(0, |m| m.lines().count());
    let shm = std::fs::read_dir(dir).map_or(0, |d| {
        d.filter_map(Result::ok).filter(|e| e.file_name().to_string_lossy().starts_with("kpccl-")).count()
    });
    (count("/proc/self/fd"), maps, shm)
}
