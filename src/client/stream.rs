//! One response body -> the record's timings and outcome: SSE events stamped as they are parsed,
//! tokens from `usage`, every size and count bounded, failures classified.

use std::time::Instant;

use crate::record::{ChunkGap, FailureKind, Outcome, RequestRecord, SpecSource, TokenSource};

use super::lines::{self, Api, Line};
use super::spec;
use super::sse::{self, classify, Event, SpecReport, SseParser};
use super::Clock;

/// Most SSE events one response may carry: about 16 times the longest output any server streams
/// today (one token per event), small enough that a hostile endless stream cannot grow a record's
/// per-event gaps without bound.
pub(super) const MAX_EVENTS: u32 = 1 << 22;

/// Progress of one response body through the SSE parser.
pub(super) struct StreamState {
    pub(super) parser: SseParser,
    pub(super) streaming: bool,
    pub(super) done: bool,
    pub(super) first_token: Option<Instant>,
    /// Events of the current read, each stamped when its blank line was parsed; reused per read.
    /// With each, the length of the captured text after it (0 when text is not captured).
    pub(super) parsed: Vec<(Instant, Result<Event, sse::Malformed>, usize)>,
    pub(super) last_event: Instant,
    pub(super) prev_completion_tokens: u64,
    pub(super) per_chunk_usage: bool,
    pub(super) final_usage: Option<sse::Usage>,
    pub(super) stream_error: Option<String>,
    pub(super) malformed: Option<String>,
    pub(super) body: Vec<u8>,
    pub(super) body_bytes: usize,
    pub(super) max_body: usize,
    /// The response text, when the caller asked for it.
    pub(super) text: Option<String>,
    pub(super) max_events: u32,
    /// Read line by line as `benchmark_serving.py` does ([`lines`]) rather than as SSE events.
    lines: Option<Api>,
    /// With `lines`: when the last JSON line came in (a chat ITL runs from it).
    last_line_ns: Option<u64>,
}

impl StreamState {
    pub(super) fn new(max_event: usize, max_body: usize, streaming: bool) -> Self {
        StreamState {
            parser: SseParser::new(max_event),
            streaming,
            done: false,
            first_token: None,
            parsed: Vec::new(),
            last_event: Instant::now(),
            prev_completion_tokens: 0,
            per_chunk_usage: false,
            final_usage: None,
            stream_error: None,
            malformed: None,
            body: Vec::new(),
            body_bytes: 0,
            max_body,
            text: None,
            max_events: MAX_EVENTS,
            lines: None,
            last_line_ns: None,
        }
    }

    /// Reads the body as `api`'s upstream request function does ([`lines`]).
    pub(super) fn read_lines(&mut self, api: Api) {
        self.parser = SseParser::lines(self.parser.cap());
        self.lines = Some(api);
    }

    pub(super) fn on_data(
        &mut self,
        data: &[u8],
        now: Instant,
        clock: &Clock,
        rec: &mut RequestRecord,
    ) -> Result<(), (FailureKind, String)> {
        // A server may dribble keep-alive bytes for hours: counters saturate, never wrap.
        rec.reads = rec.reads.saturating_add(1);
        self.last_event = now;
        if !self.streaming {
            // Buffer the whole JSON body (capped), parse at the end.
            self.body_bytes += data.len();
            if self.body_bytes > self.max_body {
                return Err((
                    FailureKind::Oversized,
                    format!(
                        "response body exceeds the {}-byte body size cap (raise --max-event-bytes \
                         if the server really sends such bodies)",
                        self.max_body
                    ),
                ));
            }
            self.body.extend_from_slice(data);
            return Ok(());
        }
        if let Some(api) = self.lines {
            let mut parsed = std::mem::take(&mut self.parsed);
            let text = &mut self.text;
            self.parser
                .push(data, |line| read_line(api, line, text, &mut parsed))
                .map_err(|e| (FailureKind::Oversized, e.to_string()))?;
            return self.on_lines(api, parsed, clock, rec);
        }
        let mut parsed = std::mem::take(&mut self.parsed);
        let text = &mut self.text;
        self.parser
            .push(data, |ev| {
                let mut text_len = 0;
                if let Some(t) = text.as_mut() {
                    sse::append_text(ev, t);
                    text_len = t.len();
                }
                parsed.push((Instant::now(), classify(ev), text_len));
            })
            .map_err(|e| (FailureKind::Oversized, e.to_string()))?;
        for (at, ev, text_len) in parsed.drain(..) {
            rec.events += 1;
            match ev {
                Err(m) => {
                    self.malformed.get_or_insert(m.0);
                }
                Ok(Event::Done) => self.done = true,
                Ok(Event::Error(m)) => {
                    self.stream_error.get_or_insert(m);
                }
                Ok(Event::Chunk(c)) => {
                    let token = c.content || c.reasoning;
                    self.on_chunk(c, at, clock, rec);
                    if token && self.text.is_some() {
                        rec.chunk_text_ends.push(text_len as u32);
                    }
                }
            }
        }
        self.end_of_read(parsed, rec, "SSE events")
    }

    /// After one read's events or lines: the emptied list kept for the next read, then the
    /// read's failure, if any: a malformed event, or one event too many (each content event
    /// keeps a gap for the histograms, so they are bounded per request).
    fn end_of_read(
        &mut self,
        parsed: Vec<(Instant, Result<Event, sse::Malformed>, usize)>,
        rec: &RequestRecord,
        what: &str,
    ) -> Result<(), (FailureKind, String)> {
        self.parsed = parsed;
        if let Some(m) = self.malformed.take() {
            return Err((FailureKind::Malformed, m));
        }
        if rec.events > self.max_events {
            return Err((
                FailureKind::Oversized,
                format!(
                    "response exceeds the events-per-response cap ({} {what})",
                    self.max_events
                ),
            ));
        }
        Ok(())
    }

    /// The lines of one read, in `benchmark_serving.py`'s terms: a line whose `choices` holds a
    /// choice is a token chunk; a chat line of any kind stamps the clock.
    fn on_lines(
        &mut self,
        api: Api,
        mut parsed: Vec<(Instant, Result<Event, sse::Malformed>, usize)>,
        clock: &Clock,
        rec: &mut RequestRecord,
    ) -> Result<(), (FailureKind, String)> {
        for (at, line, text_len) in parsed.drain(..) {
            rec.events += 1;
            let c = match line {
                Err(m) => {
                    self.malformed.get_or_insert(m.0);
                    continue;
                }
                Ok(Event::Chunk(c)) => c,
                Ok(Event::Done | Event::Error(_)) => continue,
            };
            let ns = clock.ns(at);
            if api.takes_usage(&c) {
                self.final_usage = c.usage;
            }
            if let Some(r) = c.finish_reason {
                rec.finish_reason = Some(r);
            }
            if let Some(s) = c.spec {
                record_spec(rec, s);
            }
            if c.choice {
                if rec.first_token_ns.is_none() {
                    rec.first_token_ns = Some(ns);
                    self.first_token = Some(at);
                } else {
                    let prev = if api == Api::Chat {
                        self.last_line_ns
                    } else {
                        rec.last_token_ns
                    };
                    rec.chunk_gaps.push(ChunkGap {
                        gap_ns: ns.saturating_sub(prev.unwrap_or(ns)),
                        tokens: 0,
                    });
                }
                rec.content_events += 1;
                if self.text.is_some() {
                    rec.chunk_text_ends.push(text_len as u32);
                }
            }
            // The latency ends at the last token chunk (completions) or the last line (chat).
            if c.choice || api == Api::Chat {
                rec.last_token_ns = Some(ns);
            }
            self.last_line_ns = Some(ns);
        }
        self.end_of_read(parsed, rec, "lines")
    }

    /// The end of a body read by lines: its unfinished last line is read too, then a 200 is a
    /// success unless a completions body had no token chunk.
    fn finish_lines(mut self, api: Api, mut rec: RequestRecord, clock: &Clock) -> RequestRecord {
        let mut parsed = std::mem::take(&mut self.parsed);
        let text = &mut self.text;
        self.parser
            .finish_lines(|line| read_line(api, line, text, &mut parsed));
        if let Err((kind, msg)) = self.on_lines(api, parsed, clock, &mut rec) {
            return self.finish_failed(rec, clock, kind, msg);
        }
        self.apply_usage(&mut rec);
        rec.response_text = self.text.take();
        if api != Api::Chat && rec.first_token_ns.is_none() {
            return fail(
                rec,
                clock,
                FailureKind::NoOutput,
                lines::NO_TOKEN_CHUNK.to_owned(),
            );
        }
        rec.end_ns = clock.now_ns();
        rec.outcome = Outcome::Success;
        rec
    }

    pub(super) fn on_chunk(
        &mut self,
        c: sse::ChunkInfo,
        now: Instant,
        clock: &Clock,
        rec: &mut RequestRecord,
    ) {
        let now_ns = clock.ns(now);
        let has_token = c.content || c.reasoning;
        let mut chunk_tokens = 0u64;
        if let Some(u) = c.usage {
            if let Some(ct) = u.completion_tokens {
                if has_token {
                    self.per_chunk_usage = true;
                    chunk_tokens = ct.saturating_sub(self.prev_completion_tokens);
                }
                self.prev_completion_tokens = ct;
            }
            self.final_usage = Some(u);
        }
        if let Some(r) = c.finish_reason {
            rec.finish_reason = Some(r);
        }
        if let Some(s) = c.spec {
            record_spec(rec, s);
        }
        if !has_token {
            return;
        }
        rec.content_events += 1;
        match rec.content_events {
            1 => {
                rec.first_token_ns = Some(now_ns);
                self.first_token = Some(now);
                if self.per_chunk_usage {
                    rec.first_chunk_tokens = Some(chunk_tokens);
                }
            }
            2 => rec.second_token_ns = Some(now_ns),
            _ => {}
        }
        if c.content && rec.first_output_token_ns.is_none() {
            rec.first_output_token_ns = Some(now_ns);
        }
        if let Some(prev) = rec.last_token_ns {
            rec.chunk_gaps.push(ChunkGap {
                gap_ns: now_ns.saturating_sub(prev),
                tokens: chunk_tokens as u32,
            });
        }
        rec.last_token_ns = Some(now_ns);
    }

    pub(super) fn finish_failed(
        self,
        rec: RequestRecord,
        clock: &Clock,
        kind: FailureKind,
        msg: String,
    ) -> RequestRecord {
        let mut rec = fail(rec, clock, kind, msg);
        self.apply_usage(&mut rec);
        rec
    }

    pub(super) fn apply_usage(&self, rec: &mut RequestRecord) {
        if let Some(u) = self.final_usage {
            rec.prompt_tokens = u.prompt_tokens;
            rec.completion_tokens = u.completion_tokens;
            rec.reasoning_tokens = u.reasoning_tokens;
            rec.total_tokens = u.total_tokens;
            rec.token_source = if self.per_chunk_usage {
                TokenSource::UsagePerChunk
            } else {
                TokenSource::UsageFinal
            };
        }
    }

    pub(super) fn finish(
        mut self,
        mut rec: RequestRecord,
        clock: &Clock,
        streaming: bool,
    ) -> RequestRecord {
        if let Some(api) = self.lines {
            return self.finish_lines(api, rec, clock);
        }
        if !streaming {
            let body = std::mem::take(&mut self.body);
            if let Some(t) = self.text.as_mut() {
                sse::append_text(&body, t);
            }
            match classify(&body) {
                Ok(Event::Chunk(c)) => {
                    self.on_chunk(c, Instant::now(), clock, &mut rec);
                    // One body, one usage: not a per-chunk count.
                    self.per_chunk_usage = false;
                    rec.first_chunk_tokens = None;
                    // The whole answer arrived at once: there is no first or second token time
                    // (it would make TTFT = latency and ITL 0). Only the arrival is kept, as
                    // the last token's time (the request latency); every streaming-only metric
                    // is then left out, as AIPerf leaves out its STREAMING_TOKENS_ONLY metrics.
                    rec.first_token_ns = None;
                    rec.second_token_ns = None;
                    rec.first_output_token_ns = None;
                }
                Ok(Event::Error(m)) => self.stream_error = Some(m),
                Ok(Event::Done) => {
                    self.malformed = Some("body was [DONE], not a completion".into())
                }
                Err(m) => self.malformed = Some(m.0),
            }
            self.done = true;
        }
        self.apply_usage(&mut rec);
        let (kind, msg) = if let Some(m) = self.stream_error.take() {
            (FailureKind::StreamError, m)
        } else if let Some(m) = self.malformed.take() {
            (FailureKind::Malformed, m)
        } else if !self.done && (self.parser.has_pending() || rec.finish_reason.is_none()) {
            (
                FailureKind::ConnectionClosed,
                "stream ended before [DONE]".to_string(),
            )
        } else if matches!(rec.finish_reason.as_deref(), Some("abort" | "error")) {
            (
                FailureKind::StreamError,
                format!(
                    "finish_reason {}",
                    rec.finish_reason.as_deref().unwrap_or_default()
                ),
            )
        } else if self.final_usage.and_then(|u| u.completion_tokens).is_none() {
            (FailureKind::MissingUsage, "no usage.completion_tokens in the response (is stream_options.include_usage honoured?)".to_string())
        } else {
            // Well-formed and counted by the server: a success, even with nothing to show.
            rec.empty_output = rec.content_events == 0;
            rec.end_ns = clock.now_ns();
            rec.outcome = Outcome::Success;
            rec.response_text = self.text.take();
            return rec;
        };
        fail(rec, clock, kind, msg)
    }
}

/// One line of a body read by lines, stamped now, with where its first choice's text ends in
/// the captured text.
fn read_line(
    api: Api,
    line: &[u8],
    text: &mut Option<String>,
    parsed: &mut Vec<(Instant, Result<Event, sse::Malformed>, usize)>,
) {
    let at = Instant::now();
    let event = match api.line(line) {
        Ok(Line::Skip) => return,
        Ok(Line::Done) => Ok(Event::Done),
        Ok(Line::Json { info, payload }) => {
            if let (true, Some(t)) = (info.choice, text.as_mut()) {
                sse::append_text(payload, t);
            }
            Ok(Event::Chunk(info))
        }
        Err(m) => Err(m),
    };
    let text_len = text.as_ref().map_or(0, String::len);
    parsed.push((at, event, text_len));
}

/// Puts one chunk's speculative-decoding report on the record. The last chunk that carries one
/// decides: figures replace earlier figures and clear an earlier warning, and a malformed payload
/// drops earlier figures (the same response contradicting itself keeps nothing).
fn record_spec(rec: &mut RequestRecord, report: SpecReport) {
    match report {
        SpecReport::Figures(f) => {
            rec.spec = Some(f);
            rec.spec_warning = None;
        }
        SpecReport::TokensPerIter(v) => {
            // On every TensorRT-LLM chunk: update in place rather than allocate per chunk.
            match rec.spec.as_deref_mut() {
                Some(d) if d.source == SpecSource::Trtllm => d.reported_acceptance_length = Some(v),
                _ => rec.spec = Some(Box::new(spec::trtllm(v))),
            }
            rec.spec_warning = None;
        }
        SpecReport::Malformed(w) => {
            rec.spec = None;
            rec.spec_warning = Some(w.into());
        }
    }
}

pub(super) fn fail(
    mut rec: RequestRecord,
    clock: &Clock,
    kind: FailureKind,
    msg: String,
) -> RequestRecord {
    rec.end_ns = clock.now_ns();
    rec.outcome = Outcome::Failed(kind);
    rec.error = Some(msg);
    rec
}

pub(super) fn cancelled(mut rec: RequestRecord, clock: &Clock) -> RequestRecord {
    rec.end_ns = clock.now_ns();
    rec.outcome = Outcome::Cancelled;
    rec.error = Some("cancelled".into());
    rec
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::SpecDecode;

    /// Feeds `stream` in reads cut at `cuts`, then finishes the request.
    fn run(stream: &[u8], cuts: &[usize], streaming: bool) -> RequestRecord {
        let clock = Clock::new();
        let mut rec = RequestRecord::started(0, 0, 0, 0);
        let mut state = StreamState::new(1 << 16, 1 << 20, streaming);
        let mut at = 0;
        for &end in cuts.iter().chain([&stream.len()]) {
            state
                .on_data(&stream[at..end], Instant::now(), &clock, &mut rec)
                .expect("well-formed stream");
            at = end;
        }
        state.finish(rec, &clock, streaming)
    }

    fn sse(chunks: &[String]) -> Vec<u8> {
        let mut out = String::new();
        for c in chunks {
            out.push_str("data: ");
            out.push_str(c);
            out.push_str("\n\n");
        }
        out.push_str("data: [DONE]\n\n");
        out.into_bytes()
    }

    const VLLM_SPEC: &str = r#"{"mean_acceptance_length":1.2325581395348837,"draft_acceptance_rate":0.07751937984496124,"acceptance_histogram":[39,1,0,3],"num_spec_steps":43,"num_accepted_draft_tokens":10,"num_draft_tokens":129,"num_spec_tokens":3}"#;

    #[test]
    fn vllm_figures_on_the_usage_chunk_reach_the_record_however_reads_split() {
        let stream = sse(&[
            r#"{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#.into(),
            r#"{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hello"},"finish_reason":null}]}"#.into(),
            r#"{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":" world"},"finish_reason":"length"}]}"#.into(),
            format!(r#"{{"id":"c","object":"chat.completion.chunk","choices":[],"usage":{{"prompt_tokens":12,"completion_tokens":24,"total_tokens":36}},"metrics":{{"speculative_decoding":{VLLM_SPEC}}}}}"#),
        ]);
        let payload_at = stream.windows(9).position(|w| w == b"histogram").unwrap();
        for cuts in [
            vec![],
            vec![7],
            vec![payload_at],
            vec![payload_at - 40, payload_at + 3, stream.len() - 3],
        ] {
            let rec = run(&stream, &cuts, true);
            assert!(rec.outcome.is_success(), "{:?}", rec.error);
            assert_eq!(rec.spec_warning, None);
            let spec = rec.spec.expect("figures kept");
            assert_eq!(
                (
                    spec.source,
                    spec.steps,
                    spec.accepted_tokens,
                    spec.draft_tokens
                ),
                (SpecSource::Vllm, Some(43), Some(10), Some(129)),
                "cut at {cuts:?}"
            );
            assert_eq!(spec.histogram, [39, 1, 0, 3]);
        }
    }

    /// Reads `stream` by lines as `api`'s upstream does, in reads cut at `cuts`.
    fn by_lines(api: Api, stream: &str, cuts: &[usize]) -> RequestRecord {
        let clock = Clock::new();
        let mut rec = RequestRecord::started(0, 0, 0, 0);
        let mut state = StreamState::new(1 << 16, 1 << 20, true);
        state.read_lines(api);
        state.text = Some(String::new());
        let mut at = 0;
        for &end in cuts.iter().chain([&stream.len()]) {
            if let Err((kind, msg)) = state.on_data(
                &stream.as_bytes()[at..end],
                Instant::now(),
                &clock,
                &mut rec,
            ) {
                return state.finish_failed(rec, &clock, kind, msg);
            }
            at = end;
        }
        state.finish(rec, &clock, true)
    }

    /// Token chunks are the lines with a choice, text or not; usage comes from a line without
    /// one; `[DONE]` is not needed, and the last line counts without its newline: for every
    /// split of the body.
    #[test]
    fn a_body_read_by_lines_counts_what_upstream_counts() {
        let body = concat!(
            "data: {\"choices\":[{\"index\":0,\"text\":\"\"}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"text\":\"ab\"}],\"usage\":{\"completion_tokens\":9}}\r\n\n",
            "data: {\"choices\":[{\"index\":0,\"text\":\"c\",\"finish_reason\":\"length\"}]}\n",
            "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":3}}"
        );
        for cut in 0..body.len() {
            let rec = by_lines(Api::Completions, body, &[cut]);
            assert!(rec.outcome.is_success(), "cut {cut}: {:?}", rec.error);
            assert_eq!(rec.content_events, 3);
            assert_eq!(rec.chunk_gaps.len(), 2);
            assert_eq!(rec.completion_tokens, Some(3), "cut {cut}");
            assert_eq!(rec.response_text.as_deref(), Some("abc"));
            assert_eq!(rec.chunk_text_ends, [0, 2, 3]);
            assert!(rec.last_token_ns >= rec.first_token_ns);
        }
        // `dynamo` reads usage from any line: the last one read wins.
        let rec = by_lines(Api::Dynamo, body, &[]);
        assert_eq!(rec.completion_tokens, Some(3));
        let rec = by_lines(Api::Dynamo, &body[..body.rfind("data:").unwrap()], &[]);
        assert_eq!(rec.completion_tokens, Some(9));
        // Cut inside the last line: its JSON fails, and so does the request.
        let rec = by_lines(Api::Completions, &body[..body.len() - 3], &[]);
        assert_eq!(rec.outcome, Outcome::Failed(FailureKind::Malformed));
        // No line with a choice: upstream's words.
        let rec = by_lines(
            Api::Completions,
            "data: {\"choices\":[]}\n\ndata: [DONE]\n\n",
            &[],
        );
        assert_eq!(rec.outcome, Outcome::Failed(FailureKind::NoOutput));
        assert_eq!(rec.error.as_deref(), Some(lines::NO_TOKEN_CHUNK));
    }

    #[test]
    fn comments_error_objects_and_whole_bodies_are_read_as_upstream_reads_them() {
        let chunk = "data: {\"choices\":[{\"index\":0,\"text\":\"a\"}]}\n\n";
        let with_comment = format!(": ping\n\nevent: message\n{chunk}data: [DONE]\n\n");
        let rec = by_lines(Api::Completions, &with_comment, &[]);
        assert_eq!(rec.outcome, Outcome::Failed(FailureKind::Malformed));
        assert!(by_lines(Api::Dynamo, &with_comment, &[])
            .outcome
            .is_success());
        // An error object inside the stream is passed over.
        let with_error = format!("{chunk}data: {{\"error\":{{\"message\":\"x\"}}}}\n\n");
        assert!(by_lines(Api::Completions, &with_error, &[])
            .outcome
            .is_success());
        // A non-streaming completion body is one line: a token chunk for completions (its usage
        // sits beside the choice, so no output length), no delta for chat.
        let whole = "{\"choices\":[{\"index\":0,\"text\":\"a\",\"message\":{\"content\":\"a\"}}],\"usage\":{\"completion_tokens\":1}}";
        let rec = by_lines(Api::Completions, whole, &[]);
        assert!(rec.outcome.is_success());
        assert_eq!(rec.completion_tokens, None);
        let rec = by_lines(Api::Chat, whole, &[]);
        assert_eq!(rec.outcome, Outcome::Failed(FailureKind::Malformed));
    }

    /// Chat: every line stamps the clock, the latency ends at the last line, and a 200 with no
    /// choice at all is still a success.
    #[test]
    fn chat_lines_stamp_the_clock_and_need_no_token() {
        let body = concat!(
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n",
            "data: {\"choices\":[],\"usage\":{\"completion_tokens\":2}}\n\n",
            "data: [DONE]\n\n"
        );
        let rec = by_lines(Api::Chat, body, &[]);
        assert!(rec.outcome.is_success());
        assert_eq!((rec.content_events, rec.chunk_gaps.len()), (2, 1));
        assert_eq!(rec.completion_tokens, Some(2));
        assert!(rec.last_token_ns >= rec.first_token_ns);
        let rec = by_lines(Api::Chat, "data: {\"error\":{\"message\":\"x\"}}\n\n", &[]);
        assert!(rec.outcome.is_success());
        assert_eq!(rec.first_token_ns, None);
        assert!(rec.last_token_ns.is_some());
    }

    #[test]
    fn a_malformed_payload_leaves_a_warning_and_the_request_a_success() {
        let bad = VLLM_SPEC.replace("[39,1,0,3]", "[39,1,0,3.0]");
        let body = format!(
            r#"{{"id":"x","object":"text_completion","choices":[{{"index":0,"text":"ok","finish_reason":"length"}}],"usage":{{"prompt_tokens":3,"completion_tokens":24,"total_tokens":27}},"metrics":{{"speculative_decoding":{bad}}}}}"#
        );
        let rec = run(body.as_bytes(), &[10], false);
        assert!(rec.outcome.is_success());
        assert!(rec.spec.is_none());
        assert_eq!(
            rec.spec_warning.as_deref(),
            Some("malformed vLLM spec-decode payload (metrics.speculative_decoding): acceptance_histogram[3] is 3.0, not a non-negative integer")
        );
        // The same body, well formed: figures, no warning.
        let rec = run(body.replace(&bad, VLLM_SPEC).as_bytes(), &[], false);
        assert_eq!(rec.spec.map(|s| s.steps), Some(Some(43)));
        assert_eq!(rec.spec_warning, None);
    }

    #[test]
    fn cumulative_figures_keep_the_last_chunk() {
        // TensorRT-LLM: the ratio on every chunk; the usage chunk has no choices.
        let trt = |v: &str| {
            format!(
                r#"{{"choices":[{{"index":0,"delta":{{"content":"a"}},"finish_reason":null,"avg_decoded_tokens_per_iter":{v}}}]}}"#
            )
        };
        let stream = sse(&[
            trt("0.0"),
            trt("2.0"),
            trt("2.5"),
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop","avg_decoded_tokens_per_iter":2.75}]}"#.into(),
            r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":11,"total_tokens":14}}"#.into(),
        ]);
        let rec = run(&stream, &[30], true);
        assert_eq!(
            rec.spec_warning, None,
            "a later good value replaces an early bad one"
        );
        assert_eq!(*rec.spec.unwrap(), spec::trtllm(2.75));

        // llama.cpp with `timings_per_token`: cumulative timings on every chunk, draft_n once drafts began.
        let llama = |t: &str, text: &str, finish: &str| {
            format!(
                r#"{{"choices":[{{"text":"{text}","index":0,"logprobs":null,"finish_reason":{finish}}}],"object":"text_completion","timings":{{"prompt_n":4,"predicted_n":3,"predicted_ms":9.0{t}}}}}"#
            )
        };
        let stream = sse(&[
            llama("", "a", "null"),
            llama(r#","draft_n":8,"draft_n_accepted":3"#, "b", "null"),
            r#"{"choices":[{"text":"","index":0,"logprobs":null,"finish_reason":"length"}],"object":"text_completion","usage":{"prompt_tokens":4,"completion_tokens":24,"total_tokens":28},"timings":{"prompt_n":4,"predicted_n":24,"draft_n":40,"draft_n_accepted":17}}"#
                .into(),
        ]);
        let rec = run(&stream, &[], true);
        assert!(rec.outcome.is_success(), "{:?}", rec.error);
        let spec: SpecDecode = *rec.spec.unwrap();
        assert_eq!(
            (
                spec.source,
                spec.draft_tokens,
                spec.accepted_tokens,
                spec.steps
            ),
            (SpecSource::Llamacpp, Some(40), Some(17), None)
        );
    }
}
