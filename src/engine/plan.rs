//! Cache keys and the one answer to "does this partition run, and why" that `plan`, `run` and
//! `gc` share.
//!
//! A partition's key hashes its stage's code version, its parameters, the content of its input
//! files and the output hashes of its upstream partitions. Outputs are hashed by content, so an
//! upstream re-run that produces the same rows does not ripple downstream.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};
use serde_json::json;

use super::Node;
use super::{PartState, State};
use crate::warehouse::{Partition, TableDef, Warehouse};

/// The declared study, ordered: nodes come in data-flow order (see [`super::Graph`]).
pub struct Pipeline {
    pub nodes: Vec<Node>,
    /// Every table of the study ([`Graph::tables`](super::Graph)).
    pub tables: &'static [TableDef],
    pub warehouse: PathBuf,
    /// Partitions run at once.
    pub threads: usize,
    /// The config file, for messages ("no longer in pipeline.toml").
    pub config: PathBuf,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Run,
    /// Depends on a partition that will run: re-runs only if that output really changes.
    MaybeRun,
    Reuse,
}

#[derive(Debug, Clone)]
pub struct PlanItem {
    pub node: usize,
    pub action: Action,
    pub reason: String,
    /// The key it would run (or is current) under; None while an upstream partition runs first.
    pub key: Option<String>,
}

pub struct Plan {
    pub items: Vec<PlanItem>,
    /// Partitions on disk that the study no longer declares.
    pub stale: Vec<String>,
}

/// Whether a node's recorded result still stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Current,
    /// Must run, for this reason.
    Run(String),
    /// Everything it declares is unchanged but an input will be recomputed first.
    Upstream(Vec<String>),
}

impl Pipeline {
    pub fn new(g: super::Graph, warehouse: &Path, threads: usize, config: &Path) -> Result<Self> {
        let (nodes, tables) = (g.nodes, g.tables);
        for (i, n) in nodes.iter().enumerate() {
            if let Some(d) = n.deps.iter().find(|&&d| d >= i) {
                return Err(anyhow!("internal: {} depends on {}, declared after it", n.label(), nodes[*d].label()));
            }
        }
        Ok(Self {
            nodes,
            tables,
            warehouse: warehouse.to_path_buf(),
            threads: threads.max(1),
            config: config.to_path_buf(),
        })
    }

    pub fn warehouse(&self) -> Warehouse {
        Warehouse::new(&self.warehouse)
    }

    /// The partition a state entry or folder names (None: not one of this study's tables).
    pub fn partition(&self, id: &str) -> Option<Partition> {
        Partition::from_id(self.tables, id)
    }

    pub(super) fn params_hash(n: &Node) -> String {
        blake3::hash(n.params.to_string().as_bytes()).to_hex()[..16].to_string()
    }

    /// Input name → content hash for one node, given the output hashes known so far; None while
    /// an upstream partition's output is not known yet (it will run first).
    pub(super) fn inputs(
        &self,
        n: &Node,
        files: &mut FileHashes,
        outputs: &HashMap<String, String>,
    ) -> Result<Option<BTreeMap<String, String>>> {
        let mut m = BTreeMap::new();
        for f in &n.files {
            m.insert(f.display().to_string(), files.get(f)?);
        }
        for (name, h) in &n.pinned {
            m.insert(name.clone(), h.clone());
        }
        for &d in &n.deps {
            let id = self.nodes[d].part.id();
            match outputs.get(&id) {
                Some(h) => m.insert(id, h.clone()),
                None => return Ok(None),
            };
        }
        Ok(Some(m))
    }

    pub(super) fn key(n: &Node, inputs: &BTreeMap<String, String>) -> String {
        let v = json!({"stage": n.stage, "version": n.version, "params": n.params, "inputs": inputs.values().collect::<Vec<_>>()});
        blake3::hash(v.to_string().as_bytes()).to_hex().to_string()
    }

    /// Why `n` must run, given its recorded state and its inputs (None: an upstream partition
    /// runs first, named in `upstream`). The one place that decides; `plan` prints it, `run`
    /// acts on it.
    pub fn changed(
        &self,
        n: &Node,
        st: Option<&PartState>,
        inputs: Option<&BTreeMap<String, String>>,
        upstream: &[usize],
        wh: &Warehouse,
    ) -> Change {
        let Some(st) = st else {
            return Change::Run(match &n.model {
                Some(m) => format!("new model `{m}`"),
                None => "new partition".into(),
            });
        };
        if st.version != n.version {
            return Change::Run("stage code changed".into());
        }
        if st.params_hash != Self::params_hash(n) {
            return Change::Run("changed parameter".into());
        }
        let Some(inputs) = inputs else {
            return Change::Upstream(upstream.iter().map(|&d| self.nodes[d].part.id()).collect());
        };
        let changed: Vec<String> =
            inputs.iter().filter(|(k, v)| st.inputs.get(*k) != Some(v)).map(|(k, _)| k.clone()).collect();
        if !changed.is_empty() {
            return Change::Run(format!("changed input: {}", changed.join(", ")));
        }
        if st.key != Self::key(n, inputs) {
            return Change::Run("cache key changed".into());
        }
        if let Some(why) = st.unpublished(wh, &n.part) {
            return Change::Run(why);
        }
        if let Some(owed) = &st.owed {
            return Change::Run(owed.to_string());
        }
        Change::Current
    }

    pub fn plan(&self) -> Result<Plan> {
        let wh = self.warehouse();
        let st = State::load(&wh)?;
        let mut files = FileHashes::default();
        let mut outputs: HashMap<String, String> = HashMap::new();
        let mut actions: Vec<Action> = Vec::with_capacity(self.nodes.len());
        let mut items = Vec::new();
        for (i, n) in self.nodes.iter().enumerate() {
            let prev = st.partitions.get(&n.part.id());
            let running: Vec<usize> = n.deps.iter().copied().filter(|&d| actions[d] != Action::Reuse).collect();
            let inputs = if running.is_empty() { self.inputs(n, &mut files, &outputs)? } else { None };
            let (action, reason) = match self.changed(n, prev, inputs.as_ref(), &running, &wh) {
                Change::Current => (Action::Reuse, "up to date".to_string()),
                Change::Run(r) => (Action::Run, r),
                Change::Upstream(names) => (
                    Action::MaybeRun,
                    format!("upstream will re-run: {} (skipped if its output is unchanged)", names.join(", ")),
                ),
            };
            if action == Action::Reuse {
                outputs.insert(n.part.id(), prev.map(|p| p.output_hash.clone()).unwrap_or_default());
            }
            actions.push(action.clone());
            let key = inputs.as_ref().map(|inp| Self::key(n, inp));
            items.push(PlanItem { node: i, action, reason, key });
        }
        Ok(Plan { items, stale: self.stale(&st, &wh) })
    }

    /// Partitions in the state or on disk that no node produces any more.
    pub fn stale(&self, st: &State, wh: &Warehouse) -> Vec<String> {
        let live: HashSet<String> = self.nodes.iter().map(|n| n.part.id()).collect();
        let mut out: Vec<String> = st.partitions.keys().filter(|k| !live.contains(*k)).cloned().collect();
        for t in self.tables {
            for p in wh.partitions_on_disk(*t) {
                if !live.contains(&p) && !out.contains(&p) {
                    out.push(p);
                }
            }
        }
        out.sort();
        out
    }
}

/// Content hashes of input files, computed once per command.
#[derive(Default)]
pub(super) struct FileHashes(HashMap<PathBuf, String>);

impl FileHashes {
    fn get(&mut self, p: &PathBuf) -> Result<String> {
        if let Some(h) = self.0.get(p) {
            return Ok(h.clone());
        }
        let bytes = std::fs::read(p).with_context(|| format!("cannot read input {}", p.display()))?;
        let h = blake3::hash(&bytes).to_hex()[..32].to_string();
        self.0.insert(p.clone(), h.clone());
        Ok(h)
    }
}

#[cfg(test)]
impl Pipeline {
    /// As if every partition had just been published under its current key (a file whose hash is
    /// recorded), without running a job: for tests of what `plan` says after a change.
    pub(crate) fn pretend_ran(&self) -> Result<()> {
        let wh = self.warehouse();
        let mut st = State::default();
        let mut files = FileHashes::default();
        let mut outputs: HashMap<String, String> = HashMap::new();
        for n in &self.nodes {
            let inputs = self.inputs(n, &mut files, &outputs)?.expect("every input is known in order");
            let body = n.part.id().into_bytes();
            let path = wh.file(&n.part);
            std::fs::create_dir_all(path.parent().unwrap())?;
            std::fs::write(&path, &body)?;
            let output_hash = blake3::hash(&body).to_hex().to_string();
            let (bytes, mtime_ns) = crate::warehouse::stamp(&path)?;
            outputs.insert(n.part.id(), output_hash.clone());
            st.partitions.insert(
                n.part.id(),
                PartState {
                    stage: n.stage.into(),
                    key: Self::key(n, &inputs),
                    output_hash,
                    rows: 0,
                    version: n.version.clone(),
                    params_hash: Self::params_hash(n),
                    inputs,
                    finished_at: crate::warehouse::now(),
                    seconds: 0.0,
                    bytes: Some(bytes),
                    mtime_ns,
                    owed: None,
                },
            );
        }
        st.save(&wh)
    }
}
