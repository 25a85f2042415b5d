//! The Hugging Face hub cache, read offline: `--public-dataset ALIAS` -> the `traces.jsonl` the
//! InferenceX launcher pre-downloaded (`hf download --repo-type dataset <repo>`), and a
//! `--tokenizer` hub id -> the model snapshot directory. Nothing is downloaded: a missing entry
//! is an error naming the path looked at and the `hf download` command that fills it.
//!
//! Layout (`huggingface_hub`'s): `<cache>/<datasets|models>--<org>--<name>/snapshots/<rev>/`,
//! with `refs/main` holding the revision last downloaded. InferenceX's aggregator reads the same
//! layout for `tokens.output_expected`, so the traces stay where it looks.

use std::path::{Path, PathBuf};

use super::{err, ConfigError, Provenance};

/// `--public-dataset` aliases (spec §1.4) and their Hugging Face dataset repos, as AIPerf
/// 0.13's plugin table resolves them (the rolling `..._with_subagents` aliases point at the
/// 062126 corpus there; InferenceX's launcher pre-downloads 061526 for them, spec §6.5).
pub(crate) const PUBLIC_DATASETS: [(&str, &str); 14] = [
    (
        "semianalysis_cc_traces_weka_062126",
        "semianalysisai/cc-traces-weka-062126",
    ),
    (
        "semianalysis_cc_traces_weka_062126_256k",
        "semianalysisai/cc-traces-weka-062126-256k",
    ),
    (
        "semianalysis_cc_traces_weka_061526",
        "semianalysisai/cc-traces-weka-061526",
    ),
    (
        "semianalysis_cc_traces_weka_061526_256k",
        "semianalysisai/cc-traces-weka-061526-256k",
    ),
    (
        "semianalysis_cc_traces_weka_061326",
        "semianalysisai/cc-traces-weka-061326",
    ),
    (
        "semianalysis_cc_traces_weka_061326_256k",
        "semianalysisai/cc-traces-weka-061326-256k",
    ),
    (
        "semianalysis_cc_traces_weka_with_subagents_060826",
        "semianalysisai/cc-traces-weka-with-subagents-060826",
    ),
    (
        "semianalysis_cc_traces_weka_with_subagents_060826_256k",
        "semianalysisai/cc-traces-weka-with-subagents-060826-256k",
    ),
    (
        "semianalysis_cc_traces_weka_with_subagents_060526",
        "semianalysisai/cc-traces-weka-with-subagents-060526",
    ),
    (
        "semianalysis_cc_traces_weka_with_subagents_060526_256k",
        "semianalysisai/cc-traces-weka-with-subagents-060526-256k",
    ),
    (
        "semianalysis_cc_traces_weka_with_subagents_060226",
        "semianalysisai/cc-traces-weka-with-subagents-060226",
    ),
    (
        "semianalysis_cc_traces_weka_with_subagents_060226_256k",
        "semianalysisai/cc-traces-weka-with-subagents-060226-256k",
    ),
    (
        "semianalysis_cc_traces_weka_with_subagents",
        "semianalysisai/cc-traces-weka-062126",
    ),
    (
        "semianalysis_cc_traces_weka_with_subagents_256k",
        "semianalysisai/cc-traces-weka-062126-256k",
    ),
];

/// The hub cache: `$HF_HUB_CACHE`, else `$HF_HOME/hub`, else `~/.cache/huggingface/hub`.
pub(crate) fn hub_cache(env: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    let set = |k: &str| env(k).filter(|v| !v.is_empty());
    if let Some(c) = set("HF_HUB_CACHE") {
        return PathBuf::from(c);
    }
    if let Some(h) = set("HF_HOME") {
        return Path::new(&h).join("hub");
    }
    let home = set("HOME").unwrap_or_else(|| "~".to_owned());
    Path::new(&home).join(".cache/huggingface/hub")
}

/// Which half of the cache a repo lives in.
#[derive(Clone, Copy)]
enum RepoKind {
    Dataset,
    Model,
}

impl RepoKind {
    fn dir_prefix(self) -> &'static str {
        match self {
            RepoKind::Dataset => "datasets",
            RepoKind::Model => "models",
        }
    }

    fn download(self, repo: &str) -> String {
        match self {
            RepoKind::Dataset => format!("hf download --repo-type dataset {repo}"),
            RepoKind::Model => format!("hf download {repo}"),
        }
    }
}

/// The snapshot directory of `repo` (`org/name`): the revision in `refs/main` when present,
/// else the most recently modified snapshot.
fn snapshot(cache: &Path, kind: RepoKind, repo: &str) -> Result<PathBuf, ConfigError> {
    let repo_dir = cache.join(format!(
        "{}--{}",
        kind.dir_prefix(),
        repo.replace('/', "--")
    ));
    let snapshots = repo_dir.join("snapshots");
    let missing = |looked: &Path| {
        ConfigError(format!(
            "{repo} is not in the Hugging Face hub cache (looked for {}); download it first \
             with `{}` (set HF_HUB_CACHE or HF_HOME if the cache is elsewhere; nothing is \
             downloaded by specperf)",
            looked.display(),
            kind.download(repo)
        ))
    };
    if let Ok(rev) = std::fs::read_to_string(repo_dir.join("refs/main")) {
        let dir = snapshots.join(rev.trim());
        return if dir.is_dir() {
            Ok(dir)
        } else {
            Err(missing(&dir))
        };
    }
    let newest = std::fs::read_dir(&snapshots)
        .map_err(|_| missing(&snapshots))?
        .filter_map(Result::ok)
        .filter(|e| e.path().is_dir())
        .max_by_key(|e| e.metadata().and_then(|m| m.modified()).ok());
    newest.map(|e| e.path()).ok_or_else(|| missing(&snapshots))
}

/// `--public-dataset ALIAS` -> its `traces.jsonl` in the hub cache, and the provenance
/// `metadata.dataset` records.
pub(crate) fn public_dataset(
    alias: &str,
    num_dataset_entries: Option<usize>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(PathBuf, Provenance), ConfigError> {
    let Some((_, repo)) = PUBLIC_DATASETS.iter().find(|(a, _)| *a == alias) else {
        let known: Vec<&str> = PUBLIC_DATASETS.iter().map(|(a, _)| *a).collect();
        return err(format!(
            "--public-dataset {alias}: not an AgentX trace corpus; known aliases: {} (other \
             AIPerf public datasets are not replayed by `specperf profile`; give a file to \
             `specperf replay --input-file`)",
            known.join(", ")
        ));
    };
    let dir = snapshot(&hub_cache(env), RepoKind::Dataset, repo)?;
    let traces = dir.join("traces.jsonl");
    if !traces.is_file() {
        return err(format!(
            "--public-dataset {alias}: {} is missing (the snapshot is incomplete); download \
             it again with `{}`",
            traces.display(),
            RepoKind::Dataset.download(repo)
        ));
    }
    let provenance = Provenance {
        source_type: "public_dataset".to_owned(),
        loader: Some(alias.to_owned()),
        hf_dataset_name: Some((*repo).to_owned()),
        hf_split: Some("train".to_owned()),
        num_dataset_entries,
    };
    Ok((traces, provenance))
}

/// `--tokenizer`: an existing path as given, else a hub id (`org/name`) resolved to its model
/// snapshot directory in the hub cache.
pub(crate) fn tokenizer(
    given: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<PathBuf, ConfigError> {
    if given.exists() {
        return Ok(given.to_path_buf());
    }
    let id = given.to_string_lossy();
    let parts: Vec<&str> = id.split('/').collect();
    let hub_id = parts.len() == 2
        && parts.iter().all(|p| {
            !p.is_empty()
                && !p.starts_with('.')
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        });
    if !hub_id {
        return err(format!(
            "--tokenizer {id}: no such file or directory, and not a Hugging Face model id \
             (org/name); pass a local tokenizer.json, a model directory, or a model id whose \
             snapshot is in the hub cache"
        ));
    }
    snapshot(&hub_cache(env), RepoKind::Model, &id)
        .map_err(|e| ConfigError(format!("--tokenizer {id}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_with(pairs: Vec<(&'static str, String)>) -> impl Fn(&str) -> Option<String> {
        move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone())
    }

    #[test]
    fn the_hub_cache_follows_hf_hub_cache_then_hf_home_then_home() {
        let all = env_with(vec![
            ("HF_HUB_CACHE", "/c".into()),
            ("HF_HOME", "/h".into()),
            ("HOME", "/u".into()),
        ]);
        assert_eq!(hub_cache(&all), PathBuf::from("/c"));
        let home = env_with(vec![("HF_HOME", "/h".into()), ("HOME", "/u".into())]);
        assert_eq!(hub_cache(&home), PathBuf::from("/h/hub"));
        let user = env_with(vec![("HF_HUB_CACHE", String::new()), ("HOME", "/u".into())]);
        assert_eq!(hub_cache(&user), PathBuf::from("/u/.cache/huggingface/hub"));
    }

    #[test]
    fn every_alias_resolves_through_refs_main_or_the_newest_snapshot() {
        assert_eq!(PUBLIC_DATASETS.len(), 14);
        let tmp = tempfile::tempdir().unwrap();
        let cache = tmp.path().to_path_buf();
        let env = env_with(vec![("HF_HUB_CACHE", cache.display().to_string())]);
        let repo = cache.join("datasets--semianalysisai--cc-traces-weka-062126");
        for rev in ["aaa", "bbb"] {
            std::fs::create_dir_all(repo.join("snapshots").join(rev)).unwrap();
            std::fs::write(repo.join("snapshots").join(rev).join("traces.jsonl"), "").unwrap();
        }
        std::fs::create_dir_all(repo.join("refs")).unwrap();
        std::fs::write(repo.join("refs/main"), "aaa\n").unwrap();
        let (path, prov) =
            public_dataset("semianalysis_cc_traces_weka_062126", Some(393), &env).unwrap();
        assert_eq!(path, repo.join("snapshots/aaa/traces.jsonl"));
        assert_eq!(
            prov,
            Provenance {
                source_type: "public_dataset".into(),
                loader: Some("semianalysis_cc_traces_weka_062126".into()),
                hf_dataset_name: Some("semianalysisai/cc-traces-weka-062126".into()),
                hf_split: Some("train".into()),
                num_dataset_entries: Some(393),
            }
        );
        // The rolling alias reads the same repo (AIPerf 0.13's table).
        let (rolling, _) =
            public_dataset("semianalysis_cc_traces_weka_with_subagents", None, &env).unwrap();
        assert_eq!(rolling, path);
        // Without refs/main: the newest snapshot.
        std::fs::remove_file(repo.join("refs/main")).unwrap();
        let later = std::time::SystemTime::now() + std::time::Duration::from_secs(60);
        std::fs::File::open(repo.join("snapshots/bbb"))
            .unwrap()
            .set_modified(later)
            .unwrap();
        let (newest, _) = public_dataset("semianalysis_cc_traces_weka_062126", None, &env).unwrap();
        assert_eq!(newest, repo.join("snapshots/bbb/traces.jsonl"));
    }

    #[test]
    fn a_missing_corpus_names_the_path_and_the_download_command() {
        let tmp = tempfile::tempdir().unwrap();
        let env = env_with(vec![("HF_HUB_CACHE", tmp.path().display().to_string())]);
        let e = public_dataset("semianalysis_cc_traces_weka_062126_256k", None, &env)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("datasets--semianalysisai--cc-traces-weka-062126-256k")
                && e.contains(
                    "hf download --repo-type dataset semianalysisai/cc-traces-weka-062126-256k"
                ),
            "{e}"
        );
        let e = public_dataset("sharegpt", None, &env)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--public-dataset sharegpt") && e.contains("known aliases"),
            "{e}"
        );
    }

    #[test]
    fn a_tokenizer_is_a_path_or_a_hub_id_from_the_cache() {
        let tmp = tempfile::tempdir().unwrap();
        let env = env_with(vec![("HF_HUB_CACHE", tmp.path().display().to_string())]);
        assert_eq!(tokenizer(tmp.path(), &env).unwrap(), tmp.path());
        let snap = tmp.path().join("models--org--model/snapshots/r1");
        std::fs::create_dir_all(&snap).unwrap();
        assert_eq!(tokenizer(Path::new("org/model"), &env).unwrap(), snap);
        let e = tokenizer(Path::new("org/other"), &env)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("models--org--other") && e.contains("hf download org/other"),
            "{e}"
        );
        let e = tokenizer(Path::new("/no/such/tok.json"), &env)
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a Hugging Face model id"), "{e}");
    }
}
