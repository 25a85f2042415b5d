//! Fuzz target: collection loaders (SPEED-Bench, single_turn, Mooncake trace).
//! The harness and its invariants are in `specperf::fuzzing::dataset`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| specperf::fuzzing::dataset(data));
