//! The response body: a fixed buffer, or a stream that emits each planned token burst at its
//! scheduled time (woken by the precise timer) as SSE chunks or one JSON body, and injects the
//! mid-stream faults (stall, close, malformed or oversized chunk, error event). `http` builds it;
//! it moves the engine's counters (`model`) and gives the engine back (`sched`) as it ends.

use std::fmt::Write as _;
use std::pin::Pin;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use http_body::Frame;
use rand::rngs::SmallRng;
use rand::Rng;

use super::kv::Lease;
use super::model::{Emission, Plan};
use super::spec::{llamacpp_timings_member, Tally, TimingInputs};
use super::state::{ConnState, Shared};
use super::{Fault, MetricsFlavor, PerRequestSpec, ReasoningField};

/// Response body: a fixed buffer or a timed stream.
pub(super) enum SimBody {
    Full(Option<Bytes>),
    Stream(Box<SimStream>),
}

impl http_body::Body for SimBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        match self.get_mut() {
            SimBody::Full(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            SimBody::Stream(s) => s.poll_next(cx),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum StreamPhase {
    Emitting,
    Done,
    Stalled,
    /// The partial bytes are out; yield once so the server flushes them, then reset.
    Flushing,
    Closing,
}

/// A planned response being emitted.
pub(super) struct SimStream {
    pub(super) shared: Arc<Shared>,
    pub(super) engine: usize,
    /// When the request arrived (vLLM's latencies count from it).
    pub(super) arrived: Instant,
    /// When its first and latest emissions went out.
    pub(super) sent: Option<(Instant, Instant)>,
    pub(super) t0: Instant,
    pub(super) idx: usize,
    pub(super) emitted: u32,
    pub(super) fault_at: u32,
    pub(super) fault: Option<Fault>,
    /// The connection to close after the last frame (`close-after-done`).
    pub(super) close_after: Option<Arc<ConnState>>,
    pub(super) chat: bool,
    pub(super) id: u64,
    pub(super) created: u64,
    pub(super) prompt_tokens: u64,
    pub(super) stream: bool,
    pub(super) include_usage: bool,
    pub(super) continuous: bool,
    pub(super) text: String,
    pub(super) reasoning: String,
    pub(super) plan: Plan,
    pub(super) rng: SmallRng,
    pub(super) state: StreamPhase,
    /// Emissions counted by the per-step counters (`idx` can jump past them on a fault).
    pub(super) counted: usize,
    /// The request has been added to the counters that move when a request ends.
    pub(super) finished: bool,
    /// Its KV blocks and running slot, given back when the stream ends.
    pub(super) lease: Option<Lease>,
    /// Its acceptance-group slot (`--acceptance-group`), counted with every step.
    pub(super) group: usize,
    /// Prompt tokens found in the prefix cache (llama.cpp's `timings.cache_n`).
    pub(super) cached_tokens: u64,
    /// The request set `return_spec_tokens_details` (SGLang's `sglext`).
    pub(super) sglext: bool,
    /// Members added to the stream's finish chunk (llama.cpp's `timings` without a usage chunk);
    /// set just before that chunk is written.
    pub(super) finish_extra: Option<String>,
}

impl Drop for SimStream {
    fn drop(&mut self) {
        // A request that ended early (a fault, the client gone) leaves the engine here.
        self.finish();
        if let Some(lease) = self.lease.take() {
            let (queue, counters) = (
                &self.shared.sched[self.engine],
                &self.shared.engines[self.engine],
            );
            super::sched::release(queue, counters, lease);
        }
    }
}

const WORDS: [&str; 16] = [
    " the",
    " model",
    " token",
    " draft",
    " verify",
    " accept",
    " fast",
    " speculative",
    " decode",
    " step",
    " and",
    " of",
    " to",
    " code",
    " value",
    " return",
];

impl SimStream {
    pub(super) fn poll_next(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        loop {
            match self.state {
                StreamPhase::Done => return Poll::Ready(None),
                StreamPhase::Stalled => return Poll::Pending,
                StreamPhase::Flushing => {
                    // hyper writes what it buffered when the body has nothing ready: without
                    // this the reset could go out before the partial bytes, and a close with no
                    // byte at all is another fault (one a client may retry).
                    self.state = StreamPhase::Closing;
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
                StreamPhase::Closing => {
                    self.state = StreamPhase::Done;
                    return Poll::Ready(Some(Err(std::io::Error::new(
                        std::io::ErrorKind::ConnectionReset,
                        "simulated connection close",
                    ))));
                }
                StreamPhase::Emitting => {}
            }
            let e = self.plan.emissions[self.idx];
            let at = self.t0 + e.at;
            let now = Instant::now();
            if now < at {
                self.shared.timer.wake_at(at, cx.waker().clone());
                return Poll::Pending;
            }
            self.shared.record_lateness(now - at);
            self.shared.engines[self.engine].on_emission(&e, self.shared.cfg.k, self.group);
            self.idx += 1;
            self.counted = self.idx;
            let out = self.emit(&e);
            self.time_emission(now);
            if let Some(lease) = self.lease.as_mut() {
                super::sched::grow(
                    &self.shared.sched[self.engine],
                    lease,
                    u64::from(self.emitted),
                );
            }
            if self.idx == self.plan.emissions.len() && self.state == StreamPhase::Emitting {
                self.shared.engines[self.engine]
                    .requests_success
                    .fetch_add(1, Relaxed);
                self.state = StreamPhase::Done;
                // Before the last bytes go out, so a scrape after them sees the request counted.
                self.finish();
                if let Some(conn) = &self.close_after {
                    conn.doom();
                }
            }
            if let Some(bytes) = out {
                return Poll::Ready(Some(Ok(Frame::data(bytes))));
            }
        }
    }

    /// Moves vLLM's latency histograms for an emission going out `now` (after `emit`, so
    /// `emitted` counts its tokens): the time to first token or the gap since the step before,
    /// and, on the plan's last emission, the request's time per output token and latency.
    fn time_emission(&mut self, now: Instant) {
        let h = &self.shared.engines[self.engine].latency;
        let first = match self.sent {
            None => {
                h.ttft.observe(now - self.arrived);
                now
            }
            Some((first, latest)) => {
                h.itl.observe(now - latest);
                first
            }
        };
        self.sent = Some((first, now));
        if self.idx == self.plan.emissions.len() && self.state == StreamPhase::Emitting {
            // vLLM's mean time per output token: 0 for a one-token answer.
            let tpot = match self.emitted {
                0 | 1 => std::time::Duration::ZERO,
                n => (now - first) / (n - 1),
            };
            h.request_tpot.observe(tpot);
            h.e2e.observe(now - self.arrived);
        }
    }

    /// Adds the emitted part of the plan to the counters that move only when a request ends;
    /// once per request.
    fn finish(&mut self) {
        if !self.finished {
            self.finished = true;
            self.shared.engines[self.engine]
                .on_finished(&self.plan.emissions[..self.counted], self.shared.cfg.k);
        }
    }

    /// Produces the bytes of one emission (None for a non-streaming response still in progress).
    fn emit(&mut self, e: &Emission) -> Option<Bytes> {
        let mut out = String::new();
        let first = self.emitted == 0;
        let last = self.idx == self.plan.emissions.len();
        let cfg = &self.shared.cfg;
        if self.stream && self.chat && first {
            self.chunk(
                &mut out,
                r#""role":"assistant","content":"""#,
                "",
                None,
                None,
            );
        }
        if last && self.stream && !self.include_usage && self.llamacpp_timings() {
            // llama.cpp puts `timings` on the last chunk: here the finish chunk.
            self.finish_extra = Some(self.timings_member());
        }
        let pieces = if self.stream && cfg.split_steps {
            e.tokens
        } else {
            1
        };
        for piece in 0..pieces {
            let n = if pieces == 1 { e.tokens } else { 1 };
            let (mut reasoning, mut content) = (String::new(), String::new());
            for _ in 0..n {
                let w = WORDS[self.rng.random_range(0..WORDS.len())];
                if self.emitted < cfg.reasoning_tokens {
                    reasoning.push_str(w);
                } else {
                    content.push_str(w);
                }
                self.emitted += 1;
            }
            let finish = (last && piece + 1 == pieces).then_some(self.plan.finish_reason);
            if self.stream {
                let usage = self.continuous.then_some(self.emitted);
                // A step that crosses the reasoning/content boundary is sent as two chunks.
                if !reasoning.is_empty() {
                    let f = if content.is_empty() { finish } else { None };
                    self.delta_chunk(&mut out, &reasoning, true, f, usage);
                }
                if !content.is_empty() {
                    self.delta_chunk(&mut out, &content, false, finish, usage);
                }
            } else {
                self.reasoning.push_str(&reasoning);
                self.text.push_str(&content);
            }
        }
        if self.emitted >= self.fault_at {
            self.fault_at = u32::MAX;
            if let Some(fault) = self.fault {
                return Some(self.inject(fault, out));
            }
        }
        if !last {
            return self.stream.then(|| Bytes::from(out));
        }
        if self.stream {
            if self.sglext {
                // SGLang sends its details as a chunk of their own, before the usage chunk.
                out.push_str("data: ");
                self.head(&mut out);
                out.push_str("\"choices\":[],");
                out.push_str(&self.tally().sglext_member(self.emitted));
                out.push_str("}\n\n");
            }
            if self.include_usage {
                out.push_str("data: ");
                self.head(&mut out);
                out.push_str("\"choices\":[],\"usage\":");
                self.usage(&mut out, self.emitted);
                self.vllm_and_llamacpp_members(&mut out);
                out.push_str("}\n\n");
            }
            out.push_str("data: [DONE]\n\n");
        } else {
            self.full_body(&mut out);
        }
        Some(Bytes::from(out))
    }

    fn inject(&mut self, fault: Fault, mut out: String) -> Bytes {
        let cfg = &self.shared.cfg;
        if !self.stream {
            // Non-streaming: the fault replaces the body.
            out.clear();
            match fault {
                Fault::CloseMidStream => {
                    out.push_str("{\"id\":\"cmpl-");
                    self.state = StreamPhase::Flushing;
                }
                Fault::StallMidStream => self.state = StreamPhase::Stalled,
                Fault::MalformedChunk => {
                    out.push_str("{\"choices\":[{\"message\":");
                    self.state = StreamPhase::Done;
                }
                Fault::ErrorMidStream => {
                    out.push_str(r#"{"error":{"message":"simulated engine failure","type":"InternalServerError","code":500}}"#);
                    self.state = StreamPhase::Done;
                }
                Fault::OversizedChunk => {
                    self.text.push_str(&"x".repeat(cfg.oversized_bytes));
                    self.idx = self.plan.emissions.len();
                    self.full_body(&mut out);
                    self.state = StreamPhase::Done;
                }
                _ => {}
            }
            return Bytes::from(out);
        }
        match fault {
            Fault::CloseMidStream => self.state = StreamPhase::Flushing,
            Fault::StallMidStream => self.state = StreamPhase::Stalled,
            Fault::MalformedChunk => {
                out.push_str("data: {\"choices\":[{\"delta\":{\"content\":\"x\"\n\n")
            }
            Fault::ErrorMidStream => {
                out.push_str("data: {\"error\":{\"message\":\"simulated engine failure\",\"type\":\"InternalServerError\",\"code\":500}}\n\ndata: [DONE]\n\n");
                self.state = StreamPhase::Done;
            }
            Fault::OversizedChunk => {
                let big = "x".repeat(cfg.oversized_bytes);
                self.delta_chunk(&mut out, &big, false, None, None);
            }
            _ => {}
        }
        Bytes::from(out)
    }

    fn head(&self, out: &mut String) {
        let (prefix, object) = if self.chat {
            (
                "chatcmpl",
                if self.stream {
                    "chat.completion.chunk"
                } else {
                    "chat.completion"
                },
            )
        } else {
            ("cmpl", "text_completion")
        };
        let _ = write!(
            out,
            "{{\"id\":\"{prefix}-{}\",\"object\":\"{object}\",\"created\":{},\"model\":{},",
            self.id, self.created, self.shared.model_json
        );
    }

    fn usage(&self, out: &mut String, completion: u32) {
        let _ = write!(
            out,
            "{{\"prompt_tokens\":{},\"total_tokens\":{},\"completion_tokens\":{}",
            self.prompt_tokens,
            self.prompt_tokens + u64::from(completion),
            completion
        );
        let reasoning = self.shared.cfg.reasoning_tokens.min(completion);
        if reasoning > 0 {
            let _ = write!(
                out,
                ",\"completion_tokens_details\":{{\"reasoning_tokens\":{reasoning}}}"
            );
        }
        out.push('}');
    }

    /// One streaming chunk. `members` are the raw JSON members of the chat `delta`; completions
    /// carry `text` instead.
    fn chunk(
        &self,
        out: &mut String,
        members: &str,
        text: &str,
        finish: Option<&str>,
        usage: Option<u32>,
    ) {
        out.push_str("data: ");
        self.head(out);
        out.push_str("\"choices\":[{\"index\":0,");
        if self.chat {
            let _ = write!(out, "\"delta\":{{{members}}}");
        } else {
            let _ = write!(out, "\"text\":\"{text}\"");
        }
        out.push_str(",\"logprobs\":null,\"finish_reason\":");
        push_opt_str(out, finish);
        out.push_str("}]");
        if let Some(c) = usage {
            out.push_str(",\"usage\":");
            self.usage(out, c);
        }
        if let (Some(extra), Some(_)) = (&self.finish_extra, finish) {
            out.push(',');
            out.push_str(extra);
        }
        out.push_str("}\n\n");
    }

    /// A chunk carrying `text` as content or reasoning (completions have no reasoning field, so
    /// reasoning text streams as text there). Words are plain ASCII: no JSON escaping needed.
    fn delta_chunk(
        &self,
        out: &mut String,
        text: &str,
        reasoning: bool,
        finish: Option<&str>,
        usage: Option<u32>,
    ) {
        let field = match (reasoning, self.shared.cfg.reasoning_field) {
            (false, _) => "content",
            (true, ReasoningField::ReasoningContent) => "reasoning_content",
            (true, ReasoningField::Reasoning) => "reasoning",
        };
        let members = if self.chat {
            format!("\"{field}\":\"{text}\"")
        } else {
            String::new()
        };
        self.chunk(out, &members, text, finish, usage);
    }

    fn full_body(&self, out: &mut String) {
        self.head(out);
        out.push_str("\"choices\":[{\"index\":0,");
        let text = serde_json::to_string(&self.text).unwrap_or_default();
        if self.chat {
            let _ = write!(
                out,
                "\"message\":{{\"role\":\"assistant\",\"content\":{text}"
            );
            if !self.reasoning.is_empty() {
                let field = match self.shared.cfg.reasoning_field {
                    ReasoningField::ReasoningContent => "reasoning_content",
                    ReasoningField::Reasoning => "reasoning",
                };
                let _ = write!(
                    out,
                    ",\"{field}\":{}",
                    serde_json::to_string(&self.reasoning).unwrap_or_default()
                );
            }
            out.push('}');
        } else {
            let mut all = self.reasoning.clone();
            all.push_str(&self.text);
            let _ = write!(
                out,
                "\"text\":{}",
                serde_json::to_string(&all).unwrap_or_default()
            );
        }
        out.push_str(",\"logprobs\":null,\"finish_reason\":");
        push_opt_str(out, Some(self.plan.finish_reason));
        out.push_str("}],\"usage\":");
        self.usage(out, self.emitted);
        self.vllm_and_llamacpp_members(out);
        if self.sglext {
            out.push(',');
            out.push_str(&self.tally().sglext_member(self.emitted));
        }
        out.push('}');
    }

    /// The speculative decoding of what was emitted: the emissions the counters counted.
    fn tally(&self) -> Tally {
        Tally::of(&self.plan.emissions[..self.counted], self.shared.cfg.k)
    }

    fn llamacpp_timings(&self) -> bool {
        self.shared.cfg.metrics_flavor == MetricsFlavor::Llamacpp
    }

    /// llama.cpp's `timings` member, from the plan's times (prefill: up to the first token;
    /// decode: first to last emitted token).
    fn timings_member(&self) -> String {
        let emitted = &self.plan.emissions[..self.counted];
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        let (prompt_ms, predicted_ms) = match (emitted.first(), emitted.last()) {
            (Some(f), Some(l)) => (ms(f.at), ms(l.at - f.at)),
            _ => (0.0, 0.0),
        };
        let inputs = TimingInputs {
            cached: self.cached_tokens,
            prompt: self.prompt_tokens.saturating_sub(self.cached_tokens),
            prompt_ms,
            // From the emissions, not `emitted`: the finish chunk's member is made before the
            // last emission's tokens are added to it.
            predicted: emitted.iter().map(|e| e.tokens).sum(),
            predicted_ms,
        };
        llamacpp_timings_member(&self.tally(), &inputs)
    }

    /// `,"metrics":{…}` when vLLM's per-request flag is on, `,"timings":{…}` with the llama.cpp
    /// flavor: the members of a final body or usage chunk after `usage`.
    fn vllm_and_llamacpp_members(&self, out: &mut String) {
        let mode = self.shared.cfg.per_request_spec;
        if mode != PerRequestSpec::None {
            out.push(',');
            out.push_str(&self.tally().vllm_member(mode == PerRequestSpec::Detailed));
        }
        if self.llamacpp_timings() {
            out.push(',');
            out.push_str(&self.timings_member());
        }
    }
}

fn push_opt_str(out: &mut String, s: Option<&str>) {
    match s {
        Some(s) => {
            out.push('"');
            out.push_str(s);
            out.push('"');
        }
        None => out.push_str("null"),
    }
}
