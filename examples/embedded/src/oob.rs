//! The out-of-band collectives in static memory: a counting barrier that
//! spins, and an allgather through a shared buffer between two barriers.

use core::sync::atomic::AtomicU8;
use core::sync::atomic::AtomicU32;
use core::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};

use kpccl_core::{Oob, OobError};

/// Bytes an allgather may move in all: a record of the core's per rank.
const BUFFER: usize = crate::MAX_RANKS * core::mem::size_of::<kpccl_core::Record>();
const EINVAL: i32 = 22;

/// The shared state of one group of ranks; put it in a `static`.
#[derive(Debug)]
pub struct Group {
    arrived: AtomicU32,
    generation: AtomicU32,
    buf: [AtomicU8; BUFFER],
}

impl Group {
    /// A group no rank has used yet.
    #[must_use]
    pub const fn new() -> Self {
        Self { arrived: AtomicU32::new(0), generation: AtomicU32::new(0), buf: [const { AtomicU8::new(0) }; BUFFER] }
    }
}

impl Default for Group {
    fn default() -> Self {
        Self::new()
    }
}

/// One rank's handle on its group.
#[derive(Clone, Copy, Debug)]
pub struct StaticOob {
    group: &'static Group,
    rank: u32,
    nranks: u32,
}

impl StaticOob {
    /// Rank `rank` of the `nranks` ranks sharing `group`.
    #[must_use]
    pub const fn new(group: &'static Group, rank: u32, nranks: u32) -> Self {
        Self { group, rank, nranks }
    }

    fn wait_for_all(&self) {
        let g = self.group;
        // Acquire: this rank's view of the generation it arrives in.
        let generation = g.generation.load(Acquire);
        // AcqRel: the Release half publishes this rank's earlier writes to the
        // last arrival (RMWs chain the release sequence); the Acquire half
        // lets the last arrival see everyone's.
        if g.arrived.fetch_add(1, AcqRel) + 1 == self.nranks {
            // Relaxed: the Release store below publishes the reset too.
            g.arrived.store(0, Relaxed);
            // Release: everything the last arrival saw reaches every waiter.
            g.generation.store(generation.wrapping_add(1), Release);
        } else {
            // Acquire: pairs with the last arrival's Release store.
            while g.generation.load(Acquire) == generation {
                core::hint::spin_loop();
            }
        }
    }
}

impl Oob for StaticOob {
    fn allgather(&self, send: &[u8], recv: &mut [u8]) -> Result<(), OobError> {
        let n = self.nranks as usize;
        if recv.len() != n * send.len() || recv.len() > BUFFER {
            return Err(OobError { code: -EINVAL });
        }
        // A rank past the buffer (a misnumbered core) still takes part, so
        // that nobody waits for it; its record reaches no table, which
        // refuses it on every rank, as a rank past `nranks` within the buffer.
        let start = self.rank as usize * send.len();
        let mine = self.group.buf.get(start..start + send.len()).unwrap_or_default();
        // Relaxed: the barrier orders these stores before every rank's loads.
        mine.iter().zip(send).for_each(|(b, &v)| b.store(v, Relaxed));
        self.wait_for_all();
        // Relaxed: as above.
        recv.iter_mut().zip(&self.group.buf).for_each(|(v, b)| *v = b.load(Relaxed));
        // Nobody writes the next call's contribution before everyone has read this one.
        self.wait_for_all();
        Ok(())
    }

    fn barrier(&self) -> Result<(), OobError> {
        self.wait_for_all();
        Ok(())
    }
}
