//! Server-sent events: bytes off the wire -> framed events -> what each OpenAI chunk means.
//!
//! Two pure stages, both benched and fuzzable, with no I/O and no clock:
//! [`SseParser`] frames `data:` events across arbitrary read boundaries (one read may carry several
//! events, one event may span reads), and [`classify`] reads one event's JSON for the few fields the
//! metrics need (content present, reasoning present, usage, finish reason, error), borrowing from the
//! buffer instead of building a DOM. The fields that carry per-request speculative-decoding figures
//! (vLLM, SGLang, llama.cpp, TensorRT-LLM) are only borrowed as raw JSON too, and parsed (by
//! `client::spec`) in the rare chunk that has them.

use serde::Deserialize;
use serde_json::value::RawValue;

use super::spec;
pub use super::spec::SpecReport;

mod scan;

/// Framing failures.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SseError {
    /// One line (finished or not) grew past the cap.
    #[error("SSE line exceeds the {cap}-byte event size cap (raise --max-event-bytes if the server really sends such lines)")]
    LineTooLong {
        /// The cap in bytes.
        cap: usize,
    },
    /// The `data` of one event grew past the cap.
    #[error("SSE event exceeds the {cap}-byte event size cap (raise --max-event-bytes if the server really sends such events)")]
    Oversized {
        /// The cap in bytes.
        cap: usize,
    },
}

/// Incremental SSE framer. Feed it body chunks with [`SseParser::push`].
///
/// Memory is bounded by twice the cap: no line (the bytes before its `\n`, a trailing `\r`
/// included) may be longer than the cap, and no event's joined `data` either. Both limits depend
/// only on the bytes, never on how reads split them, so the events delivered before an error and
/// the error itself are the same for every split of a stream.
#[derive(Debug)]
pub struct SseParser {
    /// Bytes of an incomplete line carried over from the previous chunk.
    partial: Vec<u8>,
    /// `data:` payload of the event being assembled (multi-line data joined by `\n`).
    data: Vec<u8>,
    has_data: bool,
    cap: usize,
    /// Every non-empty line is an event of its own, stripped as Python strips bytes, with no SSE
    /// fields (`bench-serving` reads a body as `benchmark_serving.py` does: [`super::lines`]).
    lines: bool,
}

impl SseParser {
    /// A parser that rejects events larger than `cap` bytes.
    pub fn new(cap: usize) -> Self {
        SseParser {
            partial: Vec::new(),
            data: Vec::new(),
            has_data: false,
            cap,
            lines: false,
        }
    }

    /// A framer that hands every non-empty line, stripped, as one event (aiohttp's line
    /// iteration under `benchmark_serving.py`), with the same caps.
    pub fn lines(cap: usize) -> Self {
        SseParser {
            lines: true,
            ..SseParser::new(cap)
        }
    }

    /// At the end of a body read by lines: the unfinished last line, which aiohttp hands too.
    pub fn finish_lines(&mut self, mut on_event: impl FnMut(&[u8])) {
        let line = std::mem::take(&mut self.partial);
        let line = py_strip(&line);
        if !line.is_empty() {
            on_event(line);
        }
    }

    /// Consumes `chunk`, calling `on_event` with the data of every event completed by it.
    pub fn push(&mut self, chunk: &[u8], mut on_event: impl FnMut(&[u8])) -> Result<(), SseError> {
        let mut rest = chunk;
        while let Some(nl) = memchr::memchr(b'\n', rest) {
            let (line_part, tail) = rest.split_at(nl);
            rest = &tail[1..];
            if self.partial.is_empty() {
                self.line(line_part, &mut on_event)?;
            } else {
                let mut line = std::mem::take(&mut self.partial);
                line.extend_from_slice(line_part);
                self.line(&line, &mut on_event)?;
                line.clear();
                self.partial = line;
            }
        }
        if !rest.is_empty() {
            // The unfinished line is already too long, wherever it will end.
            if self.partial.len() + rest.len() > self.cap {
                return Err(SseError::LineTooLong { cap: self.cap });
            }
            self.partial.extend_from_slice(rest);
        }
        Ok(())
    }

    /// The size cap on a line and an event's data.
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// True when bytes of an unfinished event are buffered (a stream ending here was cut short).
    pub fn has_pending(&self) -> bool {
        !self.partial.is_empty() || self.has_data
    }

    fn line(&mut self, line: &[u8], on_event: &mut impl FnMut(&[u8])) -> Result<(), SseError> {
        if line.len() > self.cap {
            return Err(SseError::LineTooLong { cap: self.cap });
        }
        if self.lines {
            let line = py_strip(line);
            if !line.is_empty() {
                on_event(line);
            }
            return Ok(());
        }
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            if self.has_data {
                on_event(&self.data);
                self.data.clear();
                self.has_data = false;
            }
            return Ok(());
        }
        if line[0] == b':' {
            return Ok(()); // comment / keep-alive
        }
        let (field, value) = match memchr::memchr(b':', line) {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        if field == b"data" {
            if self.data.len() + value.len() + 1 > self.cap {
                return Err(SseError::Oversized { cap: self.cap });
            }
            if self.has_data {
                self.data.push(b'\n');
            }
            self.data.extend_from_slice(value);
            self.has_data = true;
        }
        // `event:`, `id:`, `retry:` and unknown fields carry nothing the metrics use.
        Ok(())
    }
}

/// `bytes.strip()`: ASCII whitespace off both ends, vertical tab included (Rust's `trim_ascii`
/// keeps it).
fn py_strip(b: &[u8]) -> &[u8] {
    let ws = |c: &u8| matches!(c, b' ' | b'\t' | b'\n' | b'\r' | b'\x0b' | b'\x0c');
    let start = b.iter().position(|c| !ws(c)).unwrap_or(b.len());
    let end = b.iter().rposition(|c| !ws(c)).map_or(start, |e| e + 1);
    &b[start..end]
}

/// Token usage as OpenAI-compatible servers report it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct Usage {
    /// Prompt tokens.
    #[serde(default)]
    pub prompt_tokens: Option<u64>,
    /// Completion tokens, reasoning included.
    #[serde(default)]
    pub completion_tokens: Option<u64>,
    /// Reasoning tokens, when the server splits them out.
    #[serde(default, deserialize_with = "reasoning_tokens")]
    #[serde(rename = "completion_tokens_details")]
    pub reasoning_tokens: Option<u64>,
    /// Prompt plus completion tokens, as the server adds them up.
    #[serde(default)]
    pub total_tokens: Option<u64>,
}

fn reasoning_tokens<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    #[derive(Deserialize)]
    struct Details {
        #[serde(default)]
        reasoning_tokens: Option<u64>,
    }
    Ok(Option::<Details>::deserialize(d)?.and_then(|x| x.reasoning_tokens))
}

/// What one SSE event means for the metrics.
#[derive(Debug, PartialEq)]
pub enum Event {
    /// `data: [DONE]`.
    Done,
    /// A completion chunk.
    Chunk(ChunkInfo),
    /// An `error` object sent inside the stream.
    Error(String),
}

/// The fields of one chunk that matter.
#[derive(Debug, Default, PartialEq)]
pub struct ChunkInfo {
    /// Some choice carried non-empty `content` (chat) or `text` (completions).
    pub content: bool,
    /// Some choice carried non-empty `reasoning_content` or `reasoning`.
    pub reasoning: bool,
    /// `choices` held at least one choice, with text or without (`benchmark_serving.py` counts
    /// such a chunk as a token chunk).
    pub choice: bool,
    /// The first choice carried a `delta` object (`benchmark_serving.py`'s chat reader indexes
    /// `choices[0]["delta"]` and fails the request without one).
    pub first_delta: bool,
    /// `usage`, when present and not null.
    pub usage: Option<Usage>,
    /// The last non-null `finish_reason`.
    pub finish_reason: Option<String>,
    /// Speculative-decoding figures this chunk carried (a response carries them once, on its
    /// body or its final chunk; TensorRT-LLM's ratio rides every chunk).
    pub spec: Option<SpecReport>,
}

/// Appends the first choice's text of one chunk (`delta.content`, `text`, or a non-streaming
/// `message.content`) to `out`. Reasoning is not part of the conversation history, so it is left
/// out. Not on the hot path: only multi-turn sessions keep response text.
pub fn append_text(data: &[u8], out: &mut String) {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    let Some(choice) = v.pointer("/choices/0") else {
        return;
    };
    for path in ["/delta/content", "/text", "/message/content"] {
        if let Some(t) = choice.pointer(path).and_then(|t| t.as_str()) {
            out.push_str(t);
            return;
        }
    }
}

/// Why an event is not a valid chunk.
#[derive(Debug, thiserror::Error)]
#[error("malformed SSE event: {0}")]
pub struct Malformed(pub String);

#[derive(Deserialize)]
struct WireChunk<'a> {
    #[serde(default, borrow)]
    choices: Option<Choices<'a>>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default, borrow)]
    error: Option<&'a RawValue>,
    #[serde(default, borrow)]
    object: Option<&'a str>,
    #[serde(default, borrow)]
    message: Option<&'a RawValue>,
    /// vLLM's `metrics.speculative_decoding` lives under it.
    #[serde(default, borrow)]
    metrics: Option<&'a RawValue>,
    /// SGLang's `spec_tokens_details` lives under it.
    #[serde(default, borrow)]
    sglext: Option<&'a RawValue>,
    /// llama.cpp's `draft_n` / `draft_n_accepted` live under it.
    #[serde(default, borrow)]
    timings: Option<&'a RawValue>,
}

/// A chunk's `choices`, folded one by one as they are read: no vector per event.
#[derive(Default)]
struct Choices<'a> {
    /// At least one choice was read.
    any: bool,
    /// The first choice had a non-null `delta`.
    first_delta: bool,
    /// Some choice carried content (`text`, or `content` in its delta or message).
    content: bool,
    /// Some choice carried reasoning.
    reasoning: bool,
    /// The last non-null `finish_reason`.
    finish_reason: Option<&'a str>,
    /// TensorRT-LLM's `avg_decoded_tokens_per_iter` of the first choice (index 0 or none).
    tokens_per_iter: Option<&'a RawValue>,
}

impl<'a> Choices<'a> {
    fn add(&mut self, choice: WireChoice<'a>) {
        if !self.any {
            self.first_delta = choice.delta.is_some();
        }
        self.any = true;
        self.content |= non_empty(choice.text);
        for m in [&choice.delta, &choice.message].into_iter().flatten() {
            self.content |= non_empty(m.content);
            self.reasoning |= non_empty(m.reasoning_content) || non_empty(m.reasoning);
        }
        if choice.finish_reason.is_some() {
            self.finish_reason = choice.finish_reason;
        }
        if let Some(raw) = choice.avg_decoded_tokens_per_iter {
            // The first choice's only, as the other servers report n = 1 alone.
            if self.tokens_per_iter.is_none() && choice.index.is_none_or(|i| i.get() == "0") {
                self.tokens_per_iter = Some(raw);
            }
        }
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Choices<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Fold<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Fold<'a> {
            type Value = Choices<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a sequence")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Self::Value, A::Error> {
                let mut out = Choices::default();
                while let Some(choice) = seq.next_element::<WireChoice<'de>>()? {
                    out.add(choice);
                }
                Ok(out)
            }
        }
        d.deserialize_seq(Fold(std::marker::PhantomData))
    }
}

#[derive(Deserialize)]
struct WireChoice<'a> {
    #[serde(default, borrow)]
    delta: Option<WireMessage<'a>>,
    #[serde(default, borrow)]
    message: Option<WireMessage<'a>>,
    #[serde(default, borrow)]
    text: Option<&'a RawValue>,
    #[serde(default, borrow)]
    finish_reason: Option<&'a str>,
    /// Raw, so that an unusual `index` never fails a chunk; read only beside the field below.
    #[serde(default, borrow)]
    index: Option<&'a RawValue>,
    /// TensorRT-LLM, on every choice of every chunk.
    #[serde(default, borrow)]
    avg_decoded_tokens_per_iter: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct WireMessage<'a> {
    #[serde(default, borrow)]
    content: Option<&'a RawValue>,
    #[serde(default, borrow)]
    reasoning_content: Option<&'a RawValue>,
    #[serde(default, borrow)]
    reasoning: Option<&'a RawValue>,
}

/// A JSON value that carries text: a non-empty string (or any non-null, non-string value such as a
/// content-part array, which servers only send when there is something in it).
fn non_empty(v: Option<&RawValue>) -> bool {
    non_empty_raw(v.map(|r| r.get().as_bytes()))
}

/// [`non_empty`] of a value's raw text.
fn non_empty_raw(v: Option<&[u8]>) -> bool {
    !matches!(v, None | Some(b"null") | Some(b"\"\""))
}

/// Interprets one event's data (a streaming chunk, or a whole non-streaming response body).
pub fn classify(data: &[u8]) -> Result<Event, Malformed> {
    let trimmed = data.trim_ascii();
    if trimmed == b"[DONE]" {
        return Ok(Event::Done);
    }
    // Nearly every chunk has the one shape the scanner answers, a few times faster than serde
    // (a tenth of bench-serving's CPU went to this parse); it answers nothing it is not sure of.
    if let Some(event) = scan::common(trimmed) {
        return Ok(event);
    }
    classify_full(trimmed)
}

/// Panics where the fast path answers `data` other than serde would (the fuzz targets' check).
#[cfg(any(test, fuzzing))]
pub(crate) fn assert_fast_path_agrees(data: &[u8]) {
    let trimmed = data.trim_ascii();
    if let Some(fast) = scan::common(trimmed) {
        match classify_full(trimmed) {
            Ok(full) => assert_eq!(fast, full, "{}", preview(trimmed)),
            Err(e) => panic!("the fast path answered {fast:?} where serde says {e}"),
        }
    }
}

/// [`classify`] by serde alone, for what the fast path leaves (and to check it against).
fn classify_full(trimmed: &[u8]) -> Result<Event, Malformed> {
    let chunk: WireChunk<'_> = serde_json::from_slice(trimmed)
        .map_err(|e| Malformed(format!("{e} in {}", preview(trimmed))))?;
    if let Some(err) = chunk.error {
        return Ok(Event::Error(error_message(err.get())));
    }
    if chunk.object == Some("error") {
        return Ok(Event::Error(
            chunk
                .message
                .map(|m| unquote(m.get()))
                .unwrap_or_else(|| "error".into()),
        ));
    }
    let mut info = ChunkInfo {
        usage: chunk.usage,
        ..ChunkInfo::default()
    };
    if chunk.metrics.is_some() || chunk.sglext.is_some() || chunk.timings.is_some() {
        info.spec = spec::from_root(chunk.metrics, chunk.sglext, chunk.timings);
    }
    if let Some(c) = chunk.choices {
        info.content = c.content;
        info.reasoning = c.reasoning;
        info.choice = c.any;
        info.first_delta = c.first_delta;
        info.finish_reason = c.finish_reason.map(str::to_owned);
        if let (None, Some(raw)) = (&info.spec, c.tokens_per_iter) {
            info.spec = Some(spec::tokens_per_iter(raw));
        }
    }
    Ok(Event::Chunk(info))
}

/// The human message inside an OpenAI error object (`{"message": ...}`), or the raw JSON.
pub(crate) fn error_message(raw: &str) -> String {
    // The error object itself (inside a stream), or a whole error body: OpenAI's
    // `{"error": {"message"}}`, `{"error": "text"}`, or FastAPI's `{"detail": ...}`.
    let v: Option<serde_json::Value> = serde_json::from_str(raw).ok();
    let text = |v: &serde_json::Value| v.as_str().map(str::to_owned);
    let found = v.as_ref().and_then(|v| {
        text(&v["message"])
            .or_else(|| text(&v["error"]["message"]))
            .or_else(|| text(&v["error"]))
            .or_else(|| text(&v["detail"]))
            .or_else(|| v.get("detail").map(|d| preview(d.to_string().as_bytes())))
    });
    found.unwrap_or_else(|| preview(raw.as_bytes()))
}

fn unquote(raw: &str) -> String {
    serde_json::from_str::<String>(raw).unwrap_or_else(|_| raw.to_owned())
}

/// The first 200 bytes of `data`, lossily decoded, for error messages.
pub(crate) fn preview(data: &[u8]) -> String {
    let cut = &data[..data.len().min(200)];
    let mut s = String::from_utf8_lossy(cut).into_owned();
    if data.len() > cut.len() {
        s.push('…');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_messages_are_found_in_every_common_error_body() {
        assert_eq!(error_message(r#"{"message":"a"}"#), "a");
        assert_eq!(
            error_message(r#"{"error":{"message":"b","code":429}}"#),
            "b"
        );
        assert_eq!(error_message(r#"{"error":"c"}"#), "c");
        assert_eq!(error_message(r#"{"detail":"d"}"#), "d");
        assert_eq!(error_message("<html>e</html>"), "<html>e</html>");
    }

    fn events(parser: &mut SseParser, chunk: &[u8]) -> Vec<String> {
        let mut out = Vec::new();
        parser
            .push(chunk, |e| out.push(String::from_utf8(e.to_vec()).unwrap()))
            .unwrap();
        out
    }

    #[test]
    fn frames_events_split_anywhere() {
        let stream = b"data: {\"a\":1}\n\n: keep-alive\n\ndata: {\"b\":2}\r\n\r\ndata: [DONE]\n\n";
        for split in 0..stream.len() {
            let mut p = SseParser::new(1 << 20);
            let mut got = events(&mut p, &stream[..split]);
            got.extend(events(&mut p, &stream[split..]));
            assert_eq!(
                got,
                ["{\"a\":1}", "{\"b\":2}", "[DONE]"],
                "split at {split}"
            );
            assert!(!p.has_pending());
        }
    }

    #[test]
    fn several_events_in_one_read_and_multiline_data() {
        let mut p = SseParser::new(1 << 20);
        let got = events(&mut p, b"data: x\ndata: y\n\nevent: ping\ndata:z\n\n");
        assert_eq!(got, ["x\ny", "z"]);
    }

    #[test]
    fn oversized_event_is_an_error_not_a_buffer() {
        let mut p = SseParser::new(16);
        let err = p.push(b"data: 0123456789abcdefghij", |_| {}).unwrap_err();
        assert_eq!(err, SseError::LineTooLong { cap: 16 });
        let mut p = SseParser::new(16);
        assert!(p.push(b"data: 0123456789abcdefghij\n", |_| {}).is_err());
        // Short lines, one event too large once joined.
        let mut p = SseParser::new(16);
        let err = p
            .push(b"data: 0123456\ndata: 789abc\ndata: def\n", |_| {})
            .unwrap_err();
        assert_eq!(err, SseError::Oversized { cap: 16 });
        assert!(err.to_string().contains("event size cap"), "{err}");
    }

    #[test]
    fn a_long_comment_line_hits_the_line_cap_however_it_is_split() {
        // A keep-alive comment is never buffered as data, yet an endless one must not be held
        // either; whole or split, the same cap fires.
        let stream = format!(": {}\n\ndata: x\n\n", "k".repeat(40));
        for split in [0, 5, 30, stream.len()] {
            let mut p = SseParser::new(32);
            let mut r = p.push(&stream.as_bytes()[..split], |_| {});
            if r.is_ok() {
                r = p.push(&stream.as_bytes()[split..], |_| {});
            }
            assert_eq!(
                r,
                Err(SseError::LineTooLong { cap: 32 }),
                "split at {split}"
            );
        }
    }

    #[test]
    fn truncated_stream_leaves_pending_bytes() {
        let mut p = SseParser::new(1024);
        assert!(events(&mut p, b"data: {\"a\"").is_empty());
        assert!(p.has_pending());
    }

    #[test]
    fn classifies_chat_completion_and_usage_chunks() {
        let role = br#"{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#;
        assert_eq!(
            classify(role).unwrap(),
            Event::Chunk(ChunkInfo {
                choice: true,
                first_delta: true,
                ..ChunkInfo::default()
            })
        );
        // Only the first choice's delta counts, in both parsers.
        for (data, first_delta) in [
            (&br#"{"choices":[{"delta":{}},{"text":"a"}]}"#[..], true),
            (br#"{"choices":[{"text":"a"},{"delta":{}}]}"#, false),
            (br#"{"choices":[{"delta":null,"text":"a"}]}"#, false),
            (br#"{"choices":[{"message":{"content":"a"}}]}"#, false),
        ] {
            assert_fast_path_agrees(data);
            let Event::Chunk(c) = classify_full(data).unwrap() else {
                panic!()
            };
            assert_eq!(c.first_delta, first_delta, "{}", preview(data));
        }
        let text = br#"{"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}],"usage":null}"#;
        let Event::Chunk(c) = classify(text).unwrap() else {
            panic!()
        };
        assert!(c.content && !c.reasoning && c.usage.is_none());
        let reasoning = br#"{"choices":[{"delta":{"reasoning":"hmm"}}]}"#;
        let Event::Chunk(c) = classify(reasoning).unwrap() else {
            panic!()
        };
        assert!(!c.content && c.reasoning);
        let legacy = br#"{"choices":[{"delta":{"reasoning_content":"hmm","content":null}}]}"#;
        let Event::Chunk(c) = classify(legacy).unwrap() else {
            panic!()
        };
        assert!(c.reasoning);
        let completions = br#"{"object":"text_completion","choices":[{"text":" world","finish_reason":"length"}]}"#;
        let Event::Chunk(c) = classify(completions).unwrap() else {
            panic!()
        };
        assert!(c.content && c.choice);
        assert_eq!(c.finish_reason.as_deref(), Some("length"));
        // A choice without text is still a choice (bench-serving's token chunk); both parsers.
        let blank = br#"{"choices":[{"index":0,"text":"","finish_reason":null}]}"#;
        let Event::Chunk(c) = classify(blank).unwrap() else {
            panic!()
        };
        assert!(!c.content && c.choice);
        assert_eq!(classify_full(blank).unwrap(), Event::Chunk(c));
        let usage = br#"{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":12,"total_tokens":19,"completion_tokens_details":{"reasoning_tokens":4}}}"#;
        let Event::Chunk(c) = classify(usage).unwrap() else {
            panic!()
        };
        assert_eq!(
            c.usage,
            Some(Usage {
                prompt_tokens: Some(7),
                completion_tokens: Some(12),
                reasoning_tokens: Some(4),
                total_tokens: Some(19),
            })
        );
        assert!(!c.content);
    }

    #[test]
    fn classifies_errors_done_and_garbage() {
        assert_eq!(classify(b"[DONE]").unwrap(), Event::Done);
        let nested = br#"{"error":{"message":"boom","type":"InternalServerError","code":500}}"#;
        assert_eq!(classify(nested).unwrap(), Event::Error("boom".into()));
        let flat = br#"{"object":"error","message":"bad","type":"BadRequestError","code":400}"#;
        assert_eq!(classify(flat).unwrap(), Event::Error("bad".into()));
        assert!(classify(b"{not json").is_err());
    }

    #[test]
    fn non_streaming_body_is_one_chunk() {
        let body = br#"{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"done"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2}}"#;
        let Event::Chunk(c) = classify(body).unwrap() else {
            panic!()
        };
        assert!(c.content);
        assert_eq!(c.usage.unwrap().completion_tokens, Some(2));
    }
}
