//! Rendering a 20,000-character prompt through each renderer, counting its tokens, loading the
//! tokenizer, and bench-serving's random prompts (random ids decoded, the text encoded again).
//!
//! Rendering and counting run once per request before the clock starts (never on the hot path),
//! so these bound how long preparing a large collection takes. The prompt is the 20k code-review
//! text of the shared vectors (`long_content/20k-code-block`), cut to exactly 20,000 characters,
//! behind a short system message. Token counting needs `scripts/fetch-tokenizer.sh` to have run.
#![allow(missing_docs)] // criterion_group! generates undocumented items

use std::hint::black_box;
use std::path::Path;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use serde_json::{json, Map, Value};
use tokenizer_encoders::{ChatTemplate, Encoder, Tokenizer};

#[path = "../../tests/tools.rs"]
mod tools;

const CHARS: usize = 20_000;

fn manifest() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The 20k code-review prompt of the vectors, exactly `CHARS` characters long.
fn prompt_20k() -> String {
    let text = std::fs::read_to_string(manifest().join("tests/vectors/dsv4.jsonl")).unwrap();
    let line = text
        .lines()
        .find(|l| l.contains("\"dsv4/encoder/long_content/20k-code-block-chat\""))
        .expect("20k vector present");
    let v: Value = serde_json::from_str(line).unwrap();
    let content = v["input"]["messages"][0]["content"].as_str().unwrap();
    let s: String = content.chars().cycle().take(CHARS).collect();
    assert_eq!(s.chars().count(), CHARS);
    s
}

fn bench(c: &mut Criterion) {
    let prompt = prompt_20k();
    let messages = [
        json!({"role": "system", "content": "You are a careful code reviewer."}),
        json!({"role": "user", "content": prompt}),
    ];
    let kwargs = Map::new();
    let qwen =
        ChatTemplate::from_path(&manifest().join("tests/fixtures/templates/qwen2.5")).unwrap();
    let encoders = [
        ("dsv4", Encoder::Dsv4),
        ("dsv41", Encoder::Dsv41),
        ("template_qwen2.5", Encoder::Template(qwen)),
    ];

    let mut g = c.benchmark_group("render_20k");
    g.throughput(Throughput::Bytes(prompt.len() as u64));
    for (name, enc) in &encoders {
        g.bench_function(*name, |b| {
            b.iter(|| enc.render(black_box(&messages), &kwargs, None).unwrap())
        });
    }
    g.finish();

    let path = tools::Tool::Dsv4Tokenizer.path();
    let tok = Tokenizer::from_path(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let rendered = Encoder::Dsv4.render(&messages, &kwargs, None).unwrap();
    let mut g = c.benchmark_group("count_tokens");
    g.throughput(Throughput::Bytes(rendered.len() as u64));
    g.bench_function("dsv4_20k", |b| {
        b.iter(|| tok.count(black_box(&rendered)).unwrap())
    });
    g.finish();

    let bytes = std::fs::read(&path).unwrap();
    let mut g = c.benchmark_group("load");
    g.throughput(Throughput::Bytes(bytes.len() as u64));
    g.sample_size(10);
    g.bench_function("dsv4", |b| {
        b.iter(|| Tokenizer::from_path(black_box(&path)).unwrap())
    });
    g.finish();

    // bench-serving's random datasets: random ids decoded to text, the text encoded, cut to the
    // input length, decoded and encoded again (upstream's loop runs about two rounds a prompt).
    // New ids every iteration from a fixed xorshift stream, as a run's prompts all differ.
    let vocab = tok.base_vocab_size() as u64;
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut random_ids = move |n: usize| -> Vec<u32> {
        (0..n)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state % vocab) as u32
            })
            .collect()
    };
    let mut g = c.benchmark_group("random_prompts");
    g.throughput(Throughput::Elements(PROMPTS as u64));
    g.sample_size(20);
    g.bench_function("dsv4_64x256_two_rounds", |b| {
        b.iter(|| {
            (0..PROMPTS)
                .map(|_| {
                    let text = tok.decode(&random_ids(ISL)).unwrap();
                    let mut ids = tok.ids(&text).unwrap();
                    ids.truncate(ISL);
                    let text = tok.decode(&ids).unwrap();
                    tok.ids(black_box(&text)).unwrap().len()
                })
                .sum::<usize>()
        })
    });
    // The shape upstream draws: runs of consecutive ids from a random offset, so runs overlap
    // from prompt to prompt (the piece cache hits). Encoded twice, then the second encode
    // resumed from the first (what the dataset does).
    let mut offsets = random_ids(1 << 16).into_iter().cycle();
    let mut runs = move || -> Vec<u32> {
        let start = u64::from(offsets.next().unwrap_or(0));
        (0..ISL as u64)
            .map(|j| ((start + j) % vocab) as u32)
            .collect()
    };
    let mut texts =
        || -> Vec<String> { (0..PROMPTS).map(|_| tok.decode(&runs()).unwrap()).collect() };
    // One prompt's rounds: encoded, cut, decoded and encoded again, whole or resumed.
    let rounds = |text: &String, resumed: bool| -> usize {
        if !resumed {
            let mut ids = tok.ids(text).unwrap();
            ids.truncate(ISL);
            return tok
                .ids(black_box(&tok.decode(&ids).unwrap()))
                .unwrap()
                .len();
        }
        let first = tok.encode_resumable(text).unwrap();
        let again = tok
            .decode(&first.ids()[..first.ids().len().min(ISL)])
            .unwrap();
        tok.reencode(text, &first, black_box(&again))
            .unwrap()
            .ids()
            .len()
    };
    for (name, resumed) in [
        ("dsv4_64x256_runs_two_rounds", false),
        ("dsv4_64x256_runs_resumed", true),
    ] {
        g.bench_function(name, |b| {
            b.iter_batched(
                &mut texts,
                |prompts| prompts.iter().map(|t| rounds(t, resumed)).sum::<usize>(),
                BatchSize::SmallInput,
            )
        });
    }
    g.finish();
}

/// Prompts per iteration of `random_prompts`, and their length in random ids (InferenceX's
/// ISL 256 point).
const PROMPTS: usize = 64;
const ISL: usize = 256;

criterion_group!(benches, bench);
criterion_main!(benches);
