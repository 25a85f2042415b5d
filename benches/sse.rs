//! Criterion bench of the SSE hot path: framing a stream and classifying each chunk.
#![allow(missing_docs)]
fn main() {}
