//! Fuzz target: recipe rewriter under every framework (and golden curve parsing).
//! The harness and its invariants are in `specperf::fuzzing::inject`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| specperf::fuzzing::inject(data));
