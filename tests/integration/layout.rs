//! The source tree keeps its one-way arrows: no import circle between the crate's top-level
//! modules, and the replay pipeline's stages import only the stages before them. Read from the
//! source text (every `crate::<module>` path outside test code), so a new upward import fails
//! here with the path that closes the circle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The replay pipeline, in data-flow order (README "Layout", lib.rs diagram).
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
