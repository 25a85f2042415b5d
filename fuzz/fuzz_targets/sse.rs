//! Fuzz target: SSE framing (any read split) and chunk classification.
//! The harness and its invariants are in `specperf::fuzzing::sse`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| specperf::fuzzing::sse(data));
