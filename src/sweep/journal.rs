//! The index file every multi-run orchestrator keeps (`sweep.json`, `cells.json`,
//! `collect.json`): one type for its schema check, reading, `--resume`, moving an earlier one
//! aside, the per-item upsert, skipping items already done, and how the whole ended.
//!
//! ```text
//!  Journal::open(dir, resume) ── resume ──> read <dir>/<FILE> (schema checked), marked running
//!                             └─ fresh ───> an earlier <dir> moved to <dir>.prev-<unix s>
//!     ──> for each item: done(name)? skip : run, upsert(item), save()   (atomic, every step)
//!     ──> finish(stop reason, all done?) ──> save()
//! ```
//!
//! The index structs keep their own fields (and so their files' bytes); they give the journal
//! their items and the three fields it manages ([`State`]).

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::stop::StopReason;

/// The state of one item of a multi-run index: a point of `sweep.json`, a cell of `cells.json`
/// (the schemas' `status` enums).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ItemStatus {
    /// Every run made (or convergence reached; a cell: with its server up to the end);
    /// skipped by `--resume`.
    Done,
    /// A run could not start, or a cell's server failed to start or died (the error says why);
    /// the others went on.
    Failed,
    /// Stopped by a signal before its runs were made (or still running: a crash leaves it so);
    /// `--resume` runs it again.
    Stopped,
}

/// The state of a multi-run index as a whole (`status` of `sweep.json` and `cells.json`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IndexStatus {
    /// Still going (or the process died: a crash leaves it so).
    Running,
    /// Every item done.
    Complete,
    /// Ended, with an item failed.
    Partial,
    /// Stopped by a signal.
    Stopped,
}

impl IndexStatus {
    /// The name in the index file.
    pub fn as_str(self) -> &'static str {
        match self {
            IndexStatus::Running => "running",
            IndexStatus::Complete => "complete",
            IndexStatus::Partial => "partial",
            IndexStatus::Stopped => "stopped",
        }
    }

    /// How an index ended: `stopped` by a signal, else `partial` when `all_done` is false.
    fn ended(stopped: bool, all_done: bool) -> IndexStatus {
        match (stopped, all_done) {
            (true, _) => IndexStatus::Stopped,
            (false, false) => IndexStatus::Partial,
            (false, true) => IndexStatus::Complete,
        }
    }
}

impl std::fmt::Display for IndexStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<&str> for IndexStatus {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// An index file of ours: where it lives and which schema it carries.
pub(crate) trait IndexFile: Serialize + DeserializeOwned {
    /// Its name in the orchestrator's directory (`sweep.json`).
    const FILE: &'static str;
    /// Its `schema` value.
    const SCHEMA: &'static str;
    /// The `schema` it was read with.
    fn schema(&self) -> &str;
}

/// The fields of an index the journal manages.
pub(super) struct State<'a> {
    /// The command line of the process writing it.
    pub command: &'a mut String,
    /// Running, then how it ended.
    pub status: &'a mut IndexStatus,
    /// The signal that stopped it.
    pub stopped_by: &'a mut Option<StopReason>,
}

/// An index of named items, each done, failed or stopped.
pub(super) trait Index: IndexFile {
    /// One item (a point, a cell).
    type Item: Item;
    /// What an earlier index in the directory is called when it is moved aside.
    const EARLIER: &'static str;
    /// The items, in the order they ran.
    fn items(&self) -> &[Self::Item];
    /// The same, to change.
    fn items_mut(&mut self) -> &mut Vec<Self::Item>;
    /// The fields the journal manages.
    fn state(&mut self) -> State<'_>;
}

/// One item of an [`Index`].
pub(super) trait Item: Clone {
    /// Its name (also its directory, relative to the index's).
    fn name(&self) -> &str;
    /// Where it stands.
    fn status(&self) -> ItemStatus;
}

/// Implements [`IndexFile`], [`Index`] and [`Item`] for an index struct whose `schema`,
/// `command`, `status` and `stopped_by` fields the journal manages and whose items, in the
/// field named after the `:`, each have a `name` and a `status`.
macro_rules! journal_index {
    ($index:ty, $file:literal, $schema:expr, $earlier:literal, $items:ident: $item:ty) => {
        impl $crate::sweep::journal::IndexFile for $index {
            const FILE: &'static str = $file;
            const SCHEMA: &'static str = $schema;
            fn schema(&self) -> &str {
                &self.schema
            }
        }

        impl $crate::sweep::journal::Index for $index {
            type Item = $item;
            const EARLIER: &'static str = $earlier;
            fn items(&self) -> &[$item] {
                &self.$items
            }
            fn items_mut(&mut self) -> &mut Vec<$item> {
                &mut self.$items
            }
            fn state(&mut self) -> $crate::sweep::journal::State<'_> {
                $crate::sweep::journal::State {
                    command: &mut self.command,
                    status: &mut self.status,
                    stopped_by: &mut self.stopped_by,
                }
            }
        }

        impl $crate::sweep::journal::Item for $item {
            fn name(&self) -> &str {
                &self.name
            }
            fn status(&self) -> $crate::sweep::journal::ItemStatus {
                self.status
            }
        }
    };
}
pub(super) use journal_index;

/// Why an index file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// Missing or unreadable.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// Not an index this binary reads.
    #[error("{path} is not a specperf {what} ({reason})")]
    Parse {
        /// The file.
        path: String,
        /// `sweep index`, `cells index`.
        what: &'static str,
        /// Why.
        reason: String,
    },
}

/// Why an orchestrator could not start in its directory (every item's flags were checked
/// before; this is the directory).
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    /// The directory is not usable.
    #[error("cannot write the sweep in {path}: {source} (pass a writable --artifact-dir)")]
    Dir {
        /// The directory.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// `--resume` found an index it cannot read.
    #[error(transparent)]
    Index(#[from] IndexError),
}

impl SweepError {
    /// The exit code (2: the output directory or the index named on the command line).
    pub fn exit_code(&self) -> i32 {
        crate::exit::USAGE
    }

    fn dir(dir: &Path, source: std::io::Error) -> SweepError {
        SweepError::Dir {
            path: dir.display().to_string(),
            source,
        }
    }
}

/// An index file that could not be rewritten (a warning: the runs are on disk).
#[derive(Debug, thiserror::Error)]
#[error("cannot write {path}: {source}")]
pub(crate) struct SaveError {
    path: String,
    source: std::io::Error,
}

impl SaveError {
    /// The file and the cause.
    pub(crate) fn into_parts(self) -> (String, std::io::Error) {
        (self.path, self.source)
    }
}

/// Reads `<dir>/<I::FILE>`, checking its schema.
pub(crate) fn read<I: IndexFile>(dir: &Path) -> Result<I, IndexError> {
    let path = dir.join(I::FILE);
    let text = std::fs::read_to_string(&path).map_err(|source| IndexError::Read {
        path: path.display().to_string(),
        source,
    })?;
    let parse = |reason: String| IndexError::Parse {
        path: path.display().to_string(),
        what: what(I::SCHEMA),
        reason,
    };
    let idx: I = serde_json::from_str(&text).map_err(|e| parse(e.to_string()))?;
    if idx.schema() != I::SCHEMA {
        return Err(parse(format!(
            "schema {:?}, expected {:?}",
            idx.schema(),
            I::SCHEMA
        )));
    }
    Ok(idx)
}

/// Writes `<dir>/<I::FILE>` atomically, pretty-printed with a final newline.
pub(crate) fn write<I: IndexFile>(dir: &Path, index: &I) -> Result<(), SaveError> {
    let path = dir.join(I::FILE);
    let text = serde_json::to_string_pretty(index).map_err(std::io::Error::other);
    text.and_then(|t| crate::fsutil::write_atomic(&path, (t + "\n").as_bytes()))
        .map_err(|source| SaveError {
            path: path.display().to_string(),
            source,
        })
}

/// `specperf.sweep.v1` -> `sweep index`.
fn what(schema: &str) -> &'static str {
    match schema.split('.').nth(1) {
        Some("sweep") => "sweep index",
        Some("cells") => "cells index",
        Some("collect") => "collection record",
        _ => "index",
    }
}

/// An index being kept up to date in its directory.
pub(super) struct Journal<I: Index> {
    dir: PathBuf,
    index: I,
}

impl<I: Index> Journal<I> {
    /// With `resume`, continues the index in `dir` (marked running under `command`); else
    /// starts `fresh()`, moving an earlier index's whole directory aside first (its new path is
    /// returned, for the warning). The index is written before this returns.
    pub(super) fn open(
        dir: &Path,
        resume: bool,
        command: &str,
        fresh: impl FnOnce() -> I,
    ) -> Result<(Journal<I>, Option<PathBuf>), SweepError> {
        let mut aside = None;
        let index = if resume {
            let mut idx: I = read(dir)?;
            let s = idx.state();
            *s.status = IndexStatus::Running;
            *s.stopped_by = None;
            *s.command = command.to_owned();
            idx
        } else {
            if dir.join(I::FILE).exists() {
                aside = Some(move_aside(dir).map_err(|e| SweepError::dir(dir, e))?);
            }
            fresh()
        };
        crate::fsutil::ensure_writable_dir(dir).map_err(|e| SweepError::dir(dir, e))?;
        let journal = Journal {
            dir: dir.to_path_buf(),
            index,
        };
        journal.save().map_err(|e| SweepError::dir(dir, e.source))?;
        Ok((journal, aside))
    }

    /// The warning for an earlier index moved aside by [`Journal::open`].
    pub(super) fn moved_aside(&self, aside: &Path) -> String {
        format!(
            "{} held {}; it was moved to {} (pass --resume to continue one)",
            self.dir.display(),
            I::EARLIER,
            aside.display()
        )
    }

    /// Rewrites the index file.
    pub(super) fn save(&self) -> Result<(), SaveError> {
        write(&self.dir, &self.index)
    }

    /// The finished item named `name`, if any (`--resume` skips it).
    pub(super) fn done(&self, name: &str) -> Option<&I::Item> {
        self.index
            .items()
            .iter()
            .find(|i| i.name() == name && i.status() == ItemStatus::Done)
    }

    /// Replaces the item named like `item`, or appends it.
    pub(super) fn upsert(&mut self, item: I::Item) {
        let items = self.index.items_mut();
        match items.iter_mut().find(|e| e.name() == item.name()) {
            Some(e) => *e = item,
            None => items.push(item),
        }
    }

    /// Moves the item named `name` to the end (a resumed run keeps the order it ran in).
    pub(super) fn move_to_end(&mut self, name: &str) {
        let items = self.index.items_mut();
        if let Some(i) = items.iter().position(|e| e.name() == name) {
            let item = items.remove(i);
            items.push(item);
        }
    }

    /// Records how the whole ended: `stopped` by a signal, else complete when every one of
    /// `expected` items (at least) is done, else partial.
    pub(super) fn finish(&mut self, stopped: Option<StopReason>, expected: usize) {
        let items = self.index.items();
        let all_done =
            items.len() >= expected && items.iter().all(|i| i.status() == ItemStatus::Done);
        let s = self.index.state();
        *s.stopped_by = stopped;
        *s.status = IndexStatus::ended(stopped.is_some(), all_done);
    }

    /// The index.
    pub(super) fn index(&self) -> &I {
        &self.index
    }

    /// The index, to change fields the journal does not manage.
    pub(super) fn index_mut(&mut self) -> &mut I {
        &mut self.index
    }

    /// The index as last set.
    pub(super) fn into_index(self) -> I {
        self.index
    }
}

/// `<dir>` -> `<dir>.prev-<unix seconds>` (an earlier run, kept whole).
pub(super) fn move_aside(dir: &Path) -> std::io::Result<PathBuf> {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| std::io::Error::other("it has no name; pass a new --artifact-dir"))?;
    let parent = dir.parent().unwrap_or(Path::new("."));
    let mut aside = parent.join(format!("{name}.prev-{stamp}"));
    let mut n = 1;
    while aside.exists() {
        aside = parent.join(format!("{name}.prev-{stamp}-{n}"));
        n += 1;
    }
    std::fs::rename(dir, &aside)?;
    Ok(aside)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    struct Thing {
        name: String,
        status: ItemStatus,
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Things {
        schema: String,
        command: String,
        status: IndexStatus,
        stopped_by: Option<StopReason>,
        things: Vec<Thing>,
    }

    journal_index!(
        Things,
        "things.json",
        "specperf.things.v1",
        "earlier things",
        things: Thing
    );

    fn fresh() -> Things {
        Things {
            schema: Things::SCHEMA.into(),
            command: "first".into(),
            status: IndexStatus::Running,
            stopped_by: None,
            things: Vec::new(),
        }
    }

    fn thing(name: &str, status: ItemStatus) -> Thing {
        Thing {
            name: name.into(),
            status,
        }
    }

    #[test]
    fn a_resumed_journal_skips_what_is_done_and_reruns_the_rest() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("run");
        let (mut j, aside) = Journal::open(&dir, false, "first", fresh).unwrap();
        assert!(aside.is_none());
        j.upsert(thing("a", ItemStatus::Done));
        j.upsert(thing("b", ItemStatus::Stopped));
        j.finish(Some(StopReason::Interrupted), 3);
        j.save().unwrap();
        assert_eq!(j.index().status, IndexStatus::Stopped);

        let (mut j, aside) = Journal::open(&dir, true, "second", fresh).unwrap();
        assert!(aside.is_none());
        assert_eq!(j.index().command, "second");
        assert_eq!(j.index().status, IndexStatus::Running);
        assert_eq!(j.index().stopped_by, None);
        assert!(j.done("a").is_some());
        assert!(j.done("b").is_none(), "a stopped item runs again");
        j.upsert(thing("b", ItemStatus::Done));
        j.move_to_end("a");
        j.upsert(thing("c", ItemStatus::Failed));
        j.finish(None, 3);
        let names: Vec<_> = j.index().things.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["b", "a", "c"]);
        assert_eq!(j.index().status, IndexStatus::Partial);
        j.save().unwrap();
        assert_eq!(&read::<Things>(&dir).unwrap(), j.index());
    }

    #[test]
    fn a_fresh_journal_moves_the_earlier_directory_aside_whole() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("run");
        let (j, _) = Journal::open(&dir, false, "first", fresh).unwrap();
        std::fs::write(dir.join("keep.txt"), "x").unwrap();
        drop(j);
        let (j, aside) = Journal::open(&dir, false, "second", fresh).unwrap();
        let aside = aside.expect("moved aside");
        assert!(aside.join("keep.txt").is_file());
        assert!(aside.join("things.json").is_file());
        assert!(!dir.join("keep.txt").exists());
        assert!(j.moved_aside(&aside).contains("held earlier things"));
    }

    #[test]
    fn a_journal_with_every_item_done_but_too_few_is_partial() {
        let tmp = tempfile::tempdir().unwrap();
        let (mut j, _) = Journal::open(tmp.path(), false, "c", fresh).unwrap();
        j.upsert(thing("a", ItemStatus::Done));
        j.finish(None, 2);
        assert_eq!(j.index().status, IndexStatus::Partial);
        j.finish(None, 1);
        assert_eq!(j.index().status, IndexStatus::Complete);
    }

    #[test]
    fn resuming_names_a_missing_or_foreign_index() {
        let tmp = tempfile::tempdir().unwrap();
        let e = Journal::<Things>::open(tmp.path(), true, "c", fresh)
            .err()
            .unwrap();
        assert!(e.to_string().contains("things.json"), "{e}");
        std::fs::write(
            tmp.path().join("things.json"),
            r#"{"schema":"specperf.other.v1","command":"","status":"running","stopped_by":null,"things":[]}"#,
        )
        .unwrap();
        let e = Journal::<Things>::open(tmp.path(), true, "c", fresh)
            .err()
            .unwrap();
        assert!(
            e.to_string().contains("expected \"specperf.things.v1\""),
            "{e}"
        );
        assert_eq!(e.exit_code(), crate::exit::USAGE);
    }
}
