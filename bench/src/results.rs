//! The results every benchmark program (Rust ranks, C ranks, MPI ranks, the
//! reference) appends to a file: one line per measurement,
//! `key<TAB>unit<TAB>v1,v2,...` (the samples), so that the driver collects
//! them from processes it did not start itself (mpirun's children).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs::OpenOptions;
use std::io::{self, Write as _};
use std::path::Path;

/// Samples of one measurement, pooled over every run of it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Series {
    /// `ns` (per operation), `GB/s`, `%` (CPU use)…
    pub unit: String,
    /// Every sample.
    pub samples: Vec<f64>,
}

/// Every measurement, by key (`rust/peer/2`, `mpi/winfence/8`…).
pub type Results = BTreeMap<String, Series>;

/// One result line.
#[must_use]
pub fn line(key: &str, unit: &str, samples: &[f64]) -> String {
    let mut s = format!("{key}\t{unit}\t");
    for (i, v) in samples.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        let _ = write!(s, "{v:.3}");
    }
    s.push('\n');
    s
}

/// Appends one result line to `path` (one `write` call, so lines of
/// concurrent writers do not interleave).
pub fn append(path: &Path, key: &str, unit: &str, samples: &[f64]) -> io::Result<()> {
    let mut f = OpenOptions::new().create(true).append(true).open(path)?;
    f.write_all(line(key, unit, samples).as_bytes())
}

/// Parses result lines into `into`, pooling samples of the same key;
/// ignores lines that are not results. Returns how many lines it took.
pub fn parse_into(text: &str, into: &mut Results) -> usize {
    let mut taken = 0;
    for l in text.lines() {
        let mut parts = l.split('\t');
        let (Some(key), Some(unit), Some(values), None) = (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let samples: Option<Vec<f64>> =
            values.split(',').filter(|v| !v.is_empty()).map(|v| v.trim().parse().ok()).collect();
        let Some(samples) = samples else { continue };
        let entry = into.entry(key.to_owned()).or_default();
        entry.unit = unit.to_owned();
        entry.samples.extend(samples);
        taken += 1;
    }
    taken
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mut r = Results::new();
        let text = line("rust/peer/2", "ns", &[1.0, 2.5]) + "noise\n" + &line("rust/peer/2", "ns", &[3.0]);
        assert_eq!(parse_into(&text, &mut r), 2);
        assert_eq!(r["rust/peer/2"].samples, vec![1.0, 2.5, 3.0]);
        assert_eq!(r["rust/peer/2"].unit, "ns");
    }
}
