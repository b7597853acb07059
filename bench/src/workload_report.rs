//! The report's section on the real workloads: the pipeline kernel and the
//! window allreduce, each as a ratio to Open MPI measured in the same job,
//! and their targets.

use std::fmt::Write as _;

use crate::driver::RANKS;
use crate::report::{get, median, ns, ratio, size, spread_cell};
use crate::results::Results;
use crate::workloads::{
    ALLREDUCE_MAX, ALLREDUCE_ROUNDS, PIPELINE_FLOOR, PIPELINE_FULL, PIPELINE_VARIANTS, allreduce_key, allreduce_sizes,
    pipeline_key,
};

/// A workload target: what, the measured ratio (and where), what is wanted, met?
#[derive(Clone, Debug, PartialEq)]
pub struct WorkloadTarget {
    /// The target, in words.
    pub what: String,
    /// The worst measured ratio, in words (with where it was measured).
    pub measured: String,
    /// The bound.
    pub wanted: String,
    /// `Some(true)` met, `Some(false)` missed, `None` not (fully) measured.
    pub met: Option<bool>,
}

/// `key`'s median over `base`'s, when both were measured.
fn over(r: &Results, key: &str, base: &str) -> Option<f64> {
    median(r, key).zip(median(r, base)).filter(|(_, b)| *b > 0.0).map(|(a, b)| a / b)
}

/// The worst of `ratios` against `bound`; `None` measured if any is missing.
fn worst(what: String, wanted: String, bound: f64, ratios: &[(String, Option<f64>)]) -> WorkloadTarget {
    let all = ratios.iter().all(|(_, r)| r.is_some());
    let max = ratios.iter().filter_map(|(at, r)| r.map(|r| (at, r))).max_by(|a, b| a.1.total_cmp(&b.1));
    WorkloadTarget {
        what,
        measured: max.map_or_else(|| "—".to_owned(), |(at, r)| format!("worst {r:.2}× ({at})")),
        wanted,
        met: max.filter(|_| all).map(|(_, r)| r <= bound),
    }
}

/// The workload targets, evaluated on `r`.
#[must_use]
pub fn targets(r: &Results) -> Vec<WorkloadTarget> {
    let pipeline = |variant: &str, bound: f64, name: &str| {
        let ratios: Vec<(String, Option<f64>)> = [2, 4]
            .iter()
            .map(|&n| (format!("{n} ranks"), over(r, &pipeline_key(variant, n), &pipeline_key("mpi", n))))
            .collect();
        // What the bound asks of the hand-offs: MPI's time is the floor (the
        // sweeps without any hand-off) plus MPI's hand-offs.
        let asks: Vec<String> = [2, 4]
            .iter()
            .filter_map(|&n| {
                let mpi = over(r, &pipeline_key("mpi", n), &pipeline_key(PIPELINE_FLOOR, n))?;
                Some(format!("{n} ranks: MPI {mpi:.2}× the floor, so ≤ {:.2}× the floor", bound * mpi))
            })
            .collect();
        let asks = if asks.is_empty() { String::new() } else { format!(" ({})", asks.join("; ")) };
        worst(
            format!("pipeline kernel, {name}, 2 and 4 ranks"),
            format!("≤ {bound} × MPI send/recv{asks}"),
            bound,
            &ratios,
        )
    };
    let allreduce = |from: u64, bound: f64| {
        let ratios: Vec<(String, Option<f64>)> = RANKS
            .iter()
            .flat_map(|&n| {
                allreduce_sizes(ALLREDUCE_MAX[0]).into_iter().filter(move |&b| b >= from).map(move |b| {
                    (
                        format!("{n} ranks, {}", size(b)),
                        over(r, &allreduce_key("kpccl", n, b), &allreduce_key("mpi", n, b)),
                    )
                })
            })
            .collect();
        let sizes = if from > 8 { format!("{} to 16 MiB", size(from)) } else { "8 B to 16 MiB".to_owned() };
        worst(
            format!("window allreduce, {sizes}, 2, 4 and 8 ranks"),
            format!("≤ {bound} × `MPI_Allreduce`"),
            bound,
            &ratios,
        )
    };
    vec![
        pipeline("kpccl-fence", 1.0, "`peer_fence` form"),
        pipeline("kpccl-signal", 0.8, "signal/wait form"),
        allreduce(8, 1.0),
        allreduce(1 << 20, 0.6),
    ]
}

/// Appends the section, when either workload was measured; `svgs` link the
/// pipeline's and the allreduce's plots.
pub fn section(w: &mut String, r: &Results, smoke: bool, svgs: [Option<&str>; 2]) {
    let has = |prefix: &str| r.keys().any(|k| k.starts_with(prefix));
    if !has("pipeline/") && !has("allreduce/") {
        return;
    }
    let _ = writeln!(w, "\n## Real workloads\n");
    let _ = writeln!(w, "| Target | Measured | Wanted | Met? |\n|---|---|---|---|");
    for t in targets(r) {
        let met = match t.met {
            _ if smoke => "— (smoke run)",
            Some(true) => "**met**",
            Some(false) => "**missed**",
            None => "not measured",
        };
        let _ = writeln!(w, "| {} | {} | {} | {met} |", t.what, t.measured, t.wanted);
    }
    pipeline_table(w, r, svgs[0]);
    allreduce_table(w, r, svgs[1]);
}

fn pipeline_table(w: &mut String, r: &Results, svg: Option<&str>) {
    let p = PIPELINE_FULL;
    let _ = writeln!(
        w,
        "\n### Pipeline kernel (Parallel Research Kernels, Synch_p2p)\n\n\
         `bench/c/pipeline.c`: a {} × {} grid in strips of rows, one per rank; for every column rank r \
         waits for r-1 to finish it, computes its rows of it reading r-1's last row in place, and hands \
         it to r+1; after each sweep the last rank hands the corner back to rank 0. One warm-up sweep, \
         then {} timed; every run is checked as PRK checks it (the corner equals (sweeps+1)(m+n-2)). The \
         four hand-offs (and the floor below) run in one `mpirun` job on the same strips, interleaved \
         ({} repetitions of A B C D E): Open MPI's zero-byte `MPI_Send`/`MPI_Recv` (PRK's MPI+SHM code), a count of finished \
         columns polled in the shared window with `MPI_Win_sync` (spinning then yielding, like kpccl), \
         kpccl `peer_fence` with the left neighbour before a column and the right one after it, and \
         kpccl `peer_wait(left)` / `peer_signal(right)`. Time per timed sweep of the slowest rank, \
         median (p10 – p90) of the repetitions; × MPI is over the send/recv median of the same job.\n",
        p.m, p.n, p.sweeps, p.reps
    );
    let head: Vec<&str> = PIPELINE_VARIANTS.iter().map(|(_, name)| *name).collect();
    let _ = writeln!(
        w,
        "| Ranks | {} | × MPI | {} | × MPI | {} | × MPI | {} | × MPI |",
        head[0], head[1], head[2], head[3]
    );
    let _ = writeln!(w, "|---|---|---|---|---|---|---|---|---|");
    for n in RANKS {
        let base = pipeline_key("mpi", n);
        if get(r, &base).is_none() && PIPELINE_VARIANTS.iter().all(|(v, _)| get(r, &pipeline_key(v, n)).is_none()) {
            continue;
        }
        let cells: Vec<String> = PIPELINE_VARIANTS
            .iter()
            .map(|(v, _)| {
                let key = pipeline_key(v, n);
                format!("{} | {}", spread_cell(get(r, &key)), ratio(over(r, &key, &base)))
            })
            .collect();
        let _ = writeln!(w, "| {n} | {} |", cells.join(" | "));
    }
    floor_table(w, r);
    if let Some(svg) = svg {
        let _ = writeln!(w, "\n![Pipeline time per sweep vs rank count]({svg})");
    }
}

/// Each variant over the same sweeps with no synchronisation: what the
/// hand-offs cost, and how far below MPI a variant can possibly go.
fn floor_table(w: &mut String, r: &Results) {
    let rows: Vec<u32> =
        RANKS.iter().copied().filter(|&n| get(r, &pipeline_key(PIPELINE_FLOOR, n)).is_some()).collect();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        w,
        "\nThe same sweeps with no hand-off at all (`unsynced`, run in the same job; its results are wrong and \
         not checked) are the floor: no hand-off can make a sweep cheaper. Each variant's median over it:\n"
    );
    let head: Vec<&str> = PIPELINE_VARIANTS.iter().map(|(_, name)| *name).collect();
    let _ = writeln!(w, "| Ranks | no hand-off | {} | {} | {} | {} |", head[0], head[1], head[2], head[3]);
    let _ = writeln!(w, "|---|---|---|---|---|---|");
    for n in rows {
        let floor = pipeline_key(PIPELINE_FLOOR, n);
        let cells: Vec<String> =
            PIPELINE_VARIANTS.iter().map(|(v, _)| ratio(over(r, &pipeline_key(v, n), &floor))).collect();
        let _ = writeln!(w, "| {n} | {} | {} |", spread_cell(get(r, &floor)), cells.join(" | "));
    }
}

fn allreduce_table(w: &mut String, r: &Results, svg: Option<&str>) {
    let _ = writeln!(
        w,
        "\n### Window allreduce (`examples/kpccl_allreduce.c`)\n\n\
         The example users copy: a sum of doubles through a kpccl window — up to 256 B (2 ranks) \
         or 1 KiB (4 and 8 ranks on 2 cores) every rank reduces the whole vector after one window \
         fence; above, 1 MiB at a time, each rank reduces its 1/N share reading its peers' segments \
         in place, a fence, and every rank gathers the shares (two fences); outputs larger than \
         four times a core's L2 cache, divided among the ranks sharing the core, are written with \
         non-temporal stores. \
         Every size is first checked exactly against the expected sums and `MPI_Allreduce`; then \
         both are timed in the same job, interleaved ({ALLREDUCE_ROUNDS} samples each of about 5 ms of \
         calls). Time per call of the slowest rank, median; × is kpccl over `MPI_Allreduce`.\n"
    );
    let ranks: Vec<u32> =
        RANKS.iter().copied().filter(|&n| r.keys().any(|k| k.starts_with(&format!("allreduce/kpccl/{n}/")))).collect();
    if ranks.is_empty() {
        return;
    }
    let mut head = String::from("| Size |");
    let mut rule = String::from("|---|");
    for n in &ranks {
        let _ = write!(head, " kpccl, {n} ranks | MPI, {n} ranks | × |");
        rule.push_str("---|---|---|");
    }
    let _ = writeln!(w, "{head}\n{rule}");
    for b in allreduce_sizes(ALLREDUCE_MAX[0]) {
        let mut row = format!("| {} |", size(b));
        let mut any = false;
        for &n in &ranks {
            let (k, m) = (allreduce_key("kpccl", n, b), allreduce_key("mpi", n, b));
            any |= get(r, &k).is_some();
            let cell = |key: &str| median(r, key).map_or_else(|| "—".to_owned(), ns);
            let _ = write!(row, " {} | {} | {} |", cell(&k), cell(&m), ratio(over(r, &k, &m)));
        }
        if any {
            let _ = writeln!(w, "{row}");
        }
    }
    if let Some(svg) = svg {
        let _ = writeln!(w, "\n![Allreduce time vs size]({svg})");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::Series;

    fn put(r: &mut Results, key: &str, v: f64) {
        r.insert(key.to_owned(), Series { unit: "ns".to_owned(), samples: vec![v] });
    }

    #[test]
    fn targets_take_the_worst_ratio_and_need_every_measurement() {
        let mut r = Results::new();
        for n in [2, 4] {
            put(&mut r, &pipeline_key("mpi", n), 100.0);
            put(&mut r, &pipeline_key("kpccl-fence", n), if n == 4 { 120.0 } else { 90.0 });
            put(&mut r, &pipeline_key("kpccl-signal", n), 70.0);
        }
        let t = targets(&r);
        assert_eq!(t[0].met, Some(false));
        assert_eq!(t[0].measured, "worst 1.20× (4 ranks)");
        assert_eq!(t[1].met, Some(true));
        // One allreduce size measured: nothing is judged on part of the sweep.
        put(&mut r, &allreduce_key("kpccl", 2, 8), 1.0);
        put(&mut r, &allreduce_key("mpi", 2, 8), 2.0);
        assert_eq!(targets(&r)[2].met, None);
        assert_eq!(targets(&r)[2].measured, "worst 0.50× (2 ranks, 8 B)");
        let mut s = String::new();
        section(&mut s, &r, false, [Some("docs/p.svg"), None]);
        assert!(s.contains("| 2 | ") && s.contains("1.20×") && s.contains("docs/p.svg"));
        assert!(s.contains("| 8 B | 1.00 ns | 2.00 ns | 0.50× |"));
    }

    #[test]
    fn nothing_measured_adds_nothing() {
        let mut s = String::new();
        section(&mut s, &Results::new(), false, [None, None]);
        assert!(s.is_empty());
    }
}
