//! Bounded `GET`s beside the load (readiness probe, model discovery, metrics pages) and the one
//! `POST` check before a run: every body capped, gzip inflated under the same cap, every error
//! typed and scrubbed of credentials.

use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderValue, ACCEPT, ACCEPT_ENCODING, CONTENT_ENCODING, CONTENT_TYPE};
use http::{Method, Request, Uri};
use http_body_util::BodyExt;

use super::credentials::redact;
use super::{closed_after_reuse, describe, Client};

/// A GET answer: status, lower-cased `Content-Type`, and the body (gzip already undone).
#[derive(Debug)]
pub(crate) struct Fetched {
    pub(crate) status: u16,
    pub(crate) content_type: Option<String>,
    pub(crate) body: Bytes,
}

/// A size cap on a `GET` body, and the name errors give it, so a refusal says which cap fired.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BodyCap {
    pub(crate) bytes: usize,
    pub(crate) name: &'static str,
}

impl BodyCap {
    fn exceeded(self, what: String) -> FetchError {
        FetchError::OverCap {
            what,
            cap_name: self.name,
            cap_bytes: self.bytes,
        }
    }
}

/// Why a bounded `GET` ([`Client::get`]) brought back no body. Texts taken from the server or
/// the transport have the run's credentials scrubbed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FetchError {
    /// The request could not be built (a header the URL's origin refuses, say).
    #[error("{0}")]
    Request(String),
    /// Connecting, sending or reading failed; the cause chain, joined.
    #[error("{0}")]
    Transport(String),
    /// The announced, read or inflated body is larger than the cap.
    #[error("{what} over the {cap_name} ({cap_bytes} bytes)")]
    OverCap {
        /// What was over: the announced length, the body, the inflated body.
        what: String,
        /// The cap's name, as errors and docs/replaying.md give it.
        cap_name: &'static str,
        /// The cap, bytes.
        cap_bytes: usize,
    },
    /// The body says gzip but does not inflate.
    #[error("gzip body does not inflate: {0}")]
    Gzip(std::io::Error),
    /// Nothing (or not all of it) came back within the limit.
    #[error("no answer within {0:?}")]
    TimedOut(Duration),
}

impl FetchError {
    /// The error with every secret scrubbed from the texts it carries.
    fn redacted(self, secrets: &[String]) -> FetchError {
        match self {
            FetchError::Request(m) => FetchError::Request(redact(m, secrets)),
            FetchError::Transport(m) => FetchError::Transport(redact(m, secrets)),
            FetchError::OverCap {
                what,
                cap_name,
                cap_bytes,
            } => FetchError::OverCap {
                what: redact(what, secrets),
                cap_name,
                cap_bytes,
            },
            other => other,
        }
    }
}

/// Inflates a gzip body, refusing to grow past the cap (a zip bomb must not exhaust memory).
fn gunzip(body: &[u8], cap: BodyCap) -> Result<Bytes, FetchError> {
    use std::io::Read;
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(body)
        .take(cap.bytes as u64 + 1)
        .read_to_end(&mut out)
        .map_err(FetchError::Gzip)?;
    if out.len() > cap.bytes {
        return Err(cap.exceeded("gzip body inflates".into()));
    }
    Ok(Bytes::from(out))
}

impl Client {
    /// A bounded `GET` (readiness probe, model discovery, pool warm-up). Returns status and body.
    pub(crate) async fn get(
        &self,
        uri: Uri,
        limit: Duration,
        accept: &str,
        cap: BodyCap,
    ) -> Result<Fetched, FetchError> {
        self.exchange(Method::GET, uri, None, limit, accept, cap)
            .await
    }

    /// A bounded JSON `POST` whose answer is read whole, under the same caps and limits as
    /// [`Client::get`] (a single check before the run, never a benchmark request).
    pub(crate) async fn post_json(
        &self,
        uri: Uri,
        body: Bytes,
        limit: Duration,
        cap: BodyCap,
    ) -> Result<Fetched, FetchError> {
        self.exchange(
            Method::POST,
            uri,
            Some(body),
            limit,
            "application/json",
            cap,
        )
        .await
    }

    async fn exchange(
        &self,
        method: Method,
        uri: Uri,
        json: Option<Bytes>,
        limit: Duration,
        accept: &str,
        cap: BodyCap,
    ) -> Result<Fetched, FetchError> {
        let request = || {
            let mut req = Request::builder().method(method.clone()).uri(uri.clone());
            for (k, v) in self.headers_for(&uri).into_iter().flatten() {
                req = req.header(k, v);
            }
            req = req.header(ACCEPT, accept);
            req = req.header(ACCEPT_ENCODING, "gzip, identity");
            if json.is_some() {
                req = req.header(CONTENT_TYPE, "application/json");
            }
            req.body(super::Body::from(json.clone().unwrap_or_default()).sending())
                .map_err(|e| FetchError::Request(e.to_string()))
        };
        let fut = async {
            // As for completions: a pooled connection the server closed between requests
            // (llama-server does) is not a failed scrape; the GET goes once more, fresh.
            let resp = match self.send(request()?, false).await {
                Err(e) if closed_after_reuse(&e) => self.send(request()?, true).await,
                r => r,
            }
            .map_err(|e| FetchError::Transport(describe(&e)))?;
            let status = resp.status().as_u16();
            let header = |name| {
                resp.headers()
                    .get(name)
                    .and_then(|v: &HeaderValue| v.to_str().ok())
                    .map(str::to_ascii_lowercase)
            };
            let content_type = header(CONTENT_TYPE);
            let gzip = header(CONTENT_ENCODING).is_some_and(|e| e.contains("gzip"));
            // A Content-Length past the cap is refused before a byte of the body is read.
            let announced = http_body::Body::size_hint(resp.body()).lower();
            if announced > cap.bytes as u64 {
                return Err(cap.exceeded(format!("Content-Length {announced}")));
            }
            let body = http_body_util::Limited::new(resp.into_body(), cap.bytes)
                .collect()
                .await
                .map_err(|e| {
                    if e.is::<http_body_util::LengthLimitError>() {
                        cap.exceeded("body".into())
                    } else {
                        FetchError::Transport(describe(&*e))
                    }
                })?
                .to_bytes();
            let body = if gzip { gunzip(&body, cap)? } else { body };
            Ok(Fetched {
                status,
                content_type,
                body,
            })
        };
        tokio::time::timeout(limit, fut)
            .await
            .map_err(|_| FetchError::TimedOut(limit))?
            .map_err(|e| e.redacted(&self.secrets))
    }
}
