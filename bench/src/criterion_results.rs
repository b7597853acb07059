//! The criterion micro-benchmarks' results, read from the JSON files that
//! criterion writes for each benchmark (`<dir>/<id>/new/benchmark.json`
//! names it, `estimates.json` beside it holds the estimates): no scraping of
//! its terminal output, whose layout is not a format.

use std::io;
use std::path::Path;

use serde_json::Value;

/// A criterion result: benchmark id and its time estimate `[low mid high]` in ns.
#[derive(Clone, Debug, PartialEq)]
pub struct Criterion {
    /// `layout/new/8`…
    pub id: String,
    /// Lower bound, estimate, upper bound (ns).
    pub ns: [f64; 3],
}

/// Every benchmark under criterion's output directory `dir`, sorted by id.
///
/// # Errors
/// When `dir` or a file in it cannot be read, or a file is not criterion's JSON.
pub fn read(dir: &Path) -> io::Result<Vec<Criterion>> {
    let mut out = Vec::new();
    collect(dir, &mut out)?;
    out.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(out)
}

fn collect(dir: &Path, out: &mut Vec<Criterion>) -> io::Result<()> {
    let new = dir.join("new");
    if new.join("benchmark.json").is_file() {
        out.push(one(&new)?);
    }
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        // criterion's `report/` pages and the `base`/`change` baselines hold no `new/`.
        if entry.file_type()?.is_dir() && entry.file_name() != "new" {
            collect(&entry.path(), out)?;
        }
    }
    Ok(())
}

/// One benchmark from its `new/` directory.
fn one(new: &Path) -> io::Result<Criterion> {
    let json = |name: &str| -> io::Result<Value> {
        let path = new.join(name);
        let text = std::fs::read_to_string(&path)?;
        serde_json::from_str(&text).map_err(|e| bad(&path, &e.to_string()))
    };
    let benchmark = json("benchmark.json")?;
    let id = benchmark["full_id"].as_str().ok_or_else(|| bad(new, "benchmark.json has no full_id"))?;
    Ok(Criterion { id: id.to_owned(), ns: typical(&json("estimates.json")?).ok_or_else(|| bad(new, "no estimate"))? })
}

/// The estimate criterion prints as `time:`: the slope of the linear
/// regression when it sampled linearly, the mean otherwise; with its
/// confidence interval.
fn typical(estimates: &Value) -> Option<[f64; 3]> {
    let e = Some(&estimates["slope"]).filter(|s| !s.is_null()).unwrap_or(&estimates["mean"]);
    let ci = &e["confidence_interval"];
    Some([ci["lower_bound"].as_f64()?, e["point_estimate"].as_f64()?, ci["upper_bound"].as_f64()?])
}

fn bad(path: &Path, what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("{}: {what}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_bench(root: &Path, dir: &str, id: &str, estimates: &str) {
        let new = root.join(dir).join("new");
        std::fs::create_dir_all(&new).unwrap();
        std::fs::write(new.join("benchmark.json"), format!(r#"{{"group_id":"g","full_id":"{id}"}}"#)).unwrap();
        std::fs::write(new.join("estimates.json"), estimates).unwrap();
        // A saved baseline beside it must not count twice.
        std::fs::create_dir_all(root.join(dir).join("base")).unwrap();
    }

    fn estimate(low: f64, mid: f64, high: f64) -> String {
        format!(
            r#"{{"confidence_interval":{{"confidence_level":0.95,"lower_bound":{low},"upper_bound":{high}}},"point_estimate":{mid},"standard_error":0.1}}"#
        )
    }

    #[test]
    fn reads_slope_or_mean_from_every_benchmark() {
        let root = std::env::temp_dir().join(format!("kpccl-criterion-json-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let (slope, mean) = (estimate(1.0, 2.0, 3.0), estimate(10.0, 20.0, 30.0));
        write_bench(&root, "layout_new/8", "layout/new/8", &format!(r#"{{"mean":{mean},"slope":{slope}}}"#));
        write_bench(
            &root,
            "fence_2-threads/peer",
            "fence/2-threads/peer",
            &format!(r#"{{"mean":{mean},"slope":null}}"#),
        );
        std::fs::create_dir_all(root.join("report")).unwrap();
        let got = read(&root);
        std::fs::remove_dir_all(&root).unwrap();
        let got = got.unwrap();
        assert_eq!(
            got,
            [
                Criterion { id: "fence/2-threads/peer".into(), ns: [10.0, 20.0, 30.0] },
                Criterion { id: "layout/new/8".into(), ns: [1.0, 2.0, 3.0] },
            ]
        );
    }

    #[test]
    fn a_broken_file_is_an_error_that_names_it() {
        let root = std::env::temp_dir().join(format!("kpccl-criterion-bad-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        write_bench(&root, "x", "x", "{not json");
        let got = read(&root);
        std::fs::remove_dir_all(&root).unwrap();
        let err = got.unwrap_err().to_string();
        assert!(err.contains("estimates.json"), "{err}");
    }
}
