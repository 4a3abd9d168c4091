//! The engine: a DAG of partitions, content-hash cache keys, `plan` and the scheduler.
//!
//! It knows jobs only through [`Job`]: a node says *what* (its partition, inputs, parameters,
//! code version), the job says *how*. Nothing here names a stage, a table or a config key, so the
//! engine is tested with toy jobs (`tests.rs`) and `src/jobs/` can grow without touching it.

mod checkpoint;
mod gc;
mod plan;
mod run;
mod state;
#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Result;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::ui::Ui;
use crate::warehouse::{Partition, TableDef, Warehouse};

pub use checkpoint::Checkpoint;
pub use plan::{Action, Change, Pipeline, Plan, PlanItem};
pub use state::{Lock, PartState, RunInfo, State};

/// How one stage computes one partition. Implementations hold what they need from the
/// configuration (cloned at declaration time), so running never reaches back into the config,
/// and they serialise into the node's parameters (see [`Node::new`]).
pub trait Job: Send + Sync {
    fn run(&self, cx: &Ctx) -> Result<Output>;
}

/// What a finished partition reports back to the engine.
pub struct Output {
    pub output_hash: String,
    pub rows: u64,
    pub note: Option<String>,
    /// Work the published rows still lack (requests that failed): the next run runs the
    /// partition again, under the same key, to finish it.
    pub owed: Option<Owed>,
}

impl Output {
    /// The same output, still owing `owed` (None when `owed.count` is 0).
    pub fn owing(self, owed: Owed) -> Output {
        Output { owed: (owed.count > 0).then_some(owed), ..self }
    }
}

/// What a published partition still owes, in the job's words: `count` units of `what` (e.g. 3
/// "errored answers to ask again"), said by `plan` as the reason it runs again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Owed {
    pub count: u64,
    pub what: String,
}

impl std::fmt::Display for Owed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.count, self.what)
    }
}

/// One partition of one stage: everything its cache key is made of, and the job that fills it.
#[derive(Clone)]
pub struct Node {
    pub stage: &'static str,
    pub part: Partition,
    pub deps: Vec<usize>,
    /// Input files hashed by content (moving a file does not invalidate its results).
    pub files: Vec<PathBuf>,
    /// Inputs known by a pinned hash rather than read (assets checked by `doc2ci setup`).
    pub pinned: Vec<(String, String)>,
    /// The job itself, serialised: every setting a job holds is in its key by construction (a
    /// field that cannot change rows says why with `#[serde(skip)]` where it is declared; the
    /// partitions a job reads are skipped there too: they are in the key through `deps`, by the
    /// content of their outputs, and `Partition` is not `Serialize`, so none is forgotten).
    pub params: Value,
    /// The code version of the file that declares the node ([`crate::code::version_of`]): changes
    /// whenever any code its job reaches does.
    pub version: String,
    /// Set on per-model partitions, so `plan` can say "new model".
    pub model: Option<String>,
    pub job: Arc<dyn Job>,
}

impl Node {
    /// A node with no inputs yet; the builder methods below add them. Its code version is the one
    /// of the file that calls this (a job file), derived from that file's imports.
    #[track_caller]
    pub fn new<J: Job + Serialize + 'static>(stage: &'static str, part: Partition, job: J) -> Self {
        Self {
            stage,
            part,
            deps: vec![],
            files: vec![],
            pinned: vec![],
            params: serde_json::to_value(&job).expect("a job serialises to JSON"),
            version: crate::code::version_of(std::panic::Location::caller().file()),
            model: None,
            job: Arc::new(job),
        }
    }
    pub fn deps(mut self, deps: Vec<usize>) -> Self {
        self.deps = deps;
        self
    }
    pub fn files(mut self, files: Vec<PathBuf>) -> Self {
        self.files = files;
        self
    }
    pub fn pinned(mut self, pinned: Vec<(String, String)>) -> Self {
        self.pinned = pinned;
        self
    }
    pub fn model(mut self, model: &str) -> Self {
        self.model = Some(model.to_string());
        self
    }
    pub fn label(&self) -> String {
        format!("{} {}", self.stage, self.part.id())
    }
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("stage", &self.stage)
            .field("part", &self.part.id())
            .field("deps", &self.deps)
            .finish()
    }
}

/// The declared study while jobs add their nodes, in data-flow order: a node may only depend on
/// nodes added before it, so the graph is acyclic by construction.
#[derive(Default)]
pub struct Graph {
    pub nodes: Vec<Node>,
    /// Every table the study may have written, so a partition no node writes any more is
    /// found and removed (`jobs/tables.rs`, handed in by `jobs::declare`: the engine names no table).
    pub tables: &'static [TableDef],
}

impl Graph {
    pub fn add(&mut self, n: Node) -> usize {
        debug_assert!(n.deps.iter().all(|&d| d < self.nodes.len()), "{} depends on a later node", n.label());
        self.nodes.push(n);
        self.nodes.len() - 1
    }
    /// The node writing the table's partition with these partition values (the main file,
    /// not a repair round's).
    pub fn find(&self, table: &str, values: &[(&str, &str)]) -> Option<usize> {
        self.nodes.iter().position(|n| {
            n.part.table == table && n.part.file.is_none() && values.iter().all(|(k, v)| n.part.get(k) == Some(v))
        })
    }
    /// Every node writing into `table` (any partition, any file), in declaration order.
    pub fn all(&self, table: &str) -> Vec<usize> {
        (0..self.nodes.len()).filter(|&i| self.nodes[i].part.table == table).collect()
    }
    pub fn part(&self, i: usize) -> &Partition {
        &self.nodes[i].part
    }
}

/// What a running job may use: warehouse reads, the atomic publish of its partition,
/// checkpointed batches, progress.
pub struct Ctx<'a> {
    pub wh: &'a Warehouse,
    pub node: &'a Node,
    pub key: &'a str,
    pub ui: &'a Ui,
    /// The partition on disk was published under this very key and runs again only for what it
    /// owed: its rows still stand ([`Ctx::kept`]).
    pub owing: bool,
}

impl Ctx<'_> {
    pub fn label(&self) -> String {
        self.node.label()
    }

    pub fn read<T: DeserializeOwned>(&self, p: &Partition) -> Result<Vec<T>> {
        self.wh.read(p)
    }

    /// The rows this partition published under the same key, when it runs again for what it owed
    /// (none otherwise: another key's rows answer other questions).
    pub fn kept<T: DeserializeOwned>(&self) -> Result<Vec<T>> {
        if !self.owing {
            return Ok(Vec::new());
        }
        self.wh.read(&self.node.part)
    }

    /// Writes the partition in one atomic step and drops its checkpoint.
    pub fn publish<T: Serialize + DeserializeOwned>(&self, rows: &[T], note: Option<String>) -> Result<Output> {
        self.publish_with(rows, &[], note)
    }

    /// As [`Self::publish`], with extra files beside the rows (the report's HTML and figures).
    pub fn publish_with<T: Serialize + DeserializeOwned>(
        &self,
        rows: &[T],
        extra: &[(String, Vec<u8>)],
        note: Option<String>,
    ) -> Result<Output> {
        self.published(rows.len(), note, || self.wh.write_with(&self.node.part, rows, extra))
    }

    /// As [`Self::publish`], with the columns traced from `template` rather than from `T` (rows
    /// whose columns are data, like one per registered metric).
    pub fn publish_like<T: Serialize + DeserializeOwned>(
        &self,
        rows: &[T],
        template: &T,
        note: Option<String>,
    ) -> Result<Output> {
        self.published(rows.len(), note, || self.wh.write_like(&self.node.part, rows, template))
    }

    /// One publish: `write` lands the partition atomically. Its checkpoint stays until the engine
    /// has recorded the partition: a kill in between must find the answers still kept, since the
    /// next run re-runs a partition it has no record of.
    fn published(&self, rows: usize, note: Option<String>, write: impl FnOnce() -> Result<String>) -> Result<Output> {
        test_hook("DOC2CI_TEST_STAGE_DELAY_MS");
        let output_hash = write()?;
        test_hook("DOC2CI_TEST_PUBLISHED_DELAY_MS");
        Ok(Output { output_hash, rows: rows as u64, note, owed: None })
    }

    /// The partition's checkpoint, resumed: rows of the batches a killed run finished.
    pub fn batches<T: Serialize + DeserializeOwned>(&self) -> Result<Batches<T>> {
        let ckpt = Checkpoint::at(self.wh, &self.node.part, self.key);
        let (rows, done, seq, skipped) = ckpt.resume::<T>()?;
        Ok(Batches { ckpt, rows, done, seq, skipped, resumed: done })
    }
}

/// The one checkpoint loop of every long job: each committed batch is on disk before the next
/// starts, so a killed run resumes after the last one with no row lost or repeated.
pub struct Batches<T> {
    ckpt: Checkpoint,
    rows: Vec<T>,
    /// How far into the job's input the committed batches reach (records, requests, pages).
    done: u64,
    seq: usize,
    skipped: u64,
    resumed: u64,
}

impl<T: Serialize + DeserializeOwned> Batches<T> {
    pub fn rows(&self) -> &[T] {
        &self.rows
    }
    /// Input position the last committed batch reached.
    pub fn done(&self) -> u64 {
        self.done
    }
    /// Input position the resumed checkpoint had reached when the job started (0 on a fresh run).
    pub fn resumed(&self) -> u64 {
        self.resumed
    }
    /// Bad records skipped so far, the resumed ones included.
    pub fn skipped(&self) -> u64 {
        self.skipped
    }
    /// Puts `batch` on disk, then counts it done up to input position `done`.
    pub fn commit(&mut self, batch: Vec<T>, done: u64, skipped: u64) -> Result<()> {
        self.seq += 1;
        self.ckpt.commit(self.seq, done, skipped, &batch)?;
        self.rows.extend(batch);
        (self.done, self.skipped) = (done, skipped);
        test_hook("DOC2CI_TEST_BATCH_DELAY_MS");
        Ok(())
    }
    pub fn into_rows(self) -> Vec<T> {
        self.rows
    }
    /// The job's side record beside its batches ([`Checkpoint::note`]).
    pub fn note(&self, name: &str) -> Result<Option<serde_json::Value>> {
        self.ckpt.note(name)
    }
    pub fn set_note(&self, name: &str, v: Option<&serde_json::Value>) -> Result<()> {
        self.ckpt.set_note(name, v)
    }
}

/// For the crash harness and the resume tests only: a pause at a publish or a checkpoint, so a
/// kill can land inside even the stages that take milliseconds.
pub fn test_hook(var: &str) {
    if let Some(ms) = std::env::var(var).ok().and_then(|v| v.parse::<u64>().ok()) {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
}
