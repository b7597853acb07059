//! A Rust program under `mpirun` (feature `mpi`): the node's communicator
//! from `MPI_COMM_WORLD` and from an even/odd split, a window that every
//! rank writes into its right neighbour's segment and reads back from its
//! left after a fence. Rank 0 prints `N passed, N failed`; the exit code is
//! non-zero on failure.
//!
//! ```sh
//! cargo build -p kpccl-posix --features mpi --example mpi_window
//! mpirun -np 4 target/debug/examples/mpi_window
//! ```
#![allow(missing_docs, clippy::print_stdout, clippy::print_stderr)]

use mpi::collective::SystemOperation;
use mpi::topology::{Color, Communicator};
use mpi::traits::{CommunicatorCollectives, Root};

/// One round over `comm`'s node; the number of checks that failed.
fn round<C: Communicator>(comm: &C, name: &str) -> Result<u32, kpccl_posix::Error> {
    const WORDS: usize = 256;
    let kc = kpccl_posix::mpi::node_comm(comm)?;
    let (rank, n) = (kc.rank(), kc.nranks());
    let mut failed = 0;
    if n != u32::try_from(kc.oob().communicator().size()).unwrap_or(0) || kc.local_size() != n {
        eprintln!("{name}: rank {rank}: {n} ranks, local size {}", kc.local_size());
        failed += 1;
    }
    let win = kc.window(WORDS * 8).alloc()?;
    let right = (rank + 1) % n;
    let words: Vec<u64> = (0..WORDS as u64).map(|i| u64::from(rank) << 32 | i).collect();
    win.write(right, 0, &words)?;
    win.fence()?;
    let left = (rank + n - 1) % n;
    let mut got = vec![0u64; WORDS];
    win.read(rank, 0, &mut got)?;
    let wrong = got.iter().enumerate().filter(|&(i, &w)| w != u64::from(left) << 32 | i as u64).count();
    if wrong > 0 {
        eprintln!("{name}: rank {rank}: {wrong} of {WORDS} words from rank {left} are wrong");
        failed += 1;
    }
    win.free()?;
    Ok(failed)
}

fn main() {
    let universe = mpi::initialize().expect("MPI is initialized once");
    let world = universe.world();
    let me = world.rank();
    let halves = world.split_by_color(Color::with_value(me % 2)).expect("every rank has a colour");
    let (mut passed, mut failed) = (0u32, 0u32);
    for (comm, name) in [(&world, "MPI_COMM_WORLD"), (&halves, "even/odd split")] {
        match round(comm, name) {
            Ok(0) => passed += 1,
            Ok(f) => failed += f,
            Err(e) => {
                eprintln!("{name}: rank {me}: {e}");
                failed += 1;
            }
        }
    }
    let (mut all_passed, mut all_failed) = (0u32, 0u32);
    let root = world.process_at_rank(0);
    if me == 0 {
        root.reduce_into_root(&passed, &mut all_passed, SystemOperation::sum());
        root.reduce_into_root(&failed, &mut all_failed, SystemOperation::sum());
        println!("{all_passed} passed, {all_failed} failed");
    } else {
        root.reduce_into(&passed, SystemOperation::sum());
        root.reduce_into(&failed, SystemOperation::sum());
    }
    world.barrier();
    drop(universe);
    std::process::exit(i32::from(failed > 0));
}
