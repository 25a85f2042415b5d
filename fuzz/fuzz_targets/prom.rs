//! Fuzz target: Prometheus text / OpenMetrics parsing, the spec-series snapshot, render round trip.
//! The harness and its invariants are in `specperf::fuzzing::prom`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| specperf::fuzzing::prom(data));
