//! Loopback engine bench (placeholder replaced below).
#![allow(missing_docs)]
fn main() {}
