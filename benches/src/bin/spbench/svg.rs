//! Plots written as SVG by hand: a strip plot (one box and the points of each category) and a
//! scatter plot, on linear or log axes; and the run's plots built from the summary's entries.

use std::fmt::Write as _;
use std::path::Path;

use sparse_blas::{Error, Result};

use crate::ops::Op;
use crate::report::{Entry, Reference};

const PALETTE: [&str; 10] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
];
const FONT: &str = "font-family=\"sans-serif\"";

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Point markers; a scatter plot tells precisions apart by them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    Circle,
    Square,
    Triangle,
    Diamond,
}

const SHAPES: [Shape; 4] = [
    Shape::Circle,
    Shape::Square,
    Shape::Triangle,
    Shape::Diamond,
];

/// An SVG document being written.
struct Svg {
    width: f64,
    height: f64,
    body: String,
}

impl Svg {
    fn new(width: f64, height: f64) -> Self {
        Svg {
            width,
            height,
            body: String::new(),
        }
    }

    fn line(&mut self, (x1, y1): (f64, f64), (x2, y2): (f64, f64), stroke: &str, dashed: bool) {
        let dash = if dashed {
            " stroke-dasharray=\"4 3\""
        } else {
            ""
        };
        let _ = writeln!(
            self.body,
            "<line x1=\"{x1:.1}\" y1=\"{y1:.1}\" x2=\"{x2:.1}\" y2=\"{y2:.1}\" stroke=\"{stroke}\"{dash}/>"
        );
    }

    fn rect(&mut self, (x, y): (f64, f64), (w, h): (f64, f64), fill: &str, stroke: &str) {
        let _ = writeln!(
            self.body,
            "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{h:.1}\" fill=\"{fill}\" stroke=\"{stroke}\"/>"
        );
    }

    fn circle(&mut self, at: (f64, f64), color: &str, filled: bool) {
        self.marker(at, Shape::Circle, color, filled);
    }

    fn marker(&mut self, (x, y): (f64, f64), shape: Shape, color: &str, filled: bool) {
        let fill = if filled { color } else { "none" };
        let paint = format!("fill=\"{fill}\" stroke=\"{color}\"");
        let _ = match shape {
            Shape::Circle => writeln!(
                self.body,
                "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"2.5\" {paint}/>"
            ),
            Shape::Square => writeln!(
                self.body,
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"5\" height=\"5\" {paint}/>",
                x - 2.5,
                y - 2.5
            ),
            Shape::Triangle => writeln!(
                self.body,
                "<polygon points=\"{x:.1},{:.1} {:.1},{:.1} {:.1},{:.1}\" {paint}/>",
                y - 3.0,
                x - 3.0,
                y + 2.5,
                x + 3.0,
                y + 2.5
            ),
            Shape::Diamond => writeln!(
                self.body,
                "<polygon points=\"{x:.1},{:.1} {:.1},{y:.1} {x:.1},{:.1} {:.1},{y:.1}\" {paint}/>",
                y - 3.2,
                x + 3.2,
                y + 3.2,
                x - 3.2
            ),
        };
    }

    /// Text anchored at `start`, `middle` or `end`, turned by `rotate` degrees about its anchor.
    fn text(&mut self, (x, y): (f64, f64), anchor: &str, size: u32, rotate: f64, text: &str) {
        let turn = if rotate == 0.0 {
            String::new()
        } else {
            format!(" transform=\"rotate({rotate} {x:.1} {y:.1})\"")
        };
        let _ = writeln!(
            self.body,
            "<text x=\"{x:.1}\" y=\"{y:.1}\" text-anchor=\"{anchor}\" font-size=\"{size}\" {FONT}{turn}>{}</text>",
            escape(text)
        );
    }

    fn finish(self) -> String {
        format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w:.0}\" height=\"{h:.0}\" viewBox=\"0 0 {w:.0} {h:.0}\">\n\
             <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n{}</svg>\n",
            self.body,
            w = self.width,
            h = self.height
        )
    }
}

/// A value axis: its range, and whether it is logarithmic.
struct Axis {
    label: String,
    log: bool,
    lo: f64,
    hi: f64,
}

impl Axis {
    /// The axis over `values` (positive ones only when logarithmic), always including `keep`.
    fn fit(label: &str, log: bool, values: &[f64], keep: Option<f64>) -> Self {
        let usable = values
            .iter()
            .chain(keep.as_ref())
            .copied()
            .filter(|v| v.is_finite() && (!log || *v > 0.0));
        let (lo, hi) = usable.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
        let (lo, hi) = if lo.is_finite() {
            (lo, hi)
        } else if log {
            (0.1, 10.0)
        } else {
            (0.0, 1.0)
        };
        let (lo, hi) = if log {
            let (l, h) = (lo.log10(), hi.log10());
            let pad = ((h - l) * 0.05).max(0.05);
            (10f64.powf(l - pad), 10f64.powf(h + pad))
        } else {
            let lo = lo.min(0.0);
            let pad = ((hi - lo) * 0.05).max(1e-9);
            (lo, hi + pad)
        };
        Axis {
            label: label.to_string(),
            log,
            lo,
            hi,
        }
    }

    /// Where `v` falls between pixel `from` (at lo) and `to` (at hi).
    fn place(&self, v: f64, from: f64, to: f64) -> f64 {
        let t = if self.log {
            (v.max(self.lo).log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        };
        from + t.clamp(0.0, 1.0) * (to - from)
    }

    fn ticks(&self) -> Vec<f64> {
        if self.log {
            let (a, b) = (
                self.lo.log10().floor() as i32,
                self.hi.log10().ceil() as i32,
            );
            // Decades, else 1-2-5 steps, else every digit: the first that gives two ticks.
            for mantissas in [
                &[1.0][..],
                &[1.0, 2.0, 5.0],
                &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0],
            ] {
                let ticks: Vec<f64> = (a..=b)
                    .flat_map(|e| mantissas.iter().map(move |m| m * 10f64.powi(e)))
                    .filter(|v| *v >= self.lo && *v <= self.hi)
                    .collect();
                if ticks.len() >= 2 {
                    return ticks;
                }
            }
        }
        linear_ticks(self.lo, self.hi)
    }
}

/// About five round values (steps of 1, 2 or 5 times a power of ten) from `lo` to `hi`.
fn linear_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let raw = (hi - lo) / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let first = (lo / step).ceil() as i64;
    let last = (hi / step).floor() as i64;
    (first..=last).map(|i| i as f64 * step).collect()
}

fn tick_label(v: f64) -> String {
    let a = v.abs();
    if a != 0.0 && !(1e-3..1e5).contains(&a) {
        format!("{v:.0e}")
    } else {
        // Six significant digits at most, without the noise of `i * step`.
        let scale = 10f64.powi(5 - a.max(1e-3).log10().floor() as i32);
        format!("{}", (v * scale).round() / scale)
    }
}

/// The plotting area of a chart.
struct Frame {
    left: f64,
    top: f64,
    right: f64,
    bottom: f64,
}

/// Draws the title, the frame and the y axis with its ticks and grid.
fn frame_and_y(svg: &mut Svg, f: &Frame, title: &str, y: &Axis, guide: Option<f64>) {
    svg.text((f.left, 20.0), "start", 14, 0.0, title);
    for t in y.ticks() {
        let py = y.place(t, f.bottom, f.top);
        svg.line((f.left, py), (f.right, py), "#e6e6e6", false);
        svg.text((f.left - 6.0, py + 4.0), "end", 11, 0.0, &tick_label(t));
    }
    if let Some(g) = guide {
        let py = y.place(g, f.bottom, f.top);
        svg.line((f.left, py), (f.right, py), "#444", true);
    }
    svg.rect(
        (f.left, f.top),
        (f.right - f.left, f.bottom - f.top),
        "none",
        "#333",
    );
    let mid = (f.top + f.bottom) / 2.0;
    svg.text((16.0, mid), "middle", 12, -90.0, &y.label);
}

/// One category of a strip plot: its name, its color (a palette index) and its values
/// (`true` draws the point filled).
pub struct Strip {
    pub name: String,
    pub color: usize,
    pub values: Vec<(f64, bool)>,
}

/// The width of a title in pixels, about.
fn title_width(title: &str) -> f64 {
    7.5 * title.chars().count() as f64 + 90.0
}

/// A box (quartiles and median) and the points of each category, side by side; `guide` draws
/// a dashed line (e.g. at parity).
fn strip_plot(
    title: &str,
    y_label: &str,
    log: bool,
    strips: &[Strip],
    guide: Option<f64>,
) -> String {
    let all: Vec<f64> = strips
        .iter()
        .flat_map(|s| s.values.iter().map(|v| v.0))
        .collect();
    let y = Axis::fit(y_label, log, &all, guide);
    let longest = strips.iter().map(|s| s.name.len()).max().unwrap_or(0) as f64;
    let slot = 44.0;
    let f = Frame {
        left: 70.0,
        top: 36.0,
        right: 70.0 + slot * strips.len().max(1) as f64,
        bottom: 336.0,
    };
    // Names hang down to the right at 45 degrees, about 6 px per character.
    let name_reach = 0.72 * 6.2 * longest.min(60.0);
    let mut svg = Svg::new(
        (f.right + name_reach + 20.0).max(title_width(title)),
        f.bottom + 20.0 + name_reach,
    );
    frame_and_y(&mut svg, &f, title, &y, guide);
    for (i, strip) in strips.iter().enumerate() {
        let color = PALETTE[strip.color % PALETTE.len()];
        let cx = f.left + slot * (i as f64 + 0.5);
        let mut sorted: Vec<f64> = strip.values.iter().map(|v| v.0).collect();
        sorted.sort_by(f64::total_cmp);
        if let Some(&last) = sorted.last() {
            let at = |q: f64| sorted[((sorted.len() - 1) as f64 * q).round() as usize];
            let (q1, med, q3) = (
                y.place(at(0.25), f.bottom, f.top),
                y.place(at(0.5), f.bottom, f.top),
                y.place(at(0.75), f.bottom, f.top),
            );
            svg.rect(
                (cx - 14.0, q3),
                (28.0, (q1 - q3).max(1.0)),
                "#f2f2f2",
                color,
            );
            svg.line((cx - 14.0, med), (cx + 14.0, med), color, false);
            let (lo, hi) = (
                y.place(sorted[0], f.bottom, f.top),
                y.place(last, f.bottom, f.top),
            );
            svg.line((cx, q1), (cx, lo), color, false);
            svg.line((cx, q3), (cx, hi), color, false);
        }
        for (k, &(v, filled)) in strip.values.iter().enumerate() {
            // A fixed spread (golden-ratio steps) so points of equal value stay apart.
            let jitter = ((k as f64 * 0.618_034).fract() - 0.5) * 20.0;
            svg.circle((cx + jitter, y.place(v, f.bottom, f.top)), color, filled);
        }
        svg.text((cx - 4.0, f.bottom + 12.0), "start", 11, 45.0, &strip.name);
    }
    svg.finish()
}

/// Points of one kernel in one precision: the kernel picks the color, the precision the shape.
pub struct Series {
    pub kernel: usize,
    pub precision: usize,
    pub points: Vec<(f64, f64)>,
}

/// Series of points on a common pair of axes, with a legend of kernels (colors) and
/// precisions (shapes) on the right.
fn scatter(
    title: &str,
    (x, y): (Axis, Axis),
    series: &[Series],
    kernels: &[String],
    precisions: &[String],
) -> String {
    let longest = kernels.iter().map(String::len).max().unwrap_or(0) as f64;
    let f = Frame {
        left: 70.0,
        top: 36.0,
        right: 590.0,
        bottom: 396.0,
    };
    let legend = kernels.len() + precisions.len() + 1;
    let mut svg = Svg::new(
        (f.right + 50.0 + 6.5 * longest.min(60.0)).max(title_width(title)),
        (f.bottom + 50.0).max(f.top + 16.0 * legend as f64 + 20.0),
    );
    frame_and_y(&mut svg, &f, title, &y, None);
    for t in x.ticks() {
        let px = x.place(t, f.left, f.right);
        svg.line((px, f.top), (px, f.bottom), "#e6e6e6", false);
        svg.text((px, f.bottom + 16.0), "middle", 11, 0.0, &tick_label(t));
    }
    svg.text(
        ((f.left + f.right) / 2.0, f.bottom + 36.0),
        "middle",
        12,
        0.0,
        &x.label,
    );
    for s in series {
        let color = PALETTE[s.kernel % PALETTE.len()];
        let shape = SHAPES[s.precision % SHAPES.len()];
        for &(vx, vy) in &s.points {
            let at = (x.place(vx, f.left, f.right), y.place(vy, f.bottom, f.top));
            svg.marker(at, shape, color, true);
        }
    }
    let legend_x = f.right + 24.0;
    let row = |i: usize| f.top + 8.0 + 16.0 * i as f64;
    for (i, name) in kernels.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        svg.marker((legend_x, row(i)), Shape::Circle, color, true);
        svg.text((legend_x + 10.0, row(i) + 4.0), "start", 11, 0.0, name);
    }
    for (i, name) in precisions.iter().enumerate() {
        let at = row(kernels.len() + 1 + i);
        svg.marker((legend_x, at), SHAPES[i % SHAPES.len()], "#333", true);
        svg.text((legend_x + 10.0, at + 4.0), "start", 11, 0.0, name);
    }
    svg.finish()
}

/// The values of one kernel in one precision, by index into [`Groups`]'s name lists.
struct Group<'e> {
    kernel: usize,
    precision: usize,
    values: Vec<(f64, &'e Entry)>,
}

/// The entries of one operation that have a value, grouped by kernel and precision in order of
/// appearance.
struct Groups<'e> {
    kernels: Vec<String>,
    precisions: Vec<String>,
    groups: Vec<Group<'e>>,
}

fn group<'e>(
    entries: &'e [Entry],
    op: Op,
    value: impl Fn(&Entry) -> Option<f64>,
    keep: impl Fn(&Entry) -> bool,
) -> Groups<'e> {
    let mut g = Groups {
        kernels: Vec::new(),
        precisions: Vec::new(),
        groups: Vec::new(),
    };
    let index = |names: &mut Vec<String>, name: String| match names.iter().position(|n| *n == name)
    {
        Some(i) => i,
        None => {
            names.push(name);
            names.len() - 1
        }
    };
    for e in entries.iter().filter(|e| e.op == op && keep(e)) {
        let Some(v) = value(e) else { continue };
        let kernel = index(&mut g.kernels, e.label.clone());
        let precision = index(&mut g.precisions, e.precision.to_string());
        match g
            .groups
            .iter_mut()
            .find(|x| (x.kernel, x.precision) == (kernel, precision))
        {
            Some(x) => x.values.push((v, e)),
            None => g.groups.push(Group {
                kernel,
                precision,
                values: vec![(v, e)],
            }),
        }
    }
    g.groups.sort_by_key(|x| (x.kernel, x.precision));
    g
}

/// Strips of the groups, named `kernel precision`, colored by kernel.
fn strips(g: &Groups<'_>) -> Vec<Strip> {
    g.groups
        .iter()
        .map(|x| Strip {
            name: format!("{} {}", g.kernels[x.kernel], g.precisions[x.precision]),
            color: x.kernel,
            values: x.values.iter().map(|(v, e)| (*v, e.large)).collect(),
        })
        .collect()
}

fn write(dir: &Path, name: String, svg: String, written: &mut Vec<String>) -> Result<()> {
    let path = dir.join(&name);
    std::fs::write(&path, svg).map_err(|e| Error::io(Some(path), e))?;
    written.push(name);
    Ok(())
}

/// Writes, per operation with data: the speedup distribution per kernel against cuSPARSE's best
/// (or, without a GPU, against sprs), GFLOP/s against nnz, and the fraction of the bandwidth
/// floor per kernel (large matrices filled). Returns the file names.
pub fn write_plots(dir: &Path, entries: &[Entry], ops: &[Op]) -> Result<Vec<String>> {
    let mut written = Vec::new();
    let own = |e: &Entry| !e.label.starts_with("best of");
    for &op in ops {
        let reference = [Reference::CusparseBest, Reference::Sprs]
            .into_iter()
            .filter_map(|r| Some((r, Reference::ALL.iter().position(|x| *x == r)?)))
            .find(|&(_, i)| {
                entries
                    .iter()
                    .any(|e| e.op == op && e.speedups[i].is_some())
            });
        if let Some((r, i)) = reference {
            let g = group(entries, op, |e| e.speedups[i], |_| true);
            let title = format!(
                "{}: speedup vs {} per case (log; filled = large matrix)",
                op.name(),
                r.name()
            );
            let svg = strip_plot(&title, "speedup", true, &strips(&g), Some(1.0));
            write(dir, format!("speedup-{}.svg", op.name()), svg, &mut written)?;
        }

        let g = group(entries, op, |e| e.gflops, own);
        if !g.groups.is_empty() {
            let series: Vec<Series> = g
                .groups
                .iter()
                .map(|x| Series {
                    kernel: x.kernel,
                    precision: x.precision,
                    points: x.values.iter().map(|(v, e)| (e.nnz as f64, *v)).collect(),
                })
                .collect();
            let xs: Vec<f64> = series
                .iter()
                .flat_map(|s| s.points.iter().map(|p| p.0))
                .collect();
            let ys: Vec<f64> = series
                .iter()
                .flat_map(|s| s.points.iter().map(|p| p.1))
                .collect();
            let axes = (
                Axis::fit("nnz", true, &xs, None),
                Axis::fit("GFLOP/s", true, &ys, None),
            );
            let title = format!("{}: GFLOP/s against nnz (log-log)", op.name());
            let svg = scatter(&title, axes, &series, &g.kernels, &g.precisions);
            write(dir, format!("gflops-{}.svg", op.name()), svg, &mut written)?;
        }

        let g = group(entries, op, |e| e.fraction, own);
        if !g.groups.is_empty() {
            let title = format!(
                "{}: minimal-bytes bandwidth / copy bandwidth (filled = large matrix)",
                op.name()
            );
            let label = "fraction of the bandwidth floor";
            let svg = strip_plot(&title, label, false, &strips(&g), Some(1.0));
            write(
                dir,
                format!("bandwidth-{}.svg", op.name()),
                svg,
                &mut written,
            )?;
        }
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_axes_tick_at_decades_and_place_monotonically() {
        let a = Axis::fit("x", true, &[3.0, 4000.0], None);
        let ticks = a.ticks();
        assert!(
            ticks.contains(&10.0) && ticks.contains(&1000.0),
            "{ticks:?}"
        );
        assert!(a.place(10.0, 0.0, 100.0) < a.place(100.0, 0.0, 100.0));
        let narrow = Axis::fit("x", true, &[1.5, 3.0], None);
        assert!(narrow.ticks().len() >= 2, "{:?}", narrow.ticks());
    }

    #[test]
    fn tick_labels_are_short() {
        assert_eq!(tick_label(0.1), "0.1");
        assert_eq!(tick_label(3.0 * 0.1), "0.3");
        assert_eq!(tick_label(1000.0), "1000");
        assert_eq!(tick_label(1e6), "1e6");
        assert_eq!(tick_label(0.0), "0");
    }

    #[test]
    fn linear_axes_include_zero_and_the_guide() {
        let a = Axis::fit("y", false, &[0.2, 0.7], Some(1.0));
        assert!(a.lo <= 0.0 && a.hi >= 1.0);
        assert!(a.ticks().len() >= 3);
    }

    #[test]
    fn text_is_escaped_and_plots_are_closed_documents() {
        let strips = [Strip {
            name: "a<b & c".to_string(),
            color: 0,
            values: vec![(1.0, true), (2.0, false)],
        }];
        let svg = strip_plot("t", "y", true, &strips, Some(1.0));
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("a&lt;b &amp; c"));
        let axes = (
            Axis::fit("x", true, &[], None),
            Axis::fit("y", true, &[], None),
        );
        let empty = scatter("s", axes, &[], &[], &[]);
        assert!(empty.contains("</svg>"));
    }
}
