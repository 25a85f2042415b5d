//! Why a run failed, in a few lines for stderr: the top failure kinds with their counts, the
//! first message the server (or the transport) gave for each, and a hint at the usual cause
//! (wrong model, a `--url` with `/v1`, wrong port, TLS). A pure function of the summary, so the
//! hints are unit-tested without a server.

use std::fmt::Write as _;

use crate::metrics::{FirstFailure, Summary};
use crate::record::FailureKind;

/// Failure kinds listed at most.
const TOP: usize = 3;
/// Characters of a server message shown.
const MESSAGE_CHARS: usize = 200;

/// The explanation of a run with failures; `None` when nothing failed.
pub fn failure_report(s: &Summary) -> Option<String> {
    let c = &s.counts;
    if c.failed == 0 {
        return None;
    }
    let url = s.meta.url.as_str();
    let mut kinds: Vec<(FailureKind, u64)> = FailureKind::ALL
        .iter()
        .filter_map(|k| c.failed_by_kind.get(k.as_str()).map(|n| (*k, *n)))
        .collect();
    // Most frequent first; ties keep report order (the sort is stable).
    kinds.sort_by_key(|k| std::cmp::Reverse(k.1));
    let mut o = String::new();
    let done = c.success + c.failed;
    let _ = writeln!(o, "{} of {done} requests failed:", c.failed);
    let mut hints: Vec<String> = Vec::new();
    if let Some(h) = v1_suffix_hint(url) {
        hints.push(h);
    }
    // A `/v1` suffix explains a 404 on every request by itself.
    let not_openai = hints.is_empty().then(|| not_openai_hint(s)).flatten();
    hints.extend(not_openai.clone());
    for (kind, n) in kinds.iter().take(TOP) {
        let first = s.first_failures.get(kind);
        let said = first.map(describe).unwrap_or_default();
        let _ = writeln!(o, "  {:<20} {n:>8}  {said}", kind.as_str());
        if let Some(f) = first {
            let _ = writeln!(o, "  {:<29}  {}", "", when(f, s.meta.start_unix_s));
        }
        if *kind == FailureKind::HttpStatus && not_openai.is_some() {
            continue;
        }
        if let Some(h) = hint(*kind, first, url) {
            if !hints.contains(&h) {
                hints.push(h);
            }
        }
    }
    if kinds.len() > TOP {
        let _ = writeln!(
            o,
            "  ... and {} more kinds (records.jsonl has every failure)",
            kinds.len() - TOP
        );
    }
    for h in hints {
        let _ = writeln!(o, "hint: {h}");
    }
    Some(o)
}

/// When the failures of one kind ended, on the wall clock and into the run: a worker that died or
/// a frontend that restarted shows as a window, to set beside the deployment's own logs.
fn when(f: &FirstFailure, start_unix_s: f64) -> String {
    let at = |ns: u64| {
        let t = start_unix_s + ns as f64 / 1e9;
        let clock = crate::timefmt::iso8601(t);
        // `2026-12-04T13:02:21.512345+00:00` ─► `13:02:21.51`
        let hms = clock.get(11..22).unwrap_or(&clock).to_owned();
        (hms, ns as f64 / 1e9)
    };
    let (a, ra) = at(f.first_ns);
    if f.last_ns == f.first_ns {
        return format!("at {a} UTC (+{ra:.2} s into the run)");
    }
    let (b, rb) = at(f.last_ns);
    format!("from {a} to {b} UTC (+{ra:.2} s to +{rb:.2} s into the run)")
}

/// `HTTP 404: message`, on one line and cut short.
fn describe(f: &FirstFailure) -> String {
    let one_line: String = f
        .message
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(MESSAGE_CHARS)
        .collect();
    match f.http_status {
        Some(st) if (200..300).contains(&st) => one_line,
        // The client's message already leads with the status.
        Some(st) if one_line.starts_with(&format!("HTTP {st}")) => one_line,
        Some(st) => format!("HTTP {st}: {one_line}"),
        None => one_line,
    }
}

/// The base URL without a trailing `/v1`, when `url` has one.
pub(crate) fn strip_v1(url: &str) -> Option<&str> {
    url.trim_end_matches('/').strip_suffix("/v1")
}

/// Said whenever `--url` ends in `/v1`: the endpoint path is appended to it.
pub(crate) fn v1_suffix_hint(url: &str) -> Option<String> {
    strip_v1(url).map(|base| {
        format!(
            "--url {url} ends in /v1, and specperf appends the endpoint path (/v1/...) itself: \
             pass the server's base URL, --url {base}"
        )
    })
}

/// Every request refused with 404 (not about the model), 405 or 501, or answered with a web
/// page: whatever listens at `--url` is not an OpenAI-compatible server (a static file server,
/// a dashboard, the wrong port), and the generic "error status" hint would hide that.
fn not_openai_hint(s: &Summary) -> Option<String> {
    let c = &s.counts;
    let http = c
        .failed_by_kind
        .get(FailureKind::HttpStatus.as_str())
        .copied()
        .unwrap_or(0);
    if c.success > 0 || http == 0 || http != c.failed {
        return None;
    }
    let first = s.first_failures.get(&FailureKind::HttpStatus)?;
    let msg = first.message.to_ascii_lowercase();
    let html = ["<html", "<!doctype", "<head", "<body"]
        .iter()
        .any(|t| msg.contains(t));
    let refused = match first.http_status {
        Some(405 | 501) => true,
        Some(404) => !msg.contains("model"),
        _ => false,
    };
    if !(html || refused) {
        return None;
    }
    let what = match (first.http_status, html) {
        (Some(st), true) => format!("HTTP {st} with a web page"),
        (Some(st), false) => format!("HTTP {st}"),
        (None, _) => "a web page".to_owned(),
    };
    let url = s.meta.url.as_str();
    let base = strip_v1(url).unwrap_or(url).trim_end_matches('/');
    Some(format!(
        "every request was answered {what}: what listens at {url} is not an OpenAI-compatible \
         inference server. Check the host and port in --url (the server's base URL, without \
         /v1), that GET {base}/v1/models lists a model, and that --endpoint-type / --endpoint \
         ({}) is a path this server serves",
        s.meta.endpoint
    ))
}

/// The usual cause of a failure of this kind, given its first message.
fn hint(kind: FailureKind, first: Option<&FirstFailure>, url: &str) -> Option<String> {
    let msg = first
        .map(|f| f.message.to_ascii_lowercase())
        .unwrap_or_default();
    let status = first.and_then(|f| f.http_status);
    let tls_words = ["tls", "certificate", "handshake", "ssl"];
    let about_tls = tls_words.iter().any(|w| msg.contains(w));
    let plain_http = url.starts_with("http://");
    Some(match kind {
        FailureKind::HttpStatus => match status {
            Some(404) if msg.contains("model") => format!(
                "wrong model: the server does not serve it; GET {}/v1/models lists what it \
                 serves, pass one as --model (or leave --model out to use the first)",
                strip_v1(url).unwrap_or(url).trim_end_matches('/')
            ),
            Some(404) => "the endpoint was not found: check --url (the server's base URL, \
                          e.g. http://host:8000, without /v1) and --endpoint-type / --endpoint"
                .into(),
            Some(401 | 403) => "the server refused the credentials: set OPENAI_API_KEY (or \
                                --api-key)"
                .into(),
            Some(400 | 422) => "the server rejected the request body: compare `specperf render` \
                                with what it expects, and check --extra-inputs and the sampling \
                                flags"
                .into(),
            Some(429 | 503) => "the server is overloaded or still starting: lower --concurrency, \
                                or wait for it (--wait-for-model-timeout)"
                .into(),
            _ => "the server answered with an error status: see its message and its logs".into(),
        },
        FailureKind::Connect if msg.contains("dns error") => {
            format!("the host of --url {url} does not resolve: check the host name")
        }
        FailureKind::Connect if about_tls => format!(
            "TLS failed: check http:// versus https:// in --url {url}, trust the server's CA \
             with --ca-file (or --insecure for a test server)"
        ),
        FailureKind::Connect => format!(
            "nothing accepted the connection at {url}: wrong host or port, or the server is not \
             running"
        ),
        FailureKind::ConnectTimeout => format!(
            "connecting to {url} timed out: wrong host or port, a firewall, or a server too busy \
             to accept (--connect-timeout-seconds)"
        ),
        FailureKind::Malformed | FailureKind::Transport | FailureKind::ConnectionClosed
            if plain_http && about_tls =>
        {
            format!("the server seems to speak TLS: use https:// in --url {url}")
        }
        FailureKind::Malformed | FailureKind::Transport => format!(
            "the answer is not an OpenAI-compatible HTTP stream: check the port in --url {url} \
             (and https:// for a TLS server)"
        ),
        FailureKind::ConnectionClosed => "the server closed the connection mid-answer: see its \
                                          logs (crash, proxy timeout)"
            .into(),
        FailureKind::StreamError => "the server reported an error inside the stream: see its \
                                     message"
            .into(),
        FailureKind::TtftTimeout | FailureKind::IdleTimeout | FailureKind::TotalTimeout => {
            "the server was slower than the timeouts (or hung): lower --concurrency or raise \
             --ttft-timeout-seconds / --idle-timeout-seconds / --request-timeout-seconds"
                .into()
        }
        FailureKind::MissingUsage => "the server sent no usage, so tokens cannot be counted: it \
                                      must honour stream_options.include_usage"
            .into(),
        FailureKind::NoOutput => "the server produced no token: check --osl and the prompts".into(),
        FailureKind::Oversized => "an answer exceeded the size cap: raise --max-event-bytes".into(),
        FailureKind::GracePeriodExpired => "requests outlived --benchmark-duration plus \
                                            --benchmark-grace-period: raise the grace period"
            .into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{Aggregate, LoadMeta, RunMeta};
    use crate::record::{Outcome, RequestRecord};

    fn summary(url: &str, failures: &[(FailureKind, Option<u16>, &str)], ok: u64) -> Summary {
        let mut agg = Aggregate::new();
        let mut rec = |outcome, status, error: Option<&str>| {
            let mut r = RequestRecord::started(0, 0, 0, 0);
            r.outcome = outcome;
            r.http_status = status;
            r.error = error.map(str::to_owned);
            agg.add(&r);
        };
        for (k, st, m) in failures {
            rec(Outcome::Failed(*k), *st, Some(m));
        }
        for _ in 0..ok {
            rec(Outcome::Success, Some(200), None);
        }
        agg.summary(RunMeta {
            url: url.to_owned(),
            model: "m".into(),
            endpoint: "/v1/chat/completions".into(),
            endpoint_type: crate::render::EndpointType::Chat,
            osl: None,
            cli_command: None,
            streaming: true,
            concurrency: Some(1),
            request_count: 0,
            samples: 1,
            dataset_reused: false,
            input: "bundled".into(),
            dataset_format: None,
            start_unix_s: 0.0,
            stopped_by: None,
            load: LoadMeta::default(),
            timeouts_s: Default::default(),
        })
    }

    #[test]
    fn each_kind_says_when_its_failures_ended() {
        let mut s = summary("http://h:8000", &[], 1);
        s.meta.start_unix_s = 1_796_389_320.0; // 2026-12-04T13:02:00Z
        s.counts.failed = 3;
        s.counts.failed_by_kind.insert("stream_error", 2);
        s.counts.failed_by_kind.insert("http_status", 1);
        let f = |status, message: &str, first_ns, last_ns| FirstFailure {
            http_status: Some(status),
            message: message.into(),
            first_ns,
            last_ns,
        };
        s.first_failures.insert(
            FailureKind::StreamError,
            f(
                200,
                "Service temporarily unavailable",
                21_870_000_000,
                21_910_000_000,
            ),
        );
        s.first_failures.insert(
            FailureKind::HttpStatus,
            f(503, "HTTP 503: unavailable", 27_590_000_000, 27_590_000_000),
        );
        let r = failure_report(&s).unwrap();
        assert!(
            r.contains("from 13:02:21.87 to 13:02:21.91 UTC (+21.87 s to +21.91 s into the run)"),
            "{r}"
        );
        assert!(
            r.contains("at 13:02:27.59 UTC (+27.59 s into the run)"),
            "{r}"
        );
    }

    #[test]
    fn nothing_failed_nothing_said() {
        assert!(failure_report(&summary("http://h:8000", &[], 3)).is_none());
    }

    #[test]
    fn a_wrong_model_names_the_server_message_and_points_at_model() {
        let m = "The model `other` does not exist.";
        let s = summary(
            "http://h:8000",
            &[(FailureKind::HttpStatus, Some(404), m); 3],
            0,
        );
        let r = failure_report(&s).unwrap();
        assert!(r.starts_with("3 of 3 requests failed:"), "{r}");
        assert!(
            r.contains("at 00:00:00.00 UTC (+0.00 s into the run)"),
            "{r}"
        );
        assert!(
            r.contains("http_status") && r.contains("HTTP 404: The model `other`"),
            "{r}"
        );
        assert!(
            r.contains("hint: wrong model") && r.contains("--model"),
            "{r}"
        );
    }

    #[test]
    fn a_v1_suffix_points_at_the_url_not_the_model() {
        let s = summary(
            "http://h:8000/v1",
            &[(
                FailureKind::HttpStatus,
                Some(404),
                "no route /v1/v1/chat/completions",
            )],
            0,
        );
        let r = failure_report(&s).unwrap();
        assert!(
            r.contains("ends in /v1") && r.contains("--url http://h:8000"),
            "{r}"
        );
        assert!(!r.contains("wrong model"), "{r}");
    }

    #[test]
    fn every_request_refused_by_a_non_openai_server_says_what_to_check() {
        // A static file server on the port: 501 on every POST. The generic "error status" hint
        // said nothing about the URL.
        let s = summary(
            "http://127.0.0.1:8000",
            &[(
                FailureKind::HttpStatus,
                Some(501),
                "HTTP 501: Unsupported method ('POST')",
            ); 4],
            0,
        );
        let r = failure_report(&s).unwrap();
        assert!(
            r.contains("not an OpenAI-compatible inference server")
                && r.contains("GET http://127.0.0.1:8000/v1/models")
                && r.contains("/v1/chat/completions"),
            "{r}"
        );
        assert!(!r.contains("answered with an error status"), "{r}");
        let page = summary(
            "http://h:3000",
            &[(
                FailureKind::HttpStatus,
                Some(200),
                "<!DOCTYPE html><html><head><title>Grafana</title>",
            ); 2],
            0,
        );
        let r = failure_report(&page).unwrap();
        assert!(
            r.contains("with a web page") && r.contains("not an OpenAI"),
            "{r}"
        );
        // Some requests succeeded: a 501 now and then is the server's own error, not the URL.
        let mixed = summary(
            "http://h:8000",
            &[(FailureKind::HttpStatus, Some(501), "not implemented")],
            3,
        );
        assert!(!failure_report(&mixed).unwrap().contains("not an OpenAI"));
    }

    #[test]
    fn connection_and_tls_failures_get_their_own_hint() {
        let refused = summary(
            "http://h:9",
            &[(FailureKind::Connect, None, "connection refused")],
            0,
        );
        assert!(failure_report(&refused)
            .unwrap()
            .contains("wrong host or port"));
        let tls = summary(
            "https://h:9",
            &[(
                FailureKind::Connect,
                None,
                "invalid peer certificate: UnknownIssuer",
            )],
            0,
        );
        assert!(failure_report(&tls).unwrap().contains("--ca-file"));
    }

    #[test]
    fn the_most_frequent_kinds_come_first_and_the_rest_are_counted() {
        let mut f = vec![(FailureKind::TtftTimeout, None, "t"); 1];
        f.extend([(FailureKind::HttpStatus, Some(500), "boom"); 5]);
        f.extend([(FailureKind::Connect, None, "refused"); 2]);
        f.push((FailureKind::NoOutput, None, "n"));
        let r = failure_report(&summary("http://h:1", &f, 1)).unwrap();
        assert!(r.starts_with("9 of 10 requests failed:"), "{r}");
        let pos = |k: &str| r.find(k).unwrap();
        assert!(pos("http_status") < pos("connect"), "{r}");
        assert!(r.contains("and 1 more kinds"), "{r}");
    }
}
