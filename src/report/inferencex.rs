//! The InferenceX raw throughput JSON, `<RESULT_FILENAME>.json` (`inferencex-contract.md` §8.2):
//! the shape of vLLM benchmark_serving's `--save-result` file, which InferenceX's
//! `process_result` turns into `agg_<RESULT_FILENAME>.json`. Keys in the contract's order, written
//! as Python's `json.dump` writes them.

use std::path::{Path, PathBuf};

use super::json::{Obj, J};
use super::ReportError;
use crate::metrics::{MetricKey, Stat, Summary};
use crate::render::EndpointType;

/// The percentiles benchmark_serving selects by default (`--metric-percentiles 90,99,99.9`).
const PERCENTILES: [&str; 3] = ["90", "99", "99.9"];

/// The metrics benchmark_serving reports, in its order (names from [`MetricKey::vllm_name`]).
/// `itl` is every gap between content events (vLLM's list of inter-token latencies); `tpot` is per
/// request, `(latency − ttft) / (OSL − 1)`.
pub(super) const METRICS: [MetricKey; 4] = [
    MetricKey::TimeToFirstToken,
    MetricKey::TimePerOutputToken,
    MetricKey::InterChunkLatency,
    MetricKey::RequestLatency,
];

/// Builds the raw result, or names the TPOT statistic that is zero (InferenceX would divide by
/// it).
pub(crate) fn raw_result(s: &Summary) -> Result<J, (String, f64)> {
    let m = &s.meta;
    let c = &s.counts;
    let l = &m.load;
    let mut o = Obj::new();
    let failed = c.failed + c.cancelled;
    let requested = c.total;
    o.put(
        "benchmark_outcome",
        Obj::new()
            .with(
                "status",
                if c.success == requested && requested > 0 {
                    "ok"
                } else {
                    "partial"
                },
            )
            .with("requested", requested)
            .with("completed", c.success)
            .with("failed", failed)
            .with("max_failure_rate", 0.05),
    );
    o.put("date", crate::timefmt::compact_date(m.start_unix_s))
        .put(
            "backend",
            match m.endpoint_type {
                EndpointType::Chat => "openai-chat",
                EndpointType::Completions => "openai",
            },
        )
        .put("model_id", m.model.as_str())
        .put("tokenizer_id", m.model.as_str())
        .put("best_of", 1u64)
        .put("num_prompts", m.request_count);
    match l.request_rate {
        Some(r) if r.is_finite() => o.put("request_rate", r),
        _ => o.put("request_rate", "inf"),
    };
    o.put("burstiness", l.arrival_smoothness.unwrap_or(1.0))
        // vLLM writes null when nothing capped the requests in flight.
        .put(
            "max_concurrency",
            l.concurrency_cap.or(m.concurrency).map(|c| c as u64),
        )
        .put("duration", s.duration_s)
        .put("benchmark_start_time_unix", s.benchmark_start_unix_s)
        .put("benchmark_end_time_unix", s.benchmark_end_unix_s)
        .put("completed", c.success)
        // vLLM: every request that did not succeed (ours: failed and cancelled).
        .put("failed", failed)
        .put("total_input_tokens", s.total_prompt_tokens)
        .put("total_output_tokens", s.total_completion_tokens)
        .put("request_throughput", s.request_throughput_rps)
        .put(
            "request_goodput:",
            s.goodput.as_ref().map(|g| g.goodput_rps),
        )
        // The same number under `vllm bench serve`'s current key (null unless --goodput).
        .put("request_goodput", s.goodput.as_ref().map(|g| g.goodput_rps))
        .put("output_throughput", s.output_token_throughput_tps)
        .put("total_token_throughput", s.total_token_throughput_tps);
    let lens = |v: &[u64]| J::A(v.iter().map(|&x| J::from(x)).collect());
    o.put("input_lens", lens(&s.per_request.input_lens))
        .put("output_lens", lens(&s.per_request.output_lens))
        .put(
            "max_concurrent_requests",
            s.per_request.max_concurrent_requests,
        );
    spec_decode(&mut o, s);
    super::gpu_telemetry::power_fields(&mut o, s);
    let empty = Stat::default();
    for key in METRICS {
        let name = key.vllm_name().unwrap_or(key.as_str());
        let st = s.metric(key).unwrap_or(&empty);
        let mut stats = vec![
            (format!("mean_{name}_ms"), st.avg),
            (format!("median_{name}_ms"), st.p("p50")),
            (format!("std_{name}_ms"), st.std),
        ];
        for p in PERCENTILES {
            stats.push((format!("p{p}_{name}_ms"), st.p(&format!("p{p}"))));
        }
        for (k, v) in stats {
            // No values (NaN) would be written as 0 by benchmark_serving; both break 1000/TPOT.
            let v = if v.is_finite() { v } else { 0.0 };
            if name == "tpot" && v == 0.0 {
                return Err((k, v));
            }
            o.put(k, v);
        }
    }
    Ok(J::O(o))
}

/// `vllm bench serve`'s speculative-decoding keys, from the server's counters over the run: written
/// only when drafts were counted (vLLM leaves them all out otherwise: absent, not zero, says the
/// server was not speculating). The rate is a percentage, as vLLM writes it; per-position rates
/// are fractions of drafts. Without a draft-token counter the rate and draft tokens are unknown
/// and left out.
fn spec_decode(o: &mut Obj, s: &Summary) {
    let Some(n) = s.acceptance.as_ref().map(|r| &r.acceptance.numbers) else {
        return;
    };
    let Some(al) = n.acceptance_length.filter(|_| n.drafts > 0.0) else {
        return;
    };
    if let Some(rate) = n.acceptance_rate {
        o.put("spec_decode_acceptance_rate", rate * 100.0);
    }
    o.put("spec_decode_acceptance_length", al)
        .put("spec_decode_num_drafts", n.drafts.round() as u64);
    if let Some(d) = n.draft_tokens {
        o.put("spec_decode_draft_tokens", d.round() as u64);
    }
    o.put(
        "spec_decode_accepted_tokens",
        n.accepted_tokens.round() as u64,
    )
    .put(
        "spec_decode_per_position_acceptance_rates",
        J::A(
            n.per_position_acceptance
                .iter()
                .map(|&p| J::from(p))
                .collect(),
        ),
    );
}

/// Writes `<dir>/<name>.json`; `name` was checked by `config::result_file_name`.
pub(crate) fn write_raw_result(
    dir: &Path,
    name: &str,
    s: &Summary,
) -> Result<PathBuf, ReportError> {
    let path = dir.join(format!("{name}.json"));
    let j = raw_result(s).map_err(|(key, value)| ReportError::ZeroTpot {
        path: path.clone(),
        key,
        value,
    })?;
    std::fs::create_dir_all(dir).map_err(ReportError::io(dir))?;
    std::fs::write(&path, super::json::python_compact(&j)).map_err(ReportError::io(&path))?;
    Ok(path)
}
