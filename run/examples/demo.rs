//! The main demo: N ranks — plain processes, no MPI — share a window, hand
//! data around with fences, verify every word, and time the fences.
//!
//! `cargo run --release -p kpccl-run --example demo -- [-n RANKS] [--rounds R]`
//! starts the ranks itself (through this crate's [`Launch`]); under
//! `kpccl-run` it is one rank.
// Test code: std throughout, and counts that fit any pointer width.
#![allow(missing_docs, clippy::std_instead_of_core, clippy::alloc_instead_of_core, clippy::cast_possible_truncation)]

use std::process::ExitCode;
use std::time::{Duration, Instant};

use kpccl_posix::{Comm, Oob, Window};
use kpccl_run::{Launch, RunOob, parse_rank_count};

const WORDS: usize = 128 * 1024; // 1 MiB per rank

fn word(round: u64, writer: u32, i: usize) -> u64 {
    (round << 40 | u64::from(writer) << 32 | i as u64) ^ 0x5bd1_e995
}

struct Options {
    ranks: u32,
    rounds: u64,
}

fn options() -> Result<Options, String> {
    let mut o = Options { ranks: 4, rounds: 200 };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match a.as_str() {
            // The launcher's own check: a count it would refuse is a usage error here too.
            "-n" | "--ranks" => o.ranks = parse_rank_count(&value("-n")?)?,
            "--rounds" => o.rounds = value("--rounds")?.parse().map_err(|_| "--rounds takes a count")?,
            "-h" | "--help" => return Err(String::new()),
            _ => return Err(format!("unknown argument {a:?}")),
        }
    }
    Ok(o)
}

fn main() -> ExitCode {
    let o = match options() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}\nusage: demo [-n RANKS] [--rounds ROUNDS]");
            return ExitCode::from(2);
        }
    };
    let result = match RunOob::from_env() {
        Ok(Some(oob)) => rank_main(oob, &o),
        Ok(None) => launch(&o),
        Err(e) => Err(format!("cannot reach the launcher: {e}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("demo: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Starts `o.ranks` copies of this program as the ranks.
fn launch(o: &Options) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let args = ["--rounds".to_owned(), o.rounds.to_string()];
    let report = Launch::new(o.ranks)
        .timeout(Duration::from_secs(300))
        .run(&exe, &args)
        .map_err(|e| format!("cannot start the ranks: {e}"))?;
    if report.success() { Ok(()) } else { Err(format!("a rank failed: {report}")) }
}

fn rank_main(oob: RunOob, o: &Options) -> Result<(), String> {
    let (me, n) = (oob.rank(), oob.nranks());
    let comm = Comm::new(oob, me, n).map_err(|e| e.to_string())?;
    let win = comm.window(WORDS * 8).alloc().map_err(|e| e.to_string())?;
    let ring = ring(&win, o.rounds)?;
    let pair = pairs(&win, 20_000)?;
    let fence = fences(&win, 5_000)?;
    let stats = gather(comm.oob(), n, [ring.as_secs_f64(), pair, fence])?;
    if me == 0 {
        let mib = o.rounds as f64 * f64::from(n) * (WORDS * 8) as f64 / f64::from(1 << 20);
        let pairs: Vec<f64> = stats.iter().map(|s| s[1]).filter(|&v| v > 0.0).collect();
        let fences: Vec<f64> = stats.iter().map(|s| s[2]).collect();
        println!("kpccl demo: {n} ranks (separate processes, no MPI), window of {n} x 1 MiB segments");
        println!("  ring   {} rounds: {mib:.0} MiB handed to neighbours, every word verified: OK", o.rounds);
        if pairs.is_empty() {
            println!("  pairs  (one rank: no partner for peer_fence)");
        } else {
            println!("  pairs  peer_fence round trip with a partner: median {:.0} ns per fence", median(pairs) * 1e9);
        }
        println!("  fence  window fence over {n} ranks: median {:.0} ns per fence", median(fences) * 1e9);
    }
    win.free().map_err(|e| e.to_string())
}

/// Each round every rank writes its right neighbour's segment, fences, and
/// verifies what its left neighbour wrote into its own.
fn ring(win: &Window, rounds: u64) -> Result<Duration, String> {
    let (me, n) = (win.rank(), win.nranks());
    let (right, left) = ((me + 1) % n, (me + n - 1) % n);
    let mut buf = vec![0u64; WORDS];
    let start = Instant::now();
    for round in 0..rounds {
        buf.iter_mut().enumerate().for_each(|(i, w)| *w = word(round, me, i));
        win.write(right, 0, &buf).map_err(|e| e.to_string())?;
        win.fence().map_err(|e| e.to_string())?;
        win.read(me, 0, &mut buf).map_err(|e| e.to_string())?;
        if let Some(i) = (0..WORDS).find(|&i| buf[i] != word(round, left, i)) {
            return Err(format!("round {round}: word {i} from rank {left} is wrong"));
        }
        win.fence().map_err(|e| e.to_string())?;
    }
    Ok(start.elapsed())
}

/// Ranks 2i and 2i+1 hand a word back and forth with `peer_fence`; seconds per fence (0: no partner).
fn pairs(win: &Window, iters: u64) -> Result<f64, String> {
    let (me, n) = (win.rank(), win.nranks());
    let peer = me ^ 1;
    if peer >= n {
        return Ok(0.0);
    }
    let start = Instant::now();
    let mut got = [0u64];
    for i in 0..iters {
        win.write(peer, 0, &[i + u64::from(me)]).map_err(|e| e.to_string())?;
        win.peer_fence(peer).map_err(|e| e.to_string())?;
        win.read(me, 0, &mut got).map_err(|e| e.to_string())?;
        if got[0] != i + u64::from(peer) {
            return Err(format!("pair exchange {i}: got {}, expected {}", got[0], i + u64::from(peer)));
        }
        win.peer_fence(peer).map_err(|e| e.to_string())?;
    }
    Ok(start.elapsed().as_secs_f64() / (2 * iters) as f64)
}

/// Seconds per window fence.
fn fences(win: &Window, iters: u64) -> Result<f64, String> {
    let start = Instant::now();
    for _ in 0..iters {
        win.fence().map_err(|e| e.to_string())?;
    }
    Ok(start.elapsed().as_secs_f64() / iters as f64)
}

fn gather(oob: &impl Oob, n: u32, mine: [f64; 3]) -> Result<Vec<[f64; 3]>, String> {
    let send: Vec<u8> = mine.iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut recv = vec![0u8; send.len() * n as usize];
    oob.allgather(&send, &mut recv).map_err(|e| e.to_string())?;
    Ok(recv
        .chunks_exact(send.len())
        .map(|c| std::array::from_fn(|k| f64::from_le_bytes(c[k * 8..k * 8 + 8].try_into().expect("8 bytes"))))
        .collect())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
