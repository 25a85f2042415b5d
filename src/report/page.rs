//! The page `specperf plot` writes around its charts: the headline numbers, the self-contained
//! `report.html`, and each chart rasterised to PNG (pure Rust, system fonts for the text).

use std::sync::Arc;

use super::svg;
use crate::metrics::SummaryView;

/// Why a chart could not be rasterised.
#[derive(Debug, thiserror::Error)]
pub(super) enum PngError {
    /// resvg refused our own SVG.
    #[error("{0}")]
    Svg(#[from] resvg::usvg::Error),
    /// No memory for the pixels.
    #[error("cannot allocate the image")]
    Allocate,
    /// The PNG encoder failed.
    #[error("{0}")]
    Encode(String),
}

/// Rasterises an SVG made by [`svg::render`] to PNG (pure Rust; system fonts for the text).
pub(super) fn png(
    svg_text: &str,
    fontdb: &Arc<resvg::usvg::fontdb::Database>,
) -> Result<Vec<u8>, PngError> {
    let opt = resvg::usvg::Options {
        fontdb: fontdb.clone(),
        ..Default::default()
    };
    let tree = resvg::usvg::Tree::from_str(svg_text, &opt)?;
    let mut pixmap =
        resvg::tiny_skia::Pixmap::new(svg::WIDTH, svg::HEIGHT).ok_or(PngError::Allocate)?;
    resvg::render(
        &tree,
        resvg::tiny_skia::Transform::default(),
        &mut pixmap.as_mut(),
    );
    pixmap
        .encode_png()
        .map_err(|e| PngError::Encode(e.to_string()))
}

/// A few headline numbers for the page, from `summary.json`.
pub(super) fn headline(summary: &SummaryView) -> Vec<(String, String)> {
    let f = |v: Option<f64>, unit: &str, digits: usize| {
        v.map_or("n/a".to_owned(), |v| format!("{v:.digits$} {unit}"))
    };
    let stat = |key: &str| summary.metrics.get(key).copied().unwrap_or_default();
    let (ttft, itl) = (
        stat("time_to_first_token_ms"),
        stat("inter_token_latency_ms"),
    );
    let c = summary.counts;
    let mut rows = vec![
        (
            "Target".to_owned(),
            summary.meta.url.clone().unwrap_or_else(|| "?".to_owned()),
        ),
        (
            "Model".to_owned(),
            summary.meta.model.clone().unwrap_or_else(|| "?".to_owned()),
        ),
        (
            "Requests".to_owned(),
            format!(
                "{} ok, {} failed, {} cancelled",
                c.success, c.failed, c.cancelled
            ),
        ),
        ("Duration".to_owned(), f(summary.duration_s, "s", 3)),
        (
            "Request throughput".to_owned(),
            f(summary.request_throughput_rps, "req/s", 2),
        ),
        (
            "Output token throughput".to_owned(),
            f(summary.output_token_throughput_tps, "tok/s", 1),
        ),
        (
            "TTFT p50 / p99".to_owned(),
            format!("{} / {}", f(ttft.p50, "ms", 2), f(ttft.p99, "ms", 2)),
        ),
        (
            "ITL p50 / p99".to_owned(),
            format!("{} / {}", f(itl.p50, "ms", 3), f(itl.p99, "ms", 3)),
        ),
        (
            "Acceptance length".to_owned(),
            f(summary.counters_al(), "", 4),
        ),
    ];
    let reported = summary
        .spec_decode
        .as_ref()
        .and_then(|s| s.reported.as_ref());
    if let Some(r) = reported {
        if let Some(al) = r.token_weighted_acceptance_length {
            rows.push((
                "Acceptance length per request".to_owned(),
                format!(
                    "{al:.4} token-weighted, {} mean of requests (reported by the responses)",
                    r.mean_acceptance_length
                        .map_or("n/a".to_owned(), |m| format!("{m:.4}"))
                ),
            ));
        }
    }
    if let Some(g) = summary.goodput.and_then(|g| g.goodput_rps) {
        rows.push((
            "Goodput".to_owned(),
            format!(
                "{g:.2} req/s ({:.1}% of requests good)",
                summary
                    .goodput
                    .and_then(|g| g.good_request_fraction)
                    .unwrap_or(0.0)
                    * 100.0
            ),
        ));
    }
    rows
}

pub(super) fn html(summary: &SummaryView, svgs: &[(String, String)]) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    o.push_str(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>specperf report</title>\n<style>\n\
         body{font-family:'DejaVu Sans',Verdana,Arial,sans-serif;margin:24px;color:#222;max-width:1680px}\n\
         table{border-collapse:collapse;margin-bottom:24px}td{padding:3px 12px;border-bottom:1px solid #ddd}\n\
         td:first-child{font-weight:bold}.charts{display:flex;flex-wrap:wrap;gap:16px}\n\
         figure{margin:0;border:1px solid #ddd}\n</style>\n</head>\n<body>\n<h1>specperf report</h1>\n",
    );
    let _ = writeln!(
        o,
        "<p>specperf {}, summary schema {}. Percentiles: {}.</p>",
        svg::esc(summary.specperf_version.as_deref().unwrap_or("?")),
        svg::esc(summary.schema_version.as_deref().unwrap_or("?")),
        svg::esc(summary.percentile_method.as_deref().unwrap_or("?"))
    );
    o.push_str("<table id=\"summary\">\n");
    for (k, v) in headline(summary) {
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td>{}</td></tr>",
            svg::esc(&k),
            svg::esc(&v)
        );
    }
    o.push_str("</table>\n");
    if !summary.streaming() {
        o.push_str(
            "<p id=\"not-measured\">Non-streaming run: each response arrived in one piece, so \
             time to first token and inter-token latency were not measured and are not drawn.</p>\n",
        );
    }
    o.push_str("<div class=\"charts\">\n");
    for (stem, s) in svgs {
        let _ = writeln!(o, "<figure id=\"{stem}\">\n{s}</figure>");
    }
    o.push_str("</div>\n</body>\n</html>\n");
    o
}
