//! Where requests go and how they get there: the target URL (or the embedded simulator), the
//! endpoint path, headers and API key, timeouts and TLS. Feeds `client::ClientOptions`.

use std::time::Duration;

use serde_json::Value;

use super::{err, seconds, ConfigError};
use crate::cli::ReplayArgs;
use crate::client::{build_headers, ClientOptions, Timeouts};
use crate::sim::{Acceptance, SimConfig};

/// What `--insecure` costs, said before the run and in the summary.
pub(super) const INSECURE_WARNING: &str = "TLS certificate verification is OFF (--insecure): the \
     server's identity is not checked, so anyone on the network path can read and alter the \
     traffic, API key included";

/// Where requests go.
#[derive(Clone, Debug)]
pub(crate) enum Target {
    /// A server at this base URL.
    Url(String),
    /// The built-in simulator, started in-process on loopback.
    Embedded(Box<SimConfig>),
    /// A `--serve-cmd` cell's server, whose URL is bound once it is up
    /// ([`super::RunConfig::bind`]); a run is never started against it.
    Unbound,
}

impl Target {
    /// True for the embedded simulator.
    pub(crate) fn is_embedded(&self) -> bool {
        matches!(self, Target::Embedded(_))
    }
}

/// `--endpoint`, else the endpoint type's usual path.
pub(super) fn endpoint_path(a: &ReplayArgs) -> Result<String, ConfigError> {
    match &a.endpoint {
        Some(p) if p.starts_with('/') => Ok(p.clone()),
        Some(p) => err(format!("--endpoint {p:?} must start with '/'")),
        None => Ok(a.endpoint_type.path().to_owned()),
    }
}

/// The target and the output length asked of each request: `--url`, else the embedded simulator
/// with the `--sim-*` flags, which needs an output length (256 when `--osl` is not given) because
/// it has no end of its own.
pub(super) fn target(a: &ReplayArgs) -> Result<(Target, Option<u32>), ConfigError> {
    if let Some(u) = &a.url {
        return Ok((Target::Url(normalize_url(u)?), a.osl()));
    }
    if a.url_bound_later {
        return Ok((Target::Unbound, a.osl()));
    }
    let s = &a.sim;
    let sim = SimConfig {
        ttft: Duration::try_from_secs_f64(s.ttft_ms / 1e3)
            .map_err(|_| ConfigError(format!("--sim-ttft-ms {} is invalid", s.ttft_ms)))?,
        itl: Duration::try_from_secs_f64(s.itl_ms / 1e3)
            .map_err(|_| ConfigError(format!("--sim-itl-ms {} is invalid", s.itl_ms)))?,
        k: s.k,
        acceptance: Acceptance::Probability(s.acceptance_prob),
        ignore_continuous_usage: s.ignore_continuous_usage,
        ..SimConfig::default()
    };
    let sim = super::sim::embedded_kv(s, sim)?;
    sim.validate().map_err(|e| ConfigError(e.to_string()))?;
    Ok((
        Target::Embedded(Box::new(sim)),
        Some(a.osl().unwrap_or(256)),
    ))
}

/// Headers, key, timeouts and TLS settings, checked in that order.
pub(super) fn client_options(a: &ReplayArgs) -> Result<ClientOptions, ConfigError> {
    let headers = build_headers(
        &parse_headers(&a.headers)?,
        a.api_key.as_deref().filter(|k| !k.is_empty()),
    )
    .map_err(|m| ConfigError(format!("--header/--api-key: {m}")))?;
    let timeouts = Timeouts {
        connect: seconds("connect-timeout-seconds", a.connect_timeout_seconds)?,
        first_token: seconds("ttft-timeout-seconds", a.ttft_timeout_seconds)?,
        idle: seconds("idle-timeout-seconds", a.idle_timeout_seconds)?,
        total: seconds("request-timeout-seconds", a.request_timeout_seconds)?,
    };
    if let Some(ca) = &a.ca_file {
        if !ca.is_file() {
            return err(format!("--ca-file {}: no such file", ca.display()));
        }
    }
    Ok(ClientOptions {
        http: a.http,
        reuse: a.connection_reuse_strategy,
        rate_limit_retries: a.rate_limit_retries,
        timeouts,
        headers,
        origin: None,
        insecure: a.insecure,
        ca_file: a.ca_file.clone(),
        max_event_bytes: a.max_event_bytes,
        max_body_bytes: a.max_event_bytes,
    })
}

/// The run's warnings: settings that weaken it, said before the run and kept in the summary.
pub(super) fn warnings(a: &ReplayArgs) -> Vec<String> {
    let mut w = Vec::new();
    if a.insecure {
        w.push(INSECURE_WARNING.to_owned());
    }
    if let Some(h) = a.url.as_deref().and_then(v1_hint) {
        w.push(h);
    }
    if a.per_chunk_usage && !a.streaming {
        w.push(
            "--per-chunk-usage has no effect with --streaming false: a non-streaming response \
             has one usage, so there are no per-chunk token counts"
                .to_owned(),
        );
    }
    w
}

/// A common slip: the OpenAI client's base_url carries /v1, ours must not.
pub(super) fn v1_hint(url: &str) -> Option<String> {
    crate::report::v1_suffix_hint(&normalize_url(url).ok()?)
}

/// True when the URL carries `user:password@`.
pub(super) fn has_userinfo(uri: &http::Uri) -> bool {
    uri.authority().is_some_and(|a| a.as_str().contains('@'))
}

/// Adds `http://` when the URL has no scheme and checks it parses.
pub(crate) fn normalize_url(raw: &str) -> Result<String, ConfigError> {
    let raw = raw.trim();
    let url = if raw.contains("://") {
        raw.to_owned()
    } else {
        format!("http://{raw}")
    };
    let uri: http::Uri = url
        .parse()
        .map_err(|e| ConfigError(format!("--url {raw:?} is not a URL: {e}")))?;
    match uri.scheme_str() {
        Some("http" | "https") => {}
        other => {
            return err(format!(
                "--url {raw:?}: scheme {other:?} is not http or https"
            ))
        }
    }
    if uri.host().is_none() {
        return err(format!("--url {raw:?} has no host"));
    }
    if has_userinfo(&uri) {
        // Credentials in the URL would land in summary.json, the console and error messages.
        return err(
            "--url carries credentials (user:password@); pass --api-key (or OPENAI_API_KEY) or \
             -H Authorization:... instead, which are never written anywhere",
        );
    }
    Ok(url.trim_end_matches('/').to_owned())
}

/// Parses `--header` items: `Name:Value` pairs or JSON objects of them.
fn parse_headers(items: &[String]) -> Result<Vec<(String, String)>, ConfigError> {
    let mut out = Vec::new();
    for h in items {
        let t = h.trim();
        if t.starts_with('{') {
            let Ok(Value::Object(o)) = serde_json::from_str::<Value>(t) else {
                return err(format!("--header {t:?} is not a JSON object"));
            };
            for (k, v) in o {
                let v = v
                    .as_str()
                    .map(str::to_owned)
                    .unwrap_or_else(|| v.to_string());
                out.push((k, v));
            }
            continue;
        }
        let Some((k, v)) = t.split_once(':') else {
            return err(format!("--header {t:?}: expected Name:Value"));
        };
        out.push((k.trim().to_owned(), v.trim().to_owned()));
    }
    Ok(out)
}
