//! Engine unit tests.
use std::time::Duration;

use super::phase::Unreachable;
use super::prepare::default_artifact_dir;
use super::RunConfig;
use crate::record::{FailureKind, Outcome};

#[test]
fn only_requests_that_never_reached_the_server_back_off() {
    let u = Unreachable::default();
    let connect = Outcome::Failed(FailureKind::Connect);
    let waits: Vec<u128> = (0..8)
        .map(|_| u.backoff(connect).unwrap().as_millis())
        .collect();
    assert_eq!(waits, [10, 20, 40, 80, 160, 250, 250, 250]);
    assert_eq!(u.backoff(Outcome::Failed(FailureKind::HttpStatus)), None);
    assert_eq!(u.backoff(connect), Some(Duration::from_millis(10)), "reset");
    assert_eq!(u.backoff(Outcome::Success), None);
}

#[test]
fn hostile_model_names_stay_one_short_component_under_artifacts() {
    use clap::Parser;
    let cli = crate::cli::Cli::try_parse_from(["specperf", "replay"]).unwrap();
    let crate::cli::Command::Replay(a) = cli.command else {
        panic!("not replay")
    };
    let cfg = RunConfig::from_args(&a).unwrap();
    let long = "x".repeat(10_000);
    for model in [
        "../../etc/passwd",
        "/abs/path",
        "..",
        ".",
        "",
        "a\\..\\b",
        "C:\\x",
        "~/.ssh",
        "名前/../..",
        long.as_str(),
    ] {
        let dir = default_artifact_dir(model, &cfg);
        let parts: Vec<_> = dir.components().collect();
        assert_eq!(parts.len(), 2, "{model:?} -> {}", dir.display());
        assert_eq!(parts[0].as_os_str(), "artifacts");
        let std::path::Component::Normal(name) = parts[1] else {
            panic!("{model:?} -> {}", dir.display())
        };
        let name = name.to_str().unwrap();
        assert!(name.len() <= 255 && !name.contains(['/', '\\']), "{name}");
        assert!(name.ends_with("-chat-concurrency64"), "{name}");
    }
}

#[test]
fn an_uncapped_open_loop_is_not_named_concurrency64() {
    use clap::Parser;
    let cfg = |args: &[&str]| {
        let mut argv = vec!["specperf", "replay"];
        argv.extend_from_slice(args);
        let cli = crate::cli::Cli::try_parse_from(argv).unwrap();
        let crate::cli::Command::Replay(a) = cli.command else {
            panic!("not replay")
        };
        RunConfig::from_args(&a).unwrap()
    };
    let name = |args: &[&str]| default_artifact_dir("m", &cfg(args)).display().to_string();
    assert!(name(&["--request-rate", "2.5"]).ends_with("m-chat-rate2.5"));
    assert!(name(&["--request-rate", "inf"]).ends_with("m-chat-rateinf"));
    let capped = name(&["--request-rate", "2.5", "--concurrency", "8"]);
    assert!(capped.ends_with("m-chat-rate2.5-concurrency8"), "{capped}");
    assert!(name(&[]).ends_with("m-chat-concurrency64"));
}
