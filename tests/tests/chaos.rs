//! The chaos test: jobs of 2-4 ranks make and free windows in a loop while
//! the test kills (`SIGKILL`) or freezes (`SIGSTOP`) one random rank — rank 0
//! in half of the jobs — at a random moment. Every job must end (no hang),
//! every survivor must fail: with an error that names a killed rank, or
//! within the timeout after a freeze; and after one ordinary job in the same
//! segment directory nothing may be left in it — with no sweep by anyone
//! but the library itself.
//!
//! Seeded and reproducible: the seed is printed; `KPCCL_CHAOS_SEED=<n>`
//! replays a run, `KPCCL_CHAOS_JOBS=<n>` changes the job count (default 24,
//! scaled by `KPCCL_STRESS_SCALE` under qemu, at least 8).
#![allow(missing_docs, clippy::std_instead_of_core, clippy::cast_possible_truncation)]

use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use kpccl_run::{Launch, Report};
use kpccl_testkit::ScratchDir;

/// `KPCCL_TIMEOUT_MS` of the jobs whose victim is frozen.
const FROZEN_TIMEOUT_MS: u64 = 1000;
/// How long a survivor may take to fail after its peer is frozen (with the
/// timeout above): the timeout, plus a margin for a loaded 2-core machine
/// (qemu, about ten times slower, gets ten seconds).
fn frozen_bound(scale: f64) -> Duration {
    Duration::from_secs(if scale < 1.0 { 10 } else { 4 })
}
/// A bound for every other wait of the test; nothing may come near it.
const JOB_BOUND: Duration = Duration::from_secs(60);

/// splitmix64: small, seedable, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

/// Polls for `path` until `bound`; its contents.
fn wait_for(path: &Path, bound: Duration) -> Option<String> {
    let start = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            return Some(text);
        }
        if start.elapsed() > bound {
            return None;
        }
        thread::sleep(Duration::from_millis(2));
    }
}

fn signal(pid: i32, sig: i32) {
    // SAFETY: kill has no memory effects; `pid` is a rank of a job this test started.
    let rc = unsafe { libc::kill(pid, sig) };
    // ESRCH: it already exited (the job may have ended before the blow).
    assert!(rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH), "kill({pid}, {sig})");
}

/// One job: what was done to whom, and what the survivors said.
struct Job {
    nranks: u32,
    victim: u32,
    frozen: bool,
    delay_ms: u64,
}

impl Job {
    /// Job `i`: rank 0 is the victim of every even one.
    fn draw(rng: &mut Rng, i: u64) -> Self {
        let nranks = 2 + rng.below(3) as u32;
        let victim = if i.is_multiple_of(2) { 0 } else { 1 + rng.below(u64::from(nranks) - 1) as u32 };
        let frozen = rng.below(4) == 0;
        let delay_ms = rng.below(120);
        Self { nranks, victim, frozen, delay_ms }
    }

    /// Runs the job in `shm`; returns the slowest survivor's time to fail
    /// after the blow.
    fn run(&self, shm: &Path, size: usize, frozen_bound: Duration) -> Duration {
        let files = ScratchDir::under(&std::env::temp_dir(), "chaos", "files");
        let mut launch = Launch::new(self.nranks)
            .timeout(JOB_BOUND)
            .env("KPCCL_SHM_DIR", shm)
            .env("KPCCL_LOG", "off")
            .env("KPCCL_TIMEOUT_MS", if self.frozen { FROZEN_TIMEOUT_MS.to_string() } else { "0".to_owned() });
        launch = launch.env("KPCCL_OOB_TIMEOUT_MS", JOB_BOUND.as_millis().to_string());
        let args = ["churn".to_owned(), format!("dir={}", files.path().display()), format!("size={size}")];
        let job = thread::spawn(move || launch.run(env!("CARGO_BIN_EXE_kpccl-scenario"), &args));
        let case = format!("{} ranks, {} rank {} after {} ms", self.nranks, self.verb(), self.victim, self.delay_ms);
        let pid = wait_for(&files.path().join(format!("pid-{}", self.victim)), JOB_BOUND).expect("the victim starts");
        let pid: i32 = pid.trim().parse().unwrap();
        thread::sleep(Duration::from_millis(self.delay_ms));
        signal(pid, if self.frozen { libc::SIGSTOP } else { libc::SIGKILL });
        let blow = Instant::now();
        let mut slowest = Duration::ZERO;
        let mut errors = Vec::new();
        for rank in (0..self.nranks).filter(|&r| r != self.victim) {
            let bound = if self.frozen { frozen_bound } else { JOB_BOUND };
            let err = wait_for(&files.path().join(format!("err-{rank}")), bound.saturating_sub(blow.elapsed()));
            let err = err.unwrap_or_else(|| panic!("{case}: rank {rank} did not fail within {bound:?}"));
            slowest = slowest.max(blow.elapsed());
            errors.push((rank, err));
        }
        if self.frozen {
            signal(pid, libc::SIGKILL);
        }
        let report: Report = job.join().unwrap().expect("the launcher starts");
        assert!(!report.timed_out, "{case}: the job hung: {report}");
        for (rank, err) in errors {
            assert_eq!(report.status[rank as usize].code(), Some(1), "{case}: rank {rank} ended otherwise: {report}");
            // A frozen rank is alive: a survivor that timed out in a fence
            // may name the peer it waited on, or the survivor that gave up.
            let named = err.contains(&format!("rank {}", self.victim));
            assert!(named || self.frozen, "{case}: rank {rank}'s error does not name rank {}: {err}", self.victim);
        }
        println!("{case}: survivors failed within {} ms", slowest.as_millis());
        slowest
    }

    fn verb(&self) -> &'static str {
        if self.frozen { "froze" } else { "killed" }
    }
}

#[test]
fn random_kills_and_freezes_hang_nothing_name_the_rank_and_leak_nothing() {
    let seed = env_u64("KPCCL_CHAOS_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
    });
    let scale: f64 = std::env::var("KPCCL_STRESS_SCALE").ok().and_then(|s| s.parse().ok()).unwrap_or(1.0);
    let jobs = env_u64("KPCCL_CHAOS_JOBS").unwrap_or(((24.0 * scale) as u64).max(8));
    // Windows as large as the 2-core machine (and qemu) allow in a few seconds.
    let size = if scale < 1.0 { 64 << 10 } else { 1 << 20 };
    println!("chaos: seed {seed} (KPCCL_CHAOS_SEED={seed} replays it), {jobs} jobs");
    let shm = ScratchDir::new("chaos", "shm");
    let mut rng = Rng(seed);
    let start = Instant::now();
    let (mut killed, mut frozen, mut rank0) = (0, 0, 0);
    let mut slowest_frozen = Duration::ZERO;
    for i in 0..jobs {
        let job = Job::draw(&mut rng, i);
        let took = job.run(shm.path(), size, frozen_bound(scale));
        if job.frozen {
            frozen += 1;
            slowest_frozen = slowest_frozen.max(took);
        } else {
            killed += 1;
        }
        rank0 += u32::from(job.victim == 0);
    }
    let left_by_blows = shm.entries();
    // One ordinary job: creations sweep what dead creators left (nothing, if
    // creators publish by descriptor); no one else sweeps.
    let files = ScratchDir::under(&std::env::temp_dir(), "chaos", "ordinary");
    let report = Launch::new(3)
        .timeout(JOB_BOUND)
        .env("KPCCL_SHM_DIR", shm.path())
        .run(env!("CARGO_BIN_EXE_kpccl-scenario"), ["churn", &format!("dir={}", files.path().display()), "cycles=3"])
        .unwrap();
    assert!(report.success(), "the ordinary job: {report}");
    println!(
        "chaos: {jobs} jobs ({killed} killed, {frozen} frozen, rank 0 the victim in {rank0}) in {:.1} s; \
         slowest failure after a freeze {} ms; entries left by the blows: {left_by_blows:?}",
        start.elapsed().as_secs_f64(),
        slowest_frozen.as_millis()
    );
    assert_eq!(shm.entries(), Vec::<String>::new(), "seed {seed}: segments left after the ordinary job");
}
