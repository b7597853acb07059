//! How a latency is sampled, the same way in every program (Rust ranks, C
//! ranks, MPI ranks, the reference; `bench/c/bench.h` is the C copy):
//!
//! 1. warm-up in chunks of doubling size until `warmup` operations or
//!    `warmup_ns` have passed;
//! 2. timed samples of `k` operations each, `k` chosen from the previous
//!    chunk's speed so that a sample lasts about `sample_ns`, until
//!    `samples` samples or `max_ns` of sampling.
//!
//! Every decision is rank 0's, handed to every rank by `agree` between
//! chunks (outside the timed region): fences must match, so all ranks run
//! the same number of operations, and a machine that slows down mid-run
//! stops the measurement early instead of stretching it.

use std::time::{Duration, Instant};

/// The iteration plan of a latency measurement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// The most warm-up operations.
    pub warmup: u64,
    /// The longest warm-up, in nanoseconds.
    pub warmup_ns: u64,
    /// The most timed samples.
    pub samples: u64,
    /// How long one sample should take, in nanoseconds.
    pub sample_ns: u64,
    /// The most operations in one sample.
    pub max_iters: u64,
    /// The longest sampling (all samples together), in nanoseconds.
    pub max_ns: u64,
}

impl Budget {
    /// The full run's plan.
    pub const FULL: Budget = Budget {
        warmup: 2000,
        warmup_ns: 50_000_000,
        samples: 9,
        sample_ns: 10_000_000,
        max_iters: 200_000,
        max_ns: 300_000_000,
    };
    /// The smoke run's plan: a few operations, to show that everything runs.
    pub const SMOKE: Budget = Budget { warmup: 4, warmup_ns: 1, samples: 2, sample_ns: 1, max_iters: 4, max_ns: 1 };

    /// `warmup:warmup_ns:samples:sample_ns:max_iters:max_ns`, as passed on command lines.
    #[must_use]
    pub fn arg(&self) -> String {
        format!(
            "{}:{}:{}:{}:{}:{}",
            self.warmup, self.warmup_ns, self.samples, self.sample_ns, self.max_iters, self.max_ns
        )
    }

    /// Parses [`Budget::arg`]'s format.
    pub fn parse(s: &str) -> Result<Budget, String> {
        let v: Vec<u64> = s.split(':').map(str::parse).collect::<Result<_, _>>().map_err(|e| format!("{s:?}: {e}"))?;
        match v[..] {
            [warmup, warmup_ns, samples, sample_ns, max_iters, max_ns] if samples > 0 && max_iters > 0 => {
                Ok(Budget { warmup, warmup_ns, samples, sample_ns, max_iters, max_ns })
            }
            _ => Err(format!("{s:?}: expected warmup:warmup_ns:samples:sample_ns:max_iters:max_ns")),
        }
    }

    /// Nanoseconds per operation.
    #[must_use]
    #[allow(clippy::cast_precision_loss)]
    pub fn per_op(&self, elapsed: Duration, iters: u64) -> f64 {
        elapsed.as_nanos() as f64 / iters.max(1) as f64
    }

    /// Operations per sample for operations of `per_op` nanoseconds.
    #[must_use]
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss, clippy::cast_precision_loss)]
    pub fn iters(&self, per_op: f64) -> u64 {
        let k = if per_op > 0.0 { (self.sample_ns as f64 / per_op) as u64 } else { self.max_iters };
        k.clamp(1, self.max_iters)
    }

    /// Samples `op` (see the module docs). `agree` gets this rank's
    /// proposal and returns rank 0's, which every rank follows; 0 means stop.
    pub fn sample<E>(
        &self,
        agree: impl FnMut(u64) -> Result<u64, E>,
        op: impl FnMut() -> Result<(), E>,
    ) -> Result<Vec<f64>, E> {
        Ok(self.sample_paired(agree, op, || Ok(()))?.0)
    }

    /// Samples `op` and `reference` in turn, `k` of each per sample, so that
    /// every sample of `op` has a sample of `reference` taken a moment later
    /// on the same CPUs: their ratio does not move with the placement of the
    /// processes, which on a shared virtual machine changes between runs
    /// (a cross-CPU flag exchange measured 59 ns in one run, 332 ns in the
    /// next). Sample sizes follow the pair's combined speed.
    pub fn sample_paired<E>(
        &self,
        mut agree: impl FnMut(u64) -> Result<u64, E>,
        mut op: impl FnMut() -> Result<(), E>,
        mut reference: impl FnMut() -> Result<(), E>,
    ) -> Result<(Vec<f64>, Vec<f64>), E> {
        let mut timed = |k: u64| -> Result<(Duration, Duration), E> {
            let t = Instant::now();
            for _ in 0..k {
                op()?;
            }
            let (d, t) = (t.elapsed(), Instant::now());
            for _ in 0..k {
                reference()?;
            }
            Ok((d, t.elapsed()))
        };
        let (mut k, mut done, mut spent) = (self.warmup.clamp(1, 16), 0u64, Duration::ZERO);
        let per = loop {
            let (a, b) = timed(k)?;
            (done, spent) = (done + k, spent + a + b);
            let stop = done >= self.warmup || spent.as_nanos() >= u128::from(self.warmup_ns);
            let per = self.per_op(a + b, k);
            let next = if stop { 0 } else { (2 * k).min(self.warmup - done) };
            match agree(next)? {
                0 => break per,
                n => k = n,
            }
        };
        k = agree(self.iters(per))?.max(1);
        let (mut out, mut refs, mut total) = (Vec::new(), Vec::new(), Duration::ZERO);
        loop {
            let (a, b) = timed(k)?;
            total += a + b;
            out.push(self.per_op(a, k));
            refs.push(self.per_op(b, k));
            let per = self.per_op(a + b, k);
            let stop = out.len() as u64 >= self.samples || total.as_nanos() >= u128::from(self.max_ns);
            match agree(if stop { 0 } else { self.iters(per) })? {
                0 => return Ok((out, refs)),
                n => k = n,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_round_trip() {
        assert_eq!(Budget::parse(&Budget::FULL.arg()).unwrap(), Budget::FULL);
        assert!(Budget::parse("1:2:3").is_err());
        assert!(Budget::parse("1:2:0:4:5:6").is_err());
        assert_eq!(Budget::FULL.iters(100.0), 100_000);
        assert_eq!(Budget::FULL.iters(1e12), 1);
        assert_eq!(Budget::FULL.iters(0.01), Budget::FULL.max_iters);
    }

    #[test]
    fn paired_samples_run_the_reference_as_often() {
        let full = Budget { warmup: 4, warmup_ns: u64::MAX, samples: 3, sample_ns: 1, max_iters: 5, max_ns: u64::MAX };
        let (mut ops, mut refs) = (0, 0);
        let (a, b) = full
            .sample_paired(
                Ok::<_, ()>,
                || {
                    ops += 1;
                    Ok(())
                },
                || {
                    refs += 1;
                    Ok(())
                },
            )
            .unwrap();
        assert_eq!((a.len(), b.len()), (3, 3));
        assert_eq!(ops, refs);
    }

    #[test]
    fn samples_count() {
        let b = Budget::SMOKE;
        let mut calls = 0;
        let s = b
            .sample(Ok::<_, ()>, || {
                calls += 1;
                Ok(())
            })
            .unwrap();
        assert_eq!(s.len(), 1);
        assert_eq!(calls, 4 + 1);
        // A rank that is not rank 0 follows rank 0's decisions, whatever it proposes.
        let full =
            Budget { warmup: 100, warmup_ns: u64::MAX, samples: 3, sample_ns: 1, max_iters: 5, max_ns: u64::MAX };
        let mut decisions = vec![32, 64, 0, 5, 5, 5, 0].into_iter();
        let mut ops = 0;
        let s = full
            .sample(
                |_| Ok::<_, ()>(decisions.next().unwrap()),
                || {
                    ops += 1;
                    Ok(())
                },
            )
            .unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!(ops, 16 + 32 + 64 + 3 * 5);
    }
}
