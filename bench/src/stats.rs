//! Medians and spreads of repeated samples.

/// The summary of a set of samples: median and the 10th and 90th percentiles.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    /// The median.
    pub median: f64,
    /// The 10th percentile.
    pub p10: f64,
    /// The 90th percentile.
    pub p90: f64,
    /// The smallest sample.
    pub min: f64,
    /// How many samples.
    pub n: usize,
}

impl Summary {
    /// Summarises `samples` (NaNs ignored); `None` when there are none.
    #[must_use]
    pub fn of(samples: &[f64]) -> Option<Summary> {
        let mut v: Vec<f64> = samples.iter().copied().filter(|x| !x.is_nan()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        Some(Summary {
            median: percentile(&v, 50.0),
            p10: percentile(&v, 10.0),
            p90: percentile(&v, 90.0),
            min: v[0],
            n: v.len(),
        })
    }
}

/// The `p`th percentile of sorted `v` (linear interpolation between ranks).
#[must_use]
pub fn percentile(v: &[f64], p: f64) -> f64 {
    match v.len() {
        0 => f64::NAN,
        1 => v[0],
        n => {
            #[allow(clippy::cast_precision_loss)]
            let pos = (p / 100.0).clamp(0.0, 1.0) * (n - 1) as f64;
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let lo = pos.floor() as usize;
            let hi = (lo + 1).min(n - 1);
            #[allow(clippy::cast_precision_loss)]
            let frac = pos - lo as f64;
            v[lo] + (v[hi] - v[lo]) * frac
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles() {
        let s = Summary::of(&[5.0, 1.0, 3.0, 2.0, 4.0]).unwrap();
        assert_eq!(s.median, 3.0);
        assert_eq!(s.min, 1.0);
        assert!((s.p10 - 1.4).abs() < 1e-9);
        assert!((s.p90 - 4.6).abs() < 1e-9);
        assert_eq!(Summary::of(&[]), None);
        assert_eq!(Summary::of(&[f64::NAN, 2.0]).unwrap().median, 2.0);
    }
}
