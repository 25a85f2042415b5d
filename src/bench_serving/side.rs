//! What a bench-serving run sends or writes beside its requests, each only where upstream does
//! or a specperf-only flag asks: the profiler posts, sa-bench's slow-down posts and measurement
//! window, and the `--server-metrics` acceptance keys.

use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use http::HeaderMap;
use serde_json::{json, Value};

use super::args::Args;
use super::load::Load;
use super::uri;
use crate::client::{Clock, Prepared};
use crate::dataset::bench_serving::Flavor;
use crate::record::RequestRecord;
use crate::scrape::ScrapeReport;
use crate::stop::Stopper;

/// POSTs `body` to `{base}{path}` with the run's client, outside the measured phase.
async fn side_post(
    load: &Load,
    url: http::Uri,
    body: Bytes,
    streaming: bool,
    extra: HeaderMap,
    clock: &Clock,
    stop: &Stopper,
) -> RequestRecord {
    let req = Prepared {
        uri: url,
        body: body.into(),
        streaming,
        lines: None,
        capture_text: false,
        headers: extra,
    };
    let rec = RequestRecord::started(0, 0, 0, 0);
    load.client.execute(req, rec, clock, stop.token()).await
}

/// A profiler request (`/start_profile`, `/stop_profile`), sent as a completion is; true when it
/// answered with a token chunk (upstream prints "started" then).
pub(super) async fn profiler(
    load: &Load,
    base: &str,
    path: &str,
    body: Bytes,
    clock: &Clock,
    stop: &Stopper,
) -> bool {
    let Ok(url) = uri(
        &format!("{}{path}", base.trim_end_matches('/')),
        "--base-url",
    ) else {
        return false;
    };
    side_post(load, url, body, true, HeaderMap::new(), clock, stop)
        .await
        .first_token_ns
        .is_some()
}

/// sa-bench's `--slow-down-server`: POST `forward_sleep_time` to every server (SGLang frontends
/// only), lifted after `--slow-down-wait-time` or at the end.
pub(super) struct SlowDown {
    pub(super) servers: Vec<String>,
    /// `Authorization` when `OPENAI_API_KEY` is unset: the raw `$API_KEY`.
    raw_key: Option<String>,
}

impl SlowDown {
    pub(super) fn new(a: &Args) -> Option<SlowDown> {
        let servers: Vec<String> = a
            .slow_down_servers
            .iter()
            .map(|s| s.trim().trim_end_matches('/').to_owned())
            .filter(|s| !s.is_empty())
            .collect();
        if servers.is_empty() {
            return None;
        }
        if std::env::var("SRTCTL_FRONTEND_TYPE").as_deref() != Ok("sglang") {
            println!(
                "Warning: --slow-down-server ignored (SRTCTL_FRONTEND_TYPE is not sglang; \
                 slow_down applies to SGLang worker HTTP /slow_down only)."
            );
            return None;
        }
        let bearer = std::env::var("OPENAI_API_KEY").is_ok_and(|k| !k.is_empty());
        let raw_key = (!bearer)
            .then(|| std::env::var("API_KEY").ok().filter(|k| !k.is_empty()))
            .flatten();
        Some(SlowDown { servers, raw_key })
    }

    /// One POST to every server; failures are warnings.
    pub(super) async fn post(
        &self,
        load: &Load,
        sleep: Option<f64>,
        clock: &Clock,
        stop: &Stopper,
    ) {
        let body =
            tokenizer_encoders::python_json_dumps(&json!({"forward_sleep_time": sleep}), true)
                .unwrap_or_default();
        let mut extra = HeaderMap::new();
        if let Some(v) = self
            .raw_key
            .as_deref()
            .and_then(|k| http::HeaderValue::from_str(k).ok())
        {
            extra.insert(http::header::AUTHORIZATION, v);
        }
        for s in &self.servers {
            let target = format!("{s}/slow_down");
            let Ok(url) = uri(&target, "--slow-down-server") else {
                println!("Warning: --slow-down-server {s}: not an http(s) URL");
                continue;
            };
            let sent = side_post(
                load,
                url,
                Bytes::from(body.clone()),
                false,
                extra.clone(),
                clock,
                stop,
            );
            match tokio::time::timeout(Duration::from_secs(60), sent).await {
                Ok(r) if r.http_status == Some(200) => {}
                Ok(r) => println!(
                    "Warning: slow_down POST to {target} failed: {}",
                    r.http_status
                        .map_or_else(|| r.error.unwrap_or_default(), |c| format!("HTTP {c}"))
                ),
                Err(_) => println!("Warning: slow_down POST to {target} timed out after 60 s"),
            }
        }
    }
}

/// sa-bench's measurement window (srt-slurm's `measurement_window.py`): where srtctl set
/// `SRT_MEASUREMENT_WINDOW_DIR` and the result goes under `/logs`, the window's boundaries are
/// published beside the result for the power join.
pub(super) struct MeasurementWindow {
    path: PathBuf,
    result_path: String,
    concurrency: Option<usize>,
}

impl MeasurementWindow {
    const LOG_ROOT: &'static str = "/logs";

    pub(super) fn create(a: &Args) -> Option<MeasurementWindow> {
        if a.flavor != Flavor::SaBench || !a.save_result {
            return None;
        }
        let name = a.result_filename.as_deref()?;
        let dir = PathBuf::from(std::env::var_os("SRT_MEASUREMENT_WINDOW_DIR")?);
        if !dir.is_dir() {
            return None;
        }
        let full = a.result_dir.clone().unwrap_or_default().join(name);
        let full = std::path::absolute(&full).ok()?;
        let rel = full.strip_prefix(Self::LOG_ROOT).ok()?;
        let stem = Path::new(name).file_stem()?.to_string_lossy().into_owned();
        Some(MeasurementWindow {
            path: dir.join(format!("{stem}.json")),
            result_path: rel.to_string_lossy().into_owned(),
            concurrency: a.max_concurrency,
        })
    }

    pub(super) fn write(
        &self,
        status: &str,
        start: f64,
        end: Option<f64>,
        duration: Option<f64>,
        reason: Option<&str>,
    ) {
        let dump = |v: Value| tokenizer_encoders::python_json_dumps(&v, true).unwrap_or_default();
        let fields = [
            ("schema_version", json!(1)),
            ("benchmark_type", json!("sa-bench")),
            ("result_path", json!(self.result_path)),
            ("concurrency", json!(self.concurrency)),
            ("benchmark_start_time_unix", json!(start)),
            ("benchmark_end_time_unix", json!(end)),
            ("duration", json!(duration)),
            ("clock_source", json!("head_node_unix_clock")),
            ("status", json!(status)),
            ("reason", json!(reason)),
        ];
        // json.dump(indent=2) then a newline.
        let body: Vec<String> = fields
            .iter()
            .map(|(k, v)| format!("  {}: {}", dump(json!(k)), dump(v.clone())))
            .collect();
        let text = format!("{{\n{}\n}}\n", body.join(",\n"));
        if let Err(e) = crate::fsutil::write_atomic(&self.path, text.as_bytes()) {
            eprintln!(
                "WARNING: cannot write the measurement window {}: {e}",
                self.path.display()
            );
        }
    }
}

/// `--server-metrics`: the window's acceptance under `vllm bench serve`'s keys (rate in percent,
/// per-position rates as fractions), appended after upstream's keys; none when the counters did
/// not move.
pub(super) fn spec_decode_keys(r: &ScrapeReport) -> Vec<(String, Value)> {
    for e in &r.endpoints {
        for status in [&e.before, &e.after] {
            if !status.is_ok() {
                eprintln!("WARNING: --server-metrics {}: {}", e.url, status.as_str());
            }
        }
    }
    let n = &r.acceptance.numbers;
    let Some(al) = n.acceptance_length else {
        if let Some(why) = &r.acceptance.reason {
            eprintln!("WARNING: --server-metrics: no acceptance length: {why}");
        }
        return Vec::new();
    };
    let mut v = vec![
        (
            "spec_decode_acceptance_rate".to_owned(),
            json!(n.acceptance_rate.map(|r| r * 100.0)),
        ),
        ("spec_decode_acceptance_length".to_owned(), json!(al)),
        (
            "spec_decode_num_drafts".to_owned(),
            json!(n.drafts.round() as u64),
        ),
    ];
    if let Some(d) = n.draft_tokens {
        v.push((
            "spec_decode_draft_tokens".to_owned(),
            json!(d.round() as u64),
        ));
    }
    v.push((
        "spec_decode_accepted_tokens".to_owned(),
        json!(n.accepted_tokens.round() as u64),
    ));
    if !n.per_position_acceptance.is_empty() {
        v.push((
            "spec_decode_per_position_acceptance_rates".to_owned(),
            json!(n.per_position_acceptance),
        ));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    /// srt-slurm's window file: `json.dump(indent=2)` and a newline, the times as given.
    #[test]
    fn the_measurement_window_is_srt_slurms_format() {
        let tmp = tempfile::tempdir().unwrap();
        let w = MeasurementWindow {
            path: tmp.path().join("w.json"),
            result_path: "sa-bench_isl_8_osl_4/results_concurrency_2_gpus_8.json".into(),
            concurrency: Some(2),
        };
        w.write("completed", 1.5, Some(2.25), Some(0.75), None);
        let text = std::fs::read_to_string(tmp.path().join("w.json")).unwrap();
        assert_eq!(
            text,
            "{\n  \"schema_version\": 1,\n  \"benchmark_type\": \"sa-bench\",\n  \"result_path\": \
             \"sa-bench_isl_8_osl_4/results_concurrency_2_gpus_8.json\",\n  \"concurrency\": 2,\n  \
             \"benchmark_start_time_unix\": 1.5,\n  \"benchmark_end_time_unix\": 2.25,\n  \
             \"duration\": 0.75,\n  \"clock_source\": \"head_node_unix_clock\",\n  \"status\": \
             \"completed\",\n  \"reason\": null\n}\n"
        );
    }
}
