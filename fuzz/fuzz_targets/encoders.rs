//! Fuzz target: DeepSeek-V4/V4.1 encoders through one line of the shared vector format.
//! The harness and its invariants are in `specperf::fuzzing::encoders`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| specperf::fuzzing::encoders(data));
