//! The path for backends that answer in provider batches (`openai-batch`): the
//! partition's unanswered requests go up as one batch, its results come back as rows in one
//! checkpointed commit. What must survive a kill is the batch's identity: the note
//! `openai-batch` in the partition's checkpoint holds the submission's content key before the
//! upload and the batch id as soon as the server names it, so a resumed run polls that batch (or,
//! killed between the two, finds it by the key in its metadata) and never submits it twice.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use doc2ci_llm::batch::{parse_result_line, request_line, BatchClient, BatchInfo};
use doc2ci_llm::{LlmError, Reply};
use doc2ci_rows::Generation;
use serde_json::{json, Value};

use super::{budget_reached, request, runtime, to_row, Item};
use crate::backends::{Budget, RequestCache};
use crate::config::GenSettings;
use crate::engine::{Batches, Ctx};

const NOTE: &str = "openai-batch";
/// The metadata key a submission is found by after a kill.
const META_KEY: &str = "doc2ci_key";

pub(super) struct BatchRun<'a> {
    pub cx: &'a Ctx<'a>,
    pub client: BatchClient,
    pub g: &'a GenSettings,
    pub service: &'a str,
    pub model: &'a str,
    pub round: u32,
    pub cache: Option<RequestCache>,
    pub budget: Option<Budget>,
    /// Requests of the whole partition, for the budget message.
    pub total: usize,
}

/// A request's `custom_id` in this round.
fn custom_id(it: &Item, round: u32) -> String {
    doc2ci_generate::custom_id(&it.pair_id, it.sample, round)
}

impl BatchRun<'_> {
    /// Rows for every item of `todo` (answers, failures, or the batch's reason for having none).
    pub fn run(&self, todo: &[&Item], rows: &mut Batches<Generation>) -> Result<()> {
        let who = format!("model `{}` (openai-batch {})", self.model, self.client.shown());
        let (_local, handle) = runtime()?;
        // A batch a killed run left in flight comes first: its answers are paid for.
        if let Some(note) = rows.note(NOTE)? {
            let info = handle.block_on(self.resume(&note))?;
            let ids: HashSet<&str> = note["ids"].as_array().into_iter().flatten().filter_map(|v| v.as_str()).collect();
            if let Some(info) = info {
                self.cx.ui.info(&format!("{}: polling batch {} submitted before the kill", self.cx.label(), info.id));
                let items: Vec<&Item> =
                    todo.iter().copied().filter(|it| ids.contains(custom_id(it, self.round).as_str())).collect();
                let est: Vec<f64> = items.iter().map(|_| 0.0).collect();
                self.finish(&handle, info, &items, &est, &who, rows)?;
            }
            rows.set_note(NOTE, None)?;
        }
        // Every request with a row in this partition's checkpoint has had its turn in this run (a
        // batch polled after a kill included); a failed one is asked by the next run.
        let answered: HashSet<(String, u32)> = rows.rows().iter().map(|r| (r.pair_id.clone(), r.sample)).collect();
        let mut left: Vec<&Item> =
            todo.iter().copied().filter(|it| !answered.contains(&(it.pair_id.clone(), it.sample))).collect();
        // Answers the request cache holds are rows at once, asked of no one.
        if let Some(c) = &self.cache {
            let mut hits = Vec::new();
            left.retain(|it| {
                let req = request(self.g, it);
                match c.get(&RequestCache::key(self.g, &req, it.sample)) {
                    Some(hit) => {
                        let mut row = to_row(it, self.service, self.model, self.round, Ok(hit), &who, self.g);
                        row.cost = row.cost.map(|_| 0.0);
                        hits.push(row);
                        false
                    }
                    None => true,
                }
            });
            if !hits.is_empty() {
                let n = (rows.rows().len() + hits.len()) as u64;
                rows.commit(hits, n, 0)?;
            }
        }
        if left.is_empty() {
            return Ok(());
        }
        // What the budget allows, in order.
        let mut est = Vec::new();
        for it in &left {
            let e = self.budget.as_ref().map_or(0.0, |b| b.estimate(&request(self.g, it)));
            if self.budget.as_ref().is_some_and(|b| !b.reserve(e)) {
                break;
            }
            est.push(e);
        }
        let stopped = left.len() - est.len();
        left.truncate(est.len());
        if !left.is_empty() {
            let info = handle.block_on(self.submit(&left, rows))?;
            self.cx.ui.info(&format!("{}: batch {} submitted, {} requests", self.cx.label(), info.id, left.len()));
            self.finish(&handle, info, &left, &est, &who, rows)?;
            rows.set_note(NOTE, None)?;
        }
        if let (Some(b), true) = (&self.budget, stopped > 0) {
            return Err(budget_reached(self.model, b, stopped, self.total, rows.rows().len()));
        }
        Ok(())
    }

    /// The batch a note names, or the one its key finds (killed before the id was noted).
    async fn resume(&self, note: &Value) -> Result<Option<BatchInfo>> {
        if let Some(id) = note["id"].as_str() {
            return Ok(Some(self.client.get(id).await?));
        }
        match note["key"].as_str() {
            Some(key) => Ok(self.client.find(META_KEY, key).await?),
            None => Ok(None),
        }
    }

    /// Uploads the requests and creates the batch, noting its key before and its id after.
    async fn submit(&self, items: &[&Item], rows: &Batches<Generation>) -> Result<BatchInfo> {
        let mut jsonl = Vec::new();
        let mut ids = Vec::with_capacity(items.len());
        for it in items {
            let id = custom_id(it, self.round);
            let body = doc2ci_llm::chat_body(&self.g.key.model_id, &request(self.g, it));
            serde_json::to_writer(&mut jsonl, &request_line(&id, &body))?;
            jsonl.push(b'\n');
            ids.push(id);
        }
        let key = blake3::hash(&jsonl).to_hex()[..32].to_string();
        rows.set_note(NOTE, Some(&json!({"key": key, "ids": ids})))?;
        let file = self.client.upload("doc2ci-requests.jsonl", &jsonl).await?;
        let meta = [(META_KEY.to_string(), json!(key)), ("doc2ci_partition".to_string(), json!(self.cx.label()))];
        let info = self.client.create(&file, &meta.into_iter().collect::<serde_json::Map<String, Value>>()).await?;
        rows.set_note(NOTE, Some(&json!({"key": key, "ids": ids, "id": info.id})))?;
        Ok(info)
    }

    /// Polls until the batch is final, then turns its files into one committed batch of rows.
    fn finish(
        &self,
        handle: &tokio::runtime::Handle,
        mut info: BatchInfo,
        items: &[&Item],
        est: &[f64],
        who: &str,
        rows: &mut Batches<Generation>,
    ) -> Result<()> {
        let started = Instant::now();
        let bar = self.cx.ui.bar(items.len() as u64, "batched requests");
        let mut wait = Duration::from_millis(500);
        while !info.is_final() {
            bar.set_position(info.completed + info.failed);
            std::thread::sleep(wait);
            wait = (wait * 3 / 2).min(Duration::from_secs(60));
            info = handle.block_on(self.client.get(&info.id))?;
        }
        bar.finish_and_clear();
        let mut results: HashMap<String, Result<doc2ci_llm::Parsed, LlmError>> = HashMap::new();
        for file in [&info.output_file_id, &info.error_file_id].into_iter().flatten() {
            let bytes = handle.block_on(self.client.content(file))?;
            let text = String::from_utf8(bytes).map_err(|_| anyhow!("batch {}: file {file} is not UTF-8", info.id))?;
            for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
                let (id, r) = parse_result_line(line)
                    .map_err(|e| anyhow!("batch {}: file {file} line {}: {e}", info.id, n + 1))?;
                // An answer wins over an error line for the same request.
                if r.is_ok() || !results.contains_key(&id) {
                    results.insert(id, r);
                }
            }
        }
        let latency_ms = started.elapsed().as_secs_f64() * 1e3;
        let mut fresh = Vec::with_capacity(items.len());
        for (i, it) in items.iter().enumerate() {
            let r = match results.remove(&custom_id(it, self.round)) {
                Some(Ok((text, finish_reason, prompt_tokens, completion_tokens))) => Ok(Reply {
                    text,
                    prompt_tokens,
                    completion_tokens,
                    latency_ms,
                    finish_reason,
                    endpoint: self.client.shown().to_string(),
                    attempts: 1,

                    billed_retries: 0,
                }),
                Some(Err(e)) => Err(e),
                None => Err(LlmError::Other(format!(
                    "batch {} ended `{}` with no answer for this request{}",
                    info.id,
                    info.status,
                    info.errors.as_ref().map_or(String::new(), |e| format!(": {e}"))
                ))),
            };
            if let (Some(c), Ok(reply)) = (&self.cache, &r) {
                let key = RequestCache::key(self.g, &request(self.g, it), it.sample);
                if let Err(e) = c.put(&key, reply) {
                    self.cx.ui.info(&format!("{}: request cache not written: {e:#}", self.cx.label()));
                }
            }
            if let Some(b) = &self.budget {
                let e = est.get(i).copied().unwrap_or(0.0);
                b.settle(e, b.charge(e, &r));
            }
            let row = to_row(it, self.service, self.model, self.round, r, who, self.g);
            fresh.push(row);
        }
        let n = (rows.rows().len() + fresh.len()) as u64;
        rows.commit(fresh, n, 0).with_context(|| format!("batch {}: writing its rows", info.id))
    }
}
