//! The plot of fence latency vs rank count, written as SVG by hand (no
//! plotting dependency): medians as lines, the p10–p90 spread as bars, a
//! logarithmic latency axis, the reference as a dashed horizontal line.

use std::fmt::Write as _;

use crate::driver::RANKS;
use crate::report::ns;
use crate::results::Results;
use crate::stats::Summary;

const W: f64 = 760.0;
const H: f64 = 460.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 250.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 60.0;

/// One line of the plot.
struct Line {
    prefix: &'static str,
    label: &'static str,
    color: &'static str,
    dashed: bool,
}

const LINES: [Line; 6] = [
    Line { prefix: "rust/fence", label: "kpccl fence() (Rust)", color: "#1f5fbf", dashed: false },
    Line { prefix: "c/fence", label: "kpccl win_fence (C)", color: "#2a9d8f", dashed: false },
    Line { prefix: "rust/peer", label: "kpccl peer_fence, N/2 pairs", color: "#6a3fb5", dashed: false },
    Line { prefix: "mpi/winfence", label: "Open MPI MPI_Win_fence", color: "#d62828", dashed: true },
    Line { prefix: "mpi/barrier", label: "Open MPI MPI_Barrier", color: "#f77f00", dashed: true },
    Line { prefix: "mpi/pscw", label: "Open MPI PSCW, N/2 pairs", color: "#9c6644", dashed: true },
];

/// The label of 10^d nanoseconds: `100 ns`, `1 µs`…
fn decade(d: i32) -> String {
    let units = ["ns", "µs", "ms", "s"];
    let (unit, rest) = (usize::try_from(d.max(0) / 3).unwrap_or(0).min(3), d.max(0) - 3 * (d.max(0) / 3).min(3));
    format!("{} {}", 10u64.pow(u32::try_from(rest).unwrap_or(0)), units[unit])
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// The SVG document for `r` (an empty plot with a note when nothing was measured).
#[must_use]
pub fn fence_plot(r: &Results) -> String {
    let series: Vec<(&Line, Vec<(u32, Summary)>)> = LINES
        .iter()
        .map(|l| {
            let pts = RANKS
                .iter()
                .filter_map(|&n| {
                    r.get(&format!("{}/{n}", l.prefix)).and_then(|s| Summary::of(&s.samples)).map(|s| (n, s))
                })
                .collect();
            (l, pts)
        })
        .filter(|(_, p): &(_, Vec<_>)| !p.is_empty())
        .collect();
    let reference = r.get("ref/flag/2").and_then(|s| Summary::of(&s.samples));
    let mut values: Vec<f64> =
        series.iter().flat_map(|(_, p)| p.iter().flat_map(|(_, s)| [s.p10, s.p90, s.median])).collect();
    values.extend(reference.map(|s| s.median));
    values.retain(|v| v.is_finite() && *v > 0.0);
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(0.0, f64::max);
    let (d0, d1) = if values.is_empty() {
        (1.0, 4.0)
    } else {
        (lo.log10().floor(), hi.log10().ceil().max(lo.log10().floor() + 1.0))
    };
    let plot_w = W - LEFT - RIGHT;
    let plot_h = H - TOP - BOTTOM;
    let y = |v: f64| TOP + plot_h * (1.0 - (v.max(1e-3).log10() - d0) / (d1 - d0));
    #[allow(clippy::cast_precision_loss)]
    let x = |n: u32| {
        let i = RANKS.iter().position(|&k| k == n).unwrap_or(0) as f64;
        LEFT + plot_w * (0.12 + 0.76 * i / (RANKS.len() - 1).max(1) as f64)
    };

    let mut s = String::new();
    let w = &mut s;
    let _ = writeln!(
        w,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"##
    );
    let _ = writeln!(w, r##"<rect width="{W}" height="{H}" fill="#ffffff"/>"##);
    let _ = writeln!(
        w,
        r##"<text x="{}" y="22" text-anchor="middle" font-size="15" font-weight="bold">Fence latency vs rank count (median, p10–p90 bars; log scale)</text>"##,
        W / 2.0
    );
    // The oversubscribed region: more ranks than the 2 cores (4 and 8).
    let shade = (x(2) + x(4)) / 2.0;
    let _ = writeln!(
        w,
        r##"<rect x="{shade:.1}" y="{TOP}" width="{:.1}" height="{plot_h}" fill="#f2f2f2"/><text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#666">more ranks than cores</text>"##,
        LEFT + plot_w - shade,
        (shade + LEFT + plot_w) / 2.0,
        TOP + 14.0
    );
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
    for n in RANKS {
        let xx = x(n);
        let _ = writeln!(
            w,
            r##"<line x1="{xx:.1}" x2="{xx:.1}" y1="{:.1}" y2="{:.1}" stroke="#333"/><text x="{xx:.1}" y="{:.1}" text-anchor="middle">{n}</text>"##,
            TOP + plot_h,
            TOP + plot_h + 5.0,
            TOP + plot_h + 20.0
        );
    }
    let _ =
        writeln!(w, r##"<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#333"/>"##);
    let _ = writeln!(
        w,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="middle">ranks (processes) on 2 cores</text>"##,
        LEFT + plot_w / 2.0,
        H - 18.0
    );
    let _ = writeln!(
        w,
        r##"<text x="18" y="{:.1}" text-anchor="middle" transform="rotate(-90 18 {:.1})">time per fence</text>"##,
        TOP + plot_h / 2.0,
        TOP + plot_h / 2.0
    );
    // The reference.
    if let Some(rf) = reference {
        let yy = y(rf.median);
        let _ = writeln!(
            w,
            r##"<line x1="{LEFT}" x2="{:.1}" y1="{yy:.1}" y2="{yy:.1}" stroke="#000" stroke-dasharray="2,3"/>"##,
            LEFT + plot_w
        );
    }
    // The series.
    #[allow(clippy::cast_precision_loss)]
    for (i, (l, pts)) in series.iter().enumerate() {
        let nudge = (i as f64 - (series.len() as f64 - 1.0) / 2.0) * 4.0;
        let dash = if l.dashed { r#" stroke-dasharray="6,4""# } else { "" };
        let path: Vec<String> = pts.iter().map(|(n, s)| format!("{:.1},{:.1}", x(*n) + nudge, y(s.median))).collect();
        let _ = writeln!(
            w,
            r##"<polyline points="{}" fill="none" stroke="{}" stroke-width="2"{dash}/>"##,
            path.join(" "),
            l.color
        );
        for (n, s) in pts {
            let xx = x(*n) + nudge;
            let _ = writeln!(
                w,
                r##"<line x1="{xx:.1}" x2="{xx:.1}" y1="{:.1}" y2="{:.1}" stroke="{}" stroke-width="1.2"/>"##,
                y(s.p90),
                y(s.p10),
                l.color
            );
            if l.dashed {
                let _ = writeln!(
                    w,
                    r##"<rect x="{:.1}" y="{:.1}" width="7" height="7" fill="{}"><title>{} @ {n}: {}</title></rect>"##,
                    xx - 3.5,
                    y(s.median) - 3.5,
                    l.color,
                    esc(l.label),
                    esc(&ns(s.median))
                );
            } else {
                let _ = writeln!(
                    w,
                    r##"<circle cx="{xx:.1}" cy="{:.1}" r="4" fill="{}"><title>{} @ {n}: {}</title></circle>"##,
                    y(s.median),
                    l.color,
                    esc(l.label),
                    esc(&ns(s.median))
                );
            }
        }
    }
    // The legend.
    let lx = LEFT + plot_w + 16.0;
    let mut ly = TOP + 10.0;
    for (l, _) in &series {
        let dash = if l.dashed { r#" stroke-dasharray="6,4""# } else { "" };
        let _ = writeln!(
            w,
            r##"<line x1="{lx:.1}" x2="{:.1}" y1="{ly:.1}" y2="{ly:.1}" stroke="{}" stroke-width="2"{dash}/><text x="{:.1}" y="{:.1}">{}</text>"##,
            lx + 26.0,
            l.color,
            lx + 32.0,
            ly + 4.0,
            esc(l.label)
        );
        ly += 22.0;
    }
    if let Some(rf) = reference {
        let _ = writeln!(
            w,
            r##"<line x1="{lx:.1}" x2="{:.1}" y1="{ly:.1}" y2="{ly:.1}" stroke="#000" stroke-dasharray="2,3"/><text x="{:.1}" y="{:.1}">reference, 2 procs ({})</text>"##,
            lx + 26.0,
            lx + 32.0,
            ly + 4.0,
            esc(&ns(rf.median))
        );
    }
    if series.is_empty() {
        let _ = writeln!(
            w,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="middle">no fence measurements</text>"##,
            W / 2.0,
            H / 2.0
        );
    }
    let _ = writeln!(w, "</svg>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::Series;

    #[test]
    fn plots_what_there_is() {
        let mut r = Results::new();
        for (k, v) in
            [("rust/fence/2", 150.0), ("rust/fence/8", 9000.0), ("mpi/winfence/2", 400.0), ("ref/flag/2", 100.0)]
        {
            r.insert(k.to_owned(), Series { unit: "ns".to_owned(), samples: vec![v, v * 1.1, v * 0.9] });
        }
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
}
