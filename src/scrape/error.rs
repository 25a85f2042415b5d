//! Why a scrape gave no page, and how each endpoint's two ends of the window went: the typed
//! side of the scraper's output, written to `summary.json` as `"ok"` or the error's text.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::acceptance::IterationsError;
use super::prom::ParseError;

/// One scrape of one endpoint that produced no usable page.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScrapeError {
    /// The endpoint is not a valid URL.
    #[error("invalid URL: {0}")]
    Url(String),
    /// The request failed: refused, timed out, over the page cap, TLS (the client's own text).
    #[error("{0}")]
    Fetch(String),
    /// The server answered with a status other than 200.
    #[error("HTTP {0}")]
    Status(u16),
    /// A `Content-Type` that is none of the three formats we read.
    #[error(
        "unexpected Content-Type {0:?} (want text/plain, application/openmetrics-text or \
         application/json)"
    )]
    ContentType(String),
    /// The page does not parse as Prometheus text or OpenMetrics.
    #[error("malformed page: {0}")]
    Malformed(ParseError),
    /// The TensorRT-LLM JSON answer is not the iteration-stats array.
    #[error(transparent)]
    Iterations(#[from] IterationsError),
    /// The endpoint was never scraped (the state before the baseline).
    #[error("not scraped")]
    NotScraped,
    /// Not scraped after a failed baseline: without it the endpoint has no window, and a hung
    /// endpoint would hold every later scrape for its full timeout.
    #[error("not scraped: its baseline scrape failed")]
    BaselineFailed,
    /// The scrape task panicked or was cancelled before it answered.
    #[error("scrape task failed")]
    TaskFailed,
}

/// How one end of an endpoint's window went: written as `"ok"` or the error's text, as the gate
/// and `specperf merge` read it back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScrapeStatus {
    /// The page was read.
    Ok,
    /// The page could not be had; the error as text (it round-trips through `summary.json`).
    Failed(String),
}

impl ScrapeStatus {
    /// The status of a scrape result.
    pub(crate) fn of<T>(r: &Result<T, ScrapeError>) -> ScrapeStatus {
        match r {
            Ok(_) => ScrapeStatus::Ok,
            Err(e) => ScrapeStatus::Failed(e.to_string()),
        }
    }

    /// Whether the page was read.
    pub fn is_ok(&self) -> bool {
        matches!(self, ScrapeStatus::Ok)
    }

    /// `"ok"`, or the error's text: the JSON form.
    pub fn as_str(&self) -> &str {
        match self {
            ScrapeStatus::Ok => "ok",
            ScrapeStatus::Failed(e) => e,
        }
    }
}

impl fmt::Display for ScrapeStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ScrapeStatus {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ScrapeStatus {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<ScrapeStatus, D::Error> {
        let s = String::deserialize(d)?;
        Ok(if s == "ok" {
            ScrapeStatus::Ok
        } else {
            ScrapeStatus::Failed(s)
        })
    }
}
