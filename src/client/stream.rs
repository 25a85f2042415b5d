//! One response body -> the record's timings and outcome: SSE events stamped as they are parsed,
//! tokens from `usage`, every size and count bounded, failures classified.

use std::time::Instant;

use crate::record::{ChunkGap, FailureKind, Outcome, RequestRecord, TokenSource};

use super::sse::{self, classify, Event, SseParser};
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
    pub(super) parsed: Vec<(Instant, Result<Event, sse::Malformed>)>,
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
        }
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
        let mut parsed = std::mem::take(&mut self.parsed);
        let text = &mut self.text;
        self.parser
            .push(data, |ev| {
                parsed.push((Instant::now(), classify(ev)));
                if let Some(t) = text.as_mut() {
                    sse::append_text(ev, t);
                }
            })
            .map_err(|e| (FailureKind::Oversized, e.to_string()))?;
        for (at, ev) in parsed.drain(..) {
            rec.events += 1;
            match ev {
                Err(m) => {
                    self.malformed.get_or_insert(m.0);
                }
                Ok(Event::Done) => self.done = true,
                Ok(Event::Error(m)) => {
                    self.stream_error.get_or_insert(m);
                }
                Ok(Event::Chunk(c)) => self.on_chunk(c, at, clock, rec),
            }
        }
        self.parsed = parsed;
        if let Some(m) = self.malformed.take() {
            return Err((FailureKind::Malformed, m));
        }
        if rec.events > self.max_events {
            // Each content event keeps a gap for the histograms: bound them per request.
            return Err((
                FailureKind::Oversized,
                format!(
                    "response exceeds the events-per-response cap ({} SSE events)",
                    self.max_events
                ),
            ));
        }
        Ok(())
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
