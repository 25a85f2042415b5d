//! Prometheus exposition format: text 0.0.4 and OpenMetrics 1.0 pages -> samples, and back.
//!
//! The parser is a pure function over one page, so it is benched and fuzzed on its own. The rules are those of
//! `speculative-metrics.md` §7: colon names and quoted UTF-8 names, labels in any order with escapes
//! (compared as sorted maps), Go float syntax including `NaN` and `±Inf`, optional timestamps,
//! exemplars, optional `# HELP`/`# TYPE`, and `# EOF` required in OpenMetrics. A malformed line is
//! an error naming the line, never a silent skip: a page we half-understood would give a wrong AL.
//!
//! Its inverse, the crate-internal `Writer`, writes pages in the same syntax: the simulator's
//! `/metrics` page and the fuzz round trip use it, so quoting and escaping are defined once,
//! beside the parser.

use std::collections::HashSet;
use std::fmt;

/// Which exposition format a page is in (from its `Content-Type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `text/plain; version=0.0.4`.
    Text,
    /// `application/openmetrics-text`.
    OpenMetrics,
}

/// One sample line. Labels are sorted by name, so equal label sets compare equal.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// Metric name as written (colons kept).
    pub name: String,
    /// `(name, value)` pairs sorted by name, values unescaped.
    pub labels: Vec<(String, String)>,
    /// The value; `NaN` and infinities are kept.
    pub value: f64,
}

impl Sample {
    /// The value of label `name`, if present.
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A parsed page.
#[derive(Clone, Debug, Default)]
pub struct Page {
    /// Every sample, in page order.
    pub samples: Vec<Sample>,
}

/// A line the parser could not accept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based line number (0 for page-level problems such as a missing `# EOF`).
    pub line: usize,
    /// What was wrong.
    pub reason: Reason,
    /// The offending line, shortened to 120 characters.
    pub text: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}", self.reason)
        } else {
            write!(f, "line {}: {}: {:?}", self.line, self.reason, self.text)
        }
    }
}

impl std::error::Error for ParseError {}

/// What was wrong with a line (or the page). The texts name the rule broken; the line and its
/// text come from [`ParseError`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Reason {
    /// A non-blank line after OpenMetrics' `# EOF`.
    #[error("content after `# EOF`")]
    ContentAfterEof,
    /// More series than [`MAX_SAMPLES`] (or the cap given).
    #[error("more than {0} samples on one page (the metrics series cap)")]
    TooManySamples(usize),
    /// The same name and labels twice.
    #[error("duplicate series (same name and labels twice)")]
    DuplicateSeries,
    /// An OpenMetrics page that does not end in `# EOF`.
    #[error("OpenMetrics page without `# EOF`: truncated")]
    MissingEof,
    /// `# EOF` followed by more text on its line.
    #[error("text after `# EOF`")]
    TextAfterEof,
    /// `# TYPE`, `# HELP` or `# UNIT` without the name it describes.
    #[error("`# {0}` without a metric name")]
    CommentWithoutName(String),
    /// A `# TYPE` that names no known type.
    #[error("unknown metric type {0:?}")]
    UnknownType(String),
    /// A backslash escape other than `\\`, `\"` and `\n`.
    #[error("invalid escape `\\{0}`")]
    InvalidEscape(char),
    /// A backslash at the end of the line.
    #[error("unterminated string")]
    DanglingEscape,
    /// A quoted string without its closing quote.
    #[error("unterminated quoted string")]
    UnterminatedString,
    /// A quoted name outside `{...}` (the UTF-8 syntax puts it inside).
    #[error("a quoted metric name must be inside braces")]
    QuotedNameOutsideBraces,
    /// A name starting with a character names cannot start with.
    #[error("a metric name cannot start with {0:?}")]
    BadNameStart(char),
    /// A `{` without its `}`.
    #[error("unterminated label set (missing `}}`)")]
    UnterminatedLabels,
    /// A label name starting with a character label names cannot start with.
    #[error("invalid label name starting with {0:?}")]
    BadLabelStart(char),
    /// A label name not followed by `=`.
    #[error("label {0:?} has no `=`")]
    LabelWithoutEquals(String),
    /// A label value without quotes.
    #[error("label {0:?} value must be double-quoted")]
    UnquotedLabelValue(String),
    /// Something other than `,` or `}` after a label.
    #[error("expected `,` or `}}` after a label")]
    ExpectedCommaOrBrace,
    /// Labels but no name.
    #[error("sample without a metric name")]
    NoName,
    /// The value glued to the name or labels.
    #[error("expected whitespace before the value")]
    NoSpaceBeforeValue,
    /// A name with nothing after it.
    #[error("sample without a value")]
    NoValue,
    /// A value that is not a Go float.
    #[error("value {0:?} is not a number")]
    BadValue(String),
    /// A timestamp that is not a number.
    #[error("timestamp {0:?} is not a number")]
    BadTimestamp(String),
    /// Text after the value and timestamp (other than an exemplar).
    #[error("unexpected text {0:?} after the value")]
    TrailingText(String),
    /// The same label name twice in one sample.
    #[error("a label name appears twice")]
    DuplicateLabel,
}

/// Upper bound on samples (series) per page: a hostile or runaway exporter must not exhaust
/// memory. The page itself is capped in bytes by the scraper.
pub const MAX_SAMPLES: usize = 1_000_000;

/// Parses one page.
pub fn parse(text: &str, format: Format) -> Result<Page, ParseError> {
    parse_capped(text, format, MAX_SAMPLES)
}

fn parse_capped(text: &str, format: Format, max_samples: usize) -> Result<Page, ParseError> {
    let mut page = Page::default();
    // Duplicate detection by hash; a hit (rare) is confirmed against the samples themselves.
    let mut seen: HashSet<u64> = HashSet::new();
    let mut eof = false;
    for (i, raw) in text.split('\n').enumerate() {
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        let err = |reason: Reason| ParseError {
            line: i + 1,
            reason,
            text: line.chars().take(120).collect(),
        };
        let trimmed = line.trim_matches([' ', '\t']);
        if eof {
            if trimmed.is_empty() {
                continue;
            }
            return Err(err(Reason::ContentAfterEof));
        }
        if trimmed.is_empty() {
            continue;
        }
        if let Some(rest) = trimmed.strip_prefix('#') {
            if comment(rest, format).map_err(err)? {
                eof = true;
            }
            continue;
        }
        let sample = sample_line(trimmed).map_err(err)?;
        if page.samples.len() >= max_samples {
            return Err(err(Reason::TooManySamples(max_samples)));
        }
        let h = series_hash(&sample);
        if !seen.insert(h)
            && page
                .samples
                .iter()
                .any(|s| s.name == sample.name && s.labels == sample.labels)
        {
            return Err(err(Reason::DuplicateSeries));
        }
        page.samples.push(sample);
    }
    if format == Format::OpenMetrics && !eof {
        return Err(ParseError {
            line: 0,
            reason: Reason::MissingEof,
            text: String::new(),
        });
    }
    Ok(page)
}

fn series_hash(s: &Sample) -> u64 {
    use std::hash::{BuildHasher, Hash, Hasher};
    // A fixed-key hasher: deterministic, and collisions are confirmed anyway.
    let mut h =
        std::hash::BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default()
            .build_hasher();
    s.name.hash(&mut h);
    s.labels.hash(&mut h);
    h.finish()
}

/// Checks a `#` line. Returns true for `# EOF`.
fn comment(rest: &str, format: Format) -> Result<bool, Reason> {
    let rest = rest.trim_start_matches([' ', '\t']);
    let (keyword, tail) = split_token(rest);
    match keyword {
        "EOF" if format == Format::OpenMetrics => {
            if tail.trim().is_empty() {
                Ok(true)
            } else {
                Err(Reason::TextAfterEof)
            }
        }
        "TYPE" => {
            let (name, ty) = split_name(tail.trim_start_matches([' ', '\t']))?;
            let ty = ty.trim();
            const TYPES: [&str; 9] = [
                "counter",
                "gauge",
                "histogram",
                "summary",
                "untyped",
                "unknown",
                "info",
                "stateset",
                "gaugehistogram",
            ];
            if name.is_empty() {
                return Err(Reason::CommentWithoutName("TYPE".into()));
            }
            if !TYPES.contains(&ty) {
                return Err(Reason::UnknownType(ty.to_owned()));
            }
            Ok(false)
        }
        "HELP" | "UNIT" => {
            let (name, _) = split_name(tail.trim_start_matches([' ', '\t']))?;
            if name.is_empty() {
                return Err(Reason::CommentWithoutName(keyword.to_owned()));
            }
            Ok(false)
        }
        // Any other `#` line is a comment.
        _ => Ok(false),
    }
}

fn split_token(s: &str) -> (&str, &str) {
    match s.find([' ', '\t']) {
        Some(i) => (&s[..i], &s[i..]),
        None => (s, ""),
    }
}

/// A metric name at the start of `s` (plain or quoted), and the rest.
fn split_name(s: &str) -> Result<(String, &str), Reason> {
    if s.starts_with('"') {
        let (name, used) = quoted(s)?;
        Ok((name, &s[used..]))
    } else {
        let end = s.find(|c: char| !is_name_char(c)).unwrap_or(s.len());
        Ok((s[..end].to_owned(), &s[end..]))
    }
}

fn is_name_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == ':'
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

fn is_label_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn is_label_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Parses a double-quoted string with `\\`, `\"` and `\n` escapes at the start of `s`; returns
/// the unescaped text and the bytes consumed (quotes included).
fn quoted(s: &str) -> Result<(String, usize), Reason> {
    let bytes = s.as_bytes();
    debug_assert_eq!(bytes.first(), Some(&b'"'));
    let mut out = String::new();
    let mut i = 1;
    let mut run = 1;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                out.push_str(&s[run..i]);
                return Ok((out, i + 1));
            }
            b'\\' => {
                out.push_str(&s[run..i]);
                match bytes.get(i + 1) {
                    Some(b'\\') => out.push('\\'),
                    Some(b'"') => out.push('"'),
                    Some(b'n') => out.push('\n'),
                    Some(&c) => return Err(Reason::InvalidEscape(c as char)),
                    None => return Err(Reason::DanglingEscape),
                }
                i += 2;
                run = i;
            }
            _ => i += 1,
        }
    }
    Err(Reason::UnterminatedString)
}

fn skip_ws(s: &str, mut i: usize) -> usize {
    let b = s.as_bytes();
    while i < b.len() && (b[i] == b' ' || b[i] == b'\t') {
        i += 1;
    }
    i
}

fn sample_line(line: &str) -> Result<Sample, Reason> {
    let b = line.as_bytes();
    let mut i = 0;
    let mut name = String::new();
    if b[0] != b'{' {
        let first = line.chars().next().unwrap_or(' ');
        if first == '"' {
            return Err(Reason::QuotedNameOutsideBraces);
        }
        if !is_name_start(first) {
            return Err(Reason::BadNameStart(first));
        }
        while i < b.len() && is_name_char(b[i] as char) {
            i += 1;
        }
        name.push_str(&line[..i]);
    }
    let mut labels: Vec<(String, String)> = Vec::new();
    if b.get(i) == Some(&b'{') {
        i += 1;
        loop {
            i = skip_ws(line, i);
            match b.get(i) {
                None => return Err(Reason::UnterminatedLabels),
                Some(b'}') => {
                    i += 1;
                    break;
                }
                _ => {}
            }
            let key = if b[i] == b'"' {
                let (k, used) = quoted(&line[i..])?;
                i += used;
                k
            } else {
                let start = i;
                if !is_label_start(b[i] as char) {
                    return Err(Reason::BadLabelStart(
                        line[i..].chars().next().unwrap_or(' '),
                    ));
                }
                while i < b.len() && is_label_char(b[i] as char) {
                    i += 1;
                }
                line[start..i].to_owned()
            };
            i = skip_ws(line, i);
            if b.get(i) != Some(&b'=') {
                // A lone quoted string is the metric name (UTF-8 names in OpenMetrics 1.x).
                let lone = matches!(b.get(i), Some(b',') | Some(b'}'));
                if lone && name.is_empty() && labels.is_empty() {
                    name = key;
                    if b.get(i) == Some(&b',') {
                        i += 1;
                    }
                    continue;
                }
                return Err(Reason::LabelWithoutEquals(key));
            }
            i = skip_ws(line, i + 1);
            if b.get(i) != Some(&b'"') {
                return Err(Reason::UnquotedLabelValue(key));
            }
            let (value, used) = quoted(&line[i..])?;
            i = skip_ws(line, i + used);
            labels.push((key, value));
            match b.get(i) {
                Some(b',') => i += 1,
                Some(b'}') => {}
                _ => return Err(Reason::ExpectedCommaOrBrace),
            }
        }
    }
    if name.is_empty() {
        return Err(Reason::NoName);
    }
    let after = skip_ws(line, i);
    if after == i && after < b.len() {
        return Err(Reason::NoSpaceBeforeValue);
    }
    let rest = &line[after..];
    // Exemplars (` # {...} v [ts]`) follow the value and timestamp; they are not part of them.
    let rest = match rest.find(" #") {
        Some(p) => &rest[..p],
        None => rest,
    };
    let mut parts = rest.split([' ', '\t']).filter(|s| !s.is_empty());
    let value_text = parts.next().ok_or(Reason::NoValue)?;
    let value = parse_value(value_text).ok_or_else(|| Reason::BadValue(value_text.to_owned()))?;
    if let Some(ts) = parts.next() {
        // 0.0.4: integer milliseconds; OpenMetrics: float seconds. Ignored for deltas.
        if parse_value(ts).is_none() {
            return Err(Reason::BadTimestamp(ts.to_owned()));
        }
    }
    if let Some(extra) = parts.next() {
        return Err(Reason::TrailingText(extra.to_owned()));
    }
    labels.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    if labels.windows(2).any(|w| w[0].0 == w[1].0) {
        return Err(Reason::DuplicateLabel);
    }
    Ok(Sample {
        name,
        labels,
        value,
    })
}

/// What a page's `# TYPE` and `# HELP` lines say about one family.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FamilyMeta {
    /// The type (`counter`, `gauge`, `histogram`, ...), `None` without a `# TYPE` line.
    pub kind: Option<String>,
    /// The `# HELP` text, unescaped (empty without one).
    pub help: String,
}

/// The `# TYPE` and `# HELP` lines of a page, by the name they are written for (`vllm:x_total`
/// for a counter, as Prometheus' text format writes it). Lines the parser would reject are
/// skipped: [`parse`] is the judge of a page; this only labels what it accepted.
pub fn families(text: &str) -> std::collections::HashMap<String, FamilyMeta> {
    let mut out: std::collections::HashMap<String, FamilyMeta> = Default::default();
    for raw in text.split('\n') {
        let line = raw.trim_matches([' ', '\t', '\r']);
        let Some(rest) = line.strip_prefix('#') else {
            continue;
        };
        let (keyword, tail) = split_token(rest.trim_start_matches([' ', '\t']));
        if keyword != "TYPE" && keyword != "HELP" {
            continue;
        }
        let Ok((name, after)) = split_name(tail.trim_start_matches([' ', '\t'])) else {
            continue;
        };
        if name.is_empty() {
            continue;
        }
        let meta = out.entry(name).or_default();
        // One separating blank, then the text as written.
        let value = after.strip_prefix([' ', '\t']).unwrap_or(after);
        if keyword == "TYPE" {
            meta.kind = Some(value.trim().to_owned());
        } else {
            meta.help = unescape_help(value);
        }
    }
    out
}

/// `# HELP` text escapes only `\\` and `\n`.
fn unescape_help(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some(o) => out.push(o),
            None => out.push('\\'),
        }
    }
    out
}

/// Go `strconv.ParseFloat` syntax as exporters write it: decimals, exponents, `NaN`, `Inf`, `±Inf`.
pub fn parse_value(s: &str) -> Option<f64> {
    match s {
        "NaN" | "nan" => return Some(f64::NAN),
        "+Inf" | "Inf" | "+inf" | "inf" => return Some(f64::INFINITY),
        "-Inf" | "-inf" => return Some(f64::NEG_INFINITY),
        _ => {}
    }
    // Rust also accepts "infinity" and "nan" spellings; exporters never write them, and only
    // digits, signs, dots and exponents may reach the float parser.
    if !s
        .bytes()
        .all(|c| c.is_ascii_digit() || matches!(c, b'+' | b'-' | b'.' | b'e' | b'E'))
    {
        return None;
    }
    s.parse::<f64>().ok()
}

/// Writes a page in exposition syntax, the inverse of [`parse`]: a name or label name plain where
/// the legacy grammar allows it and quoted otherwise, label values quoted with `\\`, `\"` and
/// `\n` escaped. The simulator's `/metrics` page and the fuzz round trip both write through it, so
/// the escaping rules live once, next to the parser that undoes them.
#[derive(Debug, Default)]
pub(crate) struct Writer {
    out: String,
}

impl Writer {
    /// An empty page with room for `bytes`.
    pub(crate) fn with_capacity(bytes: usize) -> Writer {
        Writer {
            out: String::with_capacity(bytes),
        }
    }

    /// `# HELP` and `# TYPE` lines for a family (`kind` is `counter`, `gauge`, ...).
    pub(crate) fn family(&mut self, name: &str, kind: &str, help: &str) {
        self.out.push_str("# HELP ");
        self.name(name, true);
        self.out.push(' ');
        // HELP text is not quoted, so a quote in it stays as it is.
        escape_into(&mut self.out, help, false);
        self.out.push_str("\n# TYPE ");
        self.name(name, true);
        self.out.push(' ');
        self.out.push_str(kind);
        self.out.push('\n');
    }

    /// One sample line: `name{label="value",...} value`. A name outside the legacy grammar goes
    /// first inside the braces, quoted, as the UTF-8 extension writes it.
    pub(crate) fn sample<K: AsRef<str>, V: AsRef<str>>(
        &mut self,
        name: &str,
        labels: &[(K, V)],
        value: impl fmt::Display,
    ) {
        let plain = is_legacy(name, true);
        if plain {
            self.out.push_str(name);
        }
        if !plain || !labels.is_empty() {
            self.out.push('{');
            if !plain {
                quote_into(&mut self.out, name);
            }
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 || !plain {
                    self.out.push(',');
                }
                self.name(k.as_ref(), false);
                self.out.push('=');
                quote_into(&mut self.out, v.as_ref());
            }
            self.out.push('}');
        }
        use fmt::Write as _;
        let _ = writeln!(self.out, " {value}");
    }

    /// The page's text; OpenMetrics gets its required `# EOF`.
    pub(crate) fn finish(mut self, format: Format) -> String {
        if format == Format::OpenMetrics {
            self.out.push_str("# EOF\n");
        }
        self.out
    }

    /// A metric name (`colons`) or label name, plain when legal and quoted otherwise.
    fn name(&mut self, name: &str, colons: bool) {
        if is_legacy(name, colons) {
            self.out.push_str(name);
        } else {
            quote_into(&mut self.out, name);
        }
    }
}

/// Appends `s` with backslash and newline escaped, and double quotes too when `quotes`.
fn escape_into(out: &mut String, s: &str, quotes: bool) {
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' if quotes => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// Whether `s` needs no quotes: a legacy metric name (`colons`) or label name.
fn is_legacy(s: &str, colons: bool) -> bool {
    let mut chars = s.chars();
    if colons {
        chars.next().is_some_and(is_name_start) && chars.all(is_name_char)
    } else {
        chars.next().is_some_and(is_label_start) && chars.all(is_label_char)
    }
}

/// Appends `s` double-quoted with the escapes [`parse`] undoes.
fn quote_into(out: &mut String, s: &str) {
    out.push('"');
    escape_into(out, s, true);
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(line: &str) -> Sample {
        parse(line, Format::Text).unwrap().samples.remove(0)
    }

    #[test]
    fn the_series_cap_names_itself_and_the_line() {
        let page = "a 1\nb 2\nc 3\n";
        assert_eq!(
            parse_capped(page, Format::Text, 3).unwrap().samples.len(),
            3
        );
        let e = parse_capped(page, Format::Text, 2).unwrap_err();
        assert_eq!(e.line, 3);
        assert!(e.to_string().contains("metrics series cap"), "{e}");
    }

    #[test]
    fn names_with_colons_labels_in_any_order_and_escapes() {
        let s = one(r#"vllm:x_total{position="1" , engine="0",model_name="a \"b\" \\ c\n}d",} 7"#);
        assert_eq!(s.name, "vllm:x_total");
        assert_eq!(s.label("engine"), Some("0"));
        assert_eq!(s.label("position"), Some("1"));
        assert_eq!(s.label("model_name"), Some("a \"b\" \\ c\n}d"));
        assert_eq!(s.labels[0].0, "engine");
        assert_eq!(s.value, 7.0);
    }

    #[test]
    fn go_float_syntax_and_timestamps() {
        for (text, want) in [
            ("m 1", 1.0),
            ("m 1.0", 1.0),
            ("m 1e+09", 1e9),
            ("m 1.7640192001234567e+09", 1.7640192001234567e9),
            ("m -0.5", -0.5),
            ("m +Inf", f64::INFINITY),
            ("m Inf", f64::INFINITY),
            ("m -Inf", f64::NEG_INFINITY),
            ("m\t3 1700000000000", 3.0),
            ("m{} 4 1.7e9", 4.0),
        ] {
            assert_eq!(one(text).value, want, "{text}");
        }
        assert!(one("m NaN").value.is_nan());
        for bad in [
            "m 1_000",
            "m infinity",
            "m 0x10",
            "m abc",
            "m 1 2 3",
            "m 1 x",
            "m",
        ] {
            assert!(parse(bad, Format::Text).is_err(), "{bad}");
        }
    }

    #[test]
    fn quoted_utf8_names_and_exemplars() {
        let s = one(r#"{"my.metric",label="x"} 1"#);
        assert_eq!(s.name, "my.metric");
        assert_eq!(s.label("label"), Some("x"));
        let p = parse(
            "# TYPE a counter\na_total 5 # {trace_id=\"x\"} 1 1.5\n# EOF\n",
            Format::OpenMetrics,
        )
        .unwrap();
        assert_eq!(p.samples[0].value, 5.0);
    }

    #[test]
    fn malformed_lines_are_errors_naming_the_line() {
        let page = "# TYPE a counter\na_total 1\nb{x=1} 2\n";
        let e = parse(page, Format::Text).unwrap_err();
        assert_eq!(e.line, 3);
        assert!(e.to_string().contains("line 3"), "{e}");
        for bad in [
            "a{x=\"1\" 1",
            "a{x=\"1\"} ",
            "a{x=\"\\q\"} 1",
            "1a 1",
            "a{x=\"1\",x=\"2\"} 1",
            "# TYPE a countre",
            "a{x=\"1\"}1",
        ] {
            assert!(parse(bad, Format::Text).is_err(), "{bad}");
        }
    }

    /// The reasons are typed, but their texts are what users read in `summary.json`: kept.
    #[test]
    fn reasons_keep_their_texts() {
        for (bad, want) in [
            ("a{x=\"1\" 1", "expected `,` or `}` after a label"),
            ("a{", "unterminated label set (missing `}`)"),
            ("a{x=\"\\q\"} 1", "invalid escape `\\q`"),
            ("1a 1", "a metric name cannot start with '1'"),
            ("# TYPE a countre", "unknown metric type \"countre\""),
            ("# HELP", "`# HELP` without a metric name"),
            ("a{x=1} 2", "label \"x\" value must be double-quoted"),
            ("a 1 2 3", "unexpected text \"3\" after the value"),
        ] {
            let e = parse(bad, Format::Text).unwrap_err();
            assert_eq!(e.reason.to_string(), want, "{bad}");
        }
    }

    #[test]
    fn duplicate_series_and_missing_eof_are_errors() {
        assert!(parse("a{x=\"1\",y=\"2\"} 1\na{y=\"2\",x=\"1\"} 2\n", Format::Text).is_err());
        let e = parse("a_total 1\n", Format::OpenMetrics).unwrap_err();
        assert_eq!(e.reason, Reason::MissingEof);
        assert!(parse("a_total 1\n# EOF\nb 2\n", Format::OpenMetrics).is_err());
    }

    #[test]
    fn crlf_blank_lines_comments_and_missing_help_type() {
        let p = parse(
            "\r\n# just a comment\r\n  a 1\r\n\r\nb{} 2\r\n",
            Format::Text,
        )
        .unwrap();
        assert_eq!(p.samples.len(), 2);
    }

    #[test]
    fn every_fixture_page_parses() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/prometheus");
        let mut n = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let format = if name.ends_with(".prom") {
                Format::Text
            } else if name.contains("openmetrics") {
                Format::OpenMetrics
            } else {
                continue;
            };
            let text = std::fs::read_to_string(&path).unwrap();
            let page = parse(&text, format).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(page.samples.len() > 10, "{name}");
            n += 1;
        }
        assert_eq!(n, 10);
    }
}
