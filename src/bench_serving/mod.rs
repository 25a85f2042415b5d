//! `specperf bench-serving`: the drop-in for InferenceX's `benchmark_serving.py` and srt-slurm's
//! sa-bench (shared/spec/bench-serving.md). The callers change one word; the prompts, the load,
//! the result file and the console are upstream's, the timings the server's.
//!
//! ```text
//! argv ─► dataset::bench_serving (numpy's draws, the prompts) ─► requests ─► result (the file,
//!                                                                            the console block)
//! ```
//!
//! Landing in steps: the generator and the datasets (`dataset::numpy_random`,
//! `dataset::bench_serving`), the aggregates and the file (`result`); the command and its run next.

pub(crate) mod result;
