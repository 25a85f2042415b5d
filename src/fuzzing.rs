//! Fuzz entry points: each takes arbitrary bytes, drives one parser of untrusted input, and
//! panics only when an invariant breaks. Compiled for cargo-fuzz (`--cfg fuzzing`, see `fuzz/`)
//! and for this crate's own tests, which replay the committed corpora through them; not part of
//! the library's API otherwise.
//!
//! Beyond "does not panic", each checks what must hold for every input:
//! - [`sse`]: framing gives the same events and the same error however reads split the stream,
//!   and classification's fast path answers each event as the full parser does, or not at all.
//! - [`prom`]: a page that parses, rendered again, parses to the same samples.
//! - [`dataset`]: a collection that loads has samples, each with a prompt.
//! - [`inject`]: a rewrite never reports an internal error, leaves every line it does not list
//!   byte-identical, and a second rewrite changes nothing.
//! - `encoders`: an encoder vector line never panics the DeepSeek encoders.

use crate::client::sse::{assert_fast_path_agrees, classify, SseError, SseParser};
use crate::dataset::{self, DatasetKind, SpeedBenchSelect};
use crate::scrape::acceptance::Snapshot;
use crate::scrape::prom::{self, Format, Page};

/// Splits `data` into a control byte and the rest (empty input: nothing to do).
fn control(data: &[u8]) -> Option<(u8, &[u8])> {
    data.split_first().map(|(c, rest)| (*c, rest))
}

/// What framing a stream produced: the events, then the error that stopped it, if any.
type Framed = (Vec<Vec<u8>>, Option<SseError>);

fn frame(stream: &[u8], cap: usize, cuts: impl Iterator<Item = usize>) -> Framed {
    let mut p = SseParser::new(cap);
    let mut events = Vec::new();
    let mut at = 0;
    for len in cuts.chain(std::iter::once(stream.len())) {
        let end = (at + len).min(stream.len());
        if let Err(e) = p.push(&stream[at..end], |ev| events.push(ev.to_vec())) {
            return (events, Some(e));
        }
        at = end;
        if at == stream.len() {
            break;
        }
    }
    (events, None)
}

/// SSE framing and classification. The control byte picks the cap (8..2048 bytes, so the caps
/// are reached) and seeds the read sizes.
pub fn sse(data: &[u8]) {
    let Some((c, stream)) = control(data) else {
        return;
    };
    let cap = 8 + usize::from(c) * 8;
    let whole = frame(stream, cap, std::iter::empty());
    let bytewise = frame(stream, cap, std::iter::repeat(1));
    assert_eq!(whole, bytewise, "one read vs one byte per read");
    // Read sizes from a small generator seeded by the control byte.
    let mut x = u32::from(c) | 0x9e37_0000;
    let sizes = std::iter::from_fn(move || {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        Some(1 + (x % 64) as usize)
    });
    assert_eq!(whole, frame(stream, cap, sizes), "one read vs random reads");
    for ev in &whole.0 {
        let _ = classify(ev);
        assert_fast_path_agrees(ev);
    }
    // A whole response body goes through the same classifier.
    let _ = classify(stream);
    assert_fast_path_agrees(stream);
}

/// Prometheus text and OpenMetrics parsing, the spec-series snapshot, and the render round trip.
pub fn prom(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    for format in [Format::Text, Format::OpenMetrics] {
        let Ok(page) = prom::parse(&text, format) else {
            continue;
        };
        let _ = Snapshot::from_page(&page);
        let rendered = render(&page, format);
        let again = prom::parse(&rendered, format)
            .unwrap_or_else(|e| panic!("rendered page does not parse: {e}\n{rendered}"));
        assert_same(&page, &again, &rendered);
    }
}

/// Writes a page back in exposition syntax through the one writer: legacy names plain, any
/// other name quoted, `{:?}` values so every float (NaN, ±Inf, exponents) parses back exactly.
pub(crate) fn render(page: &Page, format: Format) -> String {
    let mut w = prom::Writer::default();
    for s in &page.samples {
        w.sample(&s.name, &s.labels, format_args!("{:?}", s.value));
    }
    w.finish(format)
}

fn assert_same(a: &Page, b: &Page, rendered: &str) {
    assert_eq!(a.samples.len(), b.samples.len(), "{rendered}");
    for (x, y) in a.samples.iter().zip(&b.samples) {
        assert_eq!((&x.name, &x.labels), (&y.name, &y.labels), "{rendered}");
        let same = x.value.to_bits() == y.value.to_bits() || (x.value.is_nan() && y.value.is_nan());
        assert!(same, "{} vs {} in {rendered}", x.value, y.value);
    }
}

/// The collection loaders. The control byte picks the format and the selection.
pub fn dataset(data: &[u8]) {
    let Some((c, rest)) = control(data) else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    let kind = [
        DatasetKind::SpeedBench,
        DatasetKind::SingleTurn,
        DatasetKind::MooncakeTrace,
        DatasetKind::MultiTurn,
        DatasetKind::Sharegpt,
    ][usize::from(c % 5)];
    let select = SpeedBenchSelect {
        category: (c & 0x10 != 0).then(|| "coding".to_owned()),
        shuffle_seed: (c & 0x20 != 0).then_some(u64::from(c)),
        all_turns: c & 0x40 != 0,
        group_by: (c & 0x80 != 0).then(|| "category".to_owned()),
        split: None,
    };
    if let Ok(samples) = dataset::load_str(&text, "fuzz", kind, &select) {
        assert!(!samples.is_empty(), "a loaded collection has samples");
    }
}

/// The recipe rewriter, under every framework and with the recipe's own choice; the same text
/// as a golden curve file (the other reader of the YAML layer).
pub fn inject(data: &[u8]) {
    let text = String::from_utf8_lossy(data).into_owned();
    let _ = crate::golden::GoldenCurve::parse("fuzz", std::path::Path::new("fuzz.yaml"), &text);
    crate::inject::fuzz_rewrite(text);
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    /// Every file of a committed corpus (seeds and regression inputs), sorted.
    pub(crate) fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fuzz/corpus")
            .join(target);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "{} is empty", dir.display());
        files
            .into_iter()
            .map(|p| {
                let bytes = std::fs::read(&p).unwrap();
                (p, bytes)
            })
            .collect()
    }

    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    use crate::scrape::prom::{parse, Format, Page, Sample};

    /// SSE: random streams of data lines, comments, other fields, CRLF and blank lines, with caps
    /// small enough to fire, frame the same under one read, byte reads and random reads.
    #[test]
    fn sse_framing_is_invariant_under_read_splits() {
        let mut rng = SmallRng::seed_from_u64(9);
        let pieces: [&[u8]; 9] = [
            b"data: {\"choices\":[{\"delta\":{\"content\":\"ab\"}}]}\n",
            b"data:x\n",
            b"data: [DONE]\n",
            b"\n",
            b"\r\n",
            b": keep-alive\n",
            b"event: message\r\n",
            b"id: 42\n",
            b"data: xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n",
        ];
        for _ in 0..2000 {
            let mut stream = vec![rng.random::<u8>()];
            for _ in 0..rng.random_range(0..30) {
                stream.extend_from_slice(pieces[rng.random_range(0..pieces.len())]);
            }
            if rng.random_bool(0.3) {
                stream.truncate(rng.random_range(1..=stream.len()));
            }
            super::sse(&stream);
        }
    }

    fn random_page(rng: &mut SmallRng) -> Page {
        const NAMES: [&str; 6] = [
            "vllm:spec_decode_num_drafts_total",
            "sglang:spec_verify_ct",
            "_x",
            "a.b",
            "dotted.utf8.名前",
            "with \"quote\" and \\",
        ];
        const LABELS: [&str; 5] = ["engine", "model_name", "le", "quantile", "label.with.dots"];
        const VALUES: [&str; 7] = ["0", "x", "", "a\"b", "back\\slash", "line\nbreak", "a #b"];
        let mut samples: Vec<Sample> = Vec::new();
        for _ in 0..rng.random_range(0..12) {
            let mut labels: Vec<(String, String)> = Vec::new();
            for _ in 0..rng.random_range(0..4) {
                let k = LABELS[rng.random_range(0..LABELS.len())];
                if labels.iter().all(|(l, _)| l != k) {
                    labels.push((k.into(), VALUES[rng.random_range(0..VALUES.len())].into()));
                }
            }
            labels.sort();
            let value = match rng.random_range(0..6) {
                0 => f64::NAN,
                1 => f64::INFINITY,
                2 => f64::NEG_INFINITY,
                3 => rng.random::<f64>() * 1e300,
                4 => -rng.random::<f64>() * 1e-300,
                _ => f64::from(rng.random::<u32>()),
            };
            let s = Sample {
                name: NAMES[rng.random_range(0..NAMES.len())].into(),
                labels,
                value,
            };
            if samples
                .iter()
                .all(|o| (&o.name, &o.labels) != (&s.name, &s.labels))
            {
                samples.push(s);
            }
        }
        Page { samples }
    }

    /// Prometheus: parse(render(page)) == page for random pages (quoted UTF-8 names, escapes,
    /// NaN and infinities), in both formats.
    #[test]
    fn prometheus_parse_of_a_rendered_page_round_trips() {
        let mut rng = SmallRng::seed_from_u64(7);
        for _ in 0..500 {
            let page = random_page(&mut rng);
            for format in [Format::Text, Format::OpenMetrics] {
                let text = super::render(&page, format);
                let back = parse(&text, format).unwrap_or_else(|e| panic!("{e}\n{text}"));
                super::assert_same(&page, &back, &text);
                super::prom(text.as_bytes());
            }
        }
    }

    /// Inject: each fixture recipe is rewritten (its lines listed), every other line stays
    /// byte-identical, and a second run changes nothing; so do damaged copies of it (lines
    /// dropped, duplicated or swapped), which must fail cleanly or rewrite cleanly.
    #[test]
    fn inject_rewrites_only_the_lines_it_lists_even_on_damaged_recipes() {
        let mut rng = SmallRng::seed_from_u64(3);
        for (path, bytes) in corpus("inject") {
            let text = String::from_utf8_lossy(&bytes).into_owned();
            super::inject(text.as_bytes());
            let lines: Vec<&str> = text.split_inclusive('\n').collect();
            for _ in 0..40 {
                let mut l = lines.clone();
                let i = rng.random_range(0..l.len());
                match rng.random_range(0..3) {
                    0 => {
                        l.remove(i);
                    }
                    1 => l.insert(i, lines[rng.random_range(0..lines.len())]),
                    _ => l.swap(i, rng.random_range(0..lines.len())),
                }
                let damaged: String = l.concat();
                let r = std::panic::catch_unwind(|| super::inject(damaged.as_bytes()));
                assert!(
                    r.is_ok(),
                    "{}: damaged copy fails:\n{damaged}",
                    path.display()
                );
            }
        }
    }

    /// The committed corpora replay without a finding: the fuzz targets' regression suite.
    #[test]
    fn committed_corpora_replay_clean() {
        for (target, run) in [
            ("sse", super::sse as fn(&[u8])),
            ("prom", super::prom),
            ("dataset", super::dataset),
            ("inject", super::inject),
        ] {
            for (path, bytes) in corpus(target) {
                let r = std::panic::catch_unwind(|| run(&bytes));
                assert!(r.is_ok(), "{target}: {} fails", path.display());
            }
        }
    }
}

/// The DeepSeek encoders, through one line of the shared vector format. (Only under cargo-fuzz:
/// `tokenizer-encoders` replays this corpus in its own tests.)
#[cfg(fuzzing)]
pub fn encoders(data: &[u8]) {
    tokenizer_encoders::fuzz_vector_line(&String::from_utf8_lossy(data));
}
