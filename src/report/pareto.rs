//! The Pareto view of a sweep: which points are optimal ([`frontier`]), the scatter chart of
//! throughput against interactivity with each configuration's frontier joined ([`pareto_svg`],
//! the same size and look as the other charts, rasterised by the same `page::png`), and the
//! self-contained page around it: notes, the sweep table with the frontier rows highlighted, and
//! the charts inline ([`sweep_html`]).

use std::cmp::Ordering;
use std::fmt::Write as _;

use super::svg::{
    esc, extent, grid, label, ticks, widen, BOTTOM, FONT, HEIGHT, LEFT, PALETTE, RIGHT, TOP, WIDTH,
};

/// One measured point of a sweep.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ParetoPoint {
    /// Written next to the marker, e.g. `conc 8`.
    pub(crate) label: String,
    /// Interactivity: tokens/s per user, `1000 / median TPOT ms`.
    pub(crate) x: f64,
    /// Throughput per GPU, tokens/s/GPU (total tokens/s when the GPU count is unknown).
    pub(crate) y: f64,
    /// Confidence-interval half width of `x`, drawn as an error bar when present.
    pub(crate) x_err: Option<f64>,
    /// Confidence-interval half width of `y`, drawn as an error bar when present.
    pub(crate) y_err: Option<f64>,
}

/// The points of one configuration (one colour and marker shape on the chart).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ParetoSeries {
    /// The configuration, e.g. the sweep directory's name.
    pub(crate) name: String,
    /// Its points, in any order.
    pub(crate) points: Vec<ParetoPoint>,
}

/// Indices of the Pareto-optimal points when larger is better on both axes, sorted by x
/// ascending. A point is dominated when another has x >= and y >= with one of them strictly
/// greater; of equal points only the first is kept; a point with a non-finite coordinate is
/// never on the frontier (and dominates nothing).
pub(crate) fn frontier(points: &[(f64, f64)]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..points.len())
        .filter(|&i| points[i].0.is_finite() && points[i].1.is_finite())
        .collect();
    // Largest x first, within one x the largest y first, equal points in input order: then a
    // point is optimal exactly when its y beats every y before it.
    let cmp = |a: f64, b: f64| a.partial_cmp(&b).unwrap_or(Ordering::Equal);
    order.sort_by(|&a, &b| {
        cmp(points[b].0, points[a].0)
            .then(cmp(points[b].1, points[a].1))
            .then(a.cmp(&b))
    });
    let mut best = f64::NEG_INFINITY;
    let mut out = Vec::new();
    for i in order {
        if points[i].1 > best {
            best = points[i].1;
            out.push(i);
        }
    }
    out.reverse();
    out
}

/// Font size of the point labels.
const LABEL_FONT: f64 = 11.0;
/// Rough width of one character of a point label (DejaVu Sans is wide), for placing labels.
const LABEL_CHAR_W: f64 = 6.6;
/// Half the size of a marker, for keeping labels and the legend off the markers.
const MARKER_R: f64 = 5.0;
/// Grey of the legend's key to the hollow markers and the error bars.
const KEY_GREY: &str = "#555555";

/// A box on the chart, in pixels: `(left, top, right, bottom)`.
type Rect = (f64, f64, f64, f64);

fn overlaps(a: Rect, b: Rect) -> bool {
    a.0 < b.2 && b.0 < a.2 && a.1 < b.3 && b.1 < a.3
}

fn contains(r: Rect, (x, y): (f64, f64)) -> bool {
    (r.0..=r.2).contains(&x) && (r.1..=r.3).contains(&y)
}

/// A usable confidence half width (absent, non-finite or negative ones draw nothing).
fn half(e: Option<f64>) -> f64 {
    e.filter(|v| v.is_finite() && *v > 0.0).unwrap_or(0.0)
}

/// Writes a marker of series shape `shape` (circle, square, diamond, triangle, cycling) centred
/// on `(x, y)`: filled with `color` when `filled`, else white with a `color` outline.
fn marker(
    o: &mut String,
    shape: usize,
    (x, y): (f64, f64),
    color: &str,
    filled: bool,
    class: &str,
) {
    let fill = if filled { color } else { "#ffffff" };
    let paint = format!(r#"class="{class}" fill="{fill}" stroke="{color}" stroke-width="1.6""#);
    let r = MARKER_R;
    let _ = match shape % 4 {
        0 => writeln!(
            o,
            r#"<circle cx="{x:.2}" cy="{y:.2}" r="{:.1}" {paint}/>"#,
            r - 0.5
        ),
        1 => writeln!(
            o,
            r#"<rect x="{:.2}" y="{:.2}" width="{:.1}" height="{:.1}" {paint}/>"#,
            x - r + 0.8,
            y - r + 0.8,
            2.0 * r - 1.6,
            2.0 * r - 1.6
        ),
        2 => writeln!(
            o,
            r#"<path d="M{x:.2},{:.2} L{:.2},{y:.2} L{x:.2},{:.2} L{:.2},{y:.2} Z" {paint}/>"#,
            y - r - 0.6,
            x + r + 0.6,
            y + r + 0.6,
            x - r - 0.6
        ),
        _ => writeln!(
            o,
            r#"<path d="M{x:.2},{:.2} L{:.2},{:.2} L{:.2},{:.2} Z" {paint}/>"#,
            y - r - 0.8,
            x + r + 0.4,
            y + r - 0.8,
            x - r - 0.4,
            y + r - 0.8
        ),
    };
}

/// One drawable point: its series, its pixel position, whether it is on the frontier.
struct Placed<'a> {
    series: usize,
    point: &'a ParetoPoint,
    at: (f64, f64),
    on_frontier: bool,
}

/// The Pareto chart: every point of every series as a marker with its label, each series'
/// frontier joined by straight segments in x order with its points filled (dominated points
/// hollow), confidence intervals as error bars where given, a legend entry per series. One
/// colour (cycling [`PALETTE`]) and marker shape per series; round-number axes as the other
/// charts, y from 0. No drawable point gives the title and a "no points" note.
pub(crate) fn pareto_svg(
    id: &'static str,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[ParetoSeries],
) -> String {
    pareto_svg_toward(id, title, x_label, y_label, series, YGoal::Higher)
}

/// Which way y is better on a Pareto chart (x, interactivity, is always better higher).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum YGoal {
    /// Throughput.
    Higher,
    /// Energy per token.
    Lower,
}

/// [`pareto_svg`] with the frontier drawn toward `goal` on y.
pub(crate) fn pareto_svg_toward(
    id: &'static str,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[ParetoSeries],
    goal: YGoal,
) -> String {
    let (w, h) = (f64::from(WIDTH), f64::from(HEIGHT));
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="{FONT}" font-size="12">"#
    );
    let _ = writeln!(o, r#"<title>{}</title>"#, esc(title));
    let _ = writeln!(o, r##"<rect width="100%" height="100%" fill="#ffffff"/>"##);
    let _ = writeln!(
        o,
        r##"<text x="{}" y="26" text-anchor="middle" font-size="16" font-weight="bold" fill="#222">{}</text>"##,
        w / 2.0,
        esc(title)
    );
    let Some(plot) = Plot::fit(series) else {
        let _ = writeln!(
            o,
            r##"<text x="{}" y="{}" text-anchor="middle" font-size="14" fill="#666">no points to plot</text>"##,
            w / 2.0,
            h / 2.0
        );
        o.push_str("</svg>\n");
        return o;
    };
    plot.axes(&mut o, x_label, y_label);
    let (placed, fronts) = plot.place(series, goal);
    plot.data(&mut o, id, series, &placed, &fronts);
    let entries = legend_entries(series, &placed);
    let legend = plot.legend_box(&entries, &placed, &fronts);
    plot.labels(&mut o, &placed, legend.at);
    draw_legend(&mut o, legend, entries);
    o.push_str("</svg>\n");
    o
}

/// A series' colour.
fn color(si: usize) -> &'static str {
    PALETTE[si % PALETTE.len()]
}

/// Drawable: both coordinates finite.
fn finite(p: &&ParetoPoint) -> bool {
    p.x.is_finite() && p.y.is_finite()
}

/// One legend row: its text, colour, marker shape (`None`: the error-bar key) and whether it
/// is a frontier (a line through a filled marker).
type LegendEntry = (String, &'static str, Option<usize>, bool);

/// The plot area of a Pareto chart and its data ranges.
struct Plot {
    /// Width and height of the plot area, px.
    pw: f64,
    ph: f64,
    /// The x and y ranges drawn.
    x0: f64,
    x1: f64,
    y0: f64,
    y1: f64,
}

impl Plot {
    /// The ranges of every drawable point (error bars included), or `None` without one: a
    /// margin on both sides of x so edge markers and their labels stay inside; y from 0 (or
    /// the lowest value when negative) with headroom for the labels above the top points.
    fn fit(series: &[ParetoSeries]) -> Option<Plot> {
        let all = || series.iter().flat_map(|s| s.points.iter().filter(finite));
        let xr = extent(all().flat_map(|p| [p.x - half(p.x_err), p.x + half(p.x_err)]))?;
        let yr = extent(all().flat_map(|p| [p.y - half(p.y_err), p.y + half(p.y_err)]))?;
        let (x_lo, x_hi) = widen(xr);
        let pad = (x_hi - x_lo) * 0.07;
        let x0 = if x_lo >= 0.0 {
            (x_lo - pad).max(0.0)
        } else {
            x_lo - pad
        };
        let (lo, hi) = widen(yr);
        let lo = if lo >= 0.0 {
            0.0
        } else {
            lo - (hi - lo) * 0.05
        };
        let (y0, y1) = widen((lo, hi + (hi - lo) * 0.12));
        Some(Plot {
            pw: f64::from(WIDTH) - LEFT - RIGHT,
            ph: f64::from(HEIGHT) - TOP - BOTTOM,
            x0,
            x1: x_hi + pad,
            y0,
            y1,
        })
    }

    fn px(&self, x: f64) -> f64 {
        LEFT + (x - self.x0) / (self.x1 - self.x0) * self.pw
    }

    fn py(&self, y: f64) -> f64 {
        TOP + self.ph - (y - self.y0) / (self.y1 - self.y0) * self.ph
    }

    /// Grid, ticks, frame and axis titles, as svg::render draws them.
    fn axes(&self, o: &mut String, x_label: &str, y_label: &str) {
        let (pw, ph) = (self.pw, self.ph);
        let y_ticks: Vec<(f64, String)> = ticks(self.y0, self.y1, 6)
            .into_iter()
            .map(|t| (self.py(t), label(t)))
            .collect();
        let x_ticks: Vec<(f64, String)> = ticks(self.x0, self.x1, 8)
            .into_iter()
            .map(|t| (self.px(t), label(t)))
            .collect();
        grid(o, &y_ticks, &x_ticks, pw, ph);
        let _ = writeln!(
            o,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#222">{}</text>"##,
            LEFT + pw / 2.0,
            f64::from(HEIGHT) - 14.0,
            esc(x_label)
        );
        // A long y title shrinks to fit the plot's height rather than run off the chart.
        let y_chars = y_label.chars().count() as f64;
        let y_font = if y_chars * 6.9 > ph {
            (ph / (y_chars * 0.58)).clamp(8.0, 12.0)
        } else {
            12.0
        };
        let _ = writeln!(
            o,
            r##"<text transform="translate(18 {:.1}) rotate(-90)" text-anchor="middle" font-size="{y_font:.1}" fill="#222">{}</text>"##,
            TOP + ph / 2.0,
            esc(y_label)
        );
    }

    /// Every drawable point and, per series, its frontier toward `goal` in x order (px).
    fn place<'a>(
        &self,
        series: &'a [ParetoSeries],
        goal: YGoal,
    ) -> (Vec<Placed<'a>>, Vec<Vec<(f64, f64)>>) {
        let mut placed: Vec<Placed> = Vec::new();
        let mut fronts: Vec<Vec<(f64, f64)>> = Vec::new();
        for (si, s) in series.iter().enumerate() {
            let xy: Vec<(f64, f64)> = s.points.iter().map(|p| (p.x, p.y)).collect();
            let front = match goal {
                YGoal::Higher => frontier(&xy),
                YGoal::Lower => frontier(&xy.iter().map(|&(x, y)| (x, -y)).collect::<Vec<_>>()),
            };
            fronts.push(
                front
                    .iter()
                    .map(|&i| (self.px(xy[i].0), self.py(xy[i].1)))
                    .collect(),
            );
            for (i, p) in s.points.iter().enumerate() {
                if finite(&p) {
                    placed.push(Placed {
                        series: si,
                        point: p,
                        at: (self.px(p.x), self.py(p.y)),
                        on_frontier: front.contains(&i),
                    });
                }
            }
        }
        (placed, fronts)
    }

    /// Data, clipped to the plot area: frontier lines, error bars, markers on top.
    fn data(
        &self,
        o: &mut String,
        id: &str,
        series: &[ParetoSeries],
        placed: &[Placed<'_>],
        fronts: &[Vec<(f64, f64)>],
    ) {
        let (pw, ph) = (self.pw, self.ph);
        let _ = writeln!(
            o,
            r#"<clipPath id="clip-{id}"><rect x="{LEFT}" y="{TOP}" width="{pw:.1}" height="{ph:.1}"/></clipPath>"#
        );
        let _ = writeln!(o, r#"<g clip-path="url(#clip-{id})">"#);
        for (si, f) in fronts.iter().enumerate() {
            if f.len() < 2 {
                continue;
            }
            let pts: Vec<String> = f.iter().map(|(x, y)| format!("{x:.2},{y:.2}")).collect();
            let _ = writeln!(
                o,
                r#"<polyline class="frontier" points="{}" fill="none" stroke="{}" stroke-width="2" stroke-linejoin="round"/>"#,
                pts.join(" "),
                color(si)
            );
        }
        for p in placed {
            self.error_bars(o, p);
        }
        for p in placed {
            let class = if p.on_frontier {
                "on-frontier"
            } else {
                "dominated"
            };
            let _ = writeln!(
                o,
                "<g><title>{}: {}, {} ({})</title>",
                esc(&series[p.series].name),
                esc(&p.point.label),
                esc(&format!("x {}, y {}", label(p.point.x), label(p.point.y))),
                class.replace('-', " ")
            );
            marker(o, p.series, p.at, color(p.series), p.on_frontier, class);
            o.push_str("</g>\n");
        }
        o.push_str("</g>\n");
    }

    /// A point's confidence intervals as capped bars.
    fn error_bars(&self, o: &mut String, p: &Placed<'_>) {
        let (x, y) = p.at;
        let (ex, ey) = (half(p.point.x_err), half(p.point.y_err));
        let c = color(p.series);
        let mut bar = |x1: f64, y1: f64, x2: f64, y2: f64| {
            let _ = writeln!(
                o,
                r#"<line class="err" x1="{x1:.2}" y1="{y1:.2}" x2="{x2:.2}" y2="{y2:.2}" stroke="{c}" stroke-width="1.2" stroke-opacity="0.8"/>"#
            );
        };
        if ex > 0.0 {
            let (l, r) = (self.px(p.point.x - ex), self.px(p.point.x + ex));
            bar(l, y, r, y);
            bar(l, y - 3.0, l, y + 3.0);
            bar(r, y - 3.0, r, y + 3.0);
        }
        if ey > 0.0 {
            let (t, b) = (self.py(p.point.y + ey), self.py(p.point.y - ey));
            bar(x, t, x, b);
            bar(x - 3.0, t, x + 3.0, t);
            bar(x - 3.0, b, x + 3.0, b);
        }
    }

    /// Where the legend goes: the corner that hides the fewest markers (and frontier), top
    /// right first (beyond the frontier, usually empty).
    fn legend_box(
        &self,
        entries: &[LegendEntry],
        placed: &[Placed<'_>],
        fronts: &[Vec<(f64, f64)>],
    ) -> LegendBox {
        let (pw, ph) = (self.pw, self.ph);
        let longest = entries
            .iter()
            .map(|e| e.0.chars().count())
            .max()
            .unwrap_or(0);
        let box_w = (40.0 + 7.0 * longest as f64).min(pw - 12.0);
        let box_h = entries.len() as f64 * 18.0 + 8.0;
        let (left, right) = (LEFT + 6.0, LEFT + pw - box_w - 6.0);
        let (top, bottom) = (TOP + 6.0, TOP + ph - box_h - 6.0);
        let samples: Vec<(f64, f64)> = fronts
            .iter()
            .flat_map(|f| f.windows(2))
            .flat_map(|s| {
                (0..=16).map(move |k| {
                    let t = f64::from(k) / 16.0;
                    (
                        s[0].0 + (s[1].0 - s[0].0) * t,
                        s[0].1 + (s[1].1 - s[0].1) * t,
                    )
                })
            })
            .collect();
        let hidden = |(bx, by): (f64, f64)| {
            let r = (
                bx - MARKER_R,
                by - MARKER_R,
                bx + box_w + MARKER_R,
                by + box_h + MARKER_R,
            );
            let marks = placed.iter().filter(|p| contains(r, p.at)).count() as f64;
            let line = samples.iter().filter(|s| contains(r, **s)).count() as f64;
            marks + line * 0.05
        };
        let mut corner = (right, top);
        for c in [(right, top), (left, bottom), (left, top), (right, bottom)] {
            if hidden(c) < hidden(corner) {
                corner = c;
            }
        }
        LegendBox {
            at: (corner.0, corner.1, corner.0 + box_w, corner.1 + box_h),
            w: box_w,
            h: box_h,
        }
    }

    /// Point labels, outside the clip so none is cut: each at the first of a few spots beside
    /// its marker that stays in the plot and clear of the legend, the markers and earlier
    /// labels.
    fn labels(&self, o: &mut String, placed: &[Placed<'_>], legend: Rect) {
        let area: Rect = (
            LEFT + 2.0,
            TOP + 2.0,
            LEFT + self.pw - 2.0,
            TOP + self.ph - 2.0,
        );
        let mut taken: Vec<Rect> = vec![legend];
        taken.extend(placed.iter().map(|p| {
            let (x, y) = p.at;
            (x - MARKER_R, y - MARKER_R, x + MARKER_R, y + MARKER_R)
        }));
        for p in placed {
            if p.point.label.is_empty() {
                continue;
            }
            let (x, y) = p.at;
            let tw = p.point.label.chars().count() as f64 * LABEL_CHAR_W;
            let spot = |dx: f64, dy: f64, anchor: &'static str| {
                let left = match anchor {
                    "start" => x + dx,
                    "end" => x + dx - tw,
                    _ => x + dx - tw / 2.0,
                };
                let base = y + dy;
                (
                    (left, base - 9.0, left + tw, base + 2.0),
                    x + dx,
                    base,
                    anchor,
                )
            };
            let spots = [
                spot(8.0, -6.0, "start"),
                spot(8.0, 14.0, "start"),
                spot(-8.0, -6.0, "end"),
                spot(-8.0, 14.0, "end"),
                spot(0.0, -10.0, "middle"),
                spot(0.0, 19.0, "middle"),
            ];
            let cost = |r: Rect| {
                let outside = !(contains(area, (r.0, r.1)) && contains(area, (r.2, r.3)));
                let hits = taken.iter().filter(|t| overlaps(**t, r)).count();
                usize::from(outside) * 1000 + hits
            };
            let mut best = spots[0];
            for s in spots {
                if cost(s.0) < cost(best.0) {
                    best = s;
                }
            }
            let (r, tx, ty, anchor) = best;
            taken.push(r);
            let _ = writeln!(
                o,
                r##"<text x="{tx:.1}" y="{ty:.1}" text-anchor="{anchor}" font-size="{LABEL_FONT}" fill="#333">{}</text>"##,
                esc(&p.point.label)
            );
        }
    }
}

/// The legend's rows: one per series, then the keys to hollow markers and error bars.
fn legend_entries(series: &[ParetoSeries], placed: &[Placed<'_>]) -> Vec<LegendEntry> {
    let mut entries: Vec<LegendEntry> = series
        .iter()
        .enumerate()
        .map(|(si, s)| (format!("{} (frontier)", s.name), color(si), Some(si), true))
        .collect();
    if placed.iter().any(|p| !p.on_frontier) {
        entries.push(("hollow: dominated point".into(), KEY_GREY, Some(0), false));
    }
    if placed
        .iter()
        .any(|p| half(p.point.x_err) > 0.0 || half(p.point.y_err) > 0.0)
    {
        entries.push(("bars: confidence interval".into(), KEY_GREY, None, false));
    }
    entries
}

/// Where the legend goes and its size.
struct LegendBox {
    at: Rect,
    w: f64,
    h: f64,
}

/// The legend box with its rows.
fn draw_legend(o: &mut String, legend: LegendBox, entries: Vec<LegendEntry>) {
    let LegendBox {
        at: legend,
        w: box_w,
        h: box_h,
    } = legend;
    let _ = writeln!(
        o,
        r##"<rect x="{:.1}" y="{:.1}" width="{box_w:.1}" height="{box_h:.1}" fill="#ffffff" fill-opacity="0.9" stroke="#cccccc"/>"##,
        legend.0, legend.1
    );
    let mut ly = legend.1 + 17.0;
    for (text, c, shape, line) in entries {
        let lx = legend.0 + 6.0;
        if line {
            let _ = writeln!(
                o,
                r#"<line x1="{lx:.1}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{c}" stroke-width="2"/>"#,
                lx + 26.0
            );
        }
        match shape {
            Some(s) => marker(o, s, (lx + 13.0, ly), c, line, "key"),
            None => {
                let _ = writeln!(
                    o,
                    r#"<path d="M{:.1},{ly:.1} H{:.1} M{:.1},{:.1} V{:.1} M{:.1},{:.1} V{:.1}" stroke="{c}" stroke-width="1.2" fill="none"/>"#,
                    lx + 3.0,
                    lx + 23.0,
                    lx + 3.0,
                    ly - 3.0,
                    ly + 3.0,
                    lx + 23.0,
                    ly - 3.0,
                    ly + 3.0
                );
            }
        }
        let _ = writeln!(
            o,
            r##"<text x="{:.1}" y="{:.1}" fill="#222">{}</text>"##,
            lx + 32.0,
            ly + 4.0,
            esc(&text)
        );
        ly += 18.0;
    }
}

/// The sweep page: `title`, the `notes` as a list, the table (`<table id="sweep">`, the rows
/// whose `highlighted_rows` entry is true with `class="frontier"`, shaded and bold), then every
/// chart inline as a `<figure>` with the id of its file stem. Self-contained (no external
/// resource); every text is escaped. A row without a `highlighted_rows` entry is plain.
pub(crate) fn sweep_html(
    title: &str,
    notes: &[String],
    table_header: &[String],
    table_rows: &[Vec<String>],
    highlighted_rows: &[bool],
    charts: &[(String, String)],
) -> String {
    let mut o = String::new();
    o.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    let _ = writeln!(o, "<title>{}</title>", esc(title));
    o.push_str(
        "<style>\n\
         body{font-family:'DejaVu Sans',Verdana,Arial,sans-serif;margin:24px;color:#222;max-width:1680px}\n\
         .notes li{margin:2px 0}\n\
         .table{overflow-x:auto;margin:12px 0 24px}\n\
         table{border-collapse:collapse}\n\
         th,td{padding:3px 10px;border-bottom:1px solid #ddd;text-align:right;white-space:nowrap}\n\
         th{background:#f2f2f2}th:first-child,td:first-child{text-align:left}\n\
         tr.frontier td{background:#dbeaf5;font-weight:bold}\n\
         tr.frontier td:first-child{box-shadow:inset 4px 0 0 #0072B2}\n\
         .key span{display:inline-block;width:28px;height:12px;background:#dbeaf5;\
         box-shadow:inset 4px 0 0 #0072B2;vertical-align:middle;margin-right:6px}\n\
         .charts{display:flex;flex-wrap:wrap;gap:16px}\n\
         figure{margin:0;border:1px solid #ddd}\n</style>\n</head>\n<body>\n",
    );
    let _ = writeln!(o, "<h1>{}</h1>", esc(title));
    if !notes.is_empty() {
        o.push_str("<ul class=\"notes\">\n");
        for n in notes {
            let _ = writeln!(o, "<li>{}</li>", esc(n));
        }
        o.push_str("</ul>\n");
    }
    let highlighted = |i: usize| highlighted_rows.get(i).copied().unwrap_or(false);
    if (0..table_rows.len()).any(highlighted) {
        o.push_str("<p class=\"key\"><span></span>highlighted rows: on the Pareto frontier</p>\n");
    }
    o.push_str("<div class=\"table\">\n<table id=\"sweep\">\n<thead>\n<tr>");
    for h in table_header {
        let _ = write!(o, "<th>{}</th>", esc(h));
    }
    o.push_str("</tr>\n</thead>\n<tbody>\n");
    for (i, row) in table_rows.iter().enumerate() {
        o.push_str(if highlighted(i) {
            "<tr class=\"frontier\">"
        } else {
            "<tr>"
        });
        for c in row {
            let _ = write!(o, "<td>{}</td>", esc(c));
        }
        o.push_str("</tr>\n");
    }
    o.push_str("</tbody>\n</table>\n</div>\n<div class=\"charts\">\n");
    for (stem, svg_text) in charts {
        let _ = writeln!(o, "<figure id=\"{}\">\n{svg_text}</figure>", esc(stem));
    }
    o.push_str("</div>\n</body>\n</html>\n");
    o
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn frontier_of_a_textbook_set_sorted_by_x() {
        let pts = [
            (1.0, 10.0),
            (2.0, 8.0), // dominated by (3, 9)
            (3.0, 9.0),
            (4.0, 5.0), // dominated by (4, 6): same x, less y
            (5.0, 1.0),
            (2.0, 2.0), // dominated by everything right of it
            (4.0, 6.0),
        ];
        assert_eq!(frontier(&pts), vec![0, 2, 6, 4]);
        // One point dominating all others.
        assert_eq!(frontier(&[(1.0, 1.0), (9.0, 9.0), (2.0, 3.0)]), vec![1]);
        // A line of points with x up and y down: all optimal.
        assert_eq!(
            frontier(&[(3.0, 1.0), (1.0, 3.0), (2.0, 2.0)]),
            vec![1, 2, 0]
        );
    }

    #[test]
    fn frontier_ties_keep_the_first_and_equal_coordinates_dominate() {
        assert_eq!(frontier(&[(1.0, 1.0), (1.0, 1.0)]), vec![0]);
        assert_eq!(frontier(&[(0.5, 2.0), (3.0, 5.0), (3.0, 5.0)]), vec![1]);
        // Same x, less y; same y, less x: dominated.
        assert_eq!(frontier(&[(2.0, 3.0), (2.0, 5.0)]), vec![1]);
        assert_eq!(frontier(&[(1.0, 5.0), (3.0, 5.0)]), vec![1]);
        // 0.0 and -0.0 are the same point.
        assert_eq!(frontier(&[(0.0, 1.0), (-0.0, 1.0)]), vec![0]);
    }

    #[test]
    fn frontier_of_nothing_and_of_non_finite_points() {
        assert_eq!(frontier(&[]), Vec::<usize>::new());
        let pts = [
            (f64::NAN, 100.0),
            (1.0, 1.0),
            (2.0, f64::INFINITY),
            (f64::NAN, f64::NAN),
            (f64::NEG_INFINITY, 5.0),
        ];
        // The non-finite points are neither on it nor dominate the finite one.
        assert_eq!(frontier(&pts), vec![1]);
        assert_eq!(frontier(&[(f64::NAN, 1.0)]), Vec::<usize>::new());
    }

    fn point(label: &str, x: f64, y: f64, err: Option<(f64, f64)>) -> ParetoPoint {
        ParetoPoint {
            label: label.into(),
            x,
            y,
            x_err: err.map(|e| e.0),
            y_err: err.map(|e| e.1),
        }
    }

    fn fonts() -> Arc<resvg::usvg::fontdb::Database> {
        let mut db = resvg::usvg::fontdb::Database::new();
        db.load_system_fonts();
        Arc::new(db)
    }

    /// Two configurations, the second with confidence intervals; `conc` from 1 to 64.
    fn example() -> Vec<ParetoSeries> {
        let base = [
            (1, 95.0, 90.0),
            (2, 88.0, 170.0),
            (4, 80.0, 300.0),
            (8, 66.0, 520.0),
            (16, 48.0, 760.0),
            (32, 30.0, 940.0),
            (64, 17.0, 1010.0),
        ];
        let mut a: Vec<ParetoPoint> = base
            .iter()
            .map(|&(c, x, y)| point(&format!("conc {c}"), x, y, None))
            .collect();
        // Dominated: less of both than conc 8.
        a.push(point("conc 8 <tp=2>", 60.0, 430.0, None));
        let b = base
            .iter()
            .map(|&(c, x, y)| {
                point(
                    &format!("conc {c}"),
                    x * 1.22,
                    y * 1.18 - 15.0,
                    Some((x * 0.03, y * 0.04)),
                )
            })
            .chain([point("conc 12", 50.0, 700.0, Some((2.0, 25.0)))])
            .collect();
        vec![
            ParetoSeries {
                name: "baseline & <no draft>".into(),
                points: a,
            },
            ParetoSeries {
                name: "eagle3".into(),
                points: b,
            },
        ]
    }

    #[test]
    fn pareto_chart_is_valid_svg_that_rasterises_with_frontiers_markers_and_error_bars() {
        let series = example();
        let svg = pareto_svg(
            "pareto",
            "Throughput against interactivity: a & b",
            "Interactivity (tok/s/user = 1000 / median TPOT)",
            "Total token throughput per GPU (tok/s/GPU, 8 GPUs)",
            &series,
        );
        let _ = std::fs::write(std::env::temp_dir().join("pareto_example.svg"), &svg);
        let doc = roxmltree::Document::parse(&svg).unwrap();
        assert_eq!(doc.root_element().tag_name().name(), "svg");
        assert_eq!(doc.root_element().attribute("width"), Some("800"));
        assert_eq!(doc.root_element().attribute("height"), Some("450"));

        // One straight frontier line per series, in the series' colour, through its optimal
        // points in x order.
        let lines: Vec<_> = doc
            .descendants()
            .filter(|n| n.has_tag_name("polyline") && n.attribute("class") == Some("frontier"))
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].attribute("stroke"), Some(PALETTE[0]));
        assert_eq!(lines[1].attribute("stroke"), Some(PALETTE[1]));
        // x up and y down at every vertex: straight segments, no step corners.
        let xy: Vec<(f64, f64)> = lines[0]
            .attribute("points")
            .unwrap()
            .split(' ')
            .map(|p| {
                let (x, y) = p.split_once(',').unwrap();
                (x.parse().unwrap(), y.parse().unwrap())
            })
            .collect();
        assert_eq!(xy.len(), 7);
        assert!(
            xy.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1),
            "{xy:?}"
        );

        // Filled markers on the frontier, hollow ones off it: the dominated point of each series.
        let class = |c: &str| {
            doc.descendants()
                .filter(|n| n.attribute("class") == Some(c))
                .collect::<Vec<_>>()
        };
        let (on, off) = (class("on-frontier"), class("dominated"));
        assert_eq!((on.len(), off.len()), (14, 2));
        assert!(on
            .iter()
            .all(|n| n.attribute("fill") == n.attribute("stroke")));
        assert!(off.iter().all(|n| n.attribute("fill") == Some("#ffffff")));
        // Circles for the first series, squares for the second.
        assert_eq!(off[0].tag_name().name(), "circle");
        assert_eq!(off[1].tag_name().name(), "rect");

        // Error bars only for the second series: a bar and two caps per axis and point.
        let err = class("err");
        assert_eq!(err.len(), 8 * 6);
        assert!(err
            .iter()
            .all(|n| n.attribute("stroke") == Some(PALETTE[1])));

        // Legend per series, labels and names escaped.
        assert!(svg.contains(">baseline &amp; &lt;no draft&gt; (frontier)</text>"));
        assert!(svg.contains(">eagle3 (frontier)</text>"));
        assert!(svg.contains(">conc 8 &lt;tp=2&gt;</text>"));
        assert!(svg.contains(">hollow: dominated point</text>"));
        assert!(svg.contains(">bars: confidence interval</text>"));
        assert!(svg.contains("a &amp; b"));

        let png = super::super::page::png(&svg, &fonts()).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        let _ = std::fs::write(std::env::temp_dir().join("pareto_example.png"), &png);
    }

    #[test]
    fn pareto_chart_without_points_says_so() {
        let db = fonts();
        let nan = ParetoSeries {
            name: "broken".into(),
            points: vec![point("conc 1", f64::NAN, 3.0, None)],
        };
        for series in [&[][..], &[nan][..]] {
            let svg = pareto_svg("pareto", "t", "x", "y", series);
            roxmltree::Document::parse(&svg).unwrap();
            assert!(svg.contains("no points to plot"), "{svg}");
            let png = super::super::page::png(&svg, &db).unwrap();
            assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        }
        // One point: a degenerate range still gets axes, no frontier line needed.
        let one = [ParetoSeries {
            name: "one".into(),
            points: vec![point("conc 1", 40.0, 200.0, Some((f64::NAN, -1.0)))],
        }];
        let svg = pareto_svg("pareto", "t", "x", "y", &one);
        roxmltree::Document::parse(&svg).unwrap();
        assert!(svg.contains("class=\"on-frontier\"") && !svg.contains("<polyline"));
        assert!(!svg.contains("class=\"err\"") && !svg.contains("NaN"));
    }

    #[test]
    fn sweep_page_has_the_table_highlighted_rows_and_every_chart() {
        let head: Vec<String> = ["point", "concurrency", "tok/s/user"]
            .map(String::from)
            .to_vec();
        let rows = vec![
            vec!["c1".to_string(), "1".into(), "95.0".into()],
            vec!["c8".to_string(), "8".into(), "66.0 ±1.2".into()],
            vec![
                "<script>alert(1)</script>".to_string(),
                "16".into(),
                "-".into(),
            ],
        ];
        let svg_a = pareto_svg("pareto", "A", "x", "y", &example());
        let svg_b = pareto_svg("other", "B", "x", "y", &[]);
        let html = sweep_html(
            "specperf sweep: runs & \"more\"",
            &["Status: done".into(), "a < b".into()],
            &head,
            &rows,
            &[false, true],
            &[
                ("pareto".into(), svg_a.clone()),
                ("other".into(), svg_b.clone()),
            ],
        );
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert!(html.contains("<title>specperf sweep: runs &amp; &quot;more&quot;</title>"));
        assert!(html.contains("<li>Status: done</li>") && html.contains("<li>a &lt; b</li>"));
        assert!(html.contains("<table id=\"sweep\">"));
        assert!(html.contains("<tr><th>point</th><th>concurrency</th><th>tok/s/user</th></tr>"));
        assert!(html.contains("<tr><td>c1</td><td>1</td><td>95.0</td></tr>"));
        assert!(
            html.contains("<tr class=\"frontier\"><td>c8</td><td>8</td><td>66.0 ±1.2</td></tr>")
        );
        // The third row has no highlight entry: plain, and escaped.
        assert!(html.contains("<tr><td>&lt;script&gt;alert(1)&lt;/script&gt;</td>"));
        assert!(!html.contains("<script>"));
        assert_eq!(html.matches("class=\"frontier\"><td>").count(), 1);
        assert!(html.contains("tr.frontier td{"), "highlight is styled");
        assert!(html.contains(&format!("<figure id=\"pareto\">\n{svg_a}</figure>")));
        assert!(html.contains(&format!("<figure id=\"other\">\n{svg_b}</figure>")));
        assert_eq!(html.matches("<svg ").count(), 2);
        assert!(
            !html.contains("src=\"http")
                && !html.contains("href=\"http")
                && !html.contains("url(http")
        );
    }
}
