//! The source tree keeps its one-way arrows: no import circle between the crate's top-level
//! modules, and the replay pipeline's stages import only the stages before them. Read from the
//! source text (every `crate::<module>` path outside test code), so a new upward import fails
//! here with the path that closes the circle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The replay pipeline, in data-flow order (docs/development.md "Layout", lib.rs diagram).
const PIPELINE: [&str; 7] = [
    "dataset", "agentx", "render", "schedule", "client", "metrics", "report",
];

/// Top-level module -> the top-level modules its non-test code names.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut stack = vec![src.clone()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let rel = p.strip_prefix(&src).unwrap();
            let top = rel
                .components()
                .next()
                .unwrap()
                .as_os_str()
                .to_string_lossy();
            let top = top.trim_end_matches(".rs").to_string();
            let name = p.file_name().unwrap().to_string_lossy();
            if top == "lib" || top == "main" || name == "tests.rs" || !name.ends_with(".rs") {
                continue;
            }
            let text = std::fs::read_to_string(&p).unwrap();
            let code = text
                .split("#[cfg(test)]\nmod tests {")
                .next()
                .unwrap_or_default();
            let deps = g.entry(top.clone()).or_default();
            for line in code.lines() {
                let line = line.split("//").next().unwrap_or_default();
                for (i, _) in line.match_indices("crate::") {
                    let rest = &line[i + "crate::".len()..];
                    let names: Vec<&str> = match rest.strip_prefix('{') {
                        // `crate::{a::X, b}`: each group member's first segment.
                        Some(group) => group
                            .split('}')
                            .next()
                            .unwrap_or_default()
                            .split(',')
                            .map(|s| s.trim().split("::").next().unwrap_or_default())
                            .collect(),
                        None => vec![rest
                            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                            .next()
                            .unwrap_or_default()],
                    };
                    for n in names {
                        if !n.is_empty()
                            && n != top
                            && n.chars().all(|c| c.is_ascii_lowercase() || c == '_')
                        {
                            deps.insert(n.to_string());
                        }
                    }
                }
            }
        }
    }
    let known: BTreeSet<String> = g.keys().cloned().collect();
    for deps in g.values_mut() {
        deps.retain(|d| known.contains(d));
    }
    g
}

/// A path of imports from `to` back to `from`, if one exists.
fn path_back(g: &BTreeMap<String, BTreeSet<String>>, from: &str, to: &str) -> Option<Vec<String>> {
    let mut seen = BTreeSet::new();
    let mut stack = vec![vec![to.to_string()]];
    while let Some(path) = stack.pop() {
        let last = path.last().unwrap().clone();
        if last == from {
            return Some(path);
        }
        if !seen.insert(last.clone()) {
            continue;
        }
        for next in g.get(&last).into_iter().flatten() {
            let mut p = path.clone();
            p.push(next.clone());
            stack.push(p);
        }
    }
    None
}

#[test]
fn no_import_circle_between_top_level_modules() {
    let g = graph();
    assert!(
        g.contains_key("engine") && g.contains_key("metrics"),
        "{g:?}"
    );
    for (m, deps) in &g {
        for d in deps {
            if let Some(back) = path_back(&g, m, d) {
                panic!("import circle: {m} -> {}", back.join(" -> "));
            }
        }
    }
}

/// The foundation: small modules every layer may use (the one CSV field writer, the debug
/// channel, child processes in words, the side tasks' join and their test hook), which name no
/// other specperf module.
const FOUNDATION: [&str; 4] = ["csv", "debug", "process", "side_task"];

#[test]
fn the_foundation_imports_no_specperf_module() {
    let g = graph();
    for m in FOUNDATION {
        let deps = g
            .get(m)
            .unwrap_or_else(|| panic!("src/{m} is gone: update FOUNDATION"));
        assert!(
            deps.is_empty(),
            "{m} imports {deps:?}; the foundation imports nothing"
        );
    }
}

/// `serve` owns a server's process group for `sweep` (cells) and golden collection: it sits below
/// both and every stage, holding only the stopper and the file helpers.
#[test]
fn serve_sits_below_what_runs_cells() {
    let g = graph();
    let serve = g.get("serve").expect("src/serve exists");
    let allowed = ["stop", "timefmt", "fsutil"];
    assert!(
        serve
            .iter()
            .all(|d| allowed.contains(&d.as_str()) || FOUNDATION.contains(&d.as_str())),
        "serve imports {serve:?}; it may use only {allowed:?}"
    );
}

/// GPU telemetry is a side task like the scrape: it reads pages with the client and the
/// exposition parser (and names a child's exit as `serve` does), and what it records flows up
/// into `metrics` and `report`, never back.
#[test]
fn telemetry_sits_beside_the_scrape_below_metrics() {
    let g = graph();
    let t = g.get("telemetry").expect("src/telemetry exists");
    let allowed = ["client", "scrape", "serve"];
    assert!(
        t.iter()
            .all(|d| allowed.contains(&d.as_str()) || FOUNDATION.contains(&d.as_str())),
        "telemetry imports {t:?}; it may use only {allowed:?}"
    );
}

#[test]
fn pipeline_stages_import_only_earlier_stages() {
    let g = graph();
    for (i, stage) in PIPELINE.iter().enumerate() {
        for d in &g[*stage] {
            if let Some(j) = PIPELINE.iter().position(|s| s == d) {
                assert!(
                    j < i,
                    "{stage} imports {d}, a later stage of the pipeline {PIPELINE:?}"
                );
            }
        }
    }
}

/// The orchestrators, bottom to top (docs/development.md "Layer map"): one run (`engine`), the
/// outcome -> exit code mapping (`exit`), many runs (`sweep`: points, categories, server cells)
/// and golden collection over cells (`collect`). Each may use those below it, none above.
const ORCHESTRATORS: [&str; 4] = ["engine", "exit", "sweep", "collect"];

#[test]
fn the_orchestrators_stack_one_way() {
    let g = graph();
    for (i, low) in ORCHESTRATORS.iter().enumerate() {
        let deps = g
            .get(*low)
            .unwrap_or_else(|| panic!("src/{low} is gone: update ORCHESTRATORS"));
        for high in &ORCHESTRATORS[i + 1..] {
            assert!(
                !deps.contains(*high),
                "{low} imports {high}, which sits above it in {ORCHESTRATORS:?}"
            );
        }
    }
}

/// `sweep/journal.rs` is the skeleton the orchestrators' files share: it names none of them.
#[test]
fn the_journal_sits_below_every_orchestrator_file() {
    let graphs = folder_graphs();
    let sweep = arrows_in(&graphs, "sweep");
    assert!(
        !sweep.contains_key("journal"),
        "sweep/journal imports {:?}",
        sweep.get("journal")
    );
    for user in ["run", "cells", "index"] {
        assert!(
            sweep.get(user).is_some_and(|d| d.contains("journal")),
            "sweep/{user} no longer keeps its index through the journal"
        );
    }
}

/// Commands that only read what finished runs left on disk: they may use anything below them,
/// and nothing imports them (so no stage comes to depend on a report over its own artifacts).
const READERS_OF_FINISHED_RUNS: [&str; 1] = ["speed_bench_report"];

#[test]
fn readers_of_finished_runs_are_imported_by_no_module() {
    let g = graph();
    for top in READERS_OF_FINISHED_RUNS {
        assert!(g.contains_key(top), "src/{top} is gone: update this list");
        let importers: Vec<&String> = g
            .iter()
            .filter(|(_, d)| d.contains(top))
            .map(|(m, _)| m)
            .collect();
        assert!(
            importers.is_empty(),
            "{importers:?} import {top}, which reads finished runs and sits above every stage"
        );
    }
}

/// Every `.rs` file under `src/` (tests and `tests.rs` left out) as (module path, non-test code
/// with comments removed): `src/inject/vllm.rs` is `["inject", "vllm"]`, `src/inject/mod.rs` is
/// `["inject"]`.
fn files() -> Vec<(Vec<String>, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = Vec::new();
    let mut stack = vec![src.clone()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            if name == "tests.rs" || !name.ends_with(".rs") {
                continue;
            }
            let rel = p.strip_prefix(&src).unwrap();
            let mut module: Vec<String> = rel
                .components()
                .map(|c| {
                    c.as_os_str()
                        .to_string_lossy()
                        .trim_end_matches(".rs")
                        .to_string()
                })
                .collect();
            if matches!(
                module.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            ) {
                module.pop();
            }
            let text = std::fs::read_to_string(&p).unwrap();
            let code: String = text
                .split("#[cfg(test)]\nmod tests {")
                .next()
                .unwrap_or_default()
                .lines()
                .map(|l| l.split("//").next().unwrap_or_default())
                .collect::<Vec<_>>()
                .join("\n");
            out.push((module, code));
        }
    }
    out
}

/// The first path segment of each member of a `{...}` group (nested groups kept whole).
fn group_members(group: &str) -> Vec<String> {
    let (mut depth, mut start, mut out) = (0usize, 0usize, Vec::new());
    let bytes = group.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'{' => depth += 1,
            b'}' if depth == 0 => {
                out.push(&group[start..i]);
                break;
            }
            b'}' => depth -= 1,
            b',' if depth == 0 => {
                out.push(&group[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.iter()
        .map(|m| m.trim().split("::").next().unwrap_or_default().to_string())
        .filter(|m| !m.is_empty())
        .collect()
}

/// Every module path a file's code names through `crate::`, `super::` or `self::`, resolved
/// from the file's own module path.
fn references(module: &[String], is_dir_module: bool, code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    for start in ["crate::", "super::", "self::"] {
        for (i, _) in code.match_indices(start) {
            if i > 0 && code[..i].chars().next_back().is_some_and(ident) {
                continue;
            }
            // The module this prefix names.
            let mut base: Vec<String> = match start {
                "crate::" => Vec::new(),
                // `super` of a folder's mod.rs is the folder's parent; of a file, its folder.
                "super::" if is_dir_module => module[..module.len().saturating_sub(1)].to_vec(),
                "super::" => module[..module.len().saturating_sub(1)].to_vec(),
                _ => module.to_vec(),
            };
            if start == "super::" && is_dir_module {
                base = module[..module.len().saturating_sub(1)].to_vec();
            }
            let mut rest = &code[i + start.len()..];
            while let Some(r) = rest.strip_prefix("super::") {
                base.pop();
                rest = r;
            }
            let names = match rest.strip_prefix('{') {
                Some(group) => group_members(group),
                None => vec![rest
                    .split(|c: char| !ident(c))
                    .next()
                    .unwrap_or_default()
                    .to_string()],
            };
            for n in names {
                if n.is_empty() || n == "self" {
                    continue;
                }
                let mut full = base.clone();
                full.push(n);
                out.push(full);
            }
        }
    }
    out
}

/// For each folder (module with children), the import arrows between its children: `a -> b`
/// when code in child `a` (or below it) names child `b` (or something in it). A folder's own
/// `mod.rs` is its root, not a child: its dispatch tables and re-exports are not arrows.
fn folder_graphs() -> BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>> {
    let files = files();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let children = |folder: &[String]| -> BTreeSet<String> {
        let dir = folder.iter().fold(src.clone(), |p, s| p.join(s));
        std::fs::read_dir(dir)
            .map(|rd| {
                rd.flatten()
                    .map(|e| {
                        e.file_name()
                            .to_string_lossy()
                            .trim_end_matches(".rs")
                            .to_string()
                    })
                    .filter(|n| !matches!(n.as_str(), "mod" | "lib" | "main" | "tests"))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut graphs: BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (module, code) in &files {
        let path = module.iter().fold(src.clone(), |p, s| p.join(s));
        let is_dir_module = path.is_dir();
        for r in references(module, is_dir_module, code) {
            // Every folder that holds both the file and the named module.
            for d in 0..module.len() {
                let folder = &module[..d];
                if r.len() <= d || r[..d] != *folder {
                    continue;
                }
                let (a, b) = (&module[d], &r[d]);
                if a != b && children(folder).contains(b) {
                    graphs
                        .entry(folder.to_vec())
                        .or_default()
                        .entry(a.clone())
                        .or_default()
                        .insert(b.clone());
                }
            }
        }
    }
    graphs
}

/// The arrows between the files of the top-level folder `folder`.
fn arrows_in<'a>(
    graphs: &'a BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>>,
    folder: &str,
) -> &'a BTreeMap<String, BTreeSet<String>> {
    graphs
        .get(&vec![folder.to_string()])
        .unwrap_or_else(|| panic!("{folder}/ has no arrows between its files"))
}

#[test]
fn no_import_circle_between_files_of_a_folder() {
    let graphs = folder_graphs();
    let inject = arrows_in(&graphs, "inject");
    assert!(!inject.is_empty());
    let mut circles = Vec::new();
    for (folder, g) in &graphs {
        let mut seen = BTreeSet::new();
        for (m, deps) in g {
            for d in deps {
                if let Some(back) = path_back(g, m, d) {
                    let mut key: Vec<String> = back.clone();
                    key.sort();
                    if seen.insert(key) {
                        circles.push(format!(
                            "src/{}: {m} -> {}",
                            folder.join("/"),
                            back.join(" -> ")
                        ));
                    }
                }
            }
        }
    }
    assert!(
        circles.is_empty(),
        "import circles between files (put the shared part in a file below both, or the \
         dispatch in the folder's mod.rs):\n{}",
        circles.join("\n")
    );
}
