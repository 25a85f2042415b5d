//! Loopback tests of the per-request speculative-decoding reports: what the bodies and streams
//! carry, and that it adds up to the simulator's counters.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};

use super::{MetricsFlavor, PerRequestSpec, SimConfig, SimHandle, Simulator};

/// A simulator with no waiting: every emission is due at once.
fn instant(cfg: SimConfig) -> SimHandle {
    Simulator::spawn(SimConfig {
        ttft: std::time::Duration::ZERO,
        itl: std::time::Duration::ZERO,
        prefill_tokens_per_s: 0.0,
        ..cfg
    })
    .expect("simulator starts")
}

type HttpClient = Client<HttpConnector, Full<Bytes>>;

fn client() -> HttpClient {
    Client::builder(TokioExecutor::new()).build_http()
}

async fn get(c: &HttpClient, url: String) -> String {
    let resp = c.get(url.parse().expect("url")).await.expect("GET");
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    String::from_utf8(body.to_vec()).expect("utf-8")
}

/// Posts `body` to `path`: the JSON body, or every SSE event's JSON for a stream (`[DONE]` left
/// out).
async fn post(c: &HttpClient, sim: &SimHandle, path: &str, body: Value) -> Vec<Value> {
    let req = http::Request::post(format!("{}{path}", sim.url()))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .expect("request");
    let resp = c.request(req).await.expect("POST");
    assert_eq!(resp.status(), 200);
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    let text = String::from_utf8(bytes.to_vec()).expect("utf-8");
    if body["stream"] != json!(true) {
        return vec![serde_json::from_str(&text).expect("JSON body")];
    }
    text.split("\n\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).expect("JSON event"))
        .collect()
}

fn chat(prompt: &str, stream: bool, include_usage: bool) -> Value {
    let mut b = json!({"model": "specperf-sim", "max_tokens": 40, "stream": stream,
        "messages": [{"role": "user", "content": prompt}]});
    if include_usage {
        b["stream_options"] = json!({"include_usage": true});
    }
    b
}

fn completion(prompt: &str, stream: bool, include_usage: bool) -> Value {
    let mut b = json!({"model": "specperf-sim", "max_tokens": 33, "stream": stream,
        "prompt": prompt});
    if include_usage {
        b["stream_options"] = json!({"include_usage": true});
    }
    b
}

/// The root members `key` of the responses that carry one, with their index.
fn carrying<'v>(responses: &'v [Value], key: &str) -> Vec<(usize, &'v Value)> {
    responses
        .iter()
        .enumerate()
        .filter_map(|(i, r)| r.get(key).map(|v| (i, v)))
        .collect()
}

fn n(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("{k} in {v}"))
}

/// `(steps, draft tokens, accepted)` of one vLLM payload, after checking its identities.
fn checked(sd: &Value, k: u64, completion_tokens: u64) -> (u64, u64, u64) {
    let (steps, drafted, accepted) = (
        n(sd, "num_spec_steps"),
        n(sd, "num_draft_tokens"),
        n(sd, "num_accepted_draft_tokens"),
    );
    let hist: Vec<u64> = sd["acceptance_histogram"]
        .as_array()
        .expect("histogram")
        .iter()
        .map(|x| x.as_u64().expect("count"))
        .collect();
    assert_eq!(hist.len() as u64, k + 1, "{sd}");
    assert_eq!(hist.iter().sum::<u64>(), steps, "{sd}");
    let weighted: u64 = hist.iter().enumerate().map(|(j, c)| j as u64 * c).sum();
    assert_eq!(weighted, accepted, "{sd}");
    assert_eq!(drafted, k * steps, "{sd}");
    assert_eq!(n(sd, "num_spec_tokens"), k);
    // The prefill token, then accepted + 1 per step.
    assert_eq!(1 + steps + accepted, completion_tokens, "{sd}");
    let per_step: Vec<u64> = sd["per_step_accepted"]
        .as_array()
        .expect("detailed")
        .iter()
        .map(|x| x.as_u64().expect("int"))
        .collect();
    assert_eq!(per_step.len() as u64, steps);
    assert_eq!(per_step.iter().sum::<u64>(), accepted);
    let drafted_each = sd["per_step_drafted"].as_array().expect("detailed");
    assert!(drafted_each.iter().all(|d| d.as_u64() == Some(k)));
    (steps, drafted, accepted)
}

#[tokio::test]
async fn vllm_reports_add_up_to_the_counters_and_the_group_truth() {
    let sim = instant(SimConfig {
        k: 3,
        per_request_spec: PerRequestSpec::Detailed,
        acceptance_groups: vec!["alpha=1".parse().unwrap(), "beta=0".parse().unwrap()],
        ..SimConfig::default()
    });
    let c = client();
    // A stream without include_usage has no usage chunk, so no report, as vLLM.
    let silent = post(&c, &sim, "/v1/chat/completions", chat("alpha", true, false)).await;
    assert!(carrying(&silent, "metrics").is_empty(), "{silent:?}");
    let before = sim.totals();
    let groups_before = sim.group_totals();

    let cases = [
        ("/v1/chat/completions", chat("say alpha", false, false), 0),
        ("/v1/chat/completions", chat("and beta", true, true), 1),
        ("/v1/completions", completion("neither", true, true), 2),
        ("/v1/completions", completion("alpha beta", false, false), 0),
    ];
    let mut sums = [(0u64, 0u64, 0u64); 3];
    let mut total = (0, 0, 0);
    for (path, body, group) in cases {
        let responses = post(&c, &sim, path, body).await;
        let with = carrying(&responses, "metrics");
        assert_eq!(with.len(), 1, "one report per response: {responses:?}");
        let (i, metrics) = with[0];
        let last = &responses[i];
        assert_eq!(i, responses.len() - 1, "the report rides the last response");
        if responses.len() > 1 {
            assert_eq!(last["choices"], json!([]), "the usage chunk: {last}");
        }
        let completion_tokens = n(&last["usage"], "completion_tokens");
        let (s, d, a) = checked(&metrics["speculative_decoding"], 3, completion_tokens);
        sums[group] = (sums[group].0 + s, sums[group].1 + d, sums[group].2 + a);
        total = (total.0 + s, total.1 + d, total.2 + a);
    }
    let after = sim.totals();
    assert_eq!(
        total,
        (
            after.drafts - before.drafts,
            after.draft_tokens - before.draft_tokens,
            after.accepted - before.accepted
        )
    );

    let groups = sim.group_totals();
    let names: Vec<&str> = groups.iter().map(|g| g.group.as_str()).collect();
    assert_eq!(names, ["alpha", "beta", ""]);
    for (i, g) in groups.iter().enumerate() {
        let b = &groups_before[i];
        assert_eq!(
            (
                g.drafts - b.drafts,
                g.draft_tokens - b.draft_tokens,
                g.accepted - b.accepted
            ),
            sums[i],
            "group {:?}",
            g.group
        );
    }
    // Certain acceptance in alpha (every step but a truncated last one takes all 3), none in beta.
    let alpha = &groups[0];
    assert!(alpha.accepted >= 3 * (alpha.drafts - 3), "{alpha:?}");
    assert_eq!(groups[1].accepted, 0);
    assert_eq!(groups[1].acceptance_length(), Some(1.0));
    let all: u64 = groups.iter().map(|g| g.accepted).sum();
    assert_eq!(all, after.accepted, "the groups split the counters");

    let page = get(&c, format!("{}/metrics", sim.url())).await;
    crate::scrape::prom::parse(&page, crate::scrape::prom::Format::Text).expect("valid page");
    let line = |name: &str, group: &str| -> u64 {
        let head = format!("specperf_sim:{name}{{group=\"{group}\"}} ");
        let l = page.lines().find_map(|l| l.strip_prefix(head.as_str()));
        l.unwrap_or_else(|| panic!("{head} in {page}"))
            .parse()
            .expect("integer")
    };
    for g in &groups {
        assert_eq!(
            line("group_spec_decode_num_drafts_total", &g.group),
            g.drafts
        );
        assert_eq!(
            line("group_spec_decode_num_draft_tokens_total", &g.group),
            g.draft_tokens
        );
        assert_eq!(
            line("group_spec_decode_num_accepted_tokens_total", &g.group),
            g.accepted
        );
    }
}

#[tokio::test]
async fn no_report_and_no_group_series_unless_asked() {
    let sim = instant(SimConfig::default());
    let c = client();
    for body in [chat("x", false, false), chat("x", true, true)] {
        let responses = post(&c, &sim, "/v1/chat/completions", body).await;
        for key in ["metrics", "timings", "sglext"] {
            assert!(carrying(&responses, key).is_empty(), "{key}: {responses:?}");
        }
    }
    assert!(sim.group_totals().is_empty());
    let page = get(&c, format!("{}/metrics", sim.url())).await;
    assert!(!page.contains("specperf_sim:group"), "{page}");
}

#[tokio::test]
async fn llamacpp_timings_ride_the_last_response_and_match_its_counters() {
    let sim = instant(SimConfig {
        k: 4,
        metrics_flavor: MetricsFlavor::Llamacpp,
        ..SimConfig::default()
    });
    let c = client();
    let mut drafted = 0;
    let mut accepted = 0;
    let mut predicted = 0;
    for (path, body) in [
        ("/v1/chat/completions", chat("a", false, false)),
        ("/v1/chat/completions", chat("b", true, false)),
        ("/v1/chat/completions", chat("c", true, true)),
        ("/v1/completions", completion("d", true, false)),
        ("/v1/completions", completion("e", false, false)),
    ] {
        let stream = body["stream"] == json!(true);
        let include_usage = body.get("stream_options").is_some();
        let responses = post(&c, &sim, path, body).await;
        let with = carrying(&responses, "timings");
        assert_eq!(with.len(), 1, "timings once: {responses:?}");
        let (i, t) = with[0];
        assert_eq!(i, responses.len() - 1, "on the last response");
        let last = &responses[i];
        if stream && include_usage {
            assert_eq!(last["choices"], json!([]), "the usage chunk: {last}");
        } else if stream {
            assert!(last["choices"][0]["finish_reason"].is_string(), "{last}");
        }
        for key in [
            "prompt_n",
            "prompt_ms",
            "predicted_ms",
            "predicted_per_second",
            "cache_n",
        ] {
            assert!(t.get(key).is_some(), "{key} in {t}");
        }
        // The drafts of the steps: predicted = the first token + accepted + one per step.
        let (d, a, p) = (
            n(t, "draft_n"),
            n(t, "draft_n_accepted"),
            n(t, "predicted_n"),
        );
        assert_eq!(d % 4, 0);
        assert_eq!(1 + d / 4 + a, p, "{t}");
        if !stream {
            assert_eq!(p, n(&last["usage"], "completion_tokens"));
        }
        drafted += d;
        accepted += a;
        predicted += p;
    }
    let page = get(&c, format!("{}/metrics", sim.url())).await;
    let value = |name: &str| -> u64 {
        let head = format!("llamacpp:{name} ");
        let l = page.lines().find_map(|l| l.strip_prefix(head.as_str()));
        l.unwrap_or_else(|| panic!("{head} in {page}"))
            .parse()
            .expect("integer")
    };
    assert_eq!(value("spec_decode_num_draft_tokens_total"), drafted);
    assert_eq!(value("spec_decode_num_accepted_tokens_total"), accepted);
    assert_eq!(value("tokens_predicted_total"), predicted);

    // One token: no step, no draft, so no draft fields (llama-server leaves them out at 0).
    let mut one = chat("f", false, false);
    one["max_tokens"] = json!(1);
    let r = post(&c, &sim, "/v1/chat/completions", one).await;
    let t = r[0]["timings"].as_object().expect("timings");
    assert!(
        !t.contains_key("draft_n") && !t.contains_key("draft_n_accepted"),
        "{t:?}"
    );
    assert_eq!(t["predicted_n"], 1);
}

#[tokio::test]
async fn sglext_only_when_the_request_asks_and_before_the_usage_chunk() {
    let sim = instant(SimConfig::default());
    let c = client();
    let ask = |mut b: Value| {
        b["return_spec_tokens_details"] = json!(true);
        b
    };
    let r = post(
        &c,
        &sim,
        "/v1/chat/completions",
        ask(chat("x", false, false)),
    )
    .await;
    let d = &r[0]["sglext"]["spec_tokens_details"];
    let completion_tokens = n(&r[0]["usage"], "completion_tokens");
    let verify = n(d, "spec_verify_ct");
    let correct = n(d, "spec_num_correct_drafts");
    assert_eq!(1 + verify + correct, completion_tokens);
    assert_eq!(n(d, "spec_num_proposed_drafts"), 3 * verify);
    let hist = d["spec_correct_drafts_histogram"]
        .as_array()
        .expect("histogram");
    assert_eq!(hist.len(), 4);
    let sum: u64 = hist.iter().map(|h| h.as_u64().expect("count")).sum();
    assert_eq!(sum, verify);
    let al = d["spec_accept_length"].as_f64().expect("float");
    assert!((al - completion_tokens as f64 / verify as f64).abs() < 1e-12);
    let rate = d["spec_accept_rate"].as_f64().expect("float");
    assert!((rate - correct as f64 / (3 * verify) as f64).abs() < 1e-12);

    let r = post(
        &c,
        &sim,
        "/v1/completions",
        ask(completion("y", true, true)),
    )
    .await;
    let with = carrying(&r, "sglext");
    assert_eq!(with.len(), 1, "{r:?}");
    let (i, details) = with[0];
    assert_eq!(i, r.len() - 2, "just before the usage chunk");
    assert_eq!(r[i]["choices"], json!([]), "a chunk of its own");
    assert_eq!(
        n(&details["spec_tokens_details"], "spec_num_proposed_drafts") % 3,
        0
    );
    assert!(r[i + 1]["usage"].is_object() && r[i + 1].get("sglext").is_none());

    let r = post(
        &c,
        &sim,
        "/v1/completions",
        ask(completion("z", true, false)),
    )
    .await;
    assert_eq!(carrying(&r, "sglext").len(), 1, "without usage too: {r:?}");

    let r = post(&c, &sim, "/v1/chat/completions", chat("w", true, true)).await;
    assert!(carrying(&r, "sglext").is_empty(), "not asked: {r:?}");
}
