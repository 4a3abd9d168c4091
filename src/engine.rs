//! The DAG of stage partitions, content-hash cache keys, `plan`, and the scheduler.
//!
//! A partition's key hashes its stage's implementation version, its parameters, the content
//! of its input files and the output hashes of its upstream partitions. Outputs are hashed by
//! content, so an upstream re-run that produces the same rows does not ripple downstream.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use petgraph::graph::{DiGraph, NodeIndex};
use serde_json::{json, Value};

use crate::config::Config;
use crate::tasks::{self, Task};
use crate::warehouse::{self, PartState, Partition, RunInfo, State, Warehouse};

/// One stage partition: what it reads, how it is keyed, what it runs.
#[derive(Debug, Clone)]
pub struct Node {
    pub stage: &'static str,
    pub part: Partition,
    pub deps: Vec<usize>,
    /// Input files hashed by content (moving a file does not invalidate its results).
    pub files: Vec<PathBuf>,
    /// Inputs known by a pinned hash rather than read (assets checked by `doc2ci setup`).
    pub pinned: Vec<(String, String)>,
    pub params: Value,
    /// The code version of the stage ([`crate::code::version`]): changes whenever its code does.
    pub version: String,
    pub task: Task,
    /// Set on per-model partitions, so `plan` can say "new model".
    pub model: Option<String>,
}

impl Node {
    pub fn label(&self) -> String {
        format!("{} {}", self.stage, self.part.id())
    }
}

pub struct Pipeline {
    pub cfg: Config,
    pub nodes: Vec<Node>,
    /// Topological order of `nodes`.
    pub order: Vec<usize>,
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
}

pub struct Plan {
    pub items: Vec<PlanItem>,
    /// Partitions on disk that the study no longer declares.
    pub stale: Vec<String>,
}

impl Pipeline {
    pub fn new(cfg: Config) -> Result<Self> {
        let nodes = tasks::build_nodes(&cfg)?;
        let mut g: DiGraph<usize, ()> = DiGraph::new();
        let idx: Vec<NodeIndex> = (0..nodes.len()).map(|i| g.add_node(i)).collect();
        for (i, n) in nodes.iter().enumerate() {
            for &d in &n.deps {
                g.add_edge(idx[d], idx[i], ());
            }
        }
        let order = petgraph::algo::toposort(&g, None)
            .map_err(|c| anyhow!("the pipeline has a cycle through {}", nodes[g[c.node_id()]].label()))?
            .into_iter()
            .map(|n| g[n])
            .collect();
        Ok(Self { cfg, nodes, order })
    }

    pub fn warehouse(&self) -> Warehouse {
        Warehouse::new(&self.cfg.warehouse)
    }

    fn params_hash(n: &Node) -> String {
        blake3::hash(n.params.to_string().as_bytes()).to_hex()[..16].to_string()
    }

    /// Input name → content hash for one node, given the output hashes known so far.
    fn inputs(
        &self,
        n: &Node,
        files: &mut FileHashes,
        outputs: &HashMap<String, String>,
    ) -> Result<BTreeMap<String, String>> {
        let mut m = BTreeMap::new();
        for f in &n.files {
            m.insert(f.display().to_string(), files.get(f)?);
        }
        for (name, h) in &n.pinned {
            m.insert(name.clone(), h.clone());
        }
        for &d in &n.deps {
            let id = self.nodes[d].part.id();
            let h = outputs
                .get(&id)
                .cloned()
                .ok_or_else(|| anyhow!("internal: {} ran before its input {id}", n.label()))?;
            m.insert(id, h);
        }
        Ok(m)
    }

    fn key(n: &Node, inputs: &BTreeMap<String, String>) -> String {
        let v = json!({"stage": n.stage, "version": n.version, "params": n.params, "inputs": inputs.values().collect::<Vec<_>>()});
        blake3::hash(v.to_string().as_bytes()).to_hex().to_string()
    }

    /// Why a node whose inputs are all known must run, or None when its result is current.
    fn why(
        &self,
        n: &Node,
        st: Option<&PartState>,
        inputs: &BTreeMap<String, String>,
        wh: &Warehouse,
    ) -> Option<String> {
        let Some(st) = st else {
            return Some(match &n.model {
                Some(m) => format!("new model `{m}`"),
                None => "new partition".into(),
            });
        };
        if st.version != n.version {
            return Some("stage code changed".into());
        }
        if st.params_hash != Self::params_hash(n) {
            return Some("changed parameter".into());
        }
        let changed: Vec<&String> =
            inputs.iter().filter(|(k, v)| st.inputs.get(*k) != Some(v)).map(|(k, _)| k).collect();
        if !changed.is_empty() {
            let names: Vec<String> = changed.iter().map(|s| s.to_string()).collect();
            return Some(format!("changed input: {}", names.join(", ")));
        }
        if st.key != Self::key(n, inputs) {
            return Some("cache key changed".into());
        }
        if !wh.file(&n.part).exists() {
            return Some("output missing from the warehouse".into());
        }
        None
    }

    pub fn plan(&self) -> Result<Plan> {
        let wh = self.warehouse();
        let st = wh.load_state()?;
        let mut files = FileHashes::default();
        let mut outputs: HashMap<String, String> = HashMap::new();
        let mut actions: HashMap<usize, Action> = HashMap::new();
        let mut items = Vec::new();
        for &i in &self.order {
            let n = &self.nodes[i];
            let prev = st.partitions.get(&n.part.id());
            let running: Vec<&Node> =
                n.deps.iter().filter(|d| actions[d] != Action::Reuse).map(|&d| &self.nodes[d]).collect();
            let (action, reason) = if running.is_empty() {
                let inputs = self.inputs(n, &mut files, &outputs)?;
                match self.why(n, prev, &inputs, &wh) {
                    Some(r) => (Action::Run, r),
                    None => (Action::Reuse, "up to date".into()),
                }
            } else {
                match prev {
                    None => {
                        (Action::Run, n.model.as_ref().map_or("new partition".into(), |m| format!("new model `{m}`")))
                    }
                    Some(p) if p.params_hash != Self::params_hash(n) => (Action::Run, "changed parameter".into()),
                    Some(p) if p.version != n.version => (Action::Run, "stage code changed".into()),
                    Some(_) => {
                        let names: Vec<String> = running.iter().map(|d| d.part.id()).collect();
                        (
                            Action::MaybeRun,
                            format!("upstream will re-run: {} (skipped if its output is unchanged)", names.join(", ")),
                        )
                    }
                }
            };
            if action == Action::Reuse {
                outputs.insert(n.part.id(), prev.map(|p| p.output_hash.clone()).unwrap_or_default());
            }
            actions.insert(i, action.clone());
            items.push(PlanItem { node: i, action, reason });
        }
        Ok(Plan { items, stale: self.stale(&st, &wh) })
    }

    /// Partitions in the state or on disk that no node produces any more.
    fn stale(&self, st: &State, wh: &Warehouse) -> Vec<String> {
        let live: HashSet<String> = self.nodes.iter().map(|n| n.part.id()).collect();
        let mut out: Vec<String> = st.partitions.keys().filter(|k| !live.contains(*k)).cloned().collect();
        for t in warehouse::TABLES {
            for p in wh.partitions_on_disk(*t) {
                if !live.contains(&p) && !out.contains(&p) {
                    out.push(p);
                }
            }
        }
        out.sort();
        out
    }

    /// Runs what the plan says, `threads` partitions at a time; finished partitions are kept
    /// even when others fail.
    pub fn run(&self, only: &[String], ui: &crate::ui::Ui) -> Result<RunInfo> {
        let wh = self.warehouse();
        let _lock = wh.lock()?;
        let started = warehouse::now();
        let state = Arc::new(Mutex::new(wh.load_state()?));
        for s in only {
            if !self.nodes.iter().any(|n| n.stage == s) {
                let stages: HashSet<&str> = self.nodes.iter().map(|n| n.stage).collect();
                let mut stages: Vec<&str> = stages.into_iter().collect();
                stages.sort();
                bail!("--only {s}: no such stage in this pipeline (stages: {})", stages.join(", "));
            }
        }
        let selected = |n: &Node| only.is_empty() || only.iter().any(|s| s == n.stage);

        let rt =
            tokio::runtime::Builder::new_multi_thread().worker_threads(self.cfg.threads.max(1)).enable_all().build()?;
        let mut files = FileHashes::default();
        let mut outputs: HashMap<String, String> = HashMap::new();
        let mut done: HashSet<usize> = HashSet::new();
        let mut failed: HashMap<usize, String> = HashMap::new();
        let (mut ran, mut reused) = (0usize, 0usize);
        let bar = ui.bar(self.nodes.len() as u64, "partitions");

        let mut pending: Vec<usize> = self.order.clone();
        let mut running = tokio::task::JoinSet::new();
        let mut queue = std::collections::VecDeque::new();
        let mut in_flight = 0usize;
        loop {
            // Start every node whose inputs are settled, cheapest decision (reuse) first.
            let mut progressed = true;
            while progressed {
                progressed = false;
                let mut i = 0;
                while i < pending.len() {
                    let id = pending[i];
                    let n = &self.nodes[id];
                    if n.deps.iter().any(|d| !done.contains(d)) {
                        i += 1;
                        continue;
                    }
                    pending.remove(i);
                    progressed = true;
                    if let Some(d) = n.deps.iter().find(|d| failed.contains_key(d)) {
                        failed.insert(id, format!("skipped: input {} failed", self.nodes[*d].part.id()));
                        done.insert(id);
                        bar.inc(1);
                        continue;
                    }
                    let inputs = self.inputs(n, &mut files, &outputs)?;
                    let prev = state.lock().unwrap().partitions.get(&n.part.id()).cloned();
                    let why = self.why(n, prev.as_ref(), &inputs, &wh);
                    match (why, prev) {
                        (None, Some(p)) => {
                            outputs.insert(n.part.id(), p.output_hash);
                            reused += 1;
                            done.insert(id);
                            bar.inc(1);
                        }
                        (_, prev) if !selected(n) => {
                            // Not selected by --only: downstream keeps reading what is there.
                            match prev {
                                Some(p) => {
                                    outputs.insert(n.part.id(), p.output_hash);
                                    done.insert(id);
                                }
                                None => {
                                    failed.insert(id, "not built yet and excluded by --only".into());
                                    done.insert(id);
                                }
                            }
                            bar.inc(1);
                        }
                        (why, _) => {
                            let reason = why.unwrap_or_default();
                            queue.push_back((id, reason, inputs));
                        }
                    }
                }
            }
            // At most `threads` partitions at once; each may use rayon inside.
            while in_flight < self.cfg.threads {
                let Some((id, reason, inputs)) = queue.pop_front() else { break };
                let n = &self.nodes[id];
                ui.info(&format!("run {} ({reason})", n.label()));
                let key = Self::key(n, &inputs);
                let node = n.clone();
                let cfg = self.cfg.clone();
                let root = wh.root.clone();
                let child = ui.child();
                in_flight += 1;
                running.spawn_blocking_on(
                    move || {
                        let t0 = Instant::now();
                        let wh = Warehouse::new(&root);
                        let r = tasks::execute(&node, &cfg, &wh, &key, &child);
                        (id, key, inputs, r, t0.elapsed().as_secs_f64())
                    },
                    rt.handle(),
                );
            }
            if in_flight == 0 {
                break;
            }
            let Some(joined) = rt.block_on(running.join_next()) else { break };
            in_flight -= 1;
            let (id, key, inputs, result, secs) = joined.context("a stage task panicked")?;
            let n = &self.nodes[id];
            bar.inc(1);
            done.insert(id);
            match result {
                Ok(out) => {
                    ran += 1;
                    outputs.insert(n.part.id(), out.output_hash.clone());
                    let ps = PartState {
                        stage: n.stage.to_string(),
                        key,
                        output_hash: out.output_hash,
                        rows: out.rows,
                        version: n.version.clone(),
                        params_hash: Self::params_hash(n),
                        inputs,
                        finished_at: warehouse::now(),
                        seconds: secs,
                    };
                    let mut st = state.lock().unwrap();
                    st.partitions.insert(n.part.id(), ps);
                    wh.save_state(&st)?;
                    ui.info(&format!(
                        "done {}: {} rows in {:.2}s{}",
                        n.label(),
                        out.rows,
                        secs,
                        out.note.map(|s| format!(" ({s})")).unwrap_or_default()
                    ));
                }
                Err(e) => {
                    ui.error(&format!("{} failed: {e:#}", n.label()));
                    failed.insert(id, format!("{e:#}"));
                }
            }
        }
        bar.finish_and_clear();

        // The table folders hold exactly the current study.
        let mut st = state.lock().unwrap();
        if only.is_empty() {
            for p in self.stale(&st, &wh) {
                if let Some(part) = partition_from_id(&p) {
                    wh.remove(&part)?;
                }
                st.partitions.remove(&p);
                ui.info(&format!("removed {p} (no longer in {})", self.cfg.file.display()));
            }
        }
        let info = RunInfo {
            started_at: started,
            finished_at: warehouse::now(),
            config: self.cfg.file.display().to_string(),
            ran,
            reused,
            failed: failed.values().filter(|m| !m.starts_with("skipped")).count(),
        };
        st.last_run = Some(info.clone());
        wh.save_state(&st)?;
        if !failed.is_empty() {
            let mut msgs: Vec<String> =
                failed.iter().map(|(i, m)| format!("  {}: {m}", self.nodes[*i].label())).collect();
            msgs.sort();
            bail!(
                "{} partition(s) did not finish (finished work is kept; fix and re-run):\n{}",
                failed.len(),
                msgs.join("\n")
            );
        }
        Ok(info)
    }
}

/// `generations/service=a/model=b` → the partition, for cleaning up stale folders.
pub fn partition_from_id(id: &str) -> Option<Partition> {
    let (id, file) = match id.split_once('#') {
        Some((a, f)) => (a, Some(f.to_string())),
        None => (id, None),
    };
    let mut it = id.split('/');
    let t = warehouse::table(it.next()?)?;
    let values: Vec<(String, String)> =
        it.map(|kv| kv.split_once('=').map(|(k, v)| (k.to_string(), v.to_string()))).collect::<Option<_>>()?;
    (values.len() == t.partition_cols.len()).then_some(Partition { table: t.name, values, file })
}

/// Content hashes of input files, computed once per command.
#[derive(Default)]
struct FileHashes(HashMap<PathBuf, String>);

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
