//! The simulator's prefix cache, KV usage, queue, token counts, output limits and context
//! length, driven over loopback HTTP and read back from its `/metrics` page and its admission log
//! (the prefill time it planned, not wall time).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use specperf::sim::{SimConfig, SimHandle};

use crate::common::{fast, sim, tokenizer_path};

/// A bare HTTP/1.0 exchange: status and body.
fn http(url: &str, method: &str, path: &str, body: &str, extra: &str) -> (u16, String) {
    let addr = url.strip_prefix("http://").unwrap();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let req = format!(
        "{method} {path} HTTP/1.0\r\nHost: {addr}\r\nContent-Type: application/json\r\n{extra}\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    let text = String::from_utf8_lossy(&out).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    (
        head.split_whitespace().nth(1).unwrap().parse().unwrap(),
        body.to_owned(),
    )
}

/// A non-streaming chat request; the parsed response.
fn chat(url: &str, body: Value) -> (u16, Value) {
    let (status, text) = http(url, "POST", "/v1/chat/completions", &body.to_string(), "");
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// One user message of `content`, `max_tokens` output.
fn ask(content: &str, max_tokens: u32) -> Value {
    json!({"model": "specperf-sim", "messages": [{"role": "user", "content": content}],
           "max_tokens": max_tokens, "ignore_eos": true})
}

/// The page's unlabelled-by-engine values: name -> value summed over engines.
fn page(url: &str) -> BTreeMap<String, f64> {
    let (status, text) = http(url, "GET", "/metrics", "", "");
    assert_eq!(status, 200);
    let mut m = BTreeMap::new();
    for line in text.lines().filter(|l| l.starts_with("vllm:")) {
        let name = line.split(['{', ' ']).next().unwrap().to_owned();
        let v: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
        *m.entry(name).or_insert(0.0) += v;
    }
    m
}

/// Polls the page until `cond` holds (bounded: 30 s).
fn wait_page(url: &str, what: &str, cond: impl Fn(&BTreeMap<String, f64>) -> bool) {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let p = page(url);
        if cond(&p) {
            return;
        }
        assert!(Instant::now() < until, "{what}: {p:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `n` characters of text seeded by `seed` (distinct seeds differ from the first character).
fn text(seed: u8, n: usize) -> String {
    (0..n)
        .map(|i| char::from(b'a' + ((i * 7 + usize::from(seed) * 5) % 26) as u8))
        .collect()
}

#[test]
fn prefix_cache_hits_are_exact_for_shared_diverging_and_evicted_prefixes() {
    // Stand-in tokens: 16 header characters + 200 = 216 characters = 54 tokens, 3 full blocks.
    let s = sim(SimConfig {
        record_requests: 100,
        prefill_tokens_per_s: 10_000.0,
        ..fast()
    });
    let url = s.url();
    let a = text(1, 200);
    // The same first 100 characters, then different: only the first block (64 characters,
    // header included) is shared.
    let diverging = format!("{}{}", &a[..100], text(2, 100));
    for content in [&a, &a, &diverging, &text(3, 200)] {
        let (status, r) = chat(&url, ask(content, 4));
        assert_eq!(status, 200, "{r}");
        assert_eq!(r["usage"]["prompt_tokens"], 54);
    }
    let cached: Vec<u64> = s.admissions().iter().map(|a| a.cached_tokens).collect();
    assert_eq!(cached, [0, 48, 16, 0]);
    let p = page(&url);
    assert_eq!(p["vllm:prefix_cache_queries_total"], 4.0 * 54.0);
    assert_eq!(p["vllm:prefix_cache_hits_total"], 64.0);
    assert_eq!(p["vllm:prompt_tokens_total"], 4.0 * 54.0);
    // vLLM's split of the prompt tokens by where their KV came from.
    let (_, exposition) = http(&url, "GET", "/metrics", "", "");
    for (source, n) in [
        ("local_compute", 4 * 54 - 64),
        ("local_cache_hit", 64),
        ("external_kv_transfer", 0),
    ] {
        let line = format!(
            "vllm:prompt_tokens_by_source_total{{engine=\"0\",model_name=\"specperf-sim\",\
             source=\"{source}\"}} {n}.0"
        );
        assert!(
            exposition.lines().any(|l| l == line),
            "{line} not in\n{exposition}"
        );
    }
    // The prefill the simulator planned: base TTFT plus the uncached tokens at 10k tokens/s.
    let ttft: Vec<Duration> = s.admissions().iter().map(|a| a.planned_ttft).collect();
    let base = Duration::from_millis(1);
    assert_eq!(ttft[0], base + Duration::from_secs_f64(54.0 / 10_000.0));
    assert_eq!(ttft[1], base + Duration::from_secs_f64(6.0 / 10_000.0));
    assert!(ttft[1] < ttft[2] && ttft[2] < ttft[0], "{ttft:?}");

    // Eviction: 8 blocks hold one request (3 prompt blocks, the tail and 1 output block = 5)
    // and keep at most 8 cached. A, B, C, then A: C's admission evicted A's blocks.
    let small = sim(SimConfig {
        kv_blocks: 8,
        record_requests: 100,
        ..fast()
    });
    let (b, c) = (text(4, 200), text(5, 200));
    for content in [&a, &b, &c, &a, &a] {
        assert_eq!(chat(&small.url(), ask(content, 16)).0, 200);
    }
    let cached: Vec<u64> = small.admissions().iter().map(|a| a.cached_tokens).collect();
    assert_eq!(cached, [0, 0, 0, 0, 48]);
    let p = page(&small.url());
    assert_eq!(p["vllm:prefix_cache_hits_total"], 48.0);
    assert_eq!(p["vllm:kv_cache_usage_perc"], 0.0);
}

#[test]
fn running_requests_hold_kv_blocks_and_the_rest_wait_then_drain_to_zero() {
    let s = Arc::new(sim(SimConfig {
        max_running: Some(1),
        kv_blocks: 100,
        record_requests: 100,
        ..fast()
    }));
    let url = s.url();
    // 54 prompt tokens, 32 output, stalled after 16: 70 tokens fill 5 blocks of 100.
    let mut body = ask(&text(1, 200), 32);
    body["stream"] = json!(true);
    let hold = crate::common::held_stream(&url, &body);
    // Its stall comes after 16 to 19 output tokens: 70 to 73 tokens, 5 blocks.
    wait_page(&url, "one running, 5 blocks", |p| {
        p["vllm:num_requests_running"] == 1.0 && p["vllm:kv_cache_usage_perc"] == 5.0 / 100.0
    });
    // Two more arrive: no running slot, they wait in order.
    let queued: Vec<_> = (0..2)
        .map(|i| {
            let url = url.clone();
            std::thread::spawn(move || chat(&url, ask(&text(10 + i, 40), 4)))
        })
        .collect();
    wait_page(&url, "two waiting", |p| {
        p["vllm:num_requests_waiting"] == 2.0
    });
    let p = page(&url);
    assert_eq!(p["vllm:num_requests_running"], 1.0);
    assert_eq!(
        p["vllm:prompt_tokens_total"], 54.0,
        "waiting requests are not prefilled"
    );
    assert_eq!(s.totals().waiting, 2);
    // The held request goes away: the queue runs and drains.
    drop(hold);
    for q in queued {
        let (status, r) = q.join().unwrap();
        assert_eq!(status, 200, "{r}");
        assert_eq!(r["usage"]["completion_tokens"], 4);
    }
    wait_page(&url, "drained", |p| {
        p["vllm:num_requests_waiting"] == 0.0
            && p["vllm:num_requests_running"] == 0.0
            && p["vllm:kv_cache_usage_perc"] == 0.0
    });
    let log = s.admissions();
    assert_eq!(log.len(), 3);
    assert_eq!(log[0].waited, Duration::ZERO);
    assert!(log[1].waited > Duration::ZERO && log[2].waited > Duration::ZERO);
}

#[test]
fn prompt_tokens_are_exact_with_the_deepseek_v4_tokenizer() {
    let path = tokenizer_path();
    let tok = tokenizer_encoders::Tokenizer::from_path(&path).unwrap();
    let s: SimHandle = sim(SimConfig {
        tokenizer: Some(Arc::new(tok.clone())),
        record_requests: 10,
        ..fast()
    });
    let system = "You are a careful coding agent. Read the repository before editing it.";
    let user = "Fix the failing test in src/lib.rs: `assert_eq!(parse(\"1 + 2\"), Ok(3));` fails \
                with Err(UnexpectedEof). Explain the cause in one paragraph, then patch it.";
    let want = tok.count(system).unwrap() + tok.count(user).unwrap();
    let body = json!({"model": "specperf-sim", "max_completion_tokens": 3, "messages": [
        {"role": "system", "content": system},
        {"role": "user", "content": [{"type": "text", "text": user}]},
    ]});
    let (status, r) = chat(&s.url(), body.clone());
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["usage"]["prompt_tokens"], want as u64);
    // The same prompt again hits its full blocks (real token blocks now).
    chat(&s.url(), body);
    let log = s.admissions();
    assert_eq!(log[1].cached_tokens, (want as u64 - 1) / 16 * 16);
    // /v1/completions: the prompt's tokens; an array of token ids is taken as it is.
    let (_, text) = http(
        &s.url(),
        "POST",
        "/v1/completions",
        &json!({"model": "specperf-sim", "prompt": user, "max_tokens": 2}).to_string(),
        "",
    );
    let r: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(r["usage"]["prompt_tokens"], tok.count(user).unwrap() as u64);
    let (_, text) = http(
        &s.url(),
        "POST",
        "/v1/completions",
        &json!({"model": "specperf-sim", "prompt": [1, 2, 3, 4, 5], "max_tokens": 2}).to_string(),
        "",
    );
    let r: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(r["usage"]["prompt_tokens"], 5);
}

#[test]
fn output_limits_follow_vllm_precedence_and_ignore_eos() {
    // Every token is an EOS candidate: only ignore_eos reaches the limit.
    let s = sim(SimConfig {
        eos_probability: 1.0,
        ..fast()
    });
    let url = s.url();
    let base = json!({"model": "specperf-sim", "messages": [{"role": "user", "content": "hi"}]});
    let with = |extra: Value| {
        let mut b = base.clone();
        b.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let (status, r) = chat(&url, b);
        assert_eq!(status, 200, "{r}");
        (
            r["usage"]["completion_tokens"].as_u64().unwrap(),
            r["choices"][0]["finish_reason"]
                .as_str()
                .unwrap()
                .to_owned(),
        )
    };
    // max_completion_tokens wins over max_tokens, as in vLLM's chat API.
    assert_eq!(
        with(json!({"max_completion_tokens": 7, "max_tokens": 20, "ignore_eos": true})),
        (7, "length".to_owned())
    );
    assert_eq!(
        with(json!({"max_tokens": 9, "ignore_eos": true})),
        (9, "length".to_owned())
    );
    assert_eq!(
        with(json!({"max_completion_tokens": 7})),
        (1, "stop".to_owned())
    );
    let (_, text) = http(
        &url,
        "POST",
        "/v1/completions",
        &json!({"model": "specperf-sim", "prompt": "hi", "max_tokens": 5, "ignore_eos": true})
            .to_string(),
        "",
    );
    let r: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(r["usage"]["completion_tokens"], 5);
}

#[test]
fn context_overflow_is_a_400_with_vllms_message() {
    let s = sim(SimConfig {
        max_model_len: Some(64),
        default_max_tokens: 256,
        ..fast()
    });
    let url = s.url();
    // 54 prompt tokens + 20 = 74 > 64.
    let (status, r) = chat(&url, ask(&text(1, 200), 20));
    assert_eq!(status, 400, "{r}");
    assert_eq!(
        r["error"]["message"],
        "This model's maximum context length is 64 tokens. However, you requested 20 output \
         tokens and your prompt contains at least 54 input tokens, for a total of at least 74 \
         tokens. Please reduce the length of the input prompt or the number of requested output \
         tokens. (parameter=input_tokens, value=54)"
    );
    assert_eq!(r["error"]["code"], 400);
    assert_eq!(chat(&url, ask(&text(1, 200), 10)).0, 200);
    // Without a limit the output fills what the context leaves (here less than the default).
    let (status, r) = chat(
        &url,
        json!({"model": "specperf-sim", "messages": [{"role": "user", "content": text(1, 200)}]}),
    );
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["usage"]["completion_tokens"], 10);
    let (_, models) = http(&url, "GET", "/v1/models", "", "");
    assert!(models.contains("\"max_model_len\":64"), "{models}");
}
