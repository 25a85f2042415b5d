//! Credentials in headers: building the header map from `--header` and `--api-key`, marking the
//! credentials sensitive, keeping them to the target's origin and scrubbing them from every text
//! the client hands out.

use std::sync::Arc;

use http::header::{HeaderName, HeaderValue, AUTHORIZATION};
use http::{HeaderMap, Uri};

/// `scheme://authority` of a URI, lower-cased: what the credentials are bound to.
pub(crate) fn origin_of(uri: &Uri) -> String {
    format!(
        "{}://{}",
        uri.scheme_str().unwrap_or("http"),
        uri.authority().map_or("", |a| a.as_str())
    )
    .to_ascii_lowercase()
}

pub(super) fn same_origin(uri: &Uri, origin: &str) -> bool {
    origin_of(uri) == origin
}

/// Header names whose values are credentials: never shown, never sent off the target's origin.
pub(super) fn is_credential(name: &HeaderName) -> bool {
    let n = name.as_str();
    matches!(n, "authorization" | "proxy-authorization" | "cookie")
        || ["key", "token", "secret", "auth", "password", "session"]
            .iter()
            .any(|w| n.contains(w))
}

/// The strings to scrub: each sensitive value, and its credential part after a scheme
/// (`Bearer <token>`). Very short values are left alone, they would scrub ordinary words.
pub(super) fn secrets(headers: &HeaderMap) -> Arc<[String]> {
    let mut out: Vec<String> = Vec::new();
    for v in headers.values().filter(|v| v.is_sensitive()) {
        let Ok(v) = v.to_str() else { continue };
        let parts = std::iter::once(v).chain(v.split_once(' ').map(|(_, t)| t.trim()));
        for p in parts.filter(|p| p.len() >= 4) {
            if !out.iter().any(|o| o == p) {
                out.push(p.to_owned());
            }
        }
    }
    // Longest first, so a value is scrubbed whole before its token part.
    out.sort_by_key(|s| std::cmp::Reverse(s.len()));
    out.into()
}

pub(super) fn redact(mut text: String, secrets: &[String]) -> String {
    for s in secrets {
        if text.contains(s.as_str()) {
            text = text.replace(s.as_str(), "[redacted]");
        }
    }
    text
}

/// A `--header` or `--api-key` that cannot go in an HTTP header. The value stays out of the
/// message: it may be a credential.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HeaderError {
    /// Not a valid header name.
    #[error("invalid header name {0:?}")]
    Name(String),
    /// The value holds characters a header may not carry.
    #[error("invalid value for header {0:?}")]
    Value(String),
    /// The API key holds characters a header may not carry.
    #[error("the API key holds characters not allowed in a header")]
    ApiKey,
}

/// Builds the header map: custom headers, then the bearer key (which wins over a custom one).
pub(crate) fn build_headers(
    custom: &[(String, String)],
    api_key: Option<&str>,
) -> Result<HeaderMap, HeaderError> {
    let mut map = HeaderMap::new();
    for (k, v) in custom {
        let name =
            HeaderName::from_bytes(k.as_bytes()).map_err(|_| HeaderError::Name(k.clone()))?;
        let mut value = HeaderValue::from_str(v).map_err(|_| HeaderError::Value(k.clone()))?;
        value.set_sensitive(is_credential(&name));
        map.append(name, value);
    }
    if let Some(key) = api_key {
        let mut value =
            HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| HeaderError::ApiKey)?;
        value.set_sensitive(true);
        map.insert(AUTHORIZATION, value);
    }
    Ok(map)
}
