//! Loopback tests of the per-request speculative-decoding reports (what the bodies and streams
//! carry, and that it adds up to the simulator's counters) and of the simulated GPUs' DCGM page
//! (that its energy counter is the truth `SimHandle::gpu_energy_j` gives, and its events).

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};

use std::time::Duration;

use super::{GpuSim, MetricsFlavor, PerRequestSpec, SimConfig, SimHandle, Simulator};

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

// ---- Simulated GPUs and their DCGM page ----

/// A simulator whose streams last a while (5 ms a step), with `gpus`.
fn with_gpus(gpus: GpuSim) -> SimHandle {
    Simulator::spawn(SimConfig {
        ttft: Duration::ZERO,
        itl: Duration::from_millis(5),
        prefill_tokens_per_s: 0.0,
        gpus: Some(gpus),
        ..SimConfig::default()
    })
    .expect("simulator starts")
}

fn unix_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs_f64()
}

/// One scrape of `/dcgm/metrics`: the page parsed by the repo's own parser, and the instant the
/// simulator computed it at (Unix s).
struct Scrape {
    samples: Vec<crate::scrape::prom::Sample>,
    at_s: f64,
}

impl Scrape {
    /// The value of `family` for GPU `gpu`, if shown.
    fn value(&self, family: &str, gpu: u32) -> Option<f64> {
        let gpu = gpu.to_string();
        self.samples
            .iter()
            .find(|s| s.name == family && s.label("gpu") == Some(gpu.as_str()))
            .map(|s| s.value)
    }

    /// The GPUs shown in `family`.
    fn gpus(&self, family: &str) -> Vec<u32> {
        self.samples
            .iter()
            .filter(|s| s.name == family)
            .map(|s| s.label("gpu").expect("gpu label").parse().expect("index"))
            .collect()
    }
}

async fn scrape(c: &HttpClient, sim: &SimHandle) -> Scrape {
    let url = sim.dcgm_url().expect("a DCGM page with GPUs");
    let resp = c.get(url.parse().expect("url")).await.expect("GET");
    assert_eq!(resp.status(), 200);
    let ct = resp.headers()["content-type"].to_str().expect("ascii");
    assert!(ct.starts_with("text/plain; version=0.0.4"), "{ct}");
    let at_ns: u64 = resp.headers()[super::DCGM_AT_HEADER]
        .to_str()
        .expect("ascii")
        .parse()
        .expect("ns");
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    let text = String::from_utf8(body.to_vec()).expect("utf-8");
    let page = crate::scrape::prom::parse(&text, crate::scrape::prom::Format::Text)
        .unwrap_or_else(|e| panic!("{e:?}\n{text}"));
    Scrape {
        samples: page.samples,
        at_s: at_ns as f64 / 1e9,
    }
}

/// `n` streamed chat requests of `max_tokens` in flight on `url`, each asserting its 200.
fn streams(url: String, n: usize, max_tokens: u32) -> tokio::task::JoinSet<()> {
    let mut set = tokio::task::JoinSet::new();
    for i in 0..n {
        let url = url.clone();
        set.spawn(async move {
            let body = json!({"model": "specperf-sim", "max_tokens": max_tokens, "stream": true,
                "messages": [{"role": "user", "content": format!("load {i}")}]});
            let req = http::Request::post(format!("{url}/v1/chat/completions"))
                .header("content-type", "application/json")
                .body(Full::new(Bytes::from(body.to_string())))
                .expect("request");
            let resp = client().request(req).await.expect("POST");
            assert_eq!(resp.status(), 200);
            resp.into_body().collect().await.expect("body");
        });
    }
    set
}

/// Waits (at most 2 s) until `running` requests run on the simulator.
async fn until_running(sim: &SimHandle, running: u64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    while sim.totals().running != running {
        assert!(std::time::Instant::now() < deadline, "{:?}", sim.totals());
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

const ENERGY: &str = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION";
const POWER: &str = "DCGM_FI_DEV_POWER_USAGE";

#[tokio::test]
async fn dcgm_energy_counter_is_the_integral_of_the_simulated_power() {
    let sim = with_gpus(GpuSim {
        count: 2,
        tick: Duration::from_millis(2),
        ..GpuSim::default()
    });
    let c = client();
    let first = scrape(&c, &sim).await;
    let mut load = streams(sim.url(), 3, 120);
    until_running(&sim, 3).await;
    tokio::time::sleep(Duration::from_millis(60)).await;
    let mid = scrape(&c, &sim).await;
    while load.join_next().await.is_some() {}
    let last = scrape(&c, &sim).await;
    for gpu in 0..2 {
        // Each sample is the truth at the instant the page was computed, in whole mJ rounded
        // down (0.1 mJ of slack for the instant's round trip through f64 seconds: ~100 ns).
        for s in [&first, &mid, &last] {
            let page_mj = s.value(ENERGY, gpu).expect("energy sample");
            let truth_mj = 1e3 * sim.gpu_energy_j(gpu, 0.0, s.at_s).expect("truth");
            assert!(
                page_mj <= truth_mj + 0.1 && page_mj > truth_mj - 1.1,
                "GPU {gpu}: page {page_mj} mJ, truth {truth_mj} mJ"
            );
        }
        // So the counter's increase is the energy drawn between the scrapes: within 2.2 mJ of
        // some 50 J, tighter than 0.01 %.
        let delta_mj = last.value(ENERGY, gpu).unwrap() - first.value(ENERGY, gpu).unwrap();
        let truth_mj = 1e3 * sim.gpu_energy_j(gpu, first.at_s, last.at_s).expect("truth");
        assert!(truth_mj > 1e3, "a run drew something: {truth_mj} mJ");
        assert!(
            (delta_mj - truth_mj).abs() <= 2.2,
            "GPU {gpu}: counter rose {delta_mj} mJ, truth {truth_mj} mJ"
        );
        // And the truth is the integral of the power the page showed: at least idle power over
        // the window, and the page's power is the power at its instant.
        let window = last.at_s - first.at_s;
        assert!(
            truth_mj / 1e3 >= 0.99 * 90.0 * window,
            "{truth_mj} over {window} s"
        );
        let shown = mid.value(POWER, gpu).unwrap();
        let truth = sim.gpu_power_w(gpu, mid.at_s).expect("power then");
        assert!(
            (shown - truth).abs() <= 0.0005,
            "page {shown} W, truth {truth} W"
        );
    }
    assert_eq!(sim.gpu_count(), 2);
    assert_eq!(sim.gpu_energy_j(2, 0.0, last.at_s), None, "no GPU 2");
    assert_eq!(
        sim.gpu_energy_j(0, last.at_s, first.at_s),
        None,
        "from > to"
    );
    assert_eq!(
        sim.gpu_energy_j(0, 0.0, unix_s() + 60.0),
        None,
        "the future"
    );
}

#[tokio::test]
async fn dcgm_power_rises_with_the_requests_running_on_the_gpus_engine() {
    let sim = with_gpus(GpuSim {
        count: 1,
        noise: 0.0,
        tick: Duration::from_millis(2),
        ..GpuSim::default()
    });
    let c = client();
    let idle = scrape(&c, &sim).await;
    assert_eq!(idle.value(POWER, 0), Some(90.0));
    assert_eq!(idle.value("DCGM_FI_DEV_GPU_UTIL", 0), Some(0.0));
    let mut load = streams(sim.url(), 4, 200);
    until_running(&sim, 4).await;
    tokio::time::sleep(Duration::from_millis(10)).await;
    let busy = scrape(&c, &sim).await;
    assert_eq!(sim.totals().running, 4, "still running when scraped");
    // 90 W idle + 25 W for each of the 4 requests on its (only) engine.
    assert_eq!(busy.value(POWER, 0), Some(190.0));
    assert_eq!(sim.gpu_power_w(0, busy.at_s), Some(190.0));
    assert_eq!(sim.gpu_power_w(0, idle.at_s), Some(90.0));
    for family in [
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_SM_CLOCK",
    ] {
        assert!(
            busy.value(family, 0) > idle.value(family, 0),
            "{family} rises under load"
        );
    }
    assert!(busy.value("DCGM_FI_DEV_FB_FREE", 0) < idle.value("DCGM_FI_DEV_FB_FREE", 0));
    while load.join_next().await.is_some() {}
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(
        scrape(&c, &sim).await.value(POWER, 0),
        Some(90.0),
        "idle again"
    );
}

#[tokio::test]
async fn dcgm_fields_appear_after_add_field_at_and_a_dropped_gpu_leaves_every_family() {
    let sim = with_gpus(GpuSim {
        count: 3,
        add_field_at: Some(Duration::from_millis(150)),
        drop_gpu: Some((1, Duration::from_millis(150))),
        ..GpuSim::default()
    });
    let c = client();
    let early = scrape(&c, &sim).await;
    let names = |s: &Scrape| {
        let mut n: Vec<String> = s.samples.iter().map(|s| s.name.clone()).collect();
        n.dedup();
        n
    };
    assert_eq!(names(&early).len(), 9, "{:?}", names(&early));
    assert!(early.gpus("DCGM_FI_DEV_XID_ERRORS").is_empty());
    assert_eq!(early.gpus(ENERGY), [0, 1, 2]);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let late = scrape(&c, &sim).await;
    let late_names = names(&late);
    assert_eq!(late_names.len(), 11, "{late_names:?}");
    for family in &late_names {
        assert_eq!(late.gpus(family), [0, 2], "{family} without GPU 1");
    }
    assert_eq!(late.value("DCGM_FI_DEV_XID_ERRORS", 0), Some(0.0));
    assert_eq!(late.value("DCGM_FI_DEV_POWER_VIOLATION", 2), Some(0.0));
    // GPU 1's history stopped at its drop: its energy no longer grows, its power is gone.
    assert_eq!(sim.gpu_count(), 3, "indices stay");
    assert_eq!(sim.gpu_power_w(1, late.at_s), None);
    assert!(sim.gpu_power_w(1, early.at_s).is_some());
    let e1 = sim.gpu_energy_j(1, 0.0, late.at_s).expect("known");
    let e2 = sim
        .gpu_energy_j(1, 0.0, late.at_s + 3600.0)
        .expect("a dropped GPU's is known");
    assert_eq!(e1, e2);
    assert!(
        (0.99 * 90.0 * 0.15..=1.01 * 90.0 * 0.15).contains(&e1),
        "{e1} J over 150 ms"
    );
}

#[tokio::test]
async fn no_gpus_no_dcgm_page() {
    let sim = instant(SimConfig::default());
    assert_eq!(sim.dcgm_url(), None);
    assert_eq!(sim.gpu_count(), 0);
    assert_eq!(sim.gpu_energy_j(0, 0.0, 1.0), None);
    let resp = client()
        .get(format!("{}/dcgm/metrics", sim.url()).parse().expect("url"))
        .await
        .expect("GET");
    assert_eq!(resp.status(), 404);
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    let text = String::from_utf8(body.to_vec()).expect("utf-8");
    assert!(
        text.contains("no GPUs") && text.contains("--gpus"),
        "{text}"
    );
}

/// vLLM's latency histograms time what the simulator sent: per request one time to first token
/// (never before its configured TTFT), one gap per later step, whose sum is the request's
/// `(last − first)`, so its time per output token times `(tokens − 1)`, exactly.
#[tokio::test]
async fn latency_histograms_time_what_was_sent() {
    let (ttft, itl, tokens, requests) = (Duration::from_millis(20), Duration::from_millis(5), 8, 3);
    let sim = Simulator::spawn(SimConfig {
        ttft,
        itl,
        acceptance: super::Acceptance::Probability(0.0),
        eos_probability: 0.0,
        prefill_tokens_per_s: 0.0,
        ..SimConfig::default()
    })
    .expect("simulator starts");
    let mut set = streams(sim.url(), requests, tokens);
    while let Some(r) = set.join_next().await {
        r.expect("stream");
    }
    let page = get(&client(), format!("{}/metrics", sim.url())).await;
    let samples = crate::scrape::prom::parse(&page, crate::scrape::prom::Format::Text)
        .unwrap_or_else(|e| panic!("{e:?}\n{page}"))
        .samples;
    let value = |name: &str| -> f64 {
        let found = samples.iter().filter(|s| s.name == name);
        found.map(|s| s.value).sum()
    };
    let n = |h: &str| value(&format!("vllm:{h}_count"));
    let sum = |h: &str| value(&format!("vllm:{h}_sum"));
    let steps = (tokens - 1) as usize * requests;
    assert_eq!(n("time_to_first_token_seconds"), requests as f64);
    assert_eq!(n("inter_token_latency_seconds"), steps as f64);
    assert_eq!(n("request_time_per_output_token_seconds"), requests as f64);
    assert_eq!(n("e2e_request_latency_seconds"), requests as f64);
    // Σ gaps = Σ (last − first) = Σ tpot × (tokens − 1), up to the nanosecond the division drops.
    let gaps = sum("inter_token_latency_seconds");
    let tpots = sum("request_time_per_output_token_seconds") * f64::from(tokens - 1);
    assert!(
        (gaps - tpots).abs() < 1e-6 * requests as f64,
        "{gaps} {tpots}"
    );
    // Nothing goes out before its schedule: the first token after the TTFT, the last after the
    // TTFT and every step.
    assert!(sum("time_to_first_token_seconds") >= requests as f64 * ttft.as_secs_f64());
    let last = ttft + itl * (tokens - 1);
    assert!(sum("e2e_request_latency_seconds") >= requests as f64 * last.as_secs_f64());
    // Buckets are cumulative and end at the count.
    let buckets: Vec<&crate::scrape::prom::Sample> = samples
        .iter()
        .filter(|s| s.name == "vllm:inter_token_latency_seconds_bucket")
        .collect();
    assert_eq!(buckets.len(), super::model::ITL_BUCKETS.len() + 1);
    assert!(buckets.windows(2).all(|w| w[0].value <= w[1].value));
    assert_eq!(buckets.last().map(|s| s.label("le")), Some(Some("+Inf")));
    assert_eq!(buckets.last().map(|s| s.value), Some(steps as f64));
}
