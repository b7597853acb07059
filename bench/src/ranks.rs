//! The Rust-API benchmarks, run by every rank of a job the driver launches
//! (`kpccl-bench rank <what> <tag> <budget> <out>` under the launcher).

use std::path::Path;
use std::time::{Duration, Instant};

use kpccl_core::sync::AtomicU64;
use kpccl_posix::launch::RunOob;
use kpccl_posix::{Comm, Oob, Window};

use crate::measure::Budget;
use crate::reference::{self, Spin};
use crate::results;

/// A benchmark failure inside a rank.
pub type Error = String;

fn err(e: impl std::fmt::Display) -> Error {
    e.to_string()
}

/// What a rank job measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum What {
    /// `peer_fence` between pairs (2i, 2i+1), `fence()` over all, and CPU
    /// use while waiting long.
    Fences,
    /// Window creation and teardown for every size in [`CREATE_SIZES`].
    Create,
    /// Copy bandwidth into a peer's segment against a local memcpy.
    Copy,
}

impl What {
    /// The word on the command line.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            What::Fences => "fences",
            What::Create => "create",
            What::Copy => "copy",
        }
    }

    /// Parses [`What::name`].
    pub fn parse(s: &str) -> Result<What, Error> {
        match s {
            "fences" => Ok(What::Fences),
            "create" => Ok(What::Create),
            "copy" => Ok(What::Copy),
            _ => Err(format!("unknown rank job {s:?}")),
        }
    }
}

/// Whole-window sizes of the creation benchmark (each rank owns `size / n`).
pub const CREATE_SIZES: [u64; 4] = [4 << 10, 1 << 20, 64 << 20, 1 << 30];

/// Bytes copied per operation in the copy benchmark.
pub const COPY_BYTES: usize = 8 << 20;

/// Repetitions of a creation of `size` bytes.
#[must_use]
pub fn create_reps(size: u64, smoke: bool) -> u32 {
    match (smoke, size) {
        (true, _) => 1,
        (false, s) if s >= 1 << 30 => 3,
        (false, s) if s >= 64 << 20 => 6,
        _ => 30,
    }
}

/// The rank job's arguments.
#[derive(Debug)]
pub struct Job<'a> {
    /// What to measure.
    pub what: What,
    /// The key prefix of the results (`rust`, `rust-aligned`…).
    pub tag: &'a str,
    /// Iterations.
    pub budget: Budget,
    /// The results file (rank 0 appends to it).
    pub out: &'a Path,
    /// Window sizes to create (the creation job).
    pub sizes: &'a [u64],
    /// Late arrivals to time CPU use over (the fences job; 0: none).
    pub idle_reps: u64,
}

/// Runs one rank of `job`.
pub fn run(oob: RunOob, job: &Job<'_>) -> Result<(), Error> {
    let (me, n) = (oob.rank(), oob.nranks());
    let comm = Comm::new(oob, me, n).map_err(err)?;
    match job.what {
        What::Fences => fences(&comm, job),
        What::Create => create(&comm, job),
        What::Copy => copy(&comm, job),
    }
}

/// Every rank's value, in rank order.
fn gather_u64(oob: &RunOob, v: u64) -> Result<Vec<u64>, Error> {
    let n = gather_bytes(oob, &v.to_le_bytes())?;
    Ok(n.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))).collect())
}

fn gather_bytes(oob: &RunOob, send: &[u8]) -> Result<Vec<u8>, Error> {
    let mut recv = vec![0u8; send.len() * oob.nranks() as usize];
    oob.allgather(send, &mut recv).map_err(|e| format!("allgather: {e}"))?;
    Ok(recv)
}

/// Every rank's samples, averaged per sample over the ranks for which
/// `counts(rank)`; rank 0 appends them under `key`.
fn report(comm: &Comm<RunOob>, out: &Path, key: &str, unit: &str, mine: &[f64], counts: bool) -> Result<(), Error> {
    let send: Vec<u8> = mine.iter().map(|v| if counts { *v } else { f64::NAN }).flat_map(f64::to_le_bytes).collect();
    let all = gather_bytes(comm.oob(), &send)?;
    if comm.rank() != 0 {
        return Ok(());
    }
    let per_rank: Vec<Vec<f64>> = all
        .chunks_exact(send.len().max(1))
        .map(|c| c.chunks_exact(8).map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes"))).collect())
        .collect();
    let mean: Vec<f64> = (0..mine.len())
        .map(|i| {
            let vals: Vec<f64> = per_rank.iter().map(|r| r[i]).filter(|v| !v.is_nan()).collect();
            #[allow(clippy::cast_precision_loss)]
            let m = vals.iter().sum::<f64>() / vals.len().max(1) as f64;
            m
        })
        .collect();
    results::append(out, key, unit, &mean).map_err(|e| format!("{}: {e}", out.display()))
}

fn agree(comm: &Comm<RunOob>) -> impl FnMut(u64) -> Result<u64, Error> + '_ {
    move |k| Ok(gather_u64(comm.oob(), k)?[0])
}

fn fences(comm: &Comm<RunOob>, job: &Job<'_>) -> Result<(), Error> {
    let (me, n) = (comm.rank(), comm.nranks());
    let win = comm.window(4096).alloc().map_err(err)?;
    let tag = job.tag;
    if n >= 2 {
        let peer = me ^ 1;
        let has_peer = peer < n;
        let fence = || if has_peer { win.peer_fence(peer).map_err(err) } else { Ok(()) };
        // Paired with the reference only while every rank has a CPU: its
        // spinning would take the CPUs that other pairs' fences need.
        if n == 2 {
            let (mine, theirs) = flags(&win, peer)?;
            let reference = || {
                reference::exchange(mine, theirs, Spin::Hint);
                Ok(())
            };
            let (s, r) = job.budget.sample_paired(agree(comm), fence, reference)?;
            report(comm, job.out, &format!("{tag}/peer/{n}"), "ns", &s, has_peer)?;
            report(comm, job.out, &format!("{tag}/peer-ref/{n}"), "ns", &r, has_peer)?;
        } else {
            let s = job.budget.sample(agree(comm), fence)?;
            report(comm, job.out, &format!("{tag}/peer/{n}"), "ns", &s, has_peer)?;
        }
    }
    let s = job.budget.sample(agree(comm), || win.fence().map_err(err))?;
    report(comm, job.out, &format!("{tag}/fence/{n}"), "ns", &s, true)?;
    if job.idle_reps > 0 {
        let idle = idle(&win, job.idle_reps, job.budget == Budget::SMOKE)?;
        report(comm, job.out, &format!("{tag}/idle/{n}"), "%", &idle, me != 0)?;
    }
    win.free().map_err(err)
}

/// The flags of the paired reference exchange: the first word of this
/// rank's segment and of `peer`'s (data pages, apart from the sync lines).
#[allow(unsafe_code)]
fn flags(win: &Window, peer: u32) -> Result<(&AtomicU64, &AtomicU64), Error> {
    let word = |rank: u32| -> Result<&AtomicU64, Error> {
        let seg = win.segment(rank).map_err(err)?;
        assert!(seg.len >= 8, "the fence window has a page per rank");
        // SAFETY: the segment is mapped while `win` lives, page-aligned and at
        // least 8 bytes long; this benchmark touches its first word only atomically.
        Ok(unsafe { AtomicU64::from_ptr(seg.ptr.as_ptr().cast()) })
    };
    Ok((word(win.rank())?, word(peer)?))
}

/// CPU time of this process, in nanoseconds.
#[allow(unsafe_code)]
fn cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid out-parameter.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &raw mut ts) };
    u64::try_from(ts.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(ts.tv_nsec).unwrap_or(0)
}

/// Rank 0 arrives late at a window fence; every other rank returns the CPU
/// it used while waiting, in percent of the wait.
fn idle(win: &Window, reps: u64, smoke: bool) -> Result<Vec<f64>, Error> {
    let late = if smoke { Duration::from_millis(1) } else { Duration::from_millis(200) };
    let mut out = Vec::new();
    for _ in 0..reps {
        win.fence().map_err(err)?;
        if win.rank() == 0 {
            std::thread::sleep(late);
        }
        let (t, c) = (Instant::now(), cpu_ns());
        win.fence().map_err(err)?;
        #[allow(clippy::cast_precision_loss)]
        out.push(100.0 * (cpu_ns() - c) as f64 / t.elapsed().as_nanos() as f64);
    }
    Ok(out)
}

fn create(comm: &Comm<RunOob>, job: &Job<'_>) -> Result<(), Error> {
    let (me, n) = (comm.rank(), comm.nranks());
    let smoke = job.budget == Budget::SMOKE;
    let tag = job.tag;
    // What the out-of-band collectives cost: creation makes three allgathers.
    let mut gathers = Vec::new();
    let reps = if smoke { 2 } else { 200 };
    for _ in 0..reps {
        let t = Instant::now();
        gather_bytes(comm.oob(), &[0u8; 64])?;
        #[allow(clippy::cast_precision_loss)]
        gathers.push(t.elapsed().as_nanos() as f64);
    }
    report(comm, job.out, &format!("{tag}/oob-allgather/{n}"), "ns", &gathers, true)?;
    for &size in job.sizes {
        let mine = usize::try_from(size / u64::from(n)).map_err(err)?;
        for touch in [false, true] {
            let mut samples = Vec::new();
            for _ in 0..create_reps(size, smoke) {
                comm.barrier().map_err(err)?;
                let t = Instant::now();
                let win = comm.window(mine).alloc().map_err(err)?;
                if touch {
                    for page in (0..mine).step_by(4096) {
                        win.write(me, page, &[1u8]).map_err(err)?;
                    }
                    win.fence().map_err(err)?;
                }
                win.free().map_err(err)?;
                #[allow(clippy::cast_precision_loss)]
                samples.push(t.elapsed().as_nanos() as f64);
            }
            let what = if touch { "create-touch" } else { "create" };
            report(comm, job.out, &format!("{tag}/{what}/{n}/{size}"), "ns", &samples, true)?;
        }
    }
    Ok(())
}

fn gbps(bytes: usize, d: Duration) -> f64 {
    #[allow(clippy::cast_precision_loss)]
    let b = bytes as f64;
    b / d.as_secs_f64() / 1e9
}

fn copy(comm: &Comm<RunOob>, job: &Job<'_>) -> Result<(), Error> {
    let me = comm.rank();
    let smoke = job.budget == Budget::SMOKE;
    let bytes = if smoke { 64 << 10 } else { COPY_BYTES };
    let win = comm.window(bytes).alloc().map_err(err)?;
    let (mut window, mut local, mut read) = (Vec::new(), Vec::new(), Vec::new());
    if me == 0 && comm.nranks() > 1 {
        let src: Vec<u8> = (0..bytes).map(|i| i.to_le_bytes()[0]).collect();
        let mut dst = vec![0u8; bytes];
        let mut back = vec![0u8; bytes];
        let reps = if smoke { 1 } else { 20 };
        // Warm up all three (page tables, caches) before timing.
        win.write(1, 0, &src).map_err(err)?;
        dst.copy_from_slice(&src);
        win.read(1, 0, &mut back).map_err(err)?;
        for _ in 0..job.budget.samples {
            let t = Instant::now();
            for _ in 0..reps {
                win.write(1, 0, std::hint::black_box(&src)).map_err(err)?;
            }
            window.push(gbps(bytes * reps, t.elapsed()));
            let t = Instant::now();
            for _ in 0..reps {
                std::hint::black_box(&mut dst).copy_from_slice(std::hint::black_box(&src));
            }
            local.push(gbps(bytes * reps, t.elapsed()));
            let t = Instant::now();
            for _ in 0..reps {
                win.read(1, 0, std::hint::black_box(&mut back)).map_err(err)?;
            }
            read.push(gbps(bytes * reps, t.elapsed()));
        }
        if back != src {
            return Err("the bytes read back from the peer's segment differ".to_owned());
        }
    } else {
        let k = usize::try_from(job.budget.samples).unwrap_or(0);
        (window, local, read) = (vec![f64::NAN; k], vec![f64::NAN; k], vec![f64::NAN; k]);
    }
    win.fence().map_err(err)?;
    let tag = job.tag;
    report(comm, job.out, &format!("{tag}/copy/window-write"), "GB/s", &window, me == 0)?;
    report(comm, job.out, &format!("{tag}/copy/memcpy"), "GB/s", &local, me == 0)?;
    report(comm, job.out, &format!("{tag}/copy/window-read"), "GB/s", &read, me == 0)?;
    win.free().map_err(err)
}
