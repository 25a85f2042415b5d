//! Per-request speculative-decoding figures in a response -> a checked [`SpecDecode`] or a named
//! warning, for [`classify`](super::sse::classify).
//!
//! Each server puts them somewhere else: vLLM at the root under `metrics.speculative_decoding`,
//! SGLang under `sglext.spec_tokens_details`, llama.cpp in the root `timings`, TensorRT-LLM as
//! `avg_decoded_tokens_per_iter` on each choice. The classifier only borrows those fields as raw
//! JSON; they are parsed here, once per response for the first three (a per-chunk float for
//! TensorRT-LLM), so ordinary chunks pay nothing. A payload that contradicts itself (a histogram
//! that does not sum to the steps, a float where a count belongs) is never half-kept: the record
//! gets a warning that names the payload and the numbers instead.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::record::{SpecDecode, SpecSource};

/// What a chunk said about the request's speculative decoding. The last chunk that says
/// anything decides what the record keeps.
#[derive(Debug, PartialEq)]
pub enum SpecReport {
    /// Counts that passed every consistency check (vLLM, SGLang, llama.cpp).
    Figures(Box<SpecDecode>),
    /// TensorRT-LLM's `avg_decoded_tokens_per_iter` as of this chunk (cumulative; >= 1).
    TokensPerIter(f64),
    /// A payload that failed a check: the warning for the record, naming the payload and the
    /// numbers that disagree. The request keeps no figures.
    Malformed(Box<str>),
}

const VLLM: &str = "malformed vLLM spec-decode payload (metrics.speculative_decoding)";
const SGLANG: &str = "malformed SGLang spec_tokens_details";
const LLAMACPP: &str = "malformed llama.cpp timings";
const TRTLLM: &str = "malformed TensorRT-LLM avg_decoded_tokens_per_iter";

/// The figures carried by a response root's `metrics`, `sglext` and `timings` fields (each raw,
/// each optional), in that order of precedence; `None` when none of them holds any.
pub(super) fn from_root(
    metrics: Option<&RawValue>,
    sglext: Option<&RawValue>,
    timings: Option<&RawValue>,
) -> Option<SpecReport> {
    metrics
        .and_then(vllm)
        .or_else(|| sglext.and_then(sglang))
        .or_else(|| timings.and_then(llamacpp))
}

/// One choice's `avg_decoded_tokens_per_iter` (TensorRT-LLM, cumulative as of this chunk).
pub(super) fn tokens_per_iter(raw: &RawValue) -> SpecReport {
    match serde_json::from_str::<f64>(raw.get()) {
        Ok(v) if v.is_finite() && v >= 1.0 => SpecReport::TokensPerIter(v),
        _ => warning(
            TRTLLM,
            format!("{} is not a finite number >= 1", short(raw.get())),
        ),
    }
}

/// The record's figures for TensorRT-LLM's tokens per iteration: no counts, only the ratio.
pub(super) fn trtllm(tokens_per_iter: f64) -> SpecDecode {
    SpecDecode {
        source: SpecSource::Trtllm,
        steps: None,
        draft_tokens: None,
        accepted_tokens: None,
        histogram: Vec::new(),
        num_spec_tokens: None,
        reported_acceptance_length: Some(tokens_per_iter),
        per_step_accepted: None,
        per_step_drafted: None,
    }
}

fn warning(payload: &str, what: String) -> SpecReport {
    SpecReport::Malformed(format!("{payload}: {what}").into_boxed_str())
}

fn report(parsed: Result<SpecDecode, String>, payload: &str) -> SpecReport {
    match parsed {
        Ok(d) => SpecReport::Figures(Box::new(d)),
        Err(what) => warning(payload, what),
    }
}

/// vLLM: `metrics.speculative_decoding`. A `metrics` that is not an object is some other server's
/// field, and a null payload (n > 1) means no figures: neither warns.
fn vllm(metrics: &RawValue) -> Option<SpecReport> {
    #[derive(Deserialize)]
    struct Metrics<'a> {
        #[serde(default, borrow)]
        speculative_decoding: Option<&'a RawValue>,
    }
    let payload = serde_json::from_str::<Metrics<'_>>(metrics.get())
        .ok()?
        .speculative_decoding?;
    Some(report(vllm_payload(payload.get()), VLLM))
}

fn vllm_payload(text: &str) -> Result<SpecDecode, String> {
    let o = object(text)?;
    let histogram = counts(&o, "acceptance_histogram")?.ok_or("acceptance_histogram is missing")?;
    let steps = count(&o, "num_spec_steps")?;
    let accepted = count(&o, "num_accepted_draft_tokens")?;
    let drafted = count(&o, "num_draft_tokens")?;
    let k = optional_count(&o, "num_spec_tokens")?;
    let num_spec_tokens = match k {
        None => None,
        Some(k) => {
            let k = u32::try_from(k).map_err(|_| format!("num_spec_tokens {k} is too large"))?;
            if histogram.len() as u64 != u64::from(k) + 1 {
                return Err(format!(
                    "acceptance_histogram has {} buckets; num_spec_tokens {k} needs {}",
                    histogram.len(),
                    u64::from(k) + 1
                ));
            }
            Some(k)
        }
    };
    check_histogram(
        &histogram,
        (steps, "num_spec_steps"),
        (accepted, "num_accepted_draft_tokens"),
        "acceptance_histogram",
    )?;
    if accepted > drafted {
        return Err(format!(
            "num_accepted_draft_tokens {accepted} exceeds num_draft_tokens {drafted}"
        ));
    }
    let per_step_accepted = counts(&o, "per_step_accepted")?;
    let per_step_drafted = counts(&o, "per_step_drafted")?;
    let (per_step_accepted, per_step_drafted) = match (per_step_accepted, per_step_drafted) {
        (None, None) => (None, None),
        (Some(a), Some(d)) => {
            let (a, d) = per_step(a, d, steps, accepted, drafted)?;
            (Some(a), Some(d))
        }
        (Some(_), None) => return Err("per_step_accepted without per_step_drafted".into()),
        (None, Some(_)) => return Err("per_step_drafted without per_step_accepted".into()),
    };
    Ok(SpecDecode {
        source: SpecSource::Vllm,
        steps: Some(steps),
        draft_tokens: Some(drafted),
        accepted_tokens: Some(accepted),
        histogram,
        num_spec_tokens,
        reported_acceptance_length: ratio(&o, "mean_acceptance_length")?,
        per_step_accepted,
        per_step_drafted,
    })
}

/// vLLM `detailed`: one entry per verify step, summing to the totals, each accepted ≤ drafted.
fn per_step(
    a: Vec<u64>,
    d: Vec<u64>,
    steps: u64,
    accepted: u64,
    drafted: u64,
) -> Result<(Vec<u32>, Vec<u32>), String> {
    for (name, list) in [("per_step_accepted", &a), ("per_step_drafted", &d)] {
        if list.len() as u64 != steps {
            return Err(format!(
                "{name} has {} entries but num_spec_steps is {steps}",
                list.len()
            ));
        }
    }
    let sum = |l: &[u64]| l.iter().map(|&x| u128::from(x)).sum::<u128>();
    let (sa, sd) = (sum(&a), sum(&d));
    if sa != u128::from(accepted) {
        return Err(format!(
            "per_step_accepted sums to {sa} but num_accepted_draft_tokens is {accepted}"
        ));
    }
    if sd != u128::from(drafted) {
        return Err(format!(
            "per_step_drafted sums to {sd} but num_draft_tokens is {drafted}"
        ));
    }
    if let Some(i) = (0..a.len()).find(|&i| a[i] > d[i]) {
        return Err(format!(
            "step {i} accepted {} of {} drafts (per_step_accepted > per_step_drafted)",
            a[i], d[i]
        ));
    }
    let narrow = |name: &str, l: Vec<u64>| -> Result<Vec<u32>, String> {
        l.into_iter()
            .enumerate()
            .map(|(i, x)| u32::try_from(x).map_err(|_| format!("{name}[{i}] {x} is too large")))
            .collect()
    };
    Ok((
        narrow("per_step_accepted", a)?,
        narrow("per_step_drafted", d)?,
    ))
}

/// SGLang: `sglext.spec_tokens_details`, an object for n = 1 (a one-element list is taken too; a
/// longer list is per choice and left out, as vLLM leaves n > 1 out).
fn sglang(sglext: &RawValue) -> Option<SpecReport> {
    #[derive(Deserialize)]
    struct Ext<'a> {
        #[serde(default, borrow)]
        spec_tokens_details: Option<&'a RawValue>,
    }
    let raw = serde_json::from_str::<Ext<'_>>(sglext.get())
        .ok()?
        .spec_tokens_details?;
    let details = match serde_json::from_str::<Value>(raw.get()) {
        Ok(Value::Array(mut list)) if list.len() == 1 => list.pop()?,
        Ok(Value::Array(_)) => return None,
        Ok(v) => v,
        Err(e) => return Some(warning(SGLANG, e.to_string())),
    };
    let parsed = match details {
        Value::Null => return None,
        Value::Object(o) => sglang_details(&o),
        other => Err(format!(
            "expected an object, got {}",
            short(&other.to_string())
        )),
    };
    Some(report(parsed, SGLANG))
}

fn sglang_details(o: &Map<String, Value>) -> Result<SpecDecode, String> {
    let steps = count(o, "spec_verify_ct")?;
    let correct = aliased(o, "spec_num_correct_drafts", "spec_accepted_drafts", count)?;
    let proposed = aliased(o, "spec_num_proposed_drafts", "spec_proposed_drafts", count)?;
    // SGLang defaults the histogram to an empty list when it has none: no histogram then.
    let (h, h_alias) = ("spec_correct_drafts_histogram", "spec_accept_histogram");
    let sent = |k: &str| o.get(k).is_some_and(|v| !v.is_null());
    let histogram = if sent(h) || sent(h_alias) {
        aliased(o, h, h_alias, |o, k| {
            counts(o, k)?.ok_or_else(|| format!("{k} is missing"))
        })?
    } else {
        Vec::new()
    };
    if !histogram.is_empty() {
        check_histogram(
            &histogram,
            (steps, "spec_verify_ct"),
            (correct, "spec_num_correct_drafts"),
            "spec_correct_drafts_histogram",
        )?;
    }
    if correct > proposed {
        return Err(format!(
            "spec_num_correct_drafts {correct} exceeds spec_num_proposed_drafts {proposed}"
        ));
    }
    Ok(SpecDecode {
        source: SpecSource::Sglang,
        steps: Some(steps),
        draft_tokens: Some(proposed),
        accepted_tokens: Some(correct),
        histogram,
        num_spec_tokens: None,
        reported_acceptance_length: ratio(o, "spec_accept_length")?,
        per_step_accepted: None,
        per_step_drafted: None,
    })
}

/// A field under its current name or its older alias; when both are sent they must agree.
fn aliased<T: PartialEq + std::fmt::Debug>(
    o: &Map<String, Value>,
    name: &str,
    alias: &str,
    read: impl Fn(&Map<String, Value>, &str) -> Result<T, String>,
) -> Result<T, String> {
    let present = |k: &str| o.get(k).is_some_and(|v| !v.is_null());
    match (present(name), present(alias)) {
        (true, true) => {
            let (a, b) = (read(o, name)?, read(o, alias)?);
            if a != b {
                return Err(format!("{name} is {a:?} but its alias {alias} is {b:?}"));
            }
            Ok(a)
        }
        (true, false) => read(o, name),
        (false, true) => read(o, alias),
        (false, false) => Err(format!("{name} (or its alias {alias}) is missing")),
    }
}

/// llama.cpp: `timings.draft_n` / `draft_n_accepted`, present only once drafts were made.
fn llamacpp(timings: &RawValue) -> Option<SpecReport> {
    #[derive(Deserialize)]
    struct Timings<'a> {
        #[serde(default, borrow)]
        draft_n: Option<&'a RawValue>,
        #[serde(default, borrow)]
        draft_n_accepted: Option<&'a RawValue>,
    }
    let t = serde_json::from_str::<Timings<'_>>(timings.get()).ok()?;
    let parsed = match (t.draft_n, t.draft_n_accepted) {
        (None, None) => return None,
        (Some(d), Some(a)) => llamacpp_counts(d, a),
        (Some(_), None) => Err("draft_n without draft_n_accepted".into()),
        (None, Some(_)) => Err("draft_n_accepted without draft_n".into()),
    };
    Some(report(parsed, LLAMACPP))
}

fn llamacpp_counts(d: &RawValue, a: &RawValue) -> Result<SpecDecode, String> {
    let int = |name: &str, raw: &RawValue| {
        serde_json::from_str::<u64>(raw.get())
            .map_err(|_| format!("{name} is {}, not a non-negative integer", short(raw.get())))
    };
    let (drafted, accepted) = (int("draft_n", d)?, int("draft_n_accepted", a)?);
    if accepted > drafted {
        return Err(format!(
            "draft_n_accepted {accepted} exceeds draft_n {drafted}"
        ));
    }
    Ok(SpecDecode {
        source: SpecSource::Llamacpp,
        steps: None,
        draft_tokens: Some(drafted),
        accepted_tokens: Some(accepted),
        histogram: Vec::new(),
        num_spec_tokens: None,
        reported_acceptance_length: None,
        per_step_accepted: None,
        per_step_drafted: None,
    })
}

/// Histogram index j counts the steps that accepted exactly j drafts: it must sum to the steps,
/// and Σ j·h[j] to the accepted drafts.
fn check_histogram(
    h: &[u64],
    (steps, steps_name): (u64, &str),
    (accepted, accepted_name): (u64, &str),
    name: &str,
) -> Result<(), String> {
    let total: u128 = h.iter().map(|&c| u128::from(c)).sum();
    if total != u128::from(steps) {
        return Err(format!(
            "{name} sums to {total} steps but {steps_name} is {steps}"
        ));
    }
    let weighted: u128 = h
        .iter()
        .enumerate()
        .map(|(j, &c)| j as u128 * u128::from(c))
        .sum();
    if weighted != u128::from(accepted) {
        return Err(format!(
            "{name} accounts for {weighted} accepted drafts but {accepted_name} is {accepted}"
        ));
    }
    Ok(())
}

fn object(text: &str) -> Result<Map<String, Value>, String> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(o)) => Ok(o),
        Ok(_) | Err(_) => Err(format!("expected an object, got {}", short(text))),
    }
}

/// A required non-negative integer (3.0, -1, true and "3" are not).
fn count(o: &Map<String, Value>, key: &str) -> Result<u64, String> {
    optional_count(o, key)?.ok_or_else(|| format!("{key} is missing"))
}

fn optional_count(o: &Map<String, Value>, key: &str) -> Result<Option<u64>, String> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_u64().map(Some).ok_or_else(|| {
            format!(
                "{key} is {}, not a non-negative integer",
                short(&v.to_string())
            )
        }),
    }
}

/// An optional list of non-negative integers.
fn counts(o: &Map<String, Value>, key: &str) -> Result<Option<Vec<u64>>, String> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(list)) => list
            .iter()
            .enumerate()
            .map(|(i, v)| {
                v.as_u64().ok_or_else(|| {
                    format!(
                        "{key}[{i}] is {}, not a non-negative integer",
                        short(&v.to_string())
                    )
                })
            })
            .collect::<Result<Vec<u64>, String>>()
            .map(Some),
        Some(v) => Err(format!(
            "{key} is {}, not a list of counts",
            short(&v.to_string())
        )),
    }
}

/// An optional finite number (the server's own acceptance length).
fn ratio(o: &Map<String, Value>, key: &str) -> Result<Option<f64>, String> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_f64()
            .filter(|x| x.is_finite())
            .map(Some)
            .ok_or_else(|| format!("{key} is {}, not a number", short(&v.to_string()))),
    }
}

/// At most 40 characters of a JSON value, for a warning.
fn short(text: &str) -> String {
    match text.char_indices().nth(40) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::sse::{classify, Event};
    use super::*;

    /// The vLLM doc's example payload: Σ hist = 43 steps, Σ j·hist = 10 accepted of 129 drafts.
    const VLLM_SPEC: &str = r#"{"mean_acceptance_length":1.2325581395348837,"draft_acceptance_rate":0.07751937984496124,"acceptance_histogram":[39,1,0,3],"num_spec_steps":43,"num_accepted_draft_tokens":10,"num_draft_tokens":129,"num_spec_tokens":3}"#;
    /// The SGLang PR thread's example: Σ hist = 43 verify steps, Σ j·hist = 63 correct drafts.
    const SGLANG_SPEC: &str = r#"{"spec_accept_rate":0.2930,"spec_accept_length":2.4651,"spec_num_correct_drafts":63,"spec_num_proposed_drafts":215,"spec_verify_ct":43,"spec_correct_drafts_histogram":[11,14,11,4,0,3]}"#;
    const LLAMA_TIMINGS: &str = r#"{"cache_n":0,"prompt_n":12,"prompt_ms":5.1,"prompt_per_token_ms":0.42,"prompt_per_second":2352.9,"predicted_n":24,"predicted_ms":80.2,"predicted_per_token_ms":3.34,"predicted_per_second":299.2,"draft_n":40,"draft_n_accepted":17}"#;

    fn spec_of(data: &str) -> Option<SpecReport> {
        match classify(data.as_bytes()).expect("chunk parses") {
            Event::Chunk(c) => c.spec,
            other => panic!("not a chunk: {other:?}"),
        }
    }

    fn figures(data: &str) -> SpecDecode {
        match spec_of(data) {
            Some(SpecReport::Figures(f)) => *f,
            other => panic!("expected figures, got {other:?} from {data}"),
        }
    }

    fn warned(data: &str) -> String {
        match spec_of(data) {
            Some(SpecReport::Malformed(w)) => w.into(),
            other => panic!("expected a warning, got {other:?} from {data}"),
        }
    }

    /// A non-streamed `/v1/completions` body with `metrics.speculative_decoding` at the root.
    fn vllm_completion(payload: &str) -> String {
        format!(
            r#"{{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{{"index":0,"text":" x","logprobs":null,"finish_reason":"length"}}],"usage":{{"prompt_tokens":12,"completion_tokens":24,"total_tokens":36}},"metrics":{{"speculative_decoding":{payload}}}}}"#
        )
    }

    /// The final usage chunk of a vLLM chat stream (`choices: []`).
    fn vllm_usage_chunk(payload: &str) -> String {
        format!(
            r#"{{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{{"prompt_tokens":12,"completion_tokens":24,"total_tokens":36}},"metrics":{{"speculative_decoding":{payload}}}}}"#
        )
    }

    #[test]
    fn vllm_figures_from_a_body_and_from_the_usage_chunk() {
        let want = SpecDecode {
            source: SpecSource::Vllm,
            steps: Some(43),
            draft_tokens: Some(129),
            accepted_tokens: Some(10),
            histogram: vec![39, 1, 0, 3],
            num_spec_tokens: Some(3),
            reported_acceptance_length: Some(1.2325581395348837),
            per_step_accepted: None,
            per_step_drafted: None,
        };
        assert_eq!(figures(&vllm_completion(VLLM_SPEC)), want);
        assert_eq!(figures(&vllm_usage_chunk(VLLM_SPEC)), want);
        let chat = format!(
            r#"{{"id":"chatcmpl-1","object":"chat.completion","choices":[{{"index":0,"message":{{"role":"assistant","content":"hi"}},"finish_reason":"stop"}}],"usage":{{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}},"metrics":{{"speculative_decoding":{VLLM_SPEC}}}}}"#
        );
        assert_eq!(figures(&chat), want);
        assert_eq!(want.acceptance_length(), Some(1.0 + 10.0 / 43.0));
    }

    #[test]
    fn vllm_detailed_arrays_and_unknown_keys() {
        let detailed = r#"{"mean_acceptance_length":2.5,"draft_acceptance_rate":0.5,"acceptance_histogram":[1,1,1,1],"acceptance_histogram_by_draft_length":{"3":[1,1,1,1]},"num_spec_steps":4,"num_accepted_draft_tokens":6,"num_draft_tokens":12,"num_spec_tokens":3,"per_step_accepted":[0,1,2,3],"per_step_drafted":[3,3,3,3],"future_field":{"x":[1.5]}}"#;
        let f = figures(&vllm_completion(detailed));
        assert_eq!(f.per_step_accepted, Some(vec![0, 1, 2, 3]));
        assert_eq!(f.per_step_drafted, Some(vec![3, 3, 3, 3]));
        assert_eq!((f.steps, f.accepted_tokens), (Some(4), Some(6)));
        // `metrics` with other keys and no payload, or a null payload (n > 1): nothing, quietly.
        let other = r#"{"choices":[],"metrics":{"time_in_queue":0.1}}"#;
        assert_eq!(spec_of(other), None);
        assert_eq!(spec_of(&vllm_usage_chunk("null")), None);
        // A root `metrics` that is not an object is some other server's field.
        assert_eq!(spec_of(r#"{"choices":[],"metrics":[1,2]}"#), None);
        // Zero steps: an all-zero histogram is consistent.
        let zero = r#"{"mean_acceptance_length":1.0,"draft_acceptance_rate":0.0,"acceptance_histogram":[0,0,0,0],"num_spec_steps":0,"num_accepted_draft_tokens":0,"num_draft_tokens":0,"num_spec_tokens":3}"#;
        assert_eq!(figures(&vllm_completion(zero)).steps, Some(0));
    }

    #[test]
    fn vllm_malformed_payloads_are_named_with_their_numbers() {
        let prefix = "malformed vLLM spec-decode payload (metrics.speculative_decoding): ";
        let cases: &[(&str, &str, &str)] = &[
            ("[39,1,0,3]", "[39,1,0,3.0]", "acceptance_histogram[3] is 3.0, not a non-negative integer"),
            ("[39,1,0,3]", "[39,true,0,3]", "acceptance_histogram[1] is true, not a non-negative integer"),
            ("[39,1,0,3]", "[39,1,-1,3]", "acceptance_histogram[2] is -1, not a non-negative integer"),
            ("[39,1,0,3]", "{\"0\":39}", "acceptance_histogram is {\"0\":39}, not a list of counts"),
            ("\"num_spec_tokens\":3", "\"num_spec_tokens\":4", "acceptance_histogram has 4 buckets; num_spec_tokens 4 needs 5"),
            ("\"num_spec_steps\":43", "\"num_spec_steps\":44", "acceptance_histogram sums to 43 steps but num_spec_steps is 44"),
            ("\"num_accepted_draft_tokens\":10", "\"num_accepted_draft_tokens\":11", "acceptance_histogram accounts for 10 accepted drafts but num_accepted_draft_tokens is 11"),
            ("\"num_draft_tokens\":129", "\"num_draft_tokens\":9", "num_accepted_draft_tokens 10 exceeds num_draft_tokens 9"),
            ("\"num_draft_tokens\":129", "\"num_draft_tokens\":129.0", "num_draft_tokens is 129.0, not a non-negative integer"),
            ("\"num_spec_steps\":43,", "", "num_spec_steps is missing"),
            ("\"acceptance_histogram\":[39,1,0,3],", "", "acceptance_histogram is missing"),
            ("1.2325581395348837", "\"fast\"", "mean_acceptance_length is \"fast\", not a number"),
        ];
        for (from, to, what) in cases {
            let payload = VLLM_SPEC.replace(from, to);
            assert_ne!(payload, VLLM_SPEC, "{from} not in the fixture");
            assert_eq!(
                warned(&vllm_completion(&payload)),
                format!("{prefix}{what}")
            );
        }
        assert_eq!(
            warned(&vllm_usage_chunk("[1,2]")),
            format!("{prefix}expected an object, got [1,2]")
        );
        let detailed = r#"{"acceptance_histogram":[1,1,1,1],"num_spec_steps":4,"num_accepted_draft_tokens":6,"num_draft_tokens":12,"num_spec_tokens":3,"per_step_accepted":[0,1,2,3],"per_step_drafted":[3,3,3,3]}"#;
        let cases: &[(&str, &str, &str)] = &[
            (
                "[0,1,2,3]",
                "[0,1,2]",
                "per_step_accepted has 3 entries but num_spec_steps is 4",
            ),
            (
                "[0,1,2,3]",
                "[0,1,2,4]",
                "per_step_accepted sums to 7 but num_accepted_draft_tokens is 6",
            ),
            (
                "[3,3,3,3]",
                "[3,3,3,4]",
                "per_step_drafted sums to 13 but num_draft_tokens is 12",
            ),
            (
                "[3,3,3,3]",
                "[4,4,2,2]",
                "step 3 accepted 3 of 2 drafts (per_step_accepted > per_step_drafted)",
            ),
            (
                "[0,1,2,3]",
                "[0,1,2,3.0]",
                "per_step_accepted[3] is 3.0, not a non-negative integer",
            ),
            (
                ",\"per_step_drafted\":[3,3,3,3]",
                "",
                "per_step_accepted without per_step_drafted",
            ),
        ];
        for (from, to, what) in cases {
            let payload = detailed.replace(from, to);
            assert_ne!(payload, detailed, "{from} not in the fixture");
            assert_eq!(
                warned(&vllm_completion(&payload)),
                format!("{prefix}{what}")
            );
        }
    }

    #[test]
    fn sglang_figures_in_a_stream_chunk_and_a_body_under_either_name() {
        let want = SpecDecode {
            source: SpecSource::Sglang,
            steps: Some(43),
            draft_tokens: Some(215),
            accepted_tokens: Some(63),
            histogram: vec![11, 14, 11, 4, 0, 3],
            num_spec_tokens: None,
            reported_acceptance_length: Some(2.4651),
            per_step_accepted: None,
            per_step_drafted: None,
        };
        // Streamed completions: a `choices: []` chunk before the usage chunk.
        let chunk = format!(
            r#"{{"id":"c1","object":"text_completion","created":1,"model":"m","choices":[],"usage":null,"sglext":{{"spec_tokens_details":{SGLANG_SPEC}}}}}"#
        );
        assert_eq!(figures(&chunk), want);
        let body = format!(
            r#"{{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{{"index":0,"message":{{"role":"assistant","content":"ok"}},"finish_reason":"stop"}}],"usage":{{"prompt_tokens":5,"completion_tokens":106,"total_tokens":111}},"sglext":{{"cached_tokens_details":null,"spec_tokens_details":[{SGLANG_SPEC}]}}}}"#
        );
        assert_eq!(figures(&body), want);
        let old = SGLANG_SPEC
            .replace("spec_num_correct_drafts", "spec_accepted_drafts")
            .replace("spec_num_proposed_drafts", "spec_proposed_drafts")
            .replace("spec_correct_drafts_histogram", "spec_accept_histogram");
        assert_eq!(
            figures(&format!(
                r#"{{"choices":[],"sglext":{{"spec_tokens_details":{old}}}}}"#
            )),
            want
        );
        // Both names sent and agreeing, and SGLang's empty default histogram.
        let both = SGLANG_SPEC.replace(
            "}",
            r#","spec_accepted_drafts":63,"spec_accept_histogram":[11,14,11,4,0,3]}"#,
        );
        assert_eq!(
            figures(&format!(
                r#"{{"choices":[],"sglext":{{"spec_tokens_details":{both}}}}}"#
            )),
            want
        );
        let no_hist = SGLANG_SPEC.replace(
            ",\"spec_correct_drafts_histogram\":[11,14,11,4,0,3]",
            ",\"spec_correct_drafts_histogram\":[]",
        );
        let f = figures(&format!(
            r#"{{"choices":[],"sglext":{{"spec_tokens_details":{no_hist}}}}}"#
        ));
        assert!(f.histogram.is_empty() && f.steps == Some(43));
        // n > 1 lists, null details, and an sglext without them: no figures, no warning.
        let two = format!(
            r#"{{"choices":[],"sglext":{{"spec_tokens_details":[{SGLANG_SPEC},{SGLANG_SPEC}]}}}}"#
        );
        assert_eq!(spec_of(&two), None);
        assert_eq!(
            spec_of(r#"{"choices":[],"sglext":{"spec_tokens_details":null}}"#),
            None
        );
        assert_eq!(
            spec_of(r#"{"choices":[],"sglext":{"routed_experts":null}}"#),
            None
        );
    }

    #[test]
    fn sglang_malformed_details_are_named() {
        let prefix = "malformed SGLang spec_tokens_details: ";
        let cases: &[(&str, &str, &str)] = &[
            ("[11,14,11,4,0,3]", "[11,14,11,4,0,4]", "spec_correct_drafts_histogram sums to 44 steps but spec_verify_ct is 43"),
            ("[11,14,11,4,0,3]", "[12,13,11,4,0,3]", "spec_correct_drafts_histogram accounts for 62 accepted drafts but spec_num_correct_drafts is 63"),
            ("\"spec_num_proposed_drafts\":215", "\"spec_num_proposed_drafts\":62", "spec_num_correct_drafts 63 exceeds spec_num_proposed_drafts 62"),
            ("\"spec_verify_ct\":43", "\"spec_verify_ct\":43.0", "spec_verify_ct is 43.0, not a non-negative integer"),
            ("\"spec_num_correct_drafts\":63,", "", "spec_num_correct_drafts (or its alias spec_accepted_drafts) is missing"),
            ("\"spec_num_correct_drafts\":63", "\"spec_num_correct_drafts\":63,\"spec_accepted_drafts\":62", "spec_num_correct_drafts is 63 but its alias spec_accepted_drafts is 62"),
        ];
        for (from, to, what) in cases {
            let d = SGLANG_SPEC.replace(from, to);
            assert_ne!(d, SGLANG_SPEC, "{from} not in the fixture");
            let chunk = format!(r#"{{"choices":[],"sglext":{{"spec_tokens_details":{d}}}}}"#);
            assert_eq!(warned(&chunk), format!("{prefix}{what}"));
        }
        assert_eq!(
            warned(r#"{"choices":[],"sglext":{"spec_tokens_details":7}}"#),
            format!("{prefix}expected an object, got 7")
        );
    }

    #[test]
    fn llamacpp_timings_in_bodies_and_final_chunks() {
        let want = SpecDecode {
            source: SpecSource::Llamacpp,
            steps: None,
            draft_tokens: Some(40),
            accepted_tokens: Some(17),
            histogram: Vec::new(),
            num_spec_tokens: None,
            reported_acceptance_length: None,
            per_step_accepted: None,
            per_step_drafted: None,
        };
        let chat = format!(
            r#"{{"choices":[{{"finish_reason":"length","index":0,"message":{{"role":"assistant","content":"a b"}}}}],"created":1,"model":"m","system_fingerprint":"b1","object":"chat.completion","usage":{{"completion_tokens":24,"prompt_tokens":12,"total_tokens":36}},"id":"chatcmpl-1","timings":{LLAMA_TIMINGS}}}"#
        );
        assert_eq!(figures(&chat), want);
        let final_chunk = format!(
            r#"{{"choices":[{{"text":"","index":0,"logprobs":null,"finish_reason":"length"}}],"created":1,"model":"m","system_fingerprint":"b1","object":"text_completion","id":"cmpl-1","usage":{{"completion_tokens":24,"prompt_tokens":12,"total_tokens":36}},"timings":{LLAMA_TIMINGS}}}"#
        );
        assert_eq!(figures(&final_chunk), want);
        // No drafts made (or no speculative decoding): no draft_n, no figures, no warning.
        let plain = LLAMA_TIMINGS.replace(",\"draft_n\":40,\"draft_n_accepted\":17", "");
        assert_eq!(
            spec_of(&format!(r#"{{"choices":[],"timings":{plain}}}"#)),
            None
        );

        let prefix = "malformed llama.cpp timings: ";
        let cases: &[(&str, &str, &str)] = &[
            (
                "\"draft_n\":40",
                "\"draft_n\":40.5",
                "draft_n is 40.5, not a non-negative integer",
            ),
            (
                "\"draft_n_accepted\":17",
                "\"draft_n_accepted\":-1",
                "draft_n_accepted is -1, not a non-negative integer",
            ),
            (
                "\"draft_n_accepted\":17",
                "\"draft_n_accepted\":41",
                "draft_n_accepted 41 exceeds draft_n 40",
            ),
            (
                ",\"draft_n_accepted\":17",
                "",
                "draft_n without draft_n_accepted",
            ),
            ("\"draft_n\":40,", "", "draft_n_accepted without draft_n"),
        ];
        for (from, to, what) in cases {
            let t = LLAMA_TIMINGS.replace(from, to);
            assert_ne!(t, LLAMA_TIMINGS, "{from} not in the fixture");
            let chunk = format!(r#"{{"choices":[],"timings":{t}}}"#);
            assert_eq!(warned(&chunk), format!("{prefix}{what}"));
        }
    }

    #[test]
    fn trtllm_tokens_per_iteration_on_the_first_choice() {
        let chunk = |v: &str, index: u32| {
            format!(
                r#"{{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{{"index":{index},"delta":{{"content":"Hi"}},"logprobs":null,"finish_reason":null,"stop_reason":null,"avg_decoded_tokens_per_iter":{v}}}]}}"#
            )
        };
        assert_eq!(
            spec_of(&chunk("2.75", 0)),
            Some(SpecReport::TokensPerIter(2.75))
        );
        assert_eq!(
            spec_of(&chunk("1", 0)),
            Some(SpecReport::TokensPerIter(1.0))
        );
        assert_eq!(spec_of(&chunk("2.75", 1)), None, "a second choice (n > 1)");
        assert_eq!(spec_of(&chunk("null", 0)), None);
        let body = r#"{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"ok","finish_reason":"length","avg_decoded_tokens_per_iter":2.6}],"usage":{"prompt_tokens":3,"completion_tokens":16,"total_tokens":19}}"#;
        assert_eq!(spec_of(body), Some(SpecReport::TokensPerIter(2.6)));
        let prefix = "malformed TensorRT-LLM avg_decoded_tokens_per_iter: ";
        for (v, shown) in [
            ("0.0", "0.0"),
            ("0.5", "0.5"),
            ("\"fast\"", "\"fast\""),
            ("true", "true"),
        ] {
            assert_eq!(
                warned(&chunk(v, 0)),
                format!("{prefix}{shown} is not a finite number >= 1")
            );
        }
    }

    #[test]
    fn ordinary_chunks_carry_no_spec() {
        let text = r#"{"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}],"usage":null}"#;
        assert_eq!(spec_of(text), None);
        // An odd `index` never fails a chunk: it is only read beside the TensorRT-LLM field.
        assert_eq!(spec_of(r#"{"choices":[{"index":"a","text":"x"}]}"#), None);
    }
}
