//! Integration tests: loopback only, against the built-in simulator.
