//! The per-request `profile_export.jsonl` line, as AIPerf 0.13's `MetricRecordInfo` reads it.

use std::collections::BTreeMap;

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;

use super::super::json::Obj;
use super::{error_class, session_id, tag};
use crate::metrics::{MetricKey, RecordMetrics};
use crate::record::{FailureKind, Outcome, Phase, RequestRecord, SpecDecode, SpecSource};

#[derive(Serialize)]
struct ExportRecord<'a> {
    metadata: Metadata<'a>,
    metrics: Metrics<'a>,
    trace_data: (),
    spec_decode_acceptance: Option<Acceptance<'a>>,
    error: Option<ErrorDetails<'a>>,
}

/// AIPerf 0.13's `SpecDecodeAcceptanceRecord`: one request's steps, drafts and accepted tokens
/// with the sparse acceptance histogram. Built only when its validators would accept it.
#[derive(Debug, PartialEq, Serialize)]
struct Acceptance<'a> {
    engine: &'static str,
    mean_acceptance_length: f64,
    /// A fraction here (the per-record metric is the percentage).
    draft_acceptance_rate: f64,
    /// `{j: steps that accepted exactly j drafts}`, zero counts dropped (AIPerf's layout).
    acceptance_histogram: BTreeMap<usize, u64>,
    num_accepted_draft_tokens: u64,
    num_draft_tokens: u64,
    num_spec_steps: u64,
    num_spec_tokens: Option<u32>,
    completion_tokens: Option<u64>,
    per_step_accepted: Option<&'a [u32]>,
    per_step_drafted: Option<&'a [u32]>,
}

impl<'a> Acceptance<'a> {
    /// The record of a vLLM or SGLang response that reported steps and a histogram, when the
    /// figures satisfy AIPerf's validators (Σ counts = steps, Σ j·count = accepted, accepted ≤
    /// drafted, per-step arrays one entry per step summing to the totals, none accepting more
    /// than it drafted); `None` otherwise. The client already refuses inconsistent payloads:
    /// this keeps a record that slipped through from making the whole line invalid for AIPerf.
    fn of(d: &'a SpecDecode, completion_tokens: Option<u64>) -> Option<Self> {
        let engine = match d.source {
            SpecSource::Vllm | SpecSource::Sglang => d.source.as_str(),
            SpecSource::Llamacpp | SpecSource::Trtllm => return None,
        };
        let (steps, accepted, drafted) = (d.steps?, d.accepted_tokens?, d.draft_tokens?);
        if d.histogram.is_empty() || accepted > drafted {
            return None;
        }
        let counted: u64 = d.histogram.iter().sum();
        let weighted: u64 = d
            .histogram
            .iter()
            .enumerate()
            .map(|(j, &c)| j as u64 * c)
            .sum();
        if counted != steps || weighted != accepted {
            return None;
        }
        let per_step_ok = |v: &Option<Vec<u32>>, total: u64| {
            v.as_ref().is_none_or(|v| {
                v.len() as u64 == steps && v.iter().map(|&x| u64::from(x)).sum::<u64>() == total
            })
        };
        if !per_step_ok(&d.per_step_accepted, accepted)
            || !per_step_ok(&d.per_step_drafted, drafted)
        {
            return None;
        }
        if let (Some(a), Some(p)) = (&d.per_step_accepted, &d.per_step_drafted) {
            if a.iter().zip(p).any(|(a, p)| a > p) {
                return None;
            }
        }
        Some(Acceptance {
            engine,
            // vLLM's own values for a request without steps or drafts: AL 1, rate 0.
            mean_acceptance_length: d.acceptance_length().unwrap_or(1.0),
            draft_acceptance_rate: d.acceptance_rate().unwrap_or(0.0),
            acceptance_histogram: d
                .histogram
                .iter()
                .enumerate()
                .filter(|&(_, &c)| c > 0)
                .map(|(j, &c)| (j, c))
                .collect(),
            num_accepted_draft_tokens: accepted,
            num_draft_tokens: drafted,
            num_spec_steps: steps,
            num_spec_tokens: d.num_spec_tokens,
            completion_tokens,
            per_step_accepted: d.per_step_accepted.as_deref(),
            per_step_drafted: d.per_step_drafted.as_deref(),
        })
    }
}

#[derive(Serialize)]
struct Metadata<'a> {
    session_num: u64,
    x_request_id: String,
    x_correlation_id: String,
    conversation_id: String,
    turn_index: u32,
    // AgentX only (AIPerf writes them for trace loaders): where the turn came from.
    #[serde(skip_serializing_if = "Option::is_none")]
    source_trace_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    source_outer_idx: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    source_inner_idx: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    source_kind: Option<&'a str>,
    credit_issued_ns: u64,
    request_start_ns: u64,
    request_ack_ns: Option<u64>,
    request_end_ns: u64,
    worker_id: &'a str,
    record_processor_id: &'a str,
    benchmark_phase: &'a str,
    phase_index: Option<u32>,
    profiling_index: Option<u32>,
    phase_name: &'a str,
    phase_kind: &'a str,
    was_cancelled: bool,
    cancellation_time_ns: Option<u64>,
    context_overflow_skip: bool,
    agent_depth: u32,
    parent_correlation_id: Option<&'a str>,
    root_correlation_id: String,
}

#[derive(Serialize)]
struct ErrorDetails<'a> {
    code: Option<u16>,
    #[serde(rename = "type")]
    kind: &'a str,
    message: &'a str,
    cause: (),
    cause_chain: [(); 0],
    details: Obj,
}

/// `{tag: {"value", "unit"}}` of a successful record; empty for failures (AIPerf puts the
/// client-counted `error_isl` there; we count tokens only from `usage`, which failures lack).
struct Metrics<'a>(Option<(RecordMetrics, &'a RequestRecord)>);

#[derive(Serialize)]
struct Value<T> {
    value: T,
    unit: &'static str,
}

impl Serialize for Metrics<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        let Some((m, r)) = &self.0 else {
            return map.end();
        };
        let ms = |v: f64| Value {
            value: v,
            unit: "ms",
        };
        let tps = |v: f64| Value {
            value: v,
            unit: "tokens/sec/user",
        };
        if let Some(isl) = m.isl {
            tokens(&mut map, MetricKey::InputSequenceLength, isl)?;
        }
        if let Some(total) = m.usage_total {
            tokens(&mut map, MetricKey::UsageTotalTokens, total)?;
        }
        if let Some(v) = m.ttft_ms {
            map.serialize_entry(tag(MetricKey::TimeToFirstToken), &ms(v))?;
        }
        if let Some(v) = m.ttst_ms {
            map.serialize_entry(tag(MetricKey::TimeToSecondToken), &ms(v))?;
        }
        if let Some(v) = m.ttfo_ms {
            map.serialize_entry(tag(MetricKey::TimeToFirstOutputToken), &ms(v))?;
        }
        map.serialize_entry(tag(MetricKey::RequestLatency), &ms(m.latency_ms))?;
        if let Some(v) = m.decode_ms {
            map.serialize_entry(tag(MetricKey::DecodeDuration), &ms(v))?;
        }
        if !r.chunk_gaps.is_empty() {
            let gaps: Vec<f64> = r.chunk_gaps.iter().map(|g| g.gap_ns as f64 / 1e6).collect();
            map.serialize_entry(
                tag(MetricKey::InterChunkLatency),
                &Value {
                    value: gaps,
                    unit: "ms",
                },
            )?;
        }
        let reasoning = m.reasoning.unwrap_or(0);
        // Completion less reasoning tokens; AIPerf leaves it out when that is 0.
        let output = m.osl.saturating_sub(reasoning);
        if output > 0 {
            map.serialize_entry(
                tag(MetricKey::OutputTokenCount),
                &Value {
                    value: output,
                    unit: "tokens",
                },
            )?;
        }
        if m.reasoning.is_some() {
            map.serialize_entry(
                "reasoning_token_count",
                &Value {
                    value: reasoning,
                    unit: "tokens",
                },
            )?;
        }
        tokens(&mut map, MetricKey::OutputSequenceLength, m.osl)?;
        if let Some(pct) = m.osl_mismatch_pct {
            let key = MetricKey::OslMismatchDiffPct;
            map.serialize_entry(
                tag(key),
                &Value {
                    value: pct,
                    unit: key.unit(),
                },
            )?;
        }
        if let Some(v) = m.itl_ms {
            map.serialize_entry(tag(MetricKey::InterTokenLatency), &ms(v))?;
        }
        if let Some(v) = m.otps_user {
            map.serialize_entry(tag(MetricKey::OutputTokenThroughputPerUser), &tps(v))?;
        }
        if let Some(v) = m.e2e_tps {
            map.serialize_entry(tag(MetricKey::E2eOutputTokenThroughput), &tps(v))?;
        }
        if let Some(v) = m.prefill_tps {
            map.serialize_entry(tag(MetricKey::PrefillThroughputPerUser), &tps(v))?;
        }
        map.serialize_entry(
            tag(MetricKey::EffectiveLatency),
            &ms(m.effective_latency_ms),
        )?;
        map.serialize_entry(tag(MetricKey::DispatchLag), &ms(m.dispatch_lag_ms))?;
        for (key, value) in m.http.iter().flat_map(|h| h.values()) {
            let unit = key.unit();
            map.serialize_entry(tag(key), &Value { value, unit })?;
        }
        if let Some(d) = &r.spec {
            spec_metrics(&mut map, d)?;
        }
        map.end()
    }
}

/// A token count under its AIPerf tag and under AIPerf's `usage_*` twins of it (ISL and OSL are
/// the server's usage here, so the twins are the same numbers).
fn tokens<M: SerializeMap>(map: &mut M, key: MetricKey, value: u64) -> Result<(), M::Error> {
    let v = Value {
        value,
        unit: key.unit(),
    };
    map.serialize_entry(tag(key), &v)?;
    key.aiperf_twins()
        .iter()
        .try_for_each(|(twin, _)| map.serialize_entry(twin, &v))
}

/// AIPerf's six per-request spec-decode metrics, each only where the response's figures define
/// it (llama.cpp reports no steps: its rate and token counts only).
fn spec_metrics<M: SerializeMap>(map: &mut M, d: &SpecDecode) -> Result<(), M::Error> {
    for (key, value) in crate::metrics::spec_metrics(d) {
        let unit = key.unit();
        map.serialize_entry(tag(key), &Value { value, unit })?;
    }
    Ok(())
}

/// AIPerf 0.13's name for the warmup it synthesizes before an AgentX replay (its
/// `AGENTIC_WARMUP_PHASE_NAME`).
const AGENTX_WARMUP_PHASE: &str = "agentic.warmup";

/// Appends `r` as one AIPerf `profile_export.jsonl` record (no newline); nothing for an
/// AgentX context-overflow record, which AIPerf leaves out of the file. `epoch_ns` is the Unix
/// time of the run clock's zero: AIPerf's `*_ns` fields are epoch nanoseconds. `warmup_phase`
/// says whether a warmup phase comes before profiling (AIPerf's `phase_index` counts it).
pub(crate) fn write_record(
    out: &mut Vec<u8>,
    r: &RequestRecord,
    epoch_ns: u64,
    warmup_phase: bool,
) -> serde_json::Result<()> {
    let phase = match r.phase {
        Phase::Warmup => "warmup",
        Phase::Profiling => "profiling",
    };
    let cancelled = matches!(
        r.outcome,
        Outcome::Cancelled | Outcome::Failed(FailureKind::GracePeriodExpired)
    );
    let kind = match r.outcome {
        Outcome::Failed(k) => Some(k),
        _ => None,
    };
    let (class, code) = error_class(kind, r.http_status);
    let message = r.error.as_deref().unwrap_or(match r.outcome {
        Outcome::Cancelled => "cancelled by the run (deadline or signal)",
        _ => "",
    });
    let error = (!r.outcome.is_success()).then(|| ErrorDetails {
        code,
        kind: class,
        message,
        cause: (),
        cause_chain: [],
        details: Obj::new().with(
            "specperf_outcome",
            kind.map_or("cancelled", FailureKind::as_str),
        ),
    });
    let session = r.session.as_deref();
    if session.is_some_and(|s| s.context_overflow) {
        return Ok(());
    }
    let request_id = format!("specperf-{}", r.id);
    // AgentX: AIPerf synthesizes the replay's warmup outside its declared phases, so it has a
    // name of its own and no index; profiling is then the first (only) declared phase.
    let (phase_name, phase_index) = match (r.phase, session.is_some()) {
        (Phase::Warmup, true) => (AGENTX_WARMUP_PHASE, None),
        (Phase::Profiling, true) => (phase, Some(0)),
        (Phase::Warmup, false) => (phase, Some(0)),
        (Phase::Profiling, false) => (phase, Some(u32::from(warmup_phase))),
    };
    let rec = ExportRecord {
        metadata: Metadata {
            session_num: session.map_or(r.id, |s| s.session_num),
            // Every turn of a session shares the session's id (AIPerf's correlation id); a
            // non-AgentX session is always a root (no subagents), so it is its own root.
            root_correlation_id: session
                .map_or_else(|| request_id.clone(), |s| s.root_correlation_id.clone()),
            x_correlation_id: session
                .map_or_else(|| request_id.clone(), |s| s.x_correlation_id.clone()),
            x_request_id: session.map_or(request_id, |s| s.x_request_id.clone()),
            conversation_id: session
                .map_or_else(|| session_id(r.sample_index), |s| s.conversation_id.clone()),
            turn_index: r.turn,
            source_trace_id: session.map(|s| s.source_trace_id.as_str()),
            source_outer_idx: session.map(|s| s.source_outer_idx),
            source_inner_idx: session.and_then(|s| s.source_inner_idx),
            source_kind: session.map(|s| s.source_kind.as_str()),
            credit_issued_ns: epoch_ns + r.intended_ns,
            request_start_ns: epoch_ns + r.sent_ns,
            request_ack_ns: r.headers_ns.map(|t| epoch_ns + t),
            request_end_ns: epoch_ns + r.end_ns,
            worker_id: "specperf",
            record_processor_id: "specperf-aggregator",
            benchmark_phase: phase,
            // The place in AIPerf's ordered phases list, and among its profiling phases.
            phase_index,
            profiling_index: (r.phase == Phase::Profiling).then_some(0),
            phase_name,
            phase_kind: phase,
            was_cancelled: cancelled,
            cancellation_time_ns: cancelled.then_some(epoch_ns + r.end_ns),
            context_overflow_skip: false,
            agent_depth: session.map_or(0, |s| s.agent_depth),
            parent_correlation_id: session.and_then(|s| s.parent_correlation_id.as_deref()),
        },
        metrics: Metrics(r.outcome.is_success().then(|| (RecordMetrics::of(r), r))),
        trace_data: (),
        spec_decode_acceptance: r
            .spec
            .as_deref()
            .filter(|_| r.outcome.is_success())
            .and_then(|d| Acceptance::of(d, r.completion_tokens)),
        error,
    };
    serde_json::to_writer(out, &rec)
}
