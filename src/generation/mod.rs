//! Asking a model: the one request loop that generate and every repair round send their requests
//! through (many in flight, the request cache, the run's budget, every answer checkpointed as it
//! arrives) and the provider-batch path beside it (`batch.rs`). Jobs build the items and call
//! in; nothing here knows which stage asked. What a row keeps of an answer is the generate
//! stage's rule (`doc2ci_generate::answer_row`).

mod batch;

use std::collections::{HashMap, HashSet};

use anyhow::{anyhow, Result};
use doc2ci_generate::{Answer, Msg, PromptOptions};
use doc2ci_llm::{LlmError, Message, Reply, Request};
use doc2ci_rows::{Generation, RowKey};
use serde::{Deserialize, Serialize};

use crate::backends::RequestCache;
use crate::config::{Config, GenSettings, Model, Place, Section};
use crate::engine::{Ctx, Owed};

/// `[stages.generate]`: how the request loop checkpoints and what a run may spend; neither
/// changes an answer, so no job's key holds them.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// Requests per checkpointed batch: a killed run loses at most one batch of answers.
    /// Default: enough to keep every endpoint busy (16, or 2 × concurrency × endpoints).
    #[serde(default)]
    pub batch_size: Option<usize>,
    /// Budget of the whole run over every priced model (a model's own `max_cost` binds too).
    #[serde(default)]
    pub max_cost: Option<f64>,
}

impl Section for Settings {
    const NAME: &'static str = "generate";

    fn check(&self, at: &Place, _: &Config) -> Result<()> {
        if self.batch_size == Some(0) {
            at.fail_at("batch_size", "must be at least 1")?;
        }
        if self.max_cost.is_some_and(|c| !(c > 0.0)) {
            at.fail_at("max_cost", "must be above 0")?;
        }
        Ok(())
    }
}

/// Who is asked, for which service, how many requests at once. How many, where answers are
/// kept and what a run may spend never change an answer: skipped from the key.
#[derive(Serialize)]
pub struct Asker {
    pub model: Model,
    pub service: String,
    pub display: String,
    #[serde(skip)]
    pub batch_size: Option<usize>,
    #[serde(skip)]
    pub cache: Option<crate::backends::CacheSettings>,
    /// `[stages.generate] max_cost`.
    #[serde(skip)]
    pub run_max_cost: Option<f64>,
}

impl Asker {
    pub fn new(cfg: &Config, m: &Model, service: &str) -> Result<Self> {
        let settings: Settings = cfg.section()?;
        Ok(Self {
            model: m.clone(),
            service: service.to_string(),
            display: cfg.service(service).map_or(service.to_string(), |s| s.display.clone()),
            batch_size: settings.batch_size,
            cache: cfg.request_cache.clone(),
            run_max_cost: settings.max_cost,
        })
    }
}

/// One request to make: which pair and sample, and the messages.
pub struct Item {
    pub pair_id: String,
    pub sample: u32,
    pub messages: Vec<Msg>,
    pub seed: Option<u64>,
}

fn to_messages(m: &[Msg]) -> Vec<Message> {
    m.iter().map(|m| Message { role: m.role.clone(), content: m.content.clone() }).collect()
}

/// The prompt variant a model's settings ask for (few-shot, retrieval); the zero-shot default for
/// a model with none (an import).
pub fn prompt_options(g: Option<&GenSettings>) -> PromptOptions {
    match g {
        Some(g) => PromptOptions {
            few_shot: g.key.few_shot,
            retrieval: g.key.retrieval,
            retrieval_chars: g.key.retrieval_chars,
        },
        None => PromptOptions::default(),
    }
}

/// The request of one item, as every backend receives it.
pub fn request(g: &GenSettings, it: &Item) -> Request {
    Request {
        messages: to_messages(&it.messages),
        temperature: g.key.temperature,
        max_tokens: g.key.max_tokens,
        seed: it.seed,
        extra: g.key.params.clone(),
    }
}

/// The runtime a job's requests run on: the caller's if it has one, else a private one (kept
/// alive by the first value).
pub fn runtime() -> Result<(Option<tokio::runtime::Runtime>, tokio::runtime::Handle)> {
    Ok(match tokio::runtime::Handle::try_current() {
        Ok(h) => (None, h),
        Err(_) => {
            let local = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
            let h = local.handle().clone();
            (Some(local), h)
        }
    })
}

/// What the model said (or why it said nothing), as a `generations` row.
pub fn to_row(
    item: &Item,
    service: &str,
    model: &str,
    round: u32,
    r: std::result::Result<Reply, LlmError>,
    who: &str,
    g: &GenSettings,
) -> Generation {
    let key = RowKey {
        pair_id: item.pair_id.clone(),
        service: service.into(),
        model: model.into(),
        sample: item.sample,
        round,
    };
    let answer = r
        .map(|reply| Answer {
            text: reply.text,
            prompt_tokens: reply.prompt_tokens,
            completion_tokens: reply.completion_tokens,
            latency_ms: reply.latency_ms,
            finish_reason: reply.finish_reason,
            attempts: reply.attempts,
        })
        .map_err(|e| failure(who, &e));
    doc2ci_generate::answer_row(key, answer, (g.price_per_1k_input, g.price_per_1k_output))
}

/// A backend's failure as a row's `error`: who failed, and how.
pub fn failure(who: &str, e: &LlmError) -> String {
    let kind = match e {
        LlmError::Http(_) => "http error",
        LlmError::Retryable(_) => "gave up after retries",
        LlmError::BadResponse(_) => "bad response",
        LlmError::Other(_) => "failed",
    };
    format!("{who}: {kind}: {e}")
}

/// Sends `items` with up to `batch` requests in flight and checkpoints every answer as soon as it
/// arrives, so a killed run re-asks only what was in flight then (at most one request per slot),
/// never an answered one: on a paid API nothing answered is billed twice. Rows come back in
/// `items` order, whatever order the answers arrived in.
pub fn run_items(cx: &Ctx, ask: &Asker, model_name: &str, round: u32, items: Vec<Item>) -> Result<Vec<Generation>> {
    // The answers this partition already published, when it runs again for its errors.
    let kept: Vec<Generation> = cx.kept::<Generation>()?;
    run_items_with(cx, ask, model_name, round, items, kept)
}

/// [`run_items`] for a partition whose published rows are not `generations` rows: the caller
/// hands over the answers it already published (`kept`, when it runs again for its errors).
pub fn run_items_with(
    cx: &Ctx,
    ask: &Asker,
    model_name: &str,
    round: u32,
    items: Vec<Item>,
    kept: Vec<Generation>,
) -> Result<Vec<Generation>> {
    let (m, service, ui) = (&ask.model, ask.service.as_str(), cx.ui);
    let g = m.gen().ok_or_else(|| anyhow!("model `{}` cannot generate", m.name))?;
    let mut rows = cx.batches::<Generation>()?;
    let kept: Vec<Generation> = kept.into_iter().filter(|r| r.error.is_none()).collect();
    // An error is never an answer: only answers are left out of what is asked.
    let answered: HashSet<(String, u32)> =
        kept.iter().chain(rows.rows()).filter(|r| r.error.is_none()).map(|r| (r.pair_id.clone(), r.sample)).collect();
    let todo: Vec<&Item> = items.iter().filter(|it| !answered.contains(&(it.pair_id.clone(), it.sample))).collect();
    if !kept.is_empty() {
        ui.info(&format!("{}: asking again {} errored of {} requests", cx.label(), todo.len(), items.len()));
    } else if !rows.rows().is_empty() {
        ui.info(&format!("{}: resuming after {} of {} requests", cx.label(), rows.rows().len(), items.len()));
    }
    if !todo.is_empty() {
        if let Some(client) = crate::backends::batch_client(&m.name, g)? {
            let cache = ask.cache.as_ref().map(RequestCache::new);
            let budget = crate::backends::Budget::new(&m.name, g, ask.run_max_cost);
            let job =
                batch::BatchRun { cx, client, g, service, model: model_name, round, cache, budget, total: items.len() };
            job.run(&todo, &mut rows)?;
            return Ok(settle(&items, kept, rows.into_rows()));
        }
        let backend = crate::backends::client(&m.name, g)?;
        let who = format!("model `{}` ({})", m.name, backend.describe());
        // Enough in flight to keep every endpoint busy; the backend enforces the real limits.
        let slots = ask.batch_size.unwrap_or_else(|| 16.max(g.concurrency * g.base_urls.len().max(1) * 2));
        let (_local, handle) = runtime()?;
        let bar = ui.bar(todo.len() as u64, &format!("requests of {service}/{model_name} round {round}"));
        let cache = ask.cache.as_ref().map(RequestCache::new);

        let budget = crate::backends::Budget::new(&m.name, g, ask.run_max_cost);
        let asked = handle.block_on(async {
            let mut set = tokio::task::JoinSet::new();
            let mut next = 0usize;
            loop {
                // Answers the request cache already holds are rows at once, asked of no one.
                let mut fresh = Vec::new();
                while set.len() < slots && next < todo.len() {
                    let it = todo[next];
                    let req = request(g, it);
                    let key = cache.as_ref().map(|_| RequestCache::key(g, &req, it.sample));
                    if let Some(hit) = cache.as_ref().zip(key.as_ref()).and_then(|(c, k)| c.get(k)) {
                        let mut row = to_row(it, service, model_name, round, Ok(hit), &who, g);
                        row.cost = row.cost.map(|_| 0.0);
                        fresh.push(row);
                        next += 1;
                        continue;
                    }
                    // Within budget, or not asked (yet): in-flight answers may free room.
                    let est = budget.as_ref().map(|b| b.estimate(&req));
                    if let (Some(b), Some(e)) = (&budget, est) {
                        if !b.reserve(e) {
                            break;
                        }
                    }
                    let b = backend.clone();
                    set.spawn_on(async move { (next, key, est, b.chat(&req).await) }, &handle);
                    next += 1;
                }
                if fresh.is_empty() {
                    let Some(first) = set.join_next().await else { break };
                    let mut ready = vec![first];
                    while let Some(j) = set.try_join_next() {
                        ready.push(j);
                    }
                    for j in ready {
                        let (i, key, est, r) = j.map_err(|e| anyhow!("a request task failed: {e}"))?;
                        // Only answers are kept; a failure is asked again next time.
                        if let (Some(c), Some(k), Ok(reply)) = (&cache, &key, &r) {
                            if let Err(e) = c.put(k, reply) {
                                ui.info(&format!("{}: request cache not written: {e:#}", cx.label()));
                            }
                        }
                        if let (Some(b), Some(e)) = (&budget, est) {
                            b.settle(e, b.charge(e, &r));
                        }
                        let row = to_row(todo[i], service, model_name, round, r, &who, g);
                        fresh.push(row);
                    }
                }
                bar.inc(fresh.len() as u64);
                let n = (rows.rows().len() + fresh.len()) as u64;
                rows.commit(fresh, n, 0)?;
            }
            Ok::<_, anyhow::Error>(next)
        })?;
        bar.finish_and_clear();
        if let (Some(b), true) = (&budget, asked < todo.len()) {
            return Err(budget_reached(&m.name, b, todo.len() - asked, items.len(), rows.rows().len()));
        }
    }
    Ok(settle(&items, kept, rows.into_rows()))
}

/// One row per item, in `items` order: its answer (this run's, else the one kept), else its
/// newest error. A resumed or repeated run may hold both for one request.
fn settle(items: &[Item], kept: Vec<Generation>, asked: Vec<Generation>) -> Vec<Generation> {
    let mut best: HashMap<(String, u32), Generation> = HashMap::new();
    for r in kept.into_iter().chain(asked) {
        let k = (r.pair_id.clone(), r.sample);
        match best.get(&k) {
            Some(b) if b.error.is_none() && r.error.is_some() => {}
            _ => {
                best.insert(k, r);
            }
        }
    }
    items.iter().filter_map(|it| best.remove(&(it.pair_id.clone(), it.sample))).collect()
}

/// What a generations partition still owes: its errored requests, asked again by the next run.
pub fn owed(rows: &[Generation]) -> Owed {
    Owed {
        count: rows.iter().filter(|r| r.error.is_some()).count() as u64,
        what: "errored answers to ask again".into(),
    }
}

/// A partition stopped by its budget, every answer so far kept.
pub fn budget_reached(
    model: &str,
    b: &crate::backends::Budget,
    left: usize,
    total: usize,
    kept: usize,
) -> anyhow::Error {
    anyhow!(
        "model `{model}`: budget reached: {}; {left} of {total} requests of this partition left to ask (the {kept} \
         answered so far are kept); raise max_cost and run again",
        b.describe()
    )
}

pub fn summary(rows: &[Generation]) -> String {
    let cached = rows.iter().filter(|r| r.attempts == Some(0)).count();
    let errors = rows.iter().filter(|r| r.error.is_some()).count();
    let degenerate = rows.iter().filter(|r| r.degenerate).count();
    let tokens: u64 = rows.iter().filter_map(|r| r.completion_tokens).map(u64::from).sum();
    let cost: f64 = rows.iter().filter_map(|r| r.cost).sum();
    let answers = rows.len() - errors;
    let mut s = format!("{answers} answers, {errors} errors, {degenerate} degenerate, {tokens} tokens generated");
    if cost > 0.0 {
        s.push_str(&format!(", cost {cost:.4}"));
    }
    if cached > 0 {
        s.push_str(&format!(", {cached} from the request cache"));
    }
    s
}
