//! `specperf merge`: the artifact directories of one sharded run (`--shard i/N`) -> the report a
//! single process would have written.
//!
//! ```text
//!  shard dirs ─> summary.json: meta, acceptance ─> one run? every index once? ─┐
//!             ─> records.jsonl ─> times onto the earliest start ─> Aggregate::add ────────────┤
//!             ─> histograms.json ─> Aggregate::add_histograms ─────────────────────────────┴─> Summary ─> report
//! ```
//!
//! Per-request values are recomputed from the records by the same aggregator a run uses, so they
//! and their percentiles are exact; the per-chunk HDR histograms are added bucket by bucket;
//! throughput is over the union of the shards' windows, placed by their wall-clock starts (so the
//! hosts' clocks should agree, as NTP keeps them to about a millisecond). Acceptance is the scraping
//! shard's: the others do not scrape, so the counters are read once.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use serde::de::Error as _;
use serde::{Deserialize, Deserializer};

use crate::metrics::{Aggregate, Histograms, LoadMeta, RunMeta, Summary, SUMMARY_SCHEMA};
use crate::record::{Phase, RequestRecord};
use crate::schedule::{DispatchStats, Shard};
use crate::scrape::ScrapeReport;

/// A name from a closed set, kept as the `&'static str` its writer used. Spelled through an alias
/// because serde's derive takes a literal `&'static str` field for a string borrowed from the input,
/// which would make the struct readable only from `'static` text; [`one_of`] reads it back instead.
pub(crate) type StaticName = &'static str;

/// Reads one of `set` back as its static form (an unknown name is an error, not a fallback).
pub(crate) fn one_of<'de, D: Deserializer<'de>>(
    d: D,
    set: &'static [&'static str],
) -> Result<&'static str, D::Error> {
    let s = String::deserialize(d)?;
    set.iter()
        .copied()
        .find(|n| *n == s)
        .ok_or_else(|| D::Error::unknown_variant(&s, set))
}

/// Writes `histograms.json` (the per-chunk histograms a merge adds up) into `dir`.
pub(crate) fn write_histograms(dir: &Path, h: &Histograms) -> std::io::Result<()> {
    let json = serde_json::to_vec(h).map_err(std::io::Error::from)?;
    std::fs::write(dir.join("histograms.json"), json)
}

/// Why shard directories could not be merged. Exit code: [`MergeError::exit_code`].
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// A shard's file could not be read.
    #[error(
        "cannot read {path}: {source} (pass the --artifact-dir of each finished shard; a shard \
         killed before it wrote summary.json must be rerun)"
    )]
    Read {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// A shard's file does not parse.
    #[error("{path}: {reason}")]
    Parse {
        /// The file (and line).
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The directories hold shards of different shard counts.
    #[error(
        "{dir} is shard {index}/{count} but {first_dir} is shard {first_index}/{first_count}: \
         pass the shard directories of one run only"
    )]
    MixedCounts {
        /// The odd one out.
        dir: String,
        /// Its index.
        index: u32,
        /// Its shard count.
        count: u32,
        /// The first directory.
        first_dir: String,
        /// Its index.
        first_index: u32,
        /// Its shard count.
        first_count: u32,
    },
    /// Two directories claim the same shard.
    #[error(
        "{dir} and {other} are both shard {index}/{count}: pass each shard's directory once (a \
         rerun shard replaces its first attempt)"
    )]
    DuplicateShard {
        /// One directory.
        dir: String,
        /// The other.
        other: String,
        /// The shard index.
        index: u32,
        /// The shard count.
        count: u32,
    },
    /// Shards of the run are missing.
    #[error(
        "shard {missing} of the run is missing (got {got}): pass the artifact directory of every \
         shard, or rerun the missing ones with --shard i/{count}"
    )]
    MissingShards {
        /// The missing shards, `i/N` comma-separated.
        missing: String,
        /// The shards given, `i/N in dir`.
        got: String,
        /// The shard count.
        count: u32,
    },
    /// A directory belongs to another run (different settings or records).
    #[error(
        "{dir} is not a shard of the same run as {first_dir}: {what}; merge the shards of one run \
         only"
    )]
    MixedRun {
        /// The odd one out.
        dir: String,
        /// The first directory.
        first_dir: String,
        /// What differs.
        what: String,
    },
    /// A directory is a merged report, not a shard.
    #[error(
        "{dir} is already a merge of {shards} shards: pass the shard directories it came from"
    )]
    AlreadyMerged {
        /// The directory.
        dir: String,
        /// How many shards it combines.
        shards: u32,
    },
    /// More than one shard scraped the metrics endpoints.
    #[error(
        "{dir} and {other} both scraped the metrics endpoints, so their acceptance windows \
         overlap and cannot be combined: run every shard with the same --metrics-shard"
    )]
    TwoScrapers {
        /// One directory.
        dir: String,
        /// The other.
        other: String,
    },
    /// The output directory is one of the inputs.
    #[error("--output {dir} is one of the shard directories: pick another directory")]
    OutputIsInput {
        /// The directory.
        dir: String,
    },
    /// The merged report could not be written.
    #[error("cannot write {path}: {source} (pass a writable --output)")]
    Write {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The merged report files could not be written.
    #[error("{0} (pass a writable --output)")]
    Report(#[from] crate::report::ReportError),
}

impl MergeError {
    /// 1 when the merged report could not be written, 2 when the inputs are not one run's shards.
    pub fn exit_code(&self) -> i32 {
        match self {
            MergeError::Write { .. } | MergeError::Report(_) => crate::exit::FAILED,
            _ => crate::exit::USAGE,
        }
    }
}

/// A finished merge.
#[derive(Debug)]
pub struct MergeOutcome {
    /// The merged summary (also in `summary.json` under `output`).
    pub summary: Summary,
    /// Where the merged report was written.
    pub output: PathBuf,
}

/// What a shard's `summary.json` contributes; everything else is recomputed from its records.
#[derive(Deserialize)]
struct ShardSummary {
    schema_version: String,
    specperf_version: String,
    meta: RunMeta,
    acceptance: Option<ScrapeReport>,
}

struct ShardDir {
    dir: PathBuf,
    summary: ShardSummary,
}

impl ShardDir {
    fn shard(&self) -> Shard {
        self.summary.meta.load.shard
    }

    fn name(&self) -> String {
        self.dir.display().to_string()
    }
}

/// Merges the shard directories `dirs` into `output` (default: `merged/` beside the first
/// directory): `records.jsonl`, `histograms.json`, the scraping shard's `server_metrics/`, and
/// whatever `report::write_artifacts` writes from the merged summary.
pub fn merge(dirs: &[PathBuf], output: Option<&Path>) -> Result<MergeOutcome, MergeError> {
    let mut shards = dirs
        .iter()
        .map(|d| read_summary(d))
        .collect::<Result<Vec<_>, _>>()?;
    check_one_run(&mut shards)?;
    let scraper = scraping_shard(&shards)?;
    let out = output_dir(dirs, output)?;

    // The common clock: nanoseconds since the earliest shard's start.
    let base = shards
        .iter()
        .map(|s| s.summary.meta.start_unix_s)
        .fold(f64::INFINITY, f64::min);
    let mut agg = Aggregate::new();
    let mut records = Vec::new();
    let mut spans = Vec::with_capacity(shards.len());
    let mut seen = HashSet::new();
    for s in &shards {
        let offset = ((s.summary.meta.start_unix_s - base) * 1e9).round() as u64;
        let first = records.len();
        read_records(s, offset, &mut records, &mut seen)?;
        spans.push(span(&records[first..]));
        let path = s.dir.join("histograms.json");
        let h: Histograms = serde_json::from_slice(&read(&path)?).map_err(|e| parse(&path, e))?;
        agg.add_histograms(&h).map_err(|reason| MergeError::Parse {
            path: path.display().to_string(),
            reason,
        })?;
    }
    // Completion order on the common clock, as one process would have written them.
    records.sort_by_key(|r| (r.end_ns, r.sent_ns, r.id));
    for r in &records {
        agg.add(r);
    }

    let mut summary = agg.summary(merged_meta(&shards, base));
    if let Some(i) = scraper {
        summary.acceptance = shards[i].summary.acceptance.clone();
        if let Some(w) = window_warning(&shards, &spans, i) {
            summary.warnings.push(w);
        }
    }

    write_records(&out, &records)?;
    let werr = |path: &Path| {
        let path = path.display().to_string();
        move |source| MergeError::Write { path, source }
    };
    write_histograms(&out, &agg.histograms()).map_err(werr(&out.join("histograms.json")))?;
    if let Some(i) = scraper {
        copy_pages(
            &shards[i].dir.join("server_metrics"),
            &out.join("server_metrics"),
        )?;
    }
    crate::report::write_artifacts(&out, &summary)?;
    Ok(MergeOutcome {
        summary,
        output: out,
    })
}

fn read(path: &Path) -> Result<Vec<u8>, MergeError> {
    std::fs::read(path).map_err(|source| MergeError::Read {
        path: path.display().to_string(),
        source,
    })
}

fn parse(path: &Path, e: serde_json::Error) -> MergeError {
    MergeError::Parse {
        path: path.display().to_string(),
        reason: e.to_string(),
    }
}

fn read_summary(dir: &Path) -> Result<ShardDir, MergeError> {
    let path = dir.join("summary.json");
    let summary: ShardSummary =
        serde_json::from_slice(&read(&path)?).map_err(|e| parse(&path, e))?;
    if summary.schema_version != SUMMARY_SCHEMA {
        return Err(MergeError::Parse {
            path: path.display().to_string(),
            reason: format!(
                "schema {:?}, this specperf reads {SUMMARY_SCHEMA:?} (merge with the specperf \
                 version that wrote it)",
                summary.schema_version
            ),
        });
    }
    let Shard { index, count } = summary.meta.load.shard;
    if index >= count {
        return Err(MergeError::Parse {
            path: path.display().to_string(),
            reason: format!("shard {index}/{count} is out of range"),
        });
    }
    if let Some(n) = summary.meta.load.shards_merged {
        return Err(MergeError::AlreadyMerged {
            dir: dir.display().to_string(),
            shards: n,
        });
    }
    Ok(ShardDir {
        dir: dir.to_path_buf(),
        summary,
    })
}

/// Settings every shard of one run shares (JSON pointers into `meta`). The request count, start
/// and stop reason legitimately differ per shard.
const SAME_RUN: [&str; 17] = [
    "/model",
    "/endpoint",
    "/streaming",
    "/concurrency",
    "/samples",
    "/input",
    "/load/mode",
    "/load/request_rate",
    "/load/arrival_pattern",
    "/load/arrival_smoothness",
    "/load/concurrency_cap",
    "/load/random_seed",
    "/load/ramp_s",
    "/load/benchmark_duration_s",
    "/load/grace_period_s",
    "/load/schedule_lag_tolerance_ms",
    "/timeouts_s",
];

/// Same shard count, every index exactly once, same settings. Sorts `shards` by index.
fn check_one_run(shards: &mut [ShardDir]) -> Result<(), MergeError> {
    let first = &shards[0];
    let count = first.shard().count;
    for s in shards.iter() {
        if s.shard().count != count {
            return Err(MergeError::MixedCounts {
                dir: s.name(),
                index: s.shard().index,
                count: s.shard().count,
                first_dir: first.name(),
                first_index: first.shard().index,
                first_count: count,
            });
        }
    }
    let first_meta = serde_json::to_value(&first.summary.meta).unwrap_or_default();
    for s in shards.iter().skip(1) {
        let mixed = |what: String| MergeError::MixedRun {
            dir: s.name(),
            first_dir: first.name(),
            what,
        };
        if s.summary.specperf_version != first.summary.specperf_version {
            return Err(mixed(format!(
                "specperf {} wrote it and {} the other",
                s.summary.specperf_version, first.summary.specperf_version
            )));
        }
        // Each shard replaying against its own embedded simulator has its own port.
        let embedded = |m: &RunMeta| m.url.starts_with("embedded-simulator");
        if s.summary.meta.url != first.summary.meta.url
            && !(embedded(&s.summary.meta) && embedded(&first.summary.meta))
        {
            return Err(mixed(format!(
                "url is {} there and {} in the other",
                s.summary.meta.url, first.summary.meta.url
            )));
        }
        let meta = serde_json::to_value(&s.summary.meta).unwrap_or_default();
        for p in SAME_RUN {
            let (a, b) = (meta.pointer(p), first_meta.pointer(p));
            if a != b {
                let show =
                    |v: Option<&serde_json::Value>| v.map_or("absent".into(), |v| v.to_string());
                return Err(mixed(format!(
                    "{} is {} there and {} in the other",
                    p[1..].replace('/', "."),
                    show(a),
                    show(b)
                )));
            }
        }
    }
    shards.sort_by_key(|s| s.shard().index);
    for w in shards.windows(2) {
        if w[0].shard().index == w[1].shard().index {
            return Err(MergeError::DuplicateShard {
                dir: w[1].name(),
                other: w[0].name(),
                index: w[0].shard().index,
                count,
            });
        }
    }
    let have: HashSet<u32> = shards.iter().map(|s| s.shard().index).collect();
    let missing: Vec<String> = (0..count)
        .filter(|i| !have.contains(i))
        .map(|i| format!("{i}/{count}"))
        .collect();
    if !missing.is_empty() {
        let got: Vec<String> = shards
            .iter()
            .map(|s| format!("{}/{count} in {}", s.shard().index, s.name()))
            .collect();
        return Err(MergeError::MissingShards {
            missing: missing.join(", "),
            got: got.join(", "),
            count,
        });
    }
    Ok(())
}

/// The index (into the sorted shards) of the one shard that scraped, if any did.
fn scraping_shard(shards: &[ShardDir]) -> Result<Option<usize>, MergeError> {
    let mut found: Option<usize> = None;
    for (i, s) in shards.iter().enumerate() {
        if s.summary.acceptance.is_none() {
            continue;
        }
        if let Some(j) = found {
            return Err(MergeError::TwoScrapers {
                dir: s.name(),
                other: shards[j].name(),
            });
        }
        found = Some(i);
    }
    Ok(found)
}

/// `--output`, else `merged/` beside the first directory; created, and never one of the inputs.
fn output_dir(dirs: &[PathBuf], output: Option<&Path>) -> Result<PathBuf, MergeError> {
    let out = match output {
        Some(o) => o.to_path_buf(),
        None => dirs[0]
            .parent()
            .unwrap_or_else(|| Path::new(""))
            .join("merged"),
    };
    let werr = |source| MergeError::Write {
        path: out.display().to_string(),
        source,
    };
    std::fs::create_dir_all(&out).map_err(werr)?;
    let canon = out.canonicalize().map_err(werr)?;
    if dirs
        .iter()
        .any(|d| d.canonicalize().is_ok_and(|d| d == canon))
    {
        return Err(MergeError::OutputIsInput {
            dir: out.display().to_string(),
        });
    }
    Ok(out)
}

/// Appends the shard's records, moved `offset` ns later, checking each belongs to this shard
/// and to no other directory already read.
fn read_records(
    s: &ShardDir,
    offset: u64,
    out: &mut Vec<RequestRecord>,
    seen: &mut HashSet<(bool, u64)>,
) -> Result<(), MergeError> {
    let path = s.dir.join("records.jsonl");
    let file = std::fs::File::open(&path).map_err(|source| MergeError::Read {
        path: path.display().to_string(),
        source,
    })?;
    let Shard { index, count } = s.shard();
    for (n, line) in BufReader::new(file).lines().enumerate() {
        let at = || format!("{} line {}", path.display(), n + 1);
        let line = line.map_err(|source| MergeError::Read { path: at(), source })?;
        if line.trim().is_empty() {
            continue;
        }
        let mut r: RequestRecord = serde_json::from_str(&line).map_err(|e| MergeError::Parse {
            path: at(),
            reason: e.to_string(),
        })?;
        // The dispatcher gives shard i the global ids ≡ i (mod N), per phase.
        if r.id % u64::from(count) != u64::from(index)
            || !seen.insert((r.phase == Phase::Warmup, r.id))
        {
            return Err(MergeError::MixedRun {
                dir: s.name(),
                first_dir: "the other directories".into(),
                what: format!(
                    "{}: request id {} is not one shard {index}/{count} dispatches, or appears twice",
                    at(),
                    r.id
                ),
            });
        }
        shift(&mut r, offset);
        out.push(r);
    }
    Ok(())
}

fn shift(r: &mut RequestRecord, by: u64) {
    for t in [&mut r.intended_ns, &mut r.sent_ns, &mut r.end_ns] {
        *t += by;
    }
    for t in [
        &mut r.headers_ns,
        &mut r.first_token_ns,
        &mut r.second_token_ns,
        &mut r.last_token_ns,
        &mut r.first_output_token_ns,
    ]
    .into_iter()
    .flatten()
    {
        *t += by;
    }
}

/// First send and last end of a shard's profiling records, on the common clock.
fn span(records: &[RequestRecord]) -> Option<(u64, u64)> {
    records
        .iter()
        .filter(|r| r.phase == Phase::Profiling)
        .fold(None, |acc, r| match acc {
            None => Some((r.sent_ns, r.end_ns)),
            Some((a, b)) => Some((a.min(r.sent_ns), b.max(r.end_ns))),
        })
}

/// The scraper's counters cover its own window only: say so when another shard's requests ran
/// well outside it (their tokens are then partly missing from the acceptance length).
fn window_warning(
    shards: &[ShardDir],
    spans: &[Option<(u64, u64)>],
    scraper: usize,
) -> Option<String> {
    const SLACK_NS: u64 = 1_000_000_000;
    let (a, b) = spans[scraper]?;
    let outside: Vec<String> = spans
        .iter()
        .enumerate()
        .filter_map(|(i, s)| {
            let (x, y) = (*s)?;
            let out = a.saturating_sub(x).max(y.saturating_sub(b));
            (i != scraper && out > SLACK_NS).then(|| {
                format!(
                    "shard {} by {:.1} s",
                    shards[i].shard().index,
                    out as f64 / 1e9
                )
            })
        })
        .collect();
    (!outside.is_empty()).then(|| {
        format!(
            "acceptance is shard {}'s scrape window, and other shards ran outside it ({}): their \
             tokens are partly missing from the acceptance length; start the shards together",
            shards[scraper].shard().index,
            outside.join(", ")
        )
    })
}

fn add_dispatch(a: DispatchStats, b: DispatchStats) -> DispatchStats {
    DispatchStats {
        issued: a.issued + b.issued,
        late: a.late + b.late,
        max_lag_ms: a.max_lag_ms.max(b.max_lag_ms),
        not_issued: a.not_issued.saturating_add(b.not_issued),
    }
}

/// The meta one process would have written: the shared settings, counts summed over shards.
fn merged_meta(shards: &[ShardDir], base: f64) -> RunMeta {
    let first = &shards[0].summary.meta;
    let metas = || shards.iter().map(|s| &s.summary.meta);
    let dispatch = metas()
        .map(|m| m.load.dispatch)
        .fold(DispatchStats::default(), add_dispatch);
    let warmup = metas().filter_map(|m| m.load.warmup).reduce(add_dispatch);
    RunMeta {
        request_count: metas().map(|m| m.request_count).sum(),
        dataset_reused: dispatch.issued > first.samples as u64,
        start_unix_s: base,
        stopped_by: metas().find_map(|m| m.stopped_by.clone()),
        load: LoadMeta {
            shard: Shard::SINGLE,
            shards_merged: Some(shards.len() as u32),
            dispatch,
            warmup,
            ..first.load.clone()
        },
        ..first.clone()
    }
}

fn write_records(out: &Path, records: &[RequestRecord]) -> Result<(), MergeError> {
    let path = out.join("records.jsonl");
    let werr = |source| MergeError::Write {
        path: path.display().to_string(),
        source,
    };
    let mut w = BufWriter::new(std::fs::File::create(&path).map_err(werr)?);
    for r in records {
        serde_json::to_writer(&mut w, r)
            .map_err(std::io::Error::from)
            .map_err(werr)?;
        w.write_all(b"\n").map_err(werr)?;
    }
    w.flush().map_err(werr)
}

/// Copies the scraping shard's raw metrics pages, which back its acceptance numbers.
fn copy_pages(from: &Path, to: &Path) -> Result<(), MergeError> {
    let Ok(entries) = std::fs::read_dir(from) else {
        return Ok(());
    };
    let werr = |path: &Path| {
        let path = path.display().to_string();
        move |source| MergeError::Write { path, source }
    };
    std::fs::create_dir_all(to).map_err(werr(to))?;
    for e in entries.flatten() {
        if e.file_type().is_ok_and(|t| t.is_file()) {
            let dest = to.join(e.file_name());
            std::fs::copy(e.path(), &dest).map_err(werr(&dest))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{ChunkGap, Outcome, TokenSource};
    use std::collections::BTreeMap;

    fn meta(index: u32, count: u32, start_unix_s: f64) -> RunMeta {
        RunMeta {
            url: "http://127.0.0.1:8000".into(),
            model: "m".into(),
            endpoint: "/v1/chat/completions".into(),
            endpoint_type: "chat",
            osl: Some(8),
            cli_command: None,
            streaming: true,
            concurrency: 4,
            request_count: 2,
            samples: 10,
            dataset_reused: false,
            input: "bundled".into(),
            start_unix_s,
            stopped_by: None,
            load: LoadMeta {
                grace_period_s: Some(30.0),
                shard: Shard { index, count },
                dispatch: DispatchStats {
                    issued: 1,
                    ..DispatchStats::default()
                },
                ..LoadMeta::default()
            },
            timeouts_s: BTreeMap::from([("connect", 30.0), ("request", 600.0)]),
        }
    }

    /// A successful 100 ms request with three 10 ms gaps of 2 tokens each.
    fn record(id: u64, sent_ns: u64) -> RequestRecord {
        let mut r = RequestRecord::started(id, id as usize, sent_ns, sent_ns);
        r.outcome = Outcome::Success;
        r.first_token_ns = Some(sent_ns + 70_000_000);
        r.second_token_ns = Some(sent_ns + 80_000_000);
        r.last_token_ns = Some(sent_ns + 100_000_000);
        r.end_ns = sent_ns + 100_000_000;
        r.prompt_tokens = Some(5);
        r.completion_tokens = Some(7);
        r.token_source = TokenSource::UsageFinal;
        r.chunk_gaps = vec![
            ChunkGap {
                gap_ns: 10_000_000 + id,
                tokens: 2
            };
            3
        ];
        r
    }

    /// What a shard run leaves behind: records, histograms, summary.
    fn write_shard(dir: &Path, meta: RunMeta, records: &[RequestRecord]) {
        std::fs::create_dir_all(dir).unwrap();
        let mut agg = Aggregate::new();
        let mut lines = String::new();
        for r in records {
            agg.add(r);
            lines += &serde_json::to_string(r).unwrap();
            lines.push('\n');
        }
        std::fs::write(dir.join("records.jsonl"), lines).unwrap();
        write_histograms(dir, &agg.histograms()).unwrap();
        crate::report::write_artifacts(dir, &agg.summary(meta)).unwrap();
    }

    #[test]
    fn merge_moves_records_onto_the_earliest_start_and_adds_histograms() {
        let t = tempfile::tempdir().unwrap();
        let (a, b) = (t.path().join("s0"), t.path().join("s1"));
        // Shard 1 started 0.5 s after shard 0; its request 1 was sent 10 ms into its own run.
        write_shard(&a, meta(0, 2, 1000.0), &[record(0, 0), record(2, 0)]);
        write_shard(&b, meta(1, 2, 1000.5), &[record(1, 10_000_000)]);
        let m = merge(&[b.clone(), a.clone()], None).unwrap();
        assert_eq!(m.output, t.path().join("merged"));
        let s = &m.summary;
        assert_eq!((s.counts.total, s.counts.success), (3, 3));
        assert_eq!((s.total_prompt_tokens, s.total_completion_tokens), (15, 21));
        // Union window: 0 to 0.51 + 0.1 s.
        assert!((s.duration_s - 0.61).abs() < 1e-9, "{}", s.duration_s);
        assert_eq!(s.metrics["time_to_first_token_ms"].count, 3);
        assert_eq!(s.metrics["inter_chunk_latency_ms"].count, 9);
        assert_eq!(s.metrics["inter_token_latency_token_weighted_ms"].count, 18);
        assert_eq!(s.meta.load.shard, Shard::SINGLE);
        assert_eq!(s.meta.load.shards_merged, Some(2));
        assert_eq!((s.meta.request_count, s.meta.load.dispatch.issued), (4, 2));
        assert_eq!(s.meta.start_unix_s, 1000.0);
        let lines = std::fs::read_to_string(m.output.join("records.jsonl")).unwrap();
        let sent: Vec<(u64, u64)> = lines
            .lines()
            .map(|l| serde_json::from_str::<RequestRecord>(l).unwrap())
            .map(|r| (r.id, r.sent_ns))
            .collect();
        assert_eq!(sent, [(0, 0), (2, 0), (1, 510_000_000)]);
        assert!(m.output.join("summary.json").is_file() && m.output.join("console.txt").is_file());

        // The merged histograms are the union of the shards', bucket for bucket.
        let mut union = Aggregate::new();
        for r in [record(0, 0), record(2, 0), record(1, 0)] {
            union.add(&r);
        }
        let merged: Histograms =
            serde_json::from_slice(&std::fs::read(m.output.join("histograms.json")).unwrap())
                .unwrap();
        assert_eq!(merged, union.histograms());

        // A merged report is not a shard.
        let e = merge(
            std::slice::from_ref(&m.output),
            Some(&t.path().join("again")),
        )
        .unwrap_err();
        assert!(
            matches!(e, MergeError::AlreadyMerged { shards: 2, .. }),
            "{e}"
        );
        let e = merge(&[a.clone(), b.clone()], Some(&a)).unwrap_err();
        assert!(matches!(e, MergeError::OutputIsInput { .. }), "{e}");
    }

    #[test]
    fn merge_rejects_a_missing_shard_or_mixed_runs() {
        let t = tempfile::tempdir().unwrap();
        let dir = |n: &str| t.path().join(n);
        write_shard(&dir("a0"), meta(0, 3, 1.0), &[record(0, 0)]);
        write_shard(&dir("a2"), meta(2, 3, 1.0), &[record(2, 0)]);
        let e = merge(&[dir("a0"), dir("a2")], None).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, MergeError::MissingShards { .. }), "{msg}");
        assert!(
            msg.contains("shard 1/3 of the run is missing") && msg.contains("a2"),
            "{msg}"
        );
        assert_eq!(e.exit_code(), crate::exit::USAGE);

        write_shard(&dir("b1"), meta(1, 2, 1.0), &[record(1, 0)]);
        let e = merge(&[dir("a0"), dir("b1")], None).unwrap_err();
        assert!(matches!(e, MergeError::MixedCounts { .. }), "{e}");
        assert!(e.to_string().contains("is shard 1/2 but"), "{e}");

        let e = merge(&[dir("a0"), dir("a0"), dir("a2")], None).unwrap_err();
        assert!(
            matches!(e, MergeError::DuplicateShard { index: 0, .. }),
            "{e}"
        );

        let mut other = meta(1, 3, 1.0);
        other.load.random_seed = 7;
        write_shard(&dir("c1"), other, &[record(1, 0)]);
        let e = merge(&[dir("a0"), dir("c1"), dir("a2")], None).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, MergeError::MixedRun { .. }), "{msg}");
        assert!(
            msg.contains("c1") && msg.contains("load.random_seed is 7 there and 0"),
            "{msg}"
        );

        // Right settings, but records another shard dispatched.
        write_shard(&dir("d1"), meta(1, 3, 1.0), &[record(2, 0)]);
        let e = merge(&[dir("a0"), dir("d1"), dir("a2")], None).unwrap_err();
        assert!(
            e.to_string().contains("request id 2 is not one shard 1/3"),
            "{e}"
        );

        // A shard that never finished has no summary.json.
        std::fs::create_dir_all(dir("e1")).unwrap();
        let e = merge(&[dir("a0"), dir("e1"), dir("a2")], None).unwrap_err();
        assert!(matches!(e, MergeError::Read { .. }), "{e}");
        assert!(e.to_string().contains("summary.json"), "{e}");
    }
}
