//! Writing the merged run: the output directory, the merged [`RunMeta`], the records in one
//! process's order, the scraping shard's raw pages, and the window warning.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use super::shards::ShardDir;
use super::MergeError;
use crate::metrics::{LoadMeta, RunMeta};
use crate::record::RequestRecord;
use crate::schedule::{DispatchStats, Shard};

/// `--output`, else `merged/` beside the first directory; created, and never one of the inputs.
pub(super) fn output_dir(dirs: &[PathBuf], output: Option<&Path>) -> Result<PathBuf, MergeError> {
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

/// The scraper's counters cover its own window only: say so when another shard's requests ran
/// well outside it (their tokens are then partly missing from the acceptance length).
pub(super) fn window_warning(
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

pub(super) fn add_dispatch(a: DispatchStats, b: DispatchStats) -> DispatchStats {
    DispatchStats {
        issued: a.issued + b.issued,
        late: a.late + b.late,
        max_lag_ms: a.max_lag_ms.max(b.max_lag_ms),
        not_issued: a.not_issued.saturating_add(b.not_issued),
    }
}

/// The meta one process would have written: the shared settings, counts summed over shards.
pub(super) fn merged_meta(shards: &[ShardDir], base: f64) -> RunMeta {
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
        stopped_by: metas().find_map(|m| m.stopped_by),
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

pub(super) fn write_records(out: &Path, records: &[RequestRecord]) -> Result<(), MergeError> {
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
pub(super) fn copy_pages(from: &Path, to: &Path) -> Result<(), MergeError> {
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
