//! `specperf drain`'s flags -> the drain wait's settings: the frontend URL and the worker metrics
//! endpoints (normalised as replay's --server-metrics; the frontend's page polled once when it is
//! also listed as a worker), the poll interval, idle polls and longest wait, and where the outcome
//! goes. Feeds `scrape::wait_for_drain`.

use std::path::PathBuf;

use super::scrape::{metrics_endpoints, metrics_url};
use super::target::normalize_url;
use super::{err, seconds, ConfigError};
use crate::cli::DrainArgs;
use crate::scrape::DrainSettings;

/// A validated `drain` command.
#[derive(Clone, Debug)]
pub struct DrainConfig {
    /// What to poll and how.
    pub settings: DrainSettings,
    /// Where the outcome is written as JSON (`--output`).
    pub output: Option<PathBuf>,
}

/// Validates `specperf drain`'s flags (the environment fills in --server-metrics as for replay).
pub fn drain_config(a: &DrainArgs) -> Result<DrainConfig, ConfigError> {
    from_args(a, &|k: &str| std::env::var(k).ok())
}

/// The same for a frontend whose URL is bound later ([`bind_frontend`]): a `--serve-cmd`
/// cell's server. `a.url` is not read.
pub(crate) fn drain_config_bound_later(a: &DrainArgs) -> Result<DrainConfig, ConfigError> {
    bound_later(a, &|k: &str| std::env::var(k).ok())
}

fn bound_later(
    a: &DrainArgs,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<DrainConfig, ConfigError> {
    settings(a, metrics_endpoints(&a.server_metrics, env)?)
}

/// Puts the frontend at `url`'s page first among the drain wait's endpoints (read once when it
/// is also listed as a worker).
pub(crate) fn bind_frontend(d: &mut DrainSettings, url: &str) -> Result<(), ConfigError> {
    if let Some(m) = metrics_url(&normalize_url(url)?)? {
        d.endpoints.retain(|e| *e != m);
        d.endpoints.insert(0, m);
    }
    Ok(())
}

fn from_args(
    a: &DrainArgs,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<DrainConfig, ConfigError> {
    let mut endpoints = Vec::new();
    if let Some(u) = &a.url {
        let base = normalize_url(u)?;
        if let Some(m) = metrics_url(&base)? {
            endpoints.push(m);
        }
    }
    for w in metrics_endpoints(&a.server_metrics, env)? {
        // One page read once covers both roles: a single-node deployment's frontend is its
        // worker, and InferenceX recipes list `http://localhost:8000/metrics` as a worker too.
        if !endpoints.contains(&w) {
            endpoints.push(w);
        }
    }
    if endpoints.is_empty() {
        return err(
            "nothing to poll: pass --url http://localhost:$PORT (the frontend) and/or \
             --server-metrics URL for each worker (or set AIPERF_SERVER_METRICS_URLS)",
        );
    }
    settings(a, endpoints)
}

/// The poll settings and the output file, checked, around `endpoints`.
fn settings(a: &DrainArgs, endpoints: Vec<String>) -> Result<DrainConfig, ConfigError> {
    if a.idle_polls == 0 {
        return err(
            "--idle-polls must be at least 1 (the servers must be seen idle at least once)",
        );
    }
    let poll_interval = seconds("poll-interval-seconds", a.poll_interval_seconds)?;
    let max_wait = seconds("max-wait-seconds", a.max_wait_seconds)?;
    if let Some(out) = &a.output {
        if out.is_dir() {
            return err(format!(
                "--output {} is a directory: pass a file name for the JSON outcome",
                out.display()
            ));
        }
        let parent = out.parent().filter(|p| !p.as_os_str().is_empty());
        if let Some(dir) = parent.filter(|p| !p.is_dir()) {
            return err(format!(
                "--output {}: directory {} does not exist; create it first",
                out.display(),
                dir.display()
            ));
        }
    }
    Ok(DrainConfig {
        settings: DrainSettings {
            endpoints,
            poll_interval,
            idle_polls: a.idle_polls,
            max_wait,
        },
        output: a.output.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;
    use std::time::Duration;

    fn parse(args: &[&str]) -> DrainArgs {
        let mut argv = vec!["specperf", "drain"];
        argv.extend_from_slice(args);
        match Cli::try_parse_from(argv).unwrap().command {
            Command::Drain(a) => *a,
            _ => unreachable!("drain parses as drain"),
        }
    }

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn a_frontend_bound_later_comes_first_and_is_polled_once() {
        let a = parse(&[
            "--server-metrics",
            "9001",
            "--server-metrics",
            "localhost:8000",
        ]);
        let mut late = bound_later(&a, &no_env).unwrap().settings;
        assert_eq!(
            late.endpoints,
            [
                "http://0.0.0.0:9001/metrics",
                "http://localhost:8000/metrics"
            ]
        );
        bind_frontend(&mut late, "localhost:8000").unwrap();
        let mut now = parse(&["--url", "localhost:8000"]);
        now.server_metrics = a.server_metrics.clone();
        assert_eq!(late, from_args(&now, &no_env).unwrap().settings);
        assert!(bind_frontend(&mut late, "ftp://x").is_err());
    }

    #[test]
    fn endpoints_are_normalised_like_replays_and_the_frontend_comes_first() {
        let a = parse(&[
            "--url",
            "localhost:8000",
            "--server-metrics",
            "9001",
            "--server-metrics",
            "http://w2:9002/",
            "--poll-interval-seconds",
            "0.5",
        ]);
        let c = from_args(&a, &no_env).unwrap();
        assert_eq!(
            c.settings.endpoints,
            [
                "http://localhost:8000/metrics",
                "http://0.0.0.0:9001/metrics",
                "http://w2:9002/metrics"
            ]
        );
        assert_eq!(c.settings.poll_interval, Duration::from_millis(500));
        assert_eq!(c.settings.idle_polls, 3);
        assert_eq!(c.settings.max_wait, Duration::from_secs(1800));
    }

    #[test]
    fn workers_come_from_aiperf_server_metrics_urls_without_the_flag() {
        let a = parse(&["--url", "http://fe:8000"]);
        let env = |k: &str| {
            (k == "AIPERF_SERVER_METRICS_URLS").then(|| "http://w1:1/metrics,w2:2".to_owned())
        };
        let c = from_args(&a, &env).unwrap();
        assert_eq!(
            c.settings.endpoints,
            [
                "http://fe:8000/metrics",
                "http://w1:1/metrics",
                "http://w2:2/metrics"
            ]
        );
    }

    #[test]
    fn a_frontend_that_is_also_a_listed_worker_is_polled_once() {
        let a = parse(&[
            "--url",
            "localhost:8000",
            "--server-metrics",
            "localhost:8000",
        ]);
        let c = from_args(&a, &no_env).unwrap();
        assert_eq!(c.settings.endpoints, ["http://localhost:8000/metrics"]);
    }

    #[test]
    fn bad_flags_are_refused_with_the_flag_named() {
        let bad = |args: &[&str], want: &str| {
            let e = from_args(&parse(args), &no_env).unwrap_err().to_string();
            assert!(e.contains(want), "{args:?}: {e}");
        };
        bad(&[], "--url http://localhost:$PORT");
        bad(
            &["--server-metrics", "h:1", "--server-metrics", "h:1/"],
            "listed twice",
        );
        bad(&["--url", "h:1", "--idle-polls", "0"], "--idle-polls");
        bad(
            &["--url", "h:1", "--poll-interval-seconds", "0"],
            "--poll-interval-seconds",
        );
        bad(
            &["--url", "h:1", "--max-wait-seconds", "-1"],
            "--max-wait-seconds",
        );
        bad(&["--url", "ftp://h"], "--url");
        bad(&["--url", "h:1", "--output", "/"], "is a directory");
        bad(
            &["--url", "h:1", "--output", "/no/such/dir/out.json"],
            "does not exist",
        );
    }
}
