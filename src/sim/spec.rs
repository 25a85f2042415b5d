//! Per-request speculative-decoding reports, so the simulator is a fixture for per-request
//! acceptance: vLLM's `metrics.speculative_decoding` (`--per-request-spec-decode-metrics`),
//! llama.cpp's root `timings` (with `--metrics-flavor llamacpp`), SGLang's
//! `sglext.spec_tokens_details` (when the request sets `return_spec_tokens_details`), and the
//! acceptance rules per prompt group (`--acceptance-group`); their truth counters are `model`'s,
//! beside the engine counters, as this file reads `model`'s emissions and `model` imports nothing.
//!
//! Every figure is computed from the emissions the stream actually emitted, the same ones the
//! `/metrics` counters counted, so a request's payload summed over requests equals the counters'
//! change exactly.

use std::str::FromStr;

use serde::Serialize;

use super::model::Emission;

/// What vLLM's `--per-request-spec-decode-metrics` asks for: its flag's values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum PerRequestSpec {
    /// No per-request payload (vLLM's default).
    #[default]
    None,
    /// `metrics.speculative_decoding` with the counts, the histogram and the two ratios.
    Summary,
    /// The summary plus `per_step_accepted` and `per_step_drafted`, one entry per verify step.
    Detailed,
}

/// One `--acceptance-group TEXT=P` rule: requests whose prompt text contains `text` accept each
/// draft position with probability `probability` instead of the global acceptance.
#[derive(Clone, Debug, PartialEq)]
pub struct AcceptanceGroup {
    /// Text looked for in the request's message contents or prompt (case-sensitive); also the
    /// `group` label of the truth counters.
    pub text: String,
    /// Per-position acceptance probability, in [0, 1].
    pub probability: f64,
}

/// A malformed `--acceptance-group` rule.
#[derive(Debug, thiserror::Error)]
pub enum GroupRuleError {
    /// No `=` separates the text from the probability.
    #[error(
        "acceptance group {0:?} has no `=P`; expected TEXT=P with P a per-position acceptance \
         probability in [0, 1], e.g. `--acceptance-group coding=0.8`"
    )]
    NoProbability(String),
    /// The text before `=` is empty.
    #[error(
        "acceptance group {0:?} has an empty TEXT (it would match every prompt); expected \
         TEXT=P, e.g. `--acceptance-group coding=0.8`"
    )]
    EmptyText(String),
    /// The probability is not a number within [0, 1].
    #[error(
        "acceptance group {0:?}: the probability after the last `=` must be a number in [0, 1]; \
         expected TEXT=P, e.g. `--acceptance-group coding=0.8`"
    )]
    BadProbability(String),
}

impl FromStr for AcceptanceGroup {
    type Err = GroupRuleError;

    /// Parses `TEXT=P`; the text may itself hold `=` (the last one separates).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (text, p) = s
            .rsplit_once('=')
            .ok_or_else(|| GroupRuleError::NoProbability(s.to_owned()))?;
        if text.is_empty() {
            return Err(GroupRuleError::EmptyText(s.to_owned()));
        }
        let probability = p
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|p| (0.0..=1.0).contains(p))
            .ok_or_else(|| GroupRuleError::BadProbability(s.to_owned()))?;
        Ok(AcceptanceGroup {
            text: text.to_owned(),
            probability,
        })
    }
}

/// Checks a rule list as a whole: each rule valid on its own, and no text given twice (the
/// second could never win, and the two would share one `group` label).
pub(crate) fn validate_groups(groups: &[AcceptanceGroup]) -> Result<(), String> {
    for (i, g) in groups.iter().enumerate() {
        let rule = format!("{}={}", g.text, g.probability);
        if g.text.is_empty() {
            return Err(GroupRuleError::EmptyText(rule).to_string());
        }
        if !(0.0..=1.0).contains(&g.probability) {
            return Err(GroupRuleError::BadProbability(rule).to_string());
        }
        if groups[..i].iter().any(|o| o.text == g.text) {
            return Err(format!(
                "acceptance group {rule:?} repeats the text {:?} of an earlier rule; give each \
                 TEXT once (the first matching rule wins)",
                g.text
            ));
        }
    }
    Ok(())
}

/// The first rule whose text occurs in one of `texts`, or `groups.len()` (the unmatched slot).
pub(crate) fn pick_group<'t>(
    groups: &[AcceptanceGroup],
    texts: impl Iterator<Item = &'t str> + Clone,
) -> usize {
    groups
        .iter()
        .position(|g| texts.clone().any(|t| t.contains(g.text.as_str())))
        .unwrap_or(groups.len())
}

/// One request's speculative decoding so far, from its emitted emissions: a step is a decode
/// emission (the prefill token is not one), proposing `k` drafts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Tally {
    pub(crate) k: u32,
    pub(crate) steps: u64,
    pub(crate) accepted: u64,
    /// Index j: steps that accepted exactly j drafts (bonus excluded); length k + 1.
    pub(crate) histogram: Vec<u64>,
    /// Accepted drafts of each step, in order.
    pub(crate) per_step_accepted: Vec<u32>,
}

impl Tally {
    pub(crate) fn of(emitted: &[Emission], k: u32) -> Tally {
        let mut t = Tally {
            k,
            steps: 0,
            accepted: 0,
            histogram: vec![0; k as usize + 1],
            per_step_accepted: Vec::new(),
        };
        for a in emitted.iter().filter_map(|e| e.accepted) {
            t.steps += 1;
            t.accepted += u64::from(a);
            // A plan never accepts more than k; clamp so a bad plan cannot panic a response.
            t.histogram[(a as usize).min(k as usize)] += 1;
            t.per_step_accepted.push(a);
        }
        t
    }

    /// Drafts proposed: `k` every step.
    pub(crate) fn drafted(&self) -> u64 {
        self.steps * u64::from(self.k)
    }

    fn rate(&self) -> f64 {
        match self.drafted() {
            0 => 0.0,
            d => self.accepted as f64 / d as f64,
        }
    }

    /// vLLM's payload, as the member `"metrics":{"speculative_decoding":{…}}` (no comma).
    pub(crate) fn vllm_member(&self, detailed: bool) -> String {
        #[derive(Serialize)]
        struct Payload<'a> {
            mean_acceptance_length: f64,
            draft_acceptance_rate: f64,
            acceptance_histogram: &'a [u64],
            num_spec_steps: u64,
            num_accepted_draft_tokens: u64,
            num_draft_tokens: u64,
            num_spec_tokens: u32,
            #[serde(skip_serializing_if = "Option::is_none")]
            per_step_accepted: Option<&'a [u32]>,
            #[serde(skip_serializing_if = "Option::is_none")]
            per_step_drafted: Option<Vec<u32>>,
        }
        let p = Payload {
            mean_acceptance_length: match self.steps {
                0 => 1.0,
                s => 1.0 + self.accepted as f64 / s as f64,
            },
            draft_acceptance_rate: self.rate(),
            acceptance_histogram: &self.histogram,
            num_spec_steps: self.steps,
            num_accepted_draft_tokens: self.accepted,
            num_draft_tokens: self.drafted(),
            num_spec_tokens: self.k,
            per_step_accepted: detailed.then_some(&self.per_step_accepted[..]),
            per_step_drafted: detailed.then(|| vec![self.k; self.per_step_accepted.len()]),
        };
        format!(
            "\"metrics\":{{\"speculative_decoding\":{}}}",
            serde_json::to_string(&p).unwrap_or_default()
        )
    }

    /// SGLang's payload, as the member `"sglext":{"spec_tokens_details":{…}}` (no comma).
    /// `completion_tokens` counts every output token, the prefill one included, as SGLang's
    /// `spec_accept_length` does.
    pub(crate) fn sglext_member(&self, completion_tokens: u32) -> String {
        #[derive(Serialize)]
        struct Details<'a> {
            spec_verify_ct: u64,
            spec_num_correct_drafts: u64,
            spec_num_proposed_drafts: u64,
            spec_correct_drafts_histogram: &'a [u64],
            spec_accept_length: f64,
            spec_accept_rate: f64,
        }
        let d = Details {
            spec_verify_ct: self.steps,
            spec_num_correct_drafts: self.accepted,
            spec_num_proposed_drafts: self.drafted(),
            spec_correct_drafts_histogram: &self.histogram,
            spec_accept_length: match self.steps {
                0 => 0.0,
                s => f64::from(completion_tokens) / s as f64,
            },
            spec_accept_rate: self.rate(),
        };
        format!(
            "\"sglext\":{{\"spec_tokens_details\":{}}}",
            serde_json::to_string(&d).unwrap_or_default()
        )
    }
}

/// What llama.cpp's `timings` needs beyond the tally.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TimingInputs {
    /// Prompt tokens found in the prefix cache (`cache_n`).
    pub(crate) cached: u64,
    /// Prompt tokens computed (`prompt_n`).
    pub(crate) prompt: u64,
    /// Prefill time: the planned time of the first token, ms.
    pub(crate) prompt_ms: f64,
    /// Output tokens emitted (`predicted_n`).
    pub(crate) predicted: u32,
    /// Decode time: planned first to last emission, ms.
    pub(crate) predicted_ms: f64,
}

/// llama.cpp's `timings`, as the member `"timings":{…}` (no comma). `draft_n` and
/// `draft_n_accepted` only when drafts were proposed, as llama-server writes them.
pub(crate) fn llamacpp_timings_member(t: &Tally, i: &TimingInputs) -> String {
    #[derive(Serialize)]
    struct Timings {
        cache_n: u64,
        prompt_n: u64,
        prompt_ms: f64,
        prompt_per_token_ms: f64,
        prompt_per_second: f64,
        predicted_n: u32,
        predicted_ms: f64,
        predicted_per_token_ms: f64,
        predicted_per_second: f64,
        #[serde(skip_serializing_if = "Option::is_none")]
        draft_n: Option<u64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        draft_n_accepted: Option<u64>,
    }
    // JSON has no infinity: a zero time or count gives 0.
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
    let drafted = t.drafted();
    let timings = Timings {
        cache_n: i.cached,
        prompt_n: i.prompt,
        prompt_ms: i.prompt_ms,
        prompt_per_token_ms: ratio(i.prompt_ms, i.prompt as f64),
        prompt_per_second: ratio(1e3 * i.prompt as f64, i.prompt_ms),
        predicted_n: i.predicted,
        predicted_ms: i.predicted_ms,
        predicted_per_token_ms: ratio(i.predicted_ms, f64::from(i.predicted)),
        predicted_per_second: ratio(1e3 * f64::from(i.predicted), i.predicted_ms),
        draft_n: (drafted > 0).then_some(drafted),
        draft_n_accepted: (drafted > 0).then_some(t.accepted),
    };
    format!(
        "\"timings\":{}",
        serde_json::to_string(&timings).unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::Value;

    use super::*;
    use crate::sim::model::{plan, request_rng, PlanParams};

    fn step(a: u32) -> Emission {
        Emission {
            at: Duration::ZERO,
            tokens: a + 1,
            accepted: Some(a),
        }
    }

    fn first() -> Emission {
        Emission {
            at: Duration::ZERO,
            tokens: 1,
            accepted: None,
        }
    }

    fn member(s: &str) -> Value {
        serde_json::from_str::<Value>(&format!("{{{s}}}")).expect("valid JSON member")
    }

    #[test]
    fn group_rules_parse_and_name_the_bad_rule_and_the_form() {
        let g: AcceptanceGroup = "coding=0.9".parse().unwrap();
        assert_eq!(g.text, "coding");
        assert_eq!(g.probability, 0.9);
        let g: AcceptanceGroup = "a=b=0.25".parse().unwrap();
        assert_eq!((g.text.as_str(), g.probability), ("a=b", 0.25));
        for bad in [
            "coding",
            "=0.5",
            "coding=1.5",
            "coding=-0.1",
            "coding=x",
            "coding=NaN",
        ] {
            let e = bad.parse::<AcceptanceGroup>().unwrap_err().to_string();
            assert!(
                e.contains(&format!("{bad:?}")) && e.contains("TEXT=P"),
                "{e}"
            );
        }
        let rules =
            |s: &[&str]| -> Vec<AcceptanceGroup> { s.iter().map(|r| r.parse().unwrap()).collect() };
        assert!(validate_groups(&rules(&["a=0.1", "b=0.2"])).is_ok());
        let e = validate_groups(&rules(&["a=0.1", "a=0.2"])).unwrap_err();
        assert!(e.contains("\"a=0.2\"") && e.contains("earlier rule"), "{e}");
        let out_of_range = [AcceptanceGroup {
            text: "x".into(),
            probability: 2.0,
        }];
        assert!(validate_groups(&out_of_range)
            .unwrap_err()
            .contains("[0, 1]"));
    }

    #[test]
    fn first_matching_rule_wins_else_the_unmatched_slot() {
        let rules: Vec<AcceptanceGroup> = ["math=0.2", "code=0.9", "mat=0.5"]
            .iter()
            .map(|r| r.parse().unwrap())
            .collect();
        let pick = |texts: &[&str]| pick_group(&rules, texts.iter().copied());
        assert_eq!(pick(&["write code for math"]), 0);
        assert_eq!(pick(&["system", "some code"]), 1);
        assert_eq!(pick(&["a mate"]), 2);
        assert_eq!(pick(&["Math is case-sensitive"]), 3);
        assert_eq!(pick(&[]), 3);
    }

    #[test]
    fn tally_counts_decode_steps_only_into_a_dense_histogram() {
        let emitted = [first(), step(2), step(0), step(3), step(3)];
        let t = Tally::of(&emitted, 3);
        assert_eq!(t.steps, 4);
        assert_eq!(t.accepted, 8);
        assert_eq!(t.drafted(), 12);
        assert_eq!(t.histogram, [1, 0, 1, 2]);
        assert_eq!(t.per_step_accepted, [2, 0, 3, 3]);
    }

    #[test]
    fn vllm_payload_has_the_fields_and_their_identities() {
        for seed in 0..20 {
            let params = PlanParams {
                max_tokens: 97,
                ignore_eos: true,
                eos_probability: 0.0,
                k: 4,
                p: 0.6,
                ttft: Duration::from_millis(5),
                itl: Duration::from_millis(1),
                jitter: 0.0,
            };
            let plan = plan(&params, &mut request_rng(11, seed));
            let t = Tally::of(&plan.emissions, 4);
            let v = member(&t.vllm_member(true));
            let sd = &v["metrics"]["speculative_decoding"];
            let n = |k: &str| sd[k].as_u64().unwrap();
            let list = |k: &str| -> Vec<u64> {
                sd[k]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_u64().unwrap())
                    .collect()
            };
            let hist = list("acceptance_histogram");
            assert_eq!(hist.len(), 5);
            let steps = n("num_spec_steps");
            let accepted = n("num_accepted_draft_tokens");
            assert_eq!(steps, plan.emissions.len() as u64 - 1);
            assert_eq!(hist.iter().sum::<u64>(), steps);
            let weighted: u64 = hist.iter().enumerate().map(|(j, c)| j as u64 * c).sum();
            assert_eq!(weighted, accepted);
            assert_eq!(1 + steps + accepted, 97, "every output token accounted for");
            assert_eq!(n("num_draft_tokens"), 4 * steps);
            assert_eq!(n("num_spec_tokens"), 4);
            let al = sd["mean_acceptance_length"].as_f64().unwrap();
            assert!((al - (1.0 + accepted as f64 / steps as f64)).abs() < 1e-12);
            let rate = sd["draft_acceptance_rate"].as_f64().unwrap();
            assert!((rate - accepted as f64 / (4 * steps) as f64).abs() < 1e-12);
            let per_acc = list("per_step_accepted");
            let per_drafted = list("per_step_drafted");
            assert_eq!(per_acc.len() as u64, steps);
            assert_eq!(per_acc.iter().sum::<u64>(), accepted);
            assert_eq!(per_drafted, vec![4; steps as usize]);
            let planned: Vec<u64> = plan.emissions[1..]
                .iter()
                .map(|e| u64::from(e.accepted.unwrap()))
                .collect();
            assert_eq!(per_acc, planned);
        }
        let summary = member(&Tally::of(&[first(), step(1)], 3).vllm_member(false));
        let sd = summary["metrics"]["speculative_decoding"]
            .as_object()
            .unwrap();
        assert!(!sd.contains_key("per_step_accepted") && !sd.contains_key("per_step_drafted"));
    }

    #[test]
    fn zero_steps_give_al_one_rate_zero_and_no_llamacpp_draft_fields() {
        let t = Tally::of(&[first()], 3);
        let v = member(&t.vllm_member(true));
        let sd = &v["metrics"]["speculative_decoding"];
        assert_eq!(sd["mean_acceptance_length"], 1.0);
        assert_eq!(sd["draft_acceptance_rate"], 0.0);
        assert_eq!(sd["acceptance_histogram"], serde_json::json!([0, 0, 0, 0]));
        assert_eq!(sd["per_step_accepted"], serde_json::json!([]));
        let inputs = TimingInputs {
            cached: 0,
            prompt: 0,
            prompt_ms: 0.0,
            predicted: 1,
            predicted_ms: 0.0,
        };
        let tm = member(&llamacpp_timings_member(&t, &inputs));
        let tm = tm["timings"].as_object().unwrap();
        assert!(!tm.contains_key("draft_n") && !tm.contains_key("draft_n_accepted"));
        assert_eq!(tm["prompt_per_second"], 0.0, "no division by zero");
        let sg = member(&t.sglext_member(1));
        assert_eq!(
            sg["sglext"]["spec_tokens_details"]["spec_accept_length"],
            0.0
        );
    }

    #[test]
    fn llamacpp_timings_and_sglext_carry_the_tally() {
        let t = Tally::of(&[first(), step(2), step(0), step(3)], 3);
        let inputs = TimingInputs {
            cached: 32,
            prompt: 18,
            prompt_ms: 60.0,
            predicted: 8,
            predicted_ms: 30.0,
        };
        let tm = member(&llamacpp_timings_member(&t, &inputs));
        let tm = &tm["timings"];
        assert_eq!(tm["draft_n"], 9);
        assert_eq!(tm["draft_n_accepted"], 5);
        assert_eq!(tm["predicted_n"], 8);
        assert_eq!(tm["prompt_n"], 18);
        assert_eq!(tm["cache_n"], 32);
        assert_eq!(tm["predicted_per_second"], 8.0 / 0.030);
        let sg = member(&t.sglext_member(8));
        let d = &sg["sglext"]["spec_tokens_details"];
        assert_eq!(d["spec_verify_ct"], 3);
        assert_eq!(d["spec_num_correct_drafts"], 5);
        assert_eq!(d["spec_num_proposed_drafts"], 9);
        assert_eq!(
            d["spec_correct_drafts_histogram"],
            serde_json::json!([1, 0, 1, 1])
        );
        assert_eq!(d["spec_accept_length"], 8.0 / 3.0);
        assert_eq!(d["spec_accept_rate"], 5.0 / 9.0);
    }
}
