//! Wall-clock formats the artifacts need, through `chrono` (already in the tree for the chat
//! templates' `strftime_now`), so no calendar arithmetic is written by hand.

use chrono::{DateTime, SecondsFormat, Utc};

/// A Unix time in seconds (negative clamps to the epoch), rounded to the microsecond.
fn utc(unix_s: f64) -> DateTime<Utc> {
    let us = (unix_s.max(0.0) * 1e6).round() as i64;
    DateTime::from_timestamp_micros(us).unwrap_or_default()
}

/// Unix seconds as ISO 8601 UTC with microseconds, e.g. `2026-11-30T12:00:00.000000+00:00`.
pub(crate) fn iso8601(unix_s: f64) -> String {
    utc(unix_s)
        .format("%Y-%m-%dT%H:%M:%S%.6f+00:00")
        .to_string()
}

/// Unix nanoseconds as nvidia-smi's CSV timestamp, local time with milliseconds
/// (`2026/11/30 12:00:00.123`), what InferenceX's `aggregate_power.py` parses.
pub(crate) fn nvidia_smi_local(t_ns: u64) -> String {
    use chrono::TimeZone;
    chrono::Local
        .timestamp_nanos(i64::try_from(t_ns).unwrap_or(i64::MAX))
        .format("%Y/%m/%d %H:%M:%S%.3f")
        .to_string()
}

/// Unix seconds as vLLM's result date, `%Y%m%d-%H%M%S` (UTC).
pub(crate) fn compact_date(unix_s: f64) -> String {
    utc(unix_s).format("%Y%m%d-%H%M%S").to_string()
}

/// Now as local time `%Y%m%d-%H%M%S` (`datetime.now().strftime(...)`, benchmark_serving.py's
/// result date).
pub(crate) fn local_compact_now() -> String {
    chrono::Local::now().format("%Y%m%d-%H%M%S").to_string()
}

/// Now as RFC 3339 UTC at second precision, e.g. `2026-11-30T12:00:00Z`.
pub(crate) fn rfc3339_now() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_are_utc_and_exact() {
        // 2024-02-29 23:59:59.123457 UTC: a leap day, and microseconds rounded.
        let t = 1_709_251_199.123_456_7;
        assert_eq!(iso8601(t), "2024-02-29T23:59:59.123457+00:00");
        assert_eq!(compact_date(t), "20240229-235959");
        assert_eq!(iso8601(-5.0), "1970-01-01T00:00:00.000000+00:00");
        let now = rfc3339_now();
        assert!(now.ends_with('Z') && now.len() == 20, "{now}");
    }
}
