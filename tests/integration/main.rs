//! Integration tests: loopback only (127.0.0.1, port 0), against the built-in simulator, every
//! request loop bounded in count and time; `golden` and `inject` work on fixture files. One
//! binary, topic modules.

mod acceptance;
mod agentx;
mod agentx_cli;
mod bench_serving;
mod ci;
mod collect;
mod common;
mod completions;
mod conformance;
mod crash;
mod docs;
mod drain;
mod dynamo;
mod energy;
mod engine;
mod fault_matrix;
mod faults;
mod gate;
mod golden;
mod inferencex;
mod inject;
mod layout;
mod llamacpp;
mod newcomer;
mod process;
mod render;
mod reports;
mod reuse;
mod security;
mod serve;
mod server_metrics;
mod shards;
mod side_tasks;
mod sim_cache;
mod spec_per_request;
mod speed_bench;
mod speed_bench_report;
mod sweep;
#[path = "../tools.rs"]
mod tools;
mod transport;
