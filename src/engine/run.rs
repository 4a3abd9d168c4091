//! The scheduler: runs what [`Pipeline::changed`] says, `threads` partitions at a time, and keeps
//! every finished partition even when others fail.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{bail, Context, Result};

use super::plan::{Change, FileHashes, Pipeline};
use super::{Checkpoint, Lock, State};
use super::{Ctx, Node};
use super::{PartState, RunInfo};
use crate::ui::Ui;
use crate::warehouse::{self, Warehouse};

/// A partition to run: its node, why it runs, and its inputs' hashes.
type Queued = (usize, String, BTreeMap<String, String>);

/// What a run task hands back: its node, key, inputs, the job's result and its seconds.
type Finished = (usize, String, BTreeMap<String, String>, Result<super::Output>, f64);

/// One run's bookkeeping: which partitions are settled, which failed, and what each produced.
struct Sched<'p> {
    p: &'p Pipeline,
    wh: Warehouse,
    only: &'p [String],
    state: Arc<Mutex<State>>,
    files: FileHashes,
    /// Each settled partition's output hash, for its dependants' keys.
    outputs: HashMap<String, String>,
    done: HashSet<usize>,
    failed: HashMap<usize, String>,
    pending: Vec<usize>,
    queue: VecDeque<Queued>,
    ran: usize,
    reused: usize,
}

impl Pipeline {
    /// Runs what changed; `only` restricts running to these stages (the others' current results
    /// are read as they are).
    pub fn run(&self, only: &[String], ui: &Ui) -> Result<RunInfo> {
        let wh = self.warehouse();
        let _lock = Lock::take(&wh)?;
        let started = warehouse::now();
        for s in only {
            if !self.nodes.iter().any(|n| n.stage == s) {
                let stages: HashSet<&str> = self.nodes.iter().map(|n| n.stage).collect();
                let mut stages: Vec<&str> = stages.into_iter().collect();
                stages.sort();
                bail!("--only {s}: no such stage in this pipeline (stages: {})", stages.join(", "));
            }
        }
        let mut s = Sched {
            p: self,
            state: Arc::new(Mutex::new(State::load(&wh)?)),
            wh,
            only,
            files: FileHashes::default(),
            outputs: HashMap::new(),
            done: HashSet::new(),
            failed: HashMap::new(),
            pending: (0..self.nodes.len()).collect(),
            queue: VecDeque::new(),
            ran: 0,
            reused: 0,
        };
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(self.threads).enable_all().build()?;
        let bar = ui.bar(self.nodes.len() as u64, "partitions");
        let mut running = tokio::task::JoinSet::new();
        let mut in_flight = 0usize;
        loop {
            s.settle(&bar)?;
            // At most `threads` partitions at once; each may use rayon inside.
            while in_flight < self.threads {
                let Some(q) = s.queue.pop_front() else { break };
                let task = s.task(q, ui);
                running.spawn_blocking_on(task, rt.handle());
                in_flight += 1;
            }
            if in_flight == 0 {
                break;
            }
            let Some(joined) = rt.block_on(running.join_next()) else { break };
            in_flight -= 1;
            bar.inc(1);
            s.record(joined.context("a stage task panicked")?, ui)?;
        }
        bar.finish_and_clear();
        s.finish(started, ui)
    }
}

impl Sched<'_> {
    fn selected(&self, n: &Node) -> bool {
        self.only.is_empty() || self.only.iter().any(|s| s == n.stage)
    }

    /// Settles every node whose inputs are settled, cheapest decision (reuse) first; what must
    /// run goes to the queue.
    fn settle(&mut self, bar: &crate::ui::Progress) -> Result<()> {
        let p = self.p;
        let mut progressed = true;
        while progressed {
            progressed = false;
            let mut i = 0;
            while i < self.pending.len() {
                let id = self.pending[i];
                let n = &p.nodes[id];
                if n.deps.iter().any(|d| !self.done.contains(d)) {
                    i += 1;
                    continue;
                }
                self.pending.remove(i);
                progressed = true;
                if let Some(d) = n.deps.iter().find(|d| self.failed.contains_key(d)) {
                    self.failed.insert(id, format!("skipped: input {} failed", p.nodes[*d].part.id()));
                    self.done.insert(id);
                    bar.inc(1);
                    continue;
                }
                let inputs =
                    p.inputs(n, &mut self.files, &self.outputs)?.context("internal: an input has no output hash")?;
                let prev = self.state.lock().unwrap().partitions.get(&n.part.id()).cloned();
                match (p.changed(n, prev.as_ref(), Some(&inputs), &[], &self.wh), prev) {
                    (Change::Current, Some(prev)) => {
                        self.outputs.insert(n.part.id(), prev.output_hash);
                        self.reused += 1;
                        self.done.insert(id);
                        bar.inc(1);
                    }
                    (_, prev) if !self.selected(n) => {
                        // Not selected by --only: downstream keeps reading what is there.
                        match prev {
                            Some(prev) => {
                                self.outputs.insert(n.part.id(), prev.output_hash);
                            }
                            None => {
                                self.failed.insert(id, "not built yet and excluded by --only".into());
                            }
                        }
                        self.done.insert(id);
                        bar.inc(1);
                    }
                    (change, _) => {
                        let reason = match change {
                            Change::Run(r) => r,
                            _ => String::new(),
                        };
                        self.queue.push_back((id, reason, inputs));
                    }
                }
            }
        }
        Ok(())
    }

    /// The task that runs one queued partition's job on a blocking thread.
    fn task(&self, (id, reason, inputs): Queued, ui: &Ui) -> impl FnOnce() -> Finished + Send + 'static {
        let n = &self.p.nodes[id];
        ui.info(&format!("run {} ({reason})", n.label()));
        let key = Pipeline::key(n, &inputs);
        // Published under this key and run again for what it owed: its rows still stand.
        let owing = self
            .state
            .lock()
            .unwrap()
            .partitions
            .get(&n.part.id())
            .is_some_and(|p| p.key == key && p.owed.is_some() && p.unpublished(&self.wh, &n.part).is_none());
        let node = n.clone();
        let root = self.wh.root.clone();
        let child = ui.child();
        move || {
            let t0 = Instant::now();
            let wh = Warehouse::new(&root);
            // A job that panics fails its own partition; every other one goes on, and the state of
            // those that finished is kept.
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                node.job.run(&Ctx { wh: &wh, node: &node, key: &key, ui: &child, owing })
            }))
            .unwrap_or_else(|p| {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "a panic without a message".into());
                Err(anyhow::anyhow!("internal error (panic): {msg}"))
            });
            (id, key, inputs, r, t0.elapsed().as_secs_f64())
        }
    }

    /// Records a finished partition: its state on disk before its checkpoint goes, or its failure.
    fn record(&mut self, (id, key, inputs, result, secs): Finished, ui: &Ui) -> Result<()> {
        let n = &self.p.nodes[id];
        self.done.insert(id);
        let out = match result {
            Ok(out) => out,
            Err(e) => {
                ui.error(&format!("{} failed: {e:#}", n.label()));
                self.failed.insert(id, format!("{e:#}"));
                return Ok(());
            }
        };
        self.ran += 1;
        self.outputs.insert(n.part.id(), out.output_hash.clone());
        let (bytes, mtime_ns) = match warehouse::stamp(&self.wh.file(&n.part)) {
            Ok((b, t)) => (Some(b), t),
            Err(_) => (None, None),
        };
        let ps = PartState {
            stage: n.stage.to_string(),
            key,
            output_hash: out.output_hash,
            rows: out.rows,
            version: n.version.clone(),
            params_hash: Pipeline::params_hash(n),
            inputs,
            finished_at: warehouse::now(),
            seconds: secs,
            bytes,
            mtime_ns,
            owed: out.owed.clone(),
        };
        let mut st = self.state.lock().unwrap();
        st.partitions.insert(n.part.id(), ps);
        st.save(&self.wh)?;
        // Only now: until the record is on disk, a resumed run re-runs the partition.
        Checkpoint::at(&self.wh, &n.part, &st.partitions[&n.part.id()].key).clear();
        ui.info(&format!(
            "done {}: {} rows in {:.2}s{}",
            n.label(),
            out.rows,
            secs,
            out.note.map(|s| format!(" ({s})")).unwrap_or_default()
        ));
        if let Some(owed) = &out.owed {
            ui.info(&format!("{}: {owed} on the next run", n.label()));
        }
        Ok(())
    }

    /// Sweeps what the study no longer holds (a whole run only), saves the run's record, and
    /// fails naming every partition that did not finish.
    fn finish(self, started: String, ui: &Ui) -> Result<RunInfo> {
        let (p, wh) = (self.p, &self.wh);
        // The table folders hold exactly the current study.
        let mut st = self.state.lock().unwrap();
        if self.only.is_empty() {
            for part_id in p.stale(&st, wh) {
                if let Some(part) = p.partition(&part_id) {
                    wh.remove(&part)?;
                }
                st.partitions.remove(&part_id);
                ui.info(&format!("removed {part_id} (no longer in {})", p.config.display()));
            }
        }
        let info = RunInfo {
            started_at: started,
            finished_at: warehouse::now(),
            config: p.config.display().to_string(),
            ran: self.ran,
            reused: self.reused,
            failed: self.failed.values().filter(|m| !m.starts_with("skipped")).count(),
        };
        st.last_run = Some(info.clone());
        st.save(wh)?;
        if !self.failed.is_empty() {
            let mut msgs: Vec<String> =
                self.failed.iter().map(|(i, m)| format!("  {}: {m}", p.nodes[*i].label())).collect();
            msgs.sort();
            bail!(
                "{} partition(s) did not finish (finished work is kept; fix and re-run):\n{}",
                self.failed.len(),
                msgs.join("\n")
            );
        }
        Ok(info)
    }
}
