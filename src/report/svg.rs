//! A small hand-written SVG chart: axes with round-number ticks (or named categories), lines or
//! steps, bars, horizontal reference lines, a legend. Enough for the report's charts without a
//! plotting dependency; the same SVG is rasterised for the PNG versions.

use std::fmt::Write as _;

/// Chart size in pixels (also the PNG size).
pub(crate) const WIDTH: u32 = 800;
/// Chart height in pixels.
pub(crate) const HEIGHT: u32 = 450;

/// Margin left of the plot area (y tick labels and the y axis title).
pub(crate) const LEFT: f64 = 78.0;
/// Margin right of the plot area.
pub(crate) const RIGHT: f64 = 24.0;
/// Margin above the plot area (the chart title).
pub(crate) const TOP: f64 = 44.0;
/// Margin below the plot area (x tick labels and the x axis title).
pub(crate) const BOTTOM: f64 = 58.0;
/// Font families of every text, first available wins.
pub(crate) const FONT: &str = "DejaVu Sans, Verdana, Arial, sans-serif";

/// Colours of successive series (colour-blind-safe Okabe-Ito).
pub(crate) const COLORS: [&str; 4] = ["#0072B2", "#D55E00", "#009E73", "#CC79A7"];

/// [`COLORS`] and then the rest of Okabe-Ito that reads on white (orange, sky blue, black; not
/// the yellow), for charts with more than four series.
pub(crate) const PALETTE: [&str; 7] = [
    COLORS[0], COLORS[1], COLORS[2], COLORS[3], "#E69F00", "#56B4E9", "#000000",
];

/// One line of a chart.
pub(crate) struct Series {
    pub(crate) name: String,
    pub(crate) points: Vec<(f64, f64)>,
    pub(crate) color: &'static str,
    /// Draw as a step function (value holds until the next point).
    pub(crate) step: bool,
}

/// One set of bars of a chart (a histogram, or one value per category).
pub(crate) struct Bars {
    pub(crate) name: String,
    /// `(x centre, height)` of each bar.
    pub(crate) points: Vec<(f64, f64)>,
    /// Width of every bar, in x units.
    pub(crate) width: f64,
    pub(crate) color: &'static str,
}

/// A horizontal reference line.
pub(crate) struct HLine {
    pub(crate) y: f64,
    pub(crate) label: String,
    pub(crate) color: &'static str,
    pub(crate) dashed: bool,
}

/// A shaded horizontal band (the gate's pass range around the golden AL).
pub(crate) struct Band {
    pub(crate) lo: f64,
    pub(crate) hi: f64,
    pub(crate) label: String,
    pub(crate) color: &'static str,
}

/// A line chart.
pub(crate) struct Chart {
    /// Unique within a page (the clip path's id), e.g. the file stem.
    pub(crate) id: &'static str,
    pub(crate) title: String,
    pub(crate) x_label: String,
    pub(crate) y_label: String,
    pub(crate) series: Vec<Series>,
    /// Bars, drawn behind the lines from y = 0 up.
    pub(crate) bars: Vec<Bars>,
    /// Names of the x positions 0, 1, …: a categorical axis (one tick per name, no numbers).
    pub(crate) x_categories: Vec<String>,
    pub(crate) hlines: Vec<HLine>,
    /// A shaded band behind the lines, listed in the legend.
    pub(crate) band: Option<Band>,
    /// Fixed y range (else from the data, starting at 0 when all values are positive).
    pub(crate) y_range: Option<(f64, f64)>,
    /// Start the x axis at 0 (time axes) instead of at the smallest value.
    pub(crate) x_from_zero: bool,
    /// Shown in the middle when there is nothing to draw.
    pub(crate) empty_note: String,
}

impl Chart {
    /// A chart of lines with nothing else: x from 0, y from the data, "no data in this run" when
    /// empty.
    pub(crate) fn lines(
        id: &'static str,
        title: &str,
        x_label: &str,
        y_label: &str,
        series: Vec<Series>,
    ) -> Chart {
        Chart {
            id,
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            series,
            bars: Vec::new(),
            x_categories: Vec::new(),
            hlines: Vec::new(),
            band: None,
            y_range: None,
            x_from_zero: true,
            empty_note: "no data in this run".into(),
        }
    }
}

/// The plot area's grid lines with their tick labels (`(pixel, text)` per tick) and its frame.
pub(crate) fn grid(
    o: &mut String,
    y_ticks: &[(f64, String)],
    x_ticks: &[(f64, String)],
    pw: f64,
    ph: f64,
) {
    for (y, text) in y_ticks {
        let _ = writeln!(
            o,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#e5e5e5"/><text x="{:.1}" y="{:.1}" text-anchor="end" fill="#444">{}</text>"##,
            LEFT + pw,
            LEFT - 6.0,
            y + 4.0,
            esc(text)
        );
    }
    for (x, text) in x_ticks {
        let _ = writeln!(
            o,
            r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{:.1}" stroke="#f0f0f0"/><text x="{x:.1}" y="{:.1}" text-anchor="middle" fill="#444">{}</text>"##,
            TOP + ph,
            TOP + ph + 18.0,
            esc(text)
        );
    }
    let _ = writeln!(
        o,
        r##"<rect x="{LEFT}" y="{TOP}" width="{pw:.1}" height="{ph:.1}" fill="none" stroke="#888"/>"##
    );
}

/// XML-escapes text content and attribute values.
pub(crate) fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// Round tick positions covering `[lo, hi]` (about `n` of them: steps of 1, 2 or 5 × 10^k).
pub(crate) fn ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    let span = (hi - lo).abs().max(f64::MIN_POSITIVE);
    let raw = span / n.max(1) as f64;
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

/// A tick label without float noise (`0.30000000000000004` -> `0.3`).
pub(crate) fn label(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let a = v.abs();
    if !(1e-3..1e6).contains(&a) {
        return format!("{v:.1e}");
    }
    let s = format!("{v:.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_owned()
}

/// The smallest and largest finite value, or `None` when there is none.
pub(crate) fn extent(vals: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    vals.filter(|v| v.is_finite())
        .fold(None, |acc, v| match acc {
            None => Some((v, v)),
            Some((a, b)) => Some((a.min(v), b.max(v))),
        })
}

/// Widens a degenerate range so a flat line still has an axis.
pub(crate) fn widen((lo, hi): (f64, f64)) -> (f64, f64) {
    if hi > lo {
        (lo, hi)
    } else if lo == 0.0 {
        (0.0, 1.0)
    } else {
        (lo - lo.abs() * 0.1, hi + hi.abs() * 0.1)
    }
}

/// Renders the chart as a standalone SVG document.
pub(crate) fn render(c: &Chart) -> String {
    let (w, h) = (f64::from(WIDTH), f64::from(HEIGHT));
    let (pw, ph) = (w - LEFT - RIGHT, h - TOP - BOTTOM);
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="{FONT}" font-size="12">"#
    );
    let _ = writeln!(o, r#"<title>{}</title>"#, esc(&c.title));
    let _ = writeln!(o, r##"<rect width="100%" height="100%" fill="#ffffff"/>"##);
    let _ = writeln!(
        o,
        r##"<text x="{}" y="26" text-anchor="middle" font-size="16" font-weight="bold" fill="#222">{}</text>"##,
        w / 2.0,
        esc(&c.title)
    );
    let bar_x = c.bars.iter().flat_map(|b| {
        b.points
            .iter()
            .flat_map(|p| [p.0 - b.width / 2.0, p.0 + b.width / 2.0])
    });
    let xs = if c.x_categories.is_empty() {
        extent(
            c.series
                .iter()
                .flat_map(|s| s.points.iter().map(|p| p.0))
                .chain(bar_x),
        )
    } else {
        Some((-0.5, c.x_categories.len() as f64 - 0.5))
    };
    let has_bars = c.bars.iter().any(|b| !b.points.is_empty());
    let ys = extent(
        c.series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .chain(c.bars.iter().flat_map(|b| b.points.iter().map(|p| p.1)))
            // Bars rise from 0.
            .chain(has_bars.then_some(0.0))
            .chain(c.hlines.iter().map(|l| l.y))
            .chain(c.band.iter().flat_map(|b| [b.lo, b.hi])),
    );
    let xs = match xs {
        _ if !c.x_categories.is_empty() && ys.is_none() => None,
        Some((lo, hi)) if c.x_from_zero => Some((lo.min(0.0), hi)),
        None if ys.is_some() => Some((0.0, 1.0)),
        other => other,
    };
    let (Some(xr), Some(yr)) = (xs, ys) else {
        let _ = writeln!(
            o,
            r##"<text x="{}" y="{}" text-anchor="middle" font-size="14" fill="#666">{}</text>"##,
            w / 2.0,
            h / 2.0,
            esc(&c.empty_note)
        );
        o.push_str("</svg>\n");
        return o;
    };
    let (x0, x1) = widen(xr);
    let (y0, y1) = widen(c.y_range.unwrap_or_else(|| {
        let (lo, hi) = yr;
        // Rates and latencies read best from zero; give lines some headroom.
        let lo = if lo >= 0.0 { 0.0 } else { lo };
        (lo, hi + (hi - lo).abs() * 0.08)
    }));
    let px = |x: f64| LEFT + (x - x0) / (x1 - x0) * pw;
    let py = |y: f64| TOP + ph - (y - y0) / (y1 - y0) * ph;

    // Grid and ticks.
    let y_ticks: Vec<(f64, String)> = ticks(y0, y1, 6)
        .into_iter()
        .map(|t| (py(t), label(t)))
        .collect();
    let x_ticks: Vec<(f64, String)> = if c.x_categories.is_empty() {
        ticks(x0, x1, 8)
            .into_iter()
            .map(|t| (px(t), label(t)))
            .collect()
    } else {
        c.x_categories
            .iter()
            .enumerate()
            .map(|(i, name)| (px(i as f64), name.clone()))
            .collect()
    };
    grid(&mut o, &y_ticks, &x_ticks, pw, ph);
    let _ = writeln!(
        o,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#222">{}</text>"##,
        LEFT + pw / 2.0,
        h - 14.0,
        esc(&c.x_label)
    );
    let _ = writeln!(
        o,
        r##"<text transform="translate(18 {:.1}) rotate(-90)" text-anchor="middle" fill="#222">{}</text>"##,
        TOP + ph / 2.0,
        esc(&c.y_label)
    );

    // Data, clipped to the plot area.
    let _ = writeln!(
        o,
        r#"<clipPath id="clip-{id}"><rect x="{LEFT}" y="{TOP}" width="{pw:.1}" height="{ph:.1}"/></clipPath>"#,
        id = c.id
    );
    let _ = writeln!(o, r#"<g clip-path="url(#clip-{})">"#, c.id);
    if let Some(b) = &c.band {
        let (top, bottom) = (py(b.hi), py(b.lo));
        let _ = writeln!(
            o,
            r#"<rect x="{LEFT}" y="{top:.1}" width="{pw:.1}" height="{:.1}" fill="{}" fill-opacity="0.15"/>"#,
            (bottom - top).max(0.0),
            b.color
        );
    }
    for b in &c.bars {
        let base = py(0f64.clamp(y0, y1));
        for &(x, y) in &b.points {
            let (left, right) = (px(x - b.width / 2.0), px(x + b.width / 2.0));
            let top = py(y);
            let _ = writeln!(
                o,
                r##"<rect x="{:.2}" y="{:.2}" width="{:.2}" height="{:.2}" fill="{}" fill-opacity="0.8" stroke="#ffffff" stroke-width="0.5"/>"##,
                left.min(right),
                top.min(base),
                (right - left).abs(),
                (base - top).abs(),
                b.color
            );
        }
    }
    for l in &c.hlines {
        let dash = if l.dashed {
            r#" stroke-dasharray="6 4""#
        } else {
            ""
        };
        let _ = writeln!(
            o,
            r#"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="{}" stroke-width="1.5"{dash}/>"#,
            LEFT + pw,
            l.color,
            y = py(l.y)
        );
    }
    for s in &c.series {
        if s.points.is_empty() {
            continue;
        }
        let mut d = String::new();
        let mut prev_y = None;
        for (i, &(x, y)) in s.points.iter().enumerate() {
            let (x, y) = (px(x), py(y));
            if i == 0 {
                let _ = write!(d, "M{x:.2},{y:.2}");
            } else {
                if s.step {
                    if let Some(py_) = prev_y {
                        let _ = write!(d, " L{x:.2},{py_:.2}");
                    }
                }
                let _ = write!(d, " L{x:.2},{y:.2}");
            }
            prev_y = Some(y);
        }
        let _ = writeln!(
            o,
            r#"<path d="{d}" fill="none" stroke="{}" stroke-width="2" stroke-linejoin="round"/>"#,
            s.color
        );
        if s.points.len() == 1 {
            let (x, y) = s.points[0];
            let _ = writeln!(
                o,
                r#"<circle cx="{:.2}" cy="{:.2}" r="3" fill="{}"/>"#,
                px(x),
                py(y),
                s.color
            );
        }
    }
    o.push_str("</g>\n");

    // Legend, bottom right on a light box: series, then reference lines.
    let entries: Vec<(&str, &str, bool)> = c
        .series
        .iter()
        .map(|s| (s.name.as_str(), s.color, false))
        .chain(
            c.hlines
                .iter()
                .map(|l| (l.label.as_str(), l.color, l.dashed)),
        )
        .collect();
    let rows = entries.len() + usize::from(c.band.is_some()) + c.bars.len();
    // Wide enough for the longest label (about 7 px a character at 12 px).
    let longest = entries
        .iter()
        .map(|e| e.0.chars().count())
        .chain(c.band.iter().map(|b| b.label.chars().count()))
        .chain(c.bars.iter().map(|b| b.name.chars().count()))
        .max()
        .unwrap_or(0);
    let box_w = (36.0 + 7.0 * longest as f64).max(196.0);
    let box_h = rows as f64 * 18.0 + 8.0;
    let _ = writeln!(
        o,
        r##"<rect x="{:.1}" y="{:.1}" width="{box_w:.1}" height="{box_h:.1}" fill="#ffffff" fill-opacity="0.85" stroke="#cccccc"/>"##,
        LEFT + pw - box_w - 4.0,
        TOP + ph - box_h - 6.0
    );
    let mut ly = TOP + ph - box_h + 8.0;
    if let Some(b) = &c.band {
        let lx = LEFT + pw - box_w + 6.0;
        let _ = writeln!(
            o,
            r##"<rect x="{lx:.1}" y="{:.1}" width="22" height="10" fill="{}" fill-opacity="0.25"/><text x="{:.1}" y="{:.1}" fill="#222">{}</text>"##,
            ly - 5.0,
            b.color,
            lx + 28.0,
            ly + 4.0,
            esc(&b.label)
        );
        ly += 18.0;
    }
    for b in &c.bars {
        let lx = LEFT + pw - box_w + 6.0;
        let _ = writeln!(
            o,
            r##"<rect x="{lx:.1}" y="{:.1}" width="22" height="10" fill="{}" fill-opacity="0.8"/><text x="{:.1}" y="{:.1}" fill="#222">{}</text>"##,
            ly - 5.0,
            b.color,
            lx + 28.0,
            ly + 4.0,
            esc(&b.name)
        );
        ly += 18.0;
    }
    for (name, color, dashed) in entries {
        let dash = if dashed {
            r#" stroke-dasharray="6 4""#
        } else {
            ""
        };
        let lx = LEFT + pw - box_w + 6.0;
        let _ = writeln!(
            o,
            r##"<line x1="{lx:.1}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{color}" stroke-width="2"{dash}/><text x="{:.1}" y="{:.1}" fill="#222">{}</text>"##,
            lx + 22.0,
            lx + 28.0,
            ly + 4.0,
            esc(name)
        );
        ly += 18.0;
    }
    o.push_str("</svg>\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        assert_eq!(ticks(0.0, 10.0, 5), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(ticks(0.0, 1.0, 4), vec![0.0, 0.5, 1.0]);
        let t = ticks(48.3, 52.9, 6);
        assert_eq!(t.first().copied(), Some(49.0));
        assert_eq!(label(0.1 + 0.2), "0.3");
        assert_eq!(esc("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
    }
}
