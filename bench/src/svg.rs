//! The plots, written as SVG by hand (no plotting dependency): medians as
//! lines over categories on the x axis (rank counts, vector sizes), the
//! p10–p90 spread as bars, a logarithmic time axis, an optional reference
//! as a dashed horizontal line and an optional shaded region.

use std::fmt::Write as _;

use crate::driver::RANKS;
use crate::report::{ns, size};
use crate::results::Results;
use crate::stats::Summary;
use crate::workloads::{ALLREDUCE_MAX, PIPELINE_VARIANTS, allreduce_key, allreduce_sizes, pipeline_key};

/// The width of a plot of up to 4 categories; each one more adds [`PER_X`].
const W: f64 = 760.0;
const PER_X: f64 = 40.0;
const H: f64 = 460.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 250.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 60.0;

/// One line of a plot: its points are (x category, summary).
struct Curve {
    label: String,
    color: &'static str,
    dashed: bool,
    points: Vec<(usize, Summary)>,
}

/// A plot over categories.
struct Plot {
    title: &'static str,
    x_label: &'static str,
    y_label: &'static str,
    /// The x categories' labels, evenly spaced.
    xs: Vec<String>,
    /// Categories from this one on are shaded, with this note.
    shade: Option<(usize, &'static str)>,
    /// A dashed horizontal line: its legend and value.
    reference: Option<(String, f64)>,
    curves: Vec<Curve>,
    /// Said in the middle when nothing was measured.
    empty: &'static str,
}

/// One line of the fence plot: results `<prefix>/<ranks>`.
struct FenceLine {
    prefix: &'static str,
    label: &'static str,
    color: &'static str,
    dashed: bool,
}

const FENCE_LINES: [FenceLine; 6] = [
    FenceLine { prefix: "rust/fence", label: "kpccl fence() (Rust)", color: "#1f5fbf", dashed: false },
    FenceLine { prefix: "c/fence", label: "kpccl win_fence (C)", color: "#2a9d8f", dashed: false },
    FenceLine { prefix: "rust/peer", label: "kpccl peer_fence, N/2 pairs", color: "#6a3fb5", dashed: false },
    FenceLine { prefix: "mpi/winfence", label: "Open MPI MPI_Win_fence", color: "#d62828", dashed: true },
    FenceLine { prefix: "mpi/barrier", label: "Open MPI MPI_Barrier", color: "#f77f00", dashed: true },
    FenceLine { prefix: "mpi/pscw", label: "Open MPI PSCW, N/2 pairs", color: "#9c6644", dashed: true },
];

/// Colours of the pipeline's variants (MPI's dashed) and of the allreduce's rank counts.
const PIPELINE_COLORS: [&str; 4] = ["#d62828", "#f77f00", "#6a3fb5", "#1f5fbf"];
const RANK_COLORS: [&str; 3] = ["#1f5fbf", "#2a9d8f", "#d62828"];

fn summary(r: &Results, key: &str) -> Option<Summary> {
    r.get(key).and_then(|s| Summary::of(&s.samples))
}

/// Points of `key(x)` over the categories `xs`, where measured.
fn points<T: Copy>(r: &Results, xs: &[T], key: impl Fn(T) -> String) -> Vec<(usize, Summary)> {
    xs.iter().enumerate().filter_map(|(i, &x)| summary(r, &key(x)).map(|s| (i, s))).collect()
}

fn rank_labels() -> Vec<String> {
    RANKS.iter().map(u32::to_string).collect()
}

/// The fence latency vs rank count plot (`docs/fence-latency.svg`).
#[must_use]
pub fn fence_plot(r: &Results) -> String {
    let curves = FENCE_LINES
        .iter()
        .map(|l| Curve {
            label: l.label.to_owned(),
            color: l.color,
            dashed: l.dashed,
            points: points(r, &RANKS, |n| format!("{}/{n}", l.prefix)),
        })
        .collect();
    render(&Plot {
        title: "Fence latency vs rank count (median, p10–p90 bars; log scale)",
        x_label: "ranks (processes) on 2 cores",
        y_label: "time per fence",
        xs: rank_labels(),
        shade: Some((1, "more ranks than cores")),
        reference: summary(r, "ref/flag/2").map(|s| (format!("reference, 2 procs ({})", ns(s.median)), s.median)),
        curves,
        empty: "no fence measurements",
    })
}

/// The pipeline kernel's time per sweep vs rank count, per hand-off variant.
#[must_use]
pub fn pipeline_plot(r: &Results) -> String {
    let curves = PIPELINE_VARIANTS
        .iter()
        .zip(PIPELINE_COLORS)
        .map(|((v, name), color)| Curve {
            label: name.replace('`', ""),
            color,
            dashed: v.starts_with("mpi"),
            points: points(r, &RANKS, |n| pipeline_key(v, n)),
        })
        .collect();
    render(&Plot {
        title: "Pipeline kernel (PRK Synch_p2p): time per sweep vs rank count",
        x_label: "ranks (processes) on 2 cores",
        y_label: "time per sweep",
        xs: rank_labels(),
        shade: Some((1, "more ranks than cores")),
        reference: None,
        curves,
        empty: "no pipeline measurements",
    })
}

/// The window allreduce's and `MPI_Allreduce`'s time vs vector size, per rank count.
#[must_use]
pub fn allreduce_plot(r: &Results) -> String {
    let sizes = allreduce_sizes(ALLREDUCE_MAX[0]);
    let mut curves = Vec::new();
    for (&n, color) in RANKS.iter().zip(RANK_COLORS) {
        for (lib, label, dashed) in [("kpccl", "kpccl window", false), ("mpi", "MPI_Allreduce", true)] {
            curves.push(Curve {
                label: format!("{label}, {n} ranks"),
                color,
                dashed,
                points: points(r, &sizes, |b| allreduce_key(lib, n, b)),
            });
        }
    }
    render(&Plot {
        title: "Allreduce (sum of doubles): time per call vs size",
        x_label: "vector size",
        y_label: "time per call",
        xs: sizes.iter().map(|&b| size(b)).collect(),
        shade: None,
        reference: None,
        curves,
        empty: "no allreduce measurements",
    })
}

/// The label of 10^d nanoseconds: `100 ns`, `1 µs`…
fn decade(d: i32) -> String {
    let units = ["ns", "µs", "ms", "s"];
    let (unit, rest) = (usize::try_from(d.max(0) / 3).unwrap_or(0).min(3), d.max(0) - 3 * (d.max(0) / 3).min(3));
    format!("{} {}", 10u64.pow(u32::try_from(rest).unwrap_or(0)), units[unit])
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// The SVG document of `p` (an empty plot with a note when nothing was measured).
fn render(p: &Plot) -> String {
    let series: Vec<&Curve> = p.curves.iter().filter(|c| !c.points.is_empty()).collect();
    let mut values: Vec<f64> =
        series.iter().flat_map(|c| c.points.iter().flat_map(|(_, s)| [s.p10, s.p90, s.median])).collect();
    values.extend(p.reference.as_ref().map(|r| r.1));
    values.retain(|v| v.is_finite() && *v > 0.0);
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(0.0, f64::max);
    let (d0, d1) = if values.is_empty() {
        (1.0, 4.0)
    } else {
        (lo.log10().floor(), hi.log10().ceil().max(lo.log10().floor() + 1.0))
    };
    #[allow(clippy::cast_precision_loss)]
    let width = W + PER_X * p.xs.len().saturating_sub(4) as f64;
    let plot_w = width - LEFT - RIGHT;
    let plot_h = H - TOP - BOTTOM;
    let y = |v: f64| TOP + plot_h * (1.0 - (v.max(1e-3).log10() - d0) / (d1 - d0));
    let margin = if p.xs.len() <= 4 { 0.12 } else { 0.05 };
    #[allow(clippy::cast_precision_loss)]
    let x = |i: usize| LEFT + plot_w * (margin + (1.0 - 2.0 * margin) * i as f64 / (p.xs.len().max(2) - 1) as f64);

    let mut s = String::new();
    let w = &mut s;
    let _ = writeln!(
        w,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{H}" viewBox="0 0 {width} {H}" font-family="sans-serif" font-size="12">"##
    );
    let _ = writeln!(w, r##"<rect width="{width}" height="{H}" fill="#ffffff"/>"##);
    let _ = writeln!(
        w,
        r##"<text x="{}" y="22" text-anchor="middle" font-size="15" font-weight="bold">{}</text>"##,
        width / 2.0,
        esc(p.title)
    );
    if let Some((from, note)) = p.shade.filter(|(from, _)| *from > 0 && *from < p.xs.len()) {
        let shade = (x(from - 1) + x(from)) / 2.0;
        let _ = writeln!(
            w,
            r##"<rect x="{shade:.1}" y="{TOP}" width="{:.1}" height="{plot_h}" fill="#f2f2f2"/><text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#666">{}</text>"##,
            LEFT + plot_w - shade,
            (shade + LEFT + plot_w) / 2.0,
            TOP + 14.0,
            esc(note)
        );
    }
    // Axes, decade grid and labels.
    #[allow(clippy::cast_possible_truncation)]
    for d in (d0 as i32)..=(d1 as i32) {
        let v = 10f64.powi(d);
        let yy = y(v);
        let _ = writeln!(
            w,
            r##"<line x1="{LEFT}" x2="{:.1}" y1="{yy:.1}" y2="{yy:.1}" stroke="#cccccc"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT + plot_w,
            LEFT - 6.0,
            yy + 4.0,
            esc(&decade(d))
        );
        for m in [2.0, 5.0] {
            let mv = v * m;
            if mv.log10() < d1 {
                let my = y(mv);
                let _ = writeln!(
                    w,
                    r##"<line x1="{LEFT}" x2="{:.1}" y1="{my:.1}" y2="{my:.1}" stroke="#eeeeee"/>"##,
                    LEFT + plot_w
                );
            }
        }
    }
    for (i, label) in p.xs.iter().enumerate() {
        let xx = x(i);
        let _ = writeln!(
            w,
            r##"<line x1="{xx:.1}" x2="{xx:.1}" y1="{:.1}" y2="{:.1}" stroke="#333"/><text x="{xx:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            TOP + plot_h,
            TOP + plot_h + 5.0,
            TOP + plot_h + 20.0,
            esc(label)
        );
    }
    let _ =
        writeln!(w, r##"<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#333"/>"##);
    let _ = writeln!(
        w,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
        LEFT + plot_w / 2.0,
        H - 18.0,
        esc(p.x_label)
    );
    let _ = writeln!(
        w,
        r##"<text x="18" y="{:.1}" text-anchor="middle" transform="rotate(-90 18 {:.1})">{}</text>"##,
        TOP + plot_h / 2.0,
        TOP + plot_h / 2.0,
        esc(p.y_label)
    );
    if let Some((_, v)) = &p.reference {
        let yy = y(*v);
        let _ = writeln!(
            w,
            r##"<line x1="{LEFT}" x2="{:.1}" y1="{yy:.1}" y2="{yy:.1}" stroke="#000" stroke-dasharray="2,3"/>"##,
            LEFT + plot_w
        );
    }
    #[allow(clippy::cast_precision_loss)]
    for (i, c) in series.iter().enumerate() {
        let nudge = (i as f64 - (series.len() as f64 - 1.0) / 2.0) * 4.0;
        let dash = if c.dashed { r#" stroke-dasharray="6,4""# } else { "" };
        let path: Vec<String> =
            c.points.iter().map(|(n, s)| format!("{:.1},{:.1}", x(*n) + nudge, y(s.median))).collect();
        let _ = writeln!(
            w,
            r##"<polyline points="{}" fill="none" stroke="{}" stroke-width="2"{dash}/>"##,
            path.join(" "),
            c.color
        );
        for (n, s) in &c.points {
            let xx = x(*n) + nudge;
            let _ = writeln!(
                w,
                r##"<line x1="{xx:.1}" x2="{xx:.1}" y1="{:.1}" y2="{:.1}" stroke="{}" stroke-width="1.2"/>"##,
                y(s.p90),
                y(s.p10),
                c.color
            );
            let title = format!("<title>{} @ {}: {}</title>", esc(&c.label), esc(&p.xs[*n]), esc(&ns(s.median)));
            if c.dashed {
                let _ = writeln!(
                    w,
                    r##"<rect x="{:.1}" y="{:.1}" width="7" height="7" fill="{}">{title}</rect>"##,
                    xx - 3.5,
                    y(s.median) - 3.5,
                    c.color
                );
            } else {
                let _ = writeln!(
                    w,
                    r##"<circle cx="{xx:.1}" cy="{:.1}" r="4" fill="{}">{title}</circle>"##,
                    y(s.median),
                    c.color
                );
            }
        }
    }
    // The legend.
    let lx = LEFT + plot_w + 16.0;
    let mut ly = TOP + 10.0;
    for c in &series {
        let dash = if c.dashed { r#" stroke-dasharray="6,4""# } else { "" };
        let _ = writeln!(
            w,
            r##"<line x1="{lx:.1}" x2="{:.1}" y1="{ly:.1}" y2="{ly:.1}" stroke="{}" stroke-width="2"{dash}/><text x="{:.1}" y="{:.1}">{}</text>"##,
            lx + 26.0,
            c.color,
            lx + 32.0,
            ly + 4.0,
            esc(&c.label)
        );
        ly += 22.0;
    }
    if let Some((label, _)) = &p.reference {
        let _ = writeln!(
            w,
            r##"<line x1="{lx:.1}" x2="{:.1}" y1="{ly:.1}" y2="{ly:.1}" stroke="#000" stroke-dasharray="2,3"/><text x="{:.1}" y="{:.1}">{}</text>"##,
            lx + 26.0,
            lx + 32.0,
            ly + 4.0,
            esc(label)
        );
    }
    if series.is_empty() {
        let _ =
            writeln!(w, r##"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"##, width / 2.0, H / 2.0, p.empty);
    }
    let _ = writeln!(w, "</svg>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::Series;

    fn results(pairs: &[(&str, f64)]) -> Results {
        let mut r = Results::new();
        for (k, v) in pairs {
            r.insert((*k).to_owned(), Series { unit: "ns".to_owned(), samples: vec![*v, v * 1.1, v * 0.9] });
        }
        r
    }

    #[test]
    fn plots_what_there_is() {
        let r = results(&[
            ("rust/fence/2", 150.0),
            ("rust/fence/8", 9000.0),
            ("mpi/winfence/2", 400.0),
            ("ref/flag/2", 100.0),
        ]);
        let svg = fence_plot(&r);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("kpccl fence() (Rust)"));
        assert!(!svg.contains("MPI_Barrier"));
        assert!(!svg.contains("NaN"));
        assert!(fence_plot(&Results::new()).contains("no fence measurements"));
        assert_eq!(decade(2), "100 ns");
        assert_eq!(decade(3), "1 µs");
        assert_eq!(decade(7), "10 ms");
    }

    #[test]
    fn workload_plots() {
        let r = results(&[
            ("pipeline/mpi/2", 4e6),
            ("pipeline/kpccl-signal/4", 3e6),
            ("allreduce/kpccl/2/8", 900.0),
            ("allreduce/mpi/8/16777216", 3e7),
        ]);
        let p = pipeline_plot(&r);
        assert!(p.contains("kpccl signal/wait") && p.contains("MPI send/recv"));
        assert!(!p.contains("peer_fence") && !p.contains("NaN"));
        let a = allreduce_plot(&r);
        assert!(a.contains("kpccl window, 2 ranks") && a.contains("MPI_Allreduce, 8 ranks") && a.contains("16 MiB"));
        assert!(!a.contains("kpccl window, 4 ranks"));
        assert!(allreduce_plot(&Results::new()).contains("no allreduce measurements"));
    }
}
