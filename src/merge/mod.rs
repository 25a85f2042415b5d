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

mod output;
mod shards;
#[cfg(test)]
mod tests;

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use output::{copy_pages, merged_meta, output_dir, window_warning, write_records};
use shards::{check_one_run, parse, read, read_records, read_summary, scraping_shard, span};

use crate::metrics::{Aggregate, Histograms, Summary};

/// Why shard directories could not be merged. Exit code: [`crate::ExitStatus`].
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
    /// Whole runs (shard 0/1 each) given to be merged as if they were shards.
    #[error(
        "{dirs} are whole runs, not shards of one run: merge combines the artifact directories \
         of `replay --shard i/N` (one per shard); compare separate runs through their \
         summary.json instead"
    )]
    NotShards {
        /// The directories, comma-separated.
        dirs: String,
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

/// A finished merge.
#[derive(Debug)]
pub struct MergeOutcome {
    /// The merged summary (also in `summary.json` under `output`).
    pub summary: Summary,
    /// Where the merged report was written.
    pub output: PathBuf,
}

/// Merges the shard directories `dirs` into `output` (default: `merged/` beside the first
/// directory): `records.jsonl`, `histograms.json`, the scraping shard's `server_metrics/` and
/// `server_metrics_export.{json,csv}`, and whatever else `report::write_artifacts` writes from
/// the merged summary.
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
        agg.add_histograms(&h).map_err(|e| MergeError::Parse {
            path: path.display().to_string(),
            reason: e.to_string(),
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
    // The shards' group field is not in their summaries' records: the groups stay, unnamed.
    summary.settle_spec(None);

    write_records(&out, &records)?;
    let werr = |path: &Path| {
        let path = path.display().to_string();
        move |source| MergeError::Write { path, source }
    };
    crate::report::write_histograms(&out, &agg.histograms())
        .map_err(werr(&out.join("histograms.json")))?;
    if let Some(i) = scraper {
        copy_pages(
            &shards[i].dir.join("server_metrics"),
            &out.join("server_metrics"),
        )?;
    }
    crate::report::write_artifacts(&out, &summary)?;
    if let Some(i) = scraper {
        // The scraping shard's collection of every family is in its own export only (summaries
        // do not carry it): that export, not one rebuilt without families, is the run's.
        for name in ["server_metrics_export.json", "server_metrics_export.csv"] {
            let from = shards[i].dir.join(name);
            if from.is_file() {
                let to = out.join(name);
                std::fs::copy(&from, &to).map_err(werr(&to))?;
            }
        }
    }
    Ok(MergeOutcome {
        summary,
        output: out,
    })
}
