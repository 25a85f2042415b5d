//! Criterion bench of the SSE hot path: framing a stream and classifying each chunk.
//!
//! The input is one realistic 256-token chat stream as vLLM sends it with speculative decoding
//! (about 2.5 tokens per chunk): a role chunk, 100 content chunks (the last with
//! `finish_reason: "length"`), a usage chunk with `"choices":[]`, and `data: [DONE]`. It is fed to
//! a fresh [`SseParser`] per iteration in 1 KiB reads, as a client would see it off the wire.
//!
//! - `sse/frame_1k_reads`: framing only, reported as bytes/s.
//! - `sse/frame_classify_1k_reads`: framing plus [`classify`] on every event, reported as events/s.
#![allow(missing_docs)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use specperf::sse::{classify, Event, SseParser};

/// Size of each simulated socket read.
const READ: usize = 1024;
/// The client's default `--max-event-bytes`.
const CAP: usize = 4 << 20;
/// Content chunks in the stream.
const CONTENT_CHUNKS: usize = 100;

/// The stream bytes and the number of events in it.
fn chat_stream() -> (Vec<u8>, u64) {
    const HEAD: &str =
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":"#;
    let mut s = String::new();
    let mut events = 0u64;
    let mut event = |s: &mut String, data: &str| {
        s.push_str("data: ");
        s.push_str(data);
        s.push_str("\n\n");
        events += 1;
    };
    event(
        &mut s,
        &format!(
            r#"{HEAD}[{{"index":0,"delta":{{"role":"assistant","content":""}},"logprobs":null,"finish_reason":null}}]}}"#
        ),
    );
    for i in 0..CONTENT_CHUNKS {
        let finish = if i + 1 == CONTENT_CHUNKS {
            r#""length""#
        } else {
            "null"
        };
        event(
            &mut s,
            &format!(
                r#"{HEAD}[{{"index":0,"delta":{{"content":" word word"}},"logprobs":null,"finish_reason":{finish}}}]}}"#
            ),
        );
    }
    event(
        &mut s,
        &format!(
            r#"{HEAD}[],"usage":{{"prompt_tokens":512,"total_tokens":768,"completion_tokens":256,"prompt_tokens_details":null}}}}"#
        ),
    );
    event(&mut s, "[DONE]");
    (s.into_bytes(), events)
}

fn frame(stream: &[u8]) -> (usize, usize) {
    let mut parser = SseParser::new(CAP);
    let (mut n, mut bytes) = (0usize, 0usize);
    for read in stream.chunks(READ) {
        parser
            .push(black_box(read), |e| {
                n += 1;
                bytes += e.len();
            })
            .expect("framing failed");
    }
    assert!(!parser.has_pending());
    (n, bytes)
}

/// Frames and classifies; returns (content chunks, completion tokens from usage, done seen).
fn frame_classify(stream: &[u8]) -> (u32, u64, bool) {
    let mut parser = SseParser::new(CAP);
    let (mut content, mut tokens, mut done) = (0u32, 0u64, false);
    for read in stream.chunks(READ) {
        parser
            .push(black_box(read), |e| match classify(e).expect("malformed") {
                Event::Chunk(c) => {
                    content += u32::from(c.content);
                    if let Some(u) = c.usage {
                        tokens = u.completion_tokens.unwrap_or(0);
                    }
                }
                Event::Done => done = true,
                Event::Error(m) => panic!("unexpected error event: {m}"),
            })
            .expect("framing failed");
    }
    (content, tokens, done)
}

fn bench(c: &mut Criterion) {
    let (stream, events) = chat_stream();
    // Sanity: the fixture is what the bench claims to measure.
    assert_eq!(frame(&stream).0 as u64, events);
    assert_eq!(frame_classify(&stream), (CONTENT_CHUNKS as u32, 256, true));

    let mut g = c.benchmark_group("sse");
    g.sample_size(30)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    g.throughput(Throughput::Bytes(stream.len() as u64));
    g.bench_function("frame_1k_reads", |b| b.iter(|| frame(black_box(&stream))));
    g.throughput(Throughput::Elements(events));
    g.bench_function("frame_classify_1k_reads", |b| {
        b.iter(|| frame_classify(black_box(&stream)))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
