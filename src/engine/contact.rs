//! The engine's contact with the server before the clock starts: the one up-front name lookup,
//! the readiness probe or model discovery on `/v1/models`, and the bounded connection warm-up.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use http::Uri;
use tokio::sync::watch;

use super::EngineError;
use crate::client::{BodyCap, Client, Fetched};
use crate::progress::{Progress, StartStep};
use crate::stop::Stopper;

pub(super) fn join(base: &str, path: &str) -> Result<Uri, EngineError> {
    format!("{}{}", base.trim_end_matches('/'), path)
        .parse()
        .map_err(|e: http::uri::InvalidUri| EngineError::Url {
            url: base.to_owned(),
            reason: e.to_string(),
        })
}

/// Polls `GET /v1/models` until it answers (any HTTP status counts as alive) or `wait` passes.
pub(super) async fn probe(
    client: &Client,
    base: &str,
    wait: Duration,
    stop: &Stopper,
) -> Result<Fetched, EngineError> {
    let uri = join(base, "/v1/models")?;
    let until = Instant::now() + wait;
    loop {
        let attempt = client
            .get(
                uri.clone(),
                Duration::from_secs(10),
                "application/json",
                BodyCap {
                    bytes: 1 << 20,
                    name: "model list size cap",
                },
            )
            .await;
        match attempt {
            Ok(ok) => return Ok(ok),
            Err(reason) if Instant::now() >= until || stop.token().is_cancelled() => {
                return Err(EngineError::NotReady {
                    url: base.to_owned(),
                    reason: reason.to_string(),
                })
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
}

pub(super) async fn discover_model(
    client: &Client,
    base: &str,
    wait: Duration,
    stop: &Stopper,
) -> Result<String, EngineError> {
    let Fetched {
        status,
        body,
        content_type,
    } = probe(client, base, wait, stop).await?;
    // A 404 or a web page means the URL is not an OpenAI server's base URL: say so, rather than
    // asking for a --model that would fail the same way.
    let html = content_type.as_deref().is_some_and(|c| c.contains("html"))
        || body.trim_ascii_start().starts_with(b"<");
    if status == 404 || html {
        let what = if html {
            format!("an HTML page (HTTP {status})")
        } else {
            "HTTP 404".to_owned()
        };
        let v1 = crate::report::v1_suffix_hint(base).unwrap_or_else(|| {
            "check --url: the OpenAI-compatible server's base URL, e.g. http://host:8000, \
             without /v1"
                .to_owned()
        });
        return Err(EngineError::Url {
            url: base.to_owned(),
            reason: format!("GET {base}/v1/models answered {what}; {v1}"),
        });
    }
    if status != 200 {
        return Err(EngineError::NoModel(format!(
            "GET {base}/v1/models answered HTTP {status}"
        )));
    }
    let v: serde_json::Value = serde_json::from_slice(&body)
        .map_err(|e| EngineError::NoModel(format!("GET {base}/v1/models is not JSON: {e}")))?;
    v.pointer("/data/0/id")
        .and_then(|x| x.as_str())
        .map(str::to_owned)
        .ok_or_else(|| EngineError::NoModel(format!("GET {base}/v1/models lists no model")))
}

/// Resolves the target's host once before anything else, so an unresolvable name fails the run
/// at once with its own error instead of every request (and every retry) looking it up again.
/// Returns the first address, for the start-up line.
pub(super) async fn resolve_once(
    base: &str,
    limit: Duration,
) -> Result<Option<SocketAddr>, EngineError> {
    let uri: Uri = base
        .parse()
        .map_err(|e: http::uri::InvalidUri| EngineError::Url {
            url: base.to_owned(),
            reason: e.to_string(),
        })?;
    let Some(host) = uri.host() else {
        return Ok(None);
    };
    let https = uri.scheme_str() == Some("https");
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let fail = |reason: String| EngineError::Resolve {
        url: base.to_owned(),
        host: host.clone(),
        reason,
    };
    let lookup = tokio::time::timeout(limit, tokio::net::lookup_host((host.clone(), port))).await;
    match lookup {
        Ok(Ok(mut addrs)) => match addrs.next() {
            Some(a) => Ok(Some(a)),
            None => Err(fail("no address".into())),
        },
        Ok(Err(e)) => Err(fail(e.to_string())),
        Err(_) => Err(fail(format!(
            "no answer within {} s (--connect-timeout-seconds)",
            limit.as_secs_f64()
        ))),
    }
}

/// Opens up to `n` keep-alive connections before the clock starts, so the first requests do not
/// pay for TCP and TLS set-up inside their TTFT. Each answer moves the start-up line's count.
/// Runs beside the rest of the start (the AL baseline scrape among it): `done` is cancelled when
/// it ends, and the clock waits for that.
pub(super) async fn warm_pool(
    client: Client,
    base: String,
    n: usize,
    limit: Duration,
    progress: watch::Sender<Progress>,
    done: tokio_util::sync::CancellationToken,
) {
    let _done = done.drop_guard();
    let Ok(uri) = join(&base, "/health") else {
        return;
    };
    let n = n.min(1024);
    progress.send_modify(|p| {
        p.start_step(StartStep::Warming {
            done: 0,
            of: n as u32,
        })
    });
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..n {
        let (c, u) = (client.clone(), uri.clone());
        set.spawn(async move { c.warm(u, limit).await });
    }
    // Best effort: a server that accepts and never answers must not hold the start for the
    // connect timeout (dropping the set aborts the rest; those requests connect themselves).
    let drain = async {
        while set.join_next().await.is_some() {
            progress.send_modify(|p| {
                if let Some(StartStep::Warming { done, .. }) =
                    p.starting.as_mut().map(|s| &mut s.step)
                {
                    *done += 1;
                }
            });
        }
    };
    let _ = tokio::time::timeout(limit.min(WARM_POOL_LIMIT), drain).await;
}

/// The most the connection warm-up waits for `/health` answers before the clock starts.
const WARM_POOL_LIMIT: Duration = Duration::from_secs(3);

/// `--use-dynamo-conv-aware-routing` puts `nvext.session_control` in every body. A Dynamo that
/// does not know the field (1.6 routes sessions by the `X-Dynamo-Session-ID` header instead)
/// refuses every such request with HTTP 400, so the whole warmup would fail without a word on
/// why. One request of the run's own shape (`body`: one short message, one token, the bind)
/// goes first; a refusal that names the field stops the run before anything is sent at scale.
/// Any other answer (success, a failure about something else) leaves the run to go its normal
/// way: the check never switches the routing it asked for.
pub(super) async fn check_session_control(
    client: &Client,
    uri: &Uri,
    body: bytes::Bytes,
    limit: Duration,
) -> Result<(), EngineError> {
    let cap = BodyCap {
        bytes: 64 << 10,
        name: "session_control check body size cap",
    };
    let Ok(Fetched { status, body, .. }) = client.post_json(uri.clone(), body, limit, cap).await
    else {
        return Ok(());
    };
    let text = String::from_utf8_lossy(&body);
    let names_field = ["session_control", "nvext"]
        .iter()
        .any(|f| text.to_ascii_lowercase().contains(f));
    if (400..500).contains(&status) && names_field {
        // Whole words, up to ~600 characters (Dynamo lists every field it knows after the one
        // it refused; the list is cut, not the sentence that names the field).
        let mut answer = String::new();
        for w in text.split_whitespace() {
            if answer.len() + w.len() > 600 {
                answer.push_str(" …");
                break;
            }
            if !answer.is_empty() {
                answer.push(' ');
            }
            answer.push_str(w);
        }
        return Err(EngineError::SessionControl {
            url: uri.to_string(),
            status,
            answer,
        });
    }
    Ok(())
}
