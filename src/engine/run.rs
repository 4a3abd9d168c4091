//! The scheduler: runs what [`Pipeline::changed`] says, `threads` partitions at a time, and keeps
//! every finished partition even when others fail.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{bail, Context, Result};

use super::plan::{Change, FileHashes, Pipeline};
use super::{Checkpoint, Lock, State};
use super::{Ctx, Node};
use super::{PartState, RunInfo};
use crate::ui::Ui;
use crate::warehouse::{self, Warehouse};

impl Pipeline {
    /// Runs what changed; `only` restricts running to these stages (the others' current results
    /// are read as they are).
    pub fn run(&self, only: &[String], ui: &Ui) -> Result<RunInfo> {
        let wh = self.warehouse();
        let _lock = Lock::take(&wh)?;
        let started = warehouse::now();
        let state = Arc::new(Mutex::new(State::load(&wh)?));
        for s in only {
            if !self.nodes.iter().any(|n| n.stage == s) {
                let stages: HashSet<&str> = self.nodes.iter().map(|n| n.stage).collect();
                let mut stages: Vec<&str> = stages.into_iter().collect();
                stages.sort();
                bail!("--only {s}: no such stage in this pipeline (stages: {})", stages.join(", "));
            }
        }
        let selected = |n: &Node| only.is_empty() || only.iter().any(|s| s == n.stage);

        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(self.threads).enable_all().build()?;
        let mut files = FileHashes::default();
        let mut outputs: HashMap<String, String> = HashMap::new();
        let mut done: HashSet<usize> = HashSet::new();
        let mut failed: HashMap<usize, String> = HashMap::new();
        let (mut ran, mut reused) = (0usize, 0usize);
        let bar = ui.bar(self.nodes.len() as u64, "partitions");

        let mut pending: Vec<usize> = (0..self.nodes.len()).collect();
        let mut running = tokio::task::JoinSet::new();
        let mut queue = VecDeque::new();
        let mut in_flight = 0usize;
        loop {
            // Settle every node whose inputs are settled, cheapest decision (reuse) first.
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
                    let inputs =
                        self.inputs(n, &mut files, &outputs)?.context("internal: an input has no output hash")?;
                    let prev = state.lock().unwrap().partitions.get(&n.part.id()).cloned();
                    match (self.changed(n, prev.as_ref(), Some(&inputs), &[], &wh), prev) {
                        (Change::Current, Some(p)) => {
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
                                }
                                None => {
                                    failed.insert(id, "not built yet and excluded by --only".into());
                                }
                            }
                            done.insert(id);
                            bar.inc(1);
                        }
                        (change, _) => {
                            let reason = match change {
                                Change::Run(r) => r,
                                _ => String::new(),
                            };
                            queue.push_back((id, reason, inputs));
                        }
                    }
                }
            }
            // At most `threads` partitions at once; each may use rayon inside.
            while in_flight < self.threads {
                let Some((id, reason, inputs)) = queue.pop_front() else { break };
                let n = &self.nodes[id];
                ui.info(&format!("run {} ({reason})", n.label()));
                let key = Self::key(n, &inputs);
                // Published under this key and run again for what it owed: its rows still stand.
                let owing = state
                    .lock()
                    .unwrap()
                    .partitions
                    .get(&n.part.id())
                    .is_some_and(|p| p.key == key && p.owed.is_some() && p.unpublished(&wh, &n.part).is_none());
                let node = n.clone();
                let root = wh.root.clone();
                let child = ui.child();
                in_flight += 1;
                running.spawn_blocking_on(
                    move || {
                        let t0 = Instant::now();
                        let wh = Warehouse::new(&root);
                        // A job that panics fails its own partition; every other one goes on, and
                        // the state of those that finished is kept.
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
                    let (bytes, mtime_ns) = match warehouse::stamp(&wh.file(&n.part)) {
                        Ok((b, t)) => (Some(b), t),
                        Err(_) => (None, None),
                    };
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
                        bytes,
                        mtime_ns,
                        owed: out.owed.clone(),
                    };
                    let mut st = state.lock().unwrap();
                    st.partitions.insert(n.part.id(), ps);
                    st.save(&wh)?;
                    // Only now: until the record is on disk, a resumed run re-runs the partition.
                    Checkpoint::at(&wh, &n.part, &st.partitions[&n.part.id()].key).clear();
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
                if let Some(part) = self.partition(&p) {
                    wh.remove(&part)?;
                }
                st.partitions.remove(&p);
                ui.info(&format!("removed {p} (no longer in {})", self.config.display()));
            }
        }
        let info = RunInfo {
            started_at: started,
            finished_at: warehouse::now(),
            config: self.config.display().to_string(),
            ran,
            reused,
            failed: failed.values().filter(|m| !m.starts_with("skipped")).count(),
        };
        st.last_run = Some(info.clone());
        st.save(&wh)?;
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
