//! What the gate replays, resolved before any request: the golden curve and its value, the
//! collection block, the prompts, the metrics endpoints, and the replay's flags as a typed
//! `ReplayArgs` (§5.3 steps 2–3, §4, §9).
//!
//! ```text
//!  Settings ─> golden::select ─> collection block (or --collection-metadata) ─> prompts file
//!          ─> endpoints (flags, env chain, else the server's own) ─> ReplayArgs ─> RunConfig
//! ```
//!
//! The replay is configured through the same `ReplayArgs` a `specperf replay` command line fills
//! and validated by the same `RunConfig::from_args`, so the gate cannot drift from the replay's
//! rules. Its starting point is the flags' declared defaults (clap's, environment included, read
//! once from an empty command line); every value the gate decides is then set as a typed field.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, FromArgMatches};
use serde_json::Value;

use crate::cli::{GateArgs, ReplayArgs};
use crate::config::{metrics_endpoints, RunConfig};
use crate::dataset::DatasetKind;
use crate::golden::{
    Collection, CollectionEndpoint, CurveQuery, GoldenCurve, GoldenSource, Renderer, ThinkingMode,
    Turns,
};
use crate::render::EndpointType;
use crate::scrape::acceptance::SpecEngine;

use super::record::{
    model, result_dir, result_name, round_to, GateRecord, PromptRender, Reason, Stop,
};
use super::settings::{env, Settings};

/// Everything resolved before the replay.
pub(crate) struct Plan {
    /// The validated settings.
    pub(crate) settings: Settings,
    /// The golden AL of the cell.
    pub(crate) golden_al: f64,
    /// The replay, as `specperf replay` flags.
    replay: ReplayArgs,
    /// The metrics endpoints probed and scraped.
    pub(crate) endpoints: Vec<String>,
    /// Dynamo with the server's own /metrics: a page without counters gets a hint to name the
    /// decode workers.
    pub(crate) dynamo_default_endpoints: bool,
    /// Prompts the curve was collected on.
    pub(crate) prompts_expected: u32,
}

fn error(reason: Reason, message: impl Into<String>) -> Stop {
    Stop::new(reason, message)
}

/// The replay flags' declared defaults, environment included, as `specperf replay` with no flag
/// would have them.
fn replay_defaults() -> Result<ReplayArgs, clap::Error> {
    let cmd = ReplayArgs::augment_args(clap::Command::new("replay"));
    ReplayArgs::from_arg_matches(&cmd.try_get_matches_from(["replay"])?)
}

/// A collection's replay for one thinking mode, as `specperf replay` flags, and how its prompts
/// are rendered.
pub(crate) struct CollectionReplay {
    /// The flags: every setting the collection records.
    pub(crate) replay: ReplayArgs,
    /// The endpoint posted to.
    pub(crate) endpoint: EndpointType,
    /// Who renders the prompt.
    pub(crate) render: PromptRender,
}

/// The replay that measures (or measured) collection `c` in mode `thinking` with `kwargs` against
/// `url`: prompts from `prompts`, the category, order, turns, endpoint, renderer (a template path
/// relative to `base_dir`), output length, sampling and kwargs exactly as recorded. Shared by the
/// gate, which replays a curve, and `specperf collect`, which measures one, so the two cannot
/// drift apart. No raw result file is written (the caller's environment may name one).
pub(crate) fn collection_replay(
    c: &Collection,
    thinking: ThinkingMode,
    kwargs: serde_json::Map<String, Value>,
    base_dir: Option<&Path>,
    prompts: PathBuf,
    url: String,
) -> Result<CollectionReplay, clap::Error> {
    let sampling = c.sampling.for_mode(thinking);
    let (endpoint, encoder, render) = match &c.renderer {
        Renderer::DeepseekV4 => (
            EndpointType::Completions,
            "dsv4".to_owned(),
            PromptRender::Client,
        ),
        Renderer::DeepseekV41 => (
            EndpointType::Completions,
            "dsv41".to_owned(),
            PromptRender::Client,
        ),
        Renderer::ServerTemplate => (EndpointType::Chat, "none".to_owned(), PromptRender::Server),
        Renderer::Template(f) => {
            let p = base_dir.map(Path::to_path_buf).unwrap_or_default().join(f);
            (
                EndpointType::Completions,
                format!("template:{}", p.display()),
                PromptRender::Client,
            )
        }
    };
    let endpoint = match c.endpoint {
        CollectionEndpoint::Chat => EndpointType::Chat,
        CollectionEndpoint::Completions => endpoint,
    };
    let mut r = replay_defaults()?;
    r.result_filename = None;
    r.result_dir = None;
    r.url = Some(url);
    r.input_file = Some(prompts);
    r.custom_dataset_type = Some(DatasetKind::SpeedBench.into());
    r.category = Some(c.category.clone());
    r.seed = c.seed.unwrap_or(0);
    r.endpoint_type = endpoint;
    r.encoder = encoder;
    r.osl = Some(crate::cli::List::one(c.output_len));
    if let Some(n) = c.concurrency {
        r.concurrency = Some(crate::cli::List::one(n as usize));
    }
    if !kwargs.is_empty() {
        // The replay's flag is JSON text; RunConfig parses and validates it.
        r.chat_template_kwargs = Some(Value::Object(kwargs).to_string());
    }
    r.all_turns = c.turns == Turns::All;
    r.temperature = sampling.temperature;
    r.top_p = sampling.top_p;
    r.presence_penalty = sampling.presence_penalty;
    r.repetition_penalty = sampling.repetition_penalty;
    r.top_k = sampling.top_k;
    if let Some(seed) = sampling.seed {
        r.extra_inputs.push(format!("seed:{seed}"));
    }
    Ok(CollectionReplay {
        replay: r,
        endpoint,
        render,
    })
}

/// The collection block for the curve: `--collection-metadata` (a file, or a directory with
/// `<curve>.yaml`) when it has one, else the curve's own; with the directory relative template
/// paths are resolved from.
fn collection(
    a: &GateArgs,
    curve: &GoldenCurve,
) -> Result<(Option<Collection>, Option<PathBuf>), Stop> {
    let own = || {
        (
            curve.collection.clone(),
            curve.file.parent().map(Path::to_path_buf),
        )
    };
    let Some(p) = &a.collection_metadata else {
        return Ok(own());
    };
    let file = if p.is_dir() {
        p.join(format!("{}.yaml", curve.name))
    } else {
        p.clone()
    };
    if !file.is_file() {
        return Ok(own());
    }
    let c = Collection::load(&file).map_err(|e| error(Reason::InvalidGolden, e.to_string()))?;
    Ok((Some(c), file.parent().map(Path::to_path_buf)))
}

impl Plan {
    /// Steps that need no server: curve, collection, prompts, endpoints (§5.3 steps 2–3).
    pub(crate) fn resolve(a: &GateArgs, rec: &mut GateRecord) -> Result<Plan, Stop> {
        let s = Settings::read(a, rec)?;
        let thinking = s.thinking;

        // Curve and golden value (§2).
        let golden_path = a.golden.clone().ok_or_else(|| {
            error(
                Reason::NoGoldenCurve,
                "no golden curves given: pass --golden DIR",
            )
        })?;
        let source = GoldenSource::open(&golden_path)
            .map_err(|e| error(Reason::NoGoldenCurve, e.to_string()))?;
        let q = CurveQuery {
            model_prefix: &s.model_prefix,
            method: &s.method,
            draft_model: a.draft_model.as_deref(),
            draft_sample_method: a.draft_sample_method.as_deref(),
        };
        let g = source.select(&q, thinking, s.k).map_err(|e| {
            if e.is_invalid_golden() {
                error(Reason::InvalidGolden, e.to_string())
            } else {
                error(Reason::NoGoldenCurve, e.to_string())
            }
        })?;
        rec.curve = Some(g.curve.name.clone());
        rec.golden_file = Some(g.curve.file.display().to_string());
        rec.model_key = Some(g.curve.model_key.clone());
        rec.reference_acceptance_length = Some(g.al);
        rec.min_acceptance_length = Some(round_to(g.al * 0.95, 10));
        rec.max_acceptance_length = Some(round_to(g.al * 1.05, 10));

        // Collection block or override (§4).
        let (collection, base_dir) = collection(a, &g.curve)?;
        let no_meta = || {
            Stop::new(
                Reason::CurveWithoutCollectionMetadata,
                format!(
                    "golden curve {}/{} has no collection metadata",
                    g.curve.name,
                    thinking.as_str()
                ),
            )
        };
        let Some(c) = collection else {
            return Err(no_meta());
        };
        let kwargs = c
            .chat_template_kwargs
            .get(thinking)
            .cloned()
            .ok_or_else(no_meta)?;
        let sampling = c.sampling.for_mode(thinking);
        rec.category = Some(c.category.clone());
        rec.output_len = Some(c.output_len);
        rec.temperature = sampling.temperature;
        rec.collection_concurrency = c.concurrency;
        rec.concurrency = Some(s.concurrency);
        rec.prompts_expected = Some(c.num_prompts);

        // Prompts (§5.3 step 3).
        let prompts = match (&a.input_file, &a.speedbench_dir) {
            (Some(f), _) => f.clone(),
            (None, Some(d)) => d.join("qualitative.jsonl"),
            (None, None) => {
                return Err(Stop::new(
                    Reason::NoPrompts,
                    "no SPEED-Bench prompts available",
                ))
            }
        };
        if !prompts.is_file() {
            return Err(Stop::new(
                Reason::NoPrompts,
                format!(
                    "no SPEED-Bench prompts available ({} not found)",
                    prompts.display()
                ),
            ));
        }

        // Endpoints (§9): flags, the env chain, else the server's port.
        let port = a.port.clone().unwrap_or_else(|| "8000".into());
        let url = a
            .url
            .clone()
            .unwrap_or_else(|| format!("http://localhost:{port}"));
        let mut endpoints = metrics_endpoints(&a.server_metrics, &env)
            .map_err(|e| error(Reason::ConfigInvalid, e.to_string()))?;
        let default_endpoints = endpoints.is_empty();
        if default_endpoints {
            let path = if s.engine == SpecEngine::Trtllm {
                "/prometheus/metrics"
            } else {
                "/metrics"
            };
            endpoints.push(match &a.port {
                Some(p) => format!("http://0.0.0.0:{p}{path}"),
                None => format!("{}{path}", url.trim_end_matches('/')),
            });
        }
        rec.endpoints = Some(endpoints.clone());

        // The replay: the collection exactly as the curve was measured.
        let CollectionReplay {
            replay: mut r,
            endpoint,
            render,
        } = collection_replay(&c, thinking, kwargs, base_dir.as_deref(), prompts, url)
            .map_err(|e| error(Reason::ConfigInvalid, format!("replay flags: {e}")))?;
        rec.endpoint_kind = Some(endpoint);
        rec.prompt_render = Some(render);
        r.concurrency = Some(crate::cli::List::one(s.concurrency as usize));
        r.scrape.spec_engine = s.engine;
        r.scrape.num_spec_tokens = Some(s.k);
        // Every request must succeed and the gate prints its own line, not the replay's.
        r.progress_interval = 0.0;
        r.failed_request_threshold = 0.0;
        r.scrape.metrics_settle_seconds = Some(s.settle.as_secs_f64());
        if let Some(m) = model(a) {
            r.model = Some(m);
        }
        r.scrape.server_metrics = endpoints.clone();
        Ok(Plan {
            golden_al: g.al,
            replay: r,
            endpoints,
            dynamo_default_endpoints: s.dynamo && default_endpoints,
            prompts_expected: c.num_prompts,
            settings: s,
        })
    }

    /// The replay's validated configuration: stable scrapes required, artifacts beside the
    /// result, and whatever is `left` of the budget as its deadline.
    pub(crate) fn run_config(&self, a: &GateArgs, left: Duration) -> Result<RunConfig, Stop> {
        let mut cfg = RunConfig::from_args(&self.replay)
            .map_err(|e| error(Reason::ConfigInvalid, e.to_string()))?;
        cfg.scrape.require_stable = true;
        cfg.artifact_dir =
            Some(result_dir(a).join(format!("al_gate_{}_artifacts", result_name(a)?)));
        cfg.run_timeout = left.max(Duration::from_millis(1));
        Ok(cfg)
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::{Cli, Command};

    fn parse(argv: &[&str]) -> Command {
        Cli::try_parse_from(argv).unwrap().command
    }

    /// The typed replay equals what the command line the gate used to build and parse back
    /// gave, for a collection that sets every field the gate passes on.
    #[test]
    fn the_typed_replay_matches_the_former_command_line() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir(d.join("golden")).unwrap();
        std::fs::write(
            d.join("golden/testm_mtp.yaml"),
            "test-model:\n  thinking_on:\n    3: 2.5\n\
             collection:\n  dataset: speed_bench\n  category: coding\n  num_prompts: 80\n\
             \x20 turns: all\n  endpoint: completions\n  renderer: template:t.jinja\n  output_len: 128\n\
             \x20 sampling:\n    temperature: 1.0\n    top_p: 0.95\n    top_k: 20\n    presence_penalty: 0.5\n\
             \x20   repetition_penalty: 1.1\n    seed: 42\n    thinking_on:\n      temperature: 0.6\n\
             \x20 chat_template_kwargs:\n    thinking_on: {\"thinking\": true, \"effort\": \"high\"}\n\
             \x20 concurrency: 64\n  seed: 7\n",
        )
        .unwrap();
        let prompts = d.join("qualitative.jsonl");
        std::fs::write(&prompts, "").unwrap();
        let (golden, prompts_s) = (
            d.join("golden").display().to_string(),
            prompts.display().to_string(),
        );
        let Command::Gate(a) = parse(&[
            "specperf",
            "gate",
            "--url",
            "http://h:1",
            "--model",
            "m",
            "--server-metrics",
            "http://h:1/metrics",
            "--golden",
            &golden,
            "--model-prefix",
            "testm",
            "--spec-method",
            "mtp",
            "--thinking-mode",
            "thinking_on",
            "--num-spec-tokens",
            "3",
            "--framework",
            "sglang",
            "--settle-seconds",
            "2.5",
            "--concurrency",
            "32",
            "--input-file",
            &prompts_s,
        ]) else {
            unreachable!()
        };
        let plan = Plan::resolve(&a, &mut GateRecord::default()).unwrap();
        let template = format!("template:{}", d.join("golden/t.jinja").display());
        let Command::Replay(former) = parse(&[
            "specperf",
            "replay",
            "--url",
            "http://h:1",
            "--input-file",
            &prompts_s,
            "--custom-dataset-type",
            "speed_bench",
            "--category",
            "coding",
            "--seed",
            "7",
            "--endpoint-type",
            "completions",
            "--encoder",
            &template,
            "--osl",
            "128",
            "--concurrency",
            "32",
            "--spec-engine",
            "sglang",
            "--num-spec-tokens",
            "3",
            "--progress-interval",
            "0",
            "--failed-request-threshold",
            "0",
            "--metrics-settle-seconds",
            "2.5",
            "--chat-template-kwargs",
            "{\"thinking\":true,\"effort\":\"high\"}",
            "--all-turns",
            "--temperature",
            "0.6",
            "--top-p",
            "0.95",
            "--presence-penalty",
            "0.5",
            "--repetition-penalty",
            "1.1",
            "--top-k=20",
            "--extra-inputs",
            "seed:42",
            "--model",
            "m",
            "--server-metrics",
            "http://h:1/metrics",
        ]) else {
            unreachable!()
        };
        assert_eq!(format!("{:?}", plan.replay), format!("{former:?}"));
        assert_eq!(plan.endpoints, ["http://h:1/metrics"]);
        assert!(!plan.dynamo_default_endpoints);
    }
}
