//! The page `specperf plot` writes around its charts: the headline numbers, the self-contained
//! `report.html`, and each chart rasterised to PNG (pure Rust, system fonts for the text).

use std::sync::Arc;

use serde_json::Value;

use super::svg;

/// Whether the run streamed (`meta.streaming`; older summaries without it did).
pub(super) fn streaming(summary: &Value) -> bool {
    summary
        .pointer("/meta/streaming")
        .and_then(Value::as_bool)
        .unwrap_or(true)
}

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
pub(super) fn headline(summary: &Value) -> Vec<(String, String)> {
    let num = |p: &str| summary.pointer(p).and_then(Value::as_f64);
    let f = |p: &str, unit: &str, digits: usize| {
        num(p).map_or("n/a".to_owned(), |v| format!("{v:.digits$} {unit}"))
    };
    let mut rows = vec![
        (
            "Target".to_owned(),
            summary
                .pointer("/meta/url")
                .and_then(Value::as_str)
                .unwrap_or("?")
                .to_owned(),
        ),
        (
            "Model".to_owned(),
            summary
                .pointer("/meta/model")
                .and_then(Value::as_str)
                .unwrap_or("?")
                .to_owned(),
        ),
        (
            "Requests".to_owned(),
            format!(
                "{} ok, {} failed, {} cancelled",
                num("/counts/success").unwrap_or(0.0),
                num("/counts/failed").unwrap_or(0.0),
                num("/counts/cancelled").unwrap_or(0.0)
            ),
        ),
        ("Duration".to_owned(), f("/duration_s", "s", 3)),
        (
            "Request throughput".to_owned(),
            f("/request_throughput_rps", "req/s", 2),
        ),
        (
            "Output token throughput".to_owned(),
            f("/output_token_throughput_tps", "tok/s", 1),
        ),
        (
            "TTFT p50 / p99".to_owned(),
            format!(
                "{} / {}",
                f("/metrics/time_to_first_token_ms/p50", "ms", 2),
                f("/metrics/time_to_first_token_ms/p99", "ms", 2)
            ),
        ),
        (
            "ITL p50 / p99".to_owned(),
            format!(
                "{} / {}",
                f("/metrics/inter_token_latency_ms/p50", "ms", 3),
                f("/metrics/inter_token_latency_ms/p99", "ms", 3)
            ),
        ),
        (
            "Acceptance length".to_owned(),
            f("/acceptance/acceptance/acceptance_length", "", 4),
        ),
    ];
    if let Some(al) = num("/spec_decode/reported/token_weighted_acceptance_length") {
        rows.push((
            "Acceptance length per request".to_owned(),
            format!(
                "{al:.4} token-weighted, {} mean of requests (reported by the responses)",
                num("/spec_decode/reported/mean_acceptance_length")
                    .map_or("n/a".to_owned(), |m| format!("{m:.4}"))
            ),
        ));
    }
    if let Some(g) = num("/goodput/goodput_rps") {
        rows.push((
            "Goodput".to_owned(),
            format!(
                "{g:.2} req/s ({:.1}% of requests good)",
                num("/goodput/good_request_fraction").unwrap_or(0.0) * 100.0
            ),
        ));
    }
    rows
}

pub(super) fn html(summary: &Value, svgs: &[(String, String)]) -> String {
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
        svg::esc(summary["specperf_version"].as_str().unwrap_or("?")),
        svg::esc(summary["schema_version"].as_str().unwrap_or("?")),
        svg::esc(summary["percentile_method"].as_str().unwrap_or("?"))
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
    if !streaming(summary) {
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
