//! Reading the shard directories back: each shard's summary (one run? every index once?), its
//! records moved onto the common clock, and which shard scraped the counters.

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::json;

use super::MergeError;
use crate::metrics::{RunMeta, SUMMARY_SCHEMA};
use crate::record::{Phase, RequestRecord};
use crate::schedule::Shard;
use crate::scrape::ScrapeReport;

/// What a shard's `summary.json` contributes; everything else is recomputed from its records.
#[derive(Deserialize)]
pub(super) struct ShardSummary {
    pub(super) schema_version: String,
    pub(super) specperf_version: String,
    pub(super) meta: RunMeta,
    pub(super) acceptance: Option<ScrapeReport>,
}

pub(super) struct ShardDir {
    pub(super) dir: PathBuf,
    pub(super) summary: ShardSummary,
}

impl ShardDir {
    pub(super) fn shard(&self) -> Shard {
        self.summary.meta.load.shard
    }

    pub(super) fn name(&self) -> String {
        self.dir.display().to_string()
    }
}

pub(super) fn read(path: &Path) -> Result<Vec<u8>, MergeError> {
    std::fs::read(path).map_err(|source| MergeError::Read {
        path: path.display().to_string(),
        source,
    })
}

pub(super) fn parse(path: &Path, e: serde_json::Error) -> MergeError {
    MergeError::Parse {
        path: path.display().to_string(),
        reason: e.to_string(),
    }
}

pub(super) fn read_summary(dir: &Path) -> Result<ShardDir, MergeError> {
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

/// A setting of `meta`, as the error names and shows it.
type Setting = (&'static str, fn(&RunMeta) -> serde_json::Value);

/// Settings every shard of one run shares. The request count, start and stop reason
/// legitimately differ per shard.
pub(super) const SAME_RUN: [Setting; 17] = [
    ("model", |m| json!(m.model)),
    ("endpoint", |m| json!(m.endpoint)),
    ("streaming", |m| json!(m.streaming)),
    ("concurrency", |m| json!(m.concurrency)),
    ("samples", |m| json!(m.samples)),
    ("input", |m| json!(m.input)),
    ("load.mode", |m| json!(m.load.mode)),
    ("load.request_rate", |m| json!(m.load.request_rate)),
    ("load.arrival_pattern", |m| json!(m.load.arrival_pattern)),
    ("load.arrival_smoothness", |m| {
        json!(m.load.arrival_smoothness)
    }),
    ("load.concurrency_cap", |m| json!(m.load.concurrency_cap)),
    ("load.random_seed", |m| json!(m.load.random_seed)),
    ("load.ramp_s", |m| json!(m.load.ramp_s)),
    ("load.benchmark_duration_s", |m| {
        json!(m.load.benchmark_duration_s)
    }),
    ("load.grace_period_s", |m| json!(m.load.grace_period_s)),
    ("load.schedule_lag_tolerance_ms", |m| {
        json!(m.load.schedule_lag_tolerance_ms)
    }),
    ("timeouts_s", |m| json!(m.timeouts_s)),
];

/// Same shard count, every index exactly once, same settings. Sorts `shards` by index.
pub(super) fn check_one_run(shards: &mut [ShardDir]) -> Result<(), MergeError> {
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
    if count == 1 && shards.len() > 1 {
        let dirs: Vec<String> = shards.iter().map(ShardDir::name).collect();
        return Err(MergeError::NotShards {
            dirs: dirs.join(", "),
        });
    }
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
        for (name, get) in SAME_RUN {
            let (a, b) = (get(&s.summary.meta), get(&first.summary.meta));
            if a != b {
                return Err(mixed(format!("{name} is {a} there and {b} in the other")));
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
pub(super) fn scraping_shard(shards: &[ShardDir]) -> Result<Option<usize>, MergeError> {
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

/// Appends the shard's records, moved `offset` ns later, checking each belongs to this shard
/// and to no other directory already read.
pub(super) fn read_records(
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

pub(super) fn shift(r: &mut RequestRecord, by: u64) {
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
pub(super) fn span(records: &[RequestRecord]) -> Option<(u64, u64)> {
    records
        .iter()
        .filter(|r| r.phase == Phase::Profiling)
        .fold(None, |acc, r| match acc {
            None => Some((r.sent_ns, r.end_ns)),
            Some((a, b)) => Some((a.min(r.sent_ns), b.max(r.end_ns))),
        })
}
