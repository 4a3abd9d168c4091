//! generate: one (service, model) → `generations/service=…/model=…`, the study's prompt (and
//! its few-shot / retrieval variants) sent through the model's backend, many requests in flight,
//! every answer checkpointed so a killed run asks each (pair, sample) once. A failed request is a
//! row with its error. Repair rounds (`repair.rs`) send their requests through the same loop.

use std::collections::{HashMap, HashSet};

use anyhow::{anyhow, Context, Result};
use doc2ci_generate::{Msg, PromptOptions, Prompter};
use doc2ci_llm::{LlmError, Message, Reply, Request};
use doc2ci_rows::{Generation, Pair, RowKey};
use serde::Serialize;

use crate::backends::RequestCache;
use crate::config::{Config, GenSettings, Model};
use crate::engine::{Ctx, Graph, Job, Node, Output};
use crate::warehouse::{Partition, Warehouse, GENERATIONS, PAIRS};

pub use doc2ci_generate::PROMPT_VERSION;

pub fn declare(cfg: &Config, g: &mut Graph) -> Result<()> {
    for m in &cfg.models {
        let Some(gs) = m.gen() else { continue };
        for service in &gs.services {
            // A service without pairs has nothing to ask.
            let Some(dedupe) = g.find(PAIRS.name, &[("service", service)]) else { continue };
            let job = Generate {
                ask: Asker::new(cfg, m, service),
                pairs: g.part(dedupe).clone(),
                keep_leaks: cfg.stages.dedupe.keep_leaks,
            };
            g.add(
                Node::new("generate", Partition::new(GENERATIONS, &[service, &m.name]), job)
                    .deps(vec![dedupe])
                    .pinned(crate::backends::pins(m.gen()))
                    .model(&m.name),
            );
        }
    }
    Ok(())
}

/// Who is asked, for which service, how many requests at once. How many, where answers are
/// kept and what a run may spend never change an answer: skipped from the key.
#[derive(Serialize)]
pub(super) struct Asker {
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
    pub fn new(cfg: &Config, m: &Model, service: &str) -> Self {
        Self {
            model: m.clone(),
            service: service.to_string(),
            display: cfg.service(service).map_or(service.to_string(), |s| s.display.clone()),
            batch_size: cfg.stages.generate.batch_size,
            cache: cfg.request_cache.clone(),
            run_max_cost: cfg.stages.generate.max_cost,
        }
    }
}

#[derive(Serialize)]
struct Generate {
    ask: Asker,
    #[serde(skip)]
    pairs: Partition,
    keep_leaks: bool,
}

impl Job for Generate {
    fn run(&self, cx: &Ctx) -> Result<Output> {
        let m = &self.ask.model;
        let g = m.gen().ok_or_else(|| anyhow!("model `{}` cannot generate", m.name))?;
        let items = items(cx.read(&self.pairs)?, self.keep_leaks, &self.ask.display, g);
        let rows = run_items(cx, &self.ask, &m.name, 0, items)?;
        let note = summary(&rows);
        cx.publish(&rows, Some(note))
    }
}

/// Every request of a (service, model) partition, in pair order, one per sample.
fn items(mut pairs: Vec<Pair>, keep_leaks: bool, display: &str, g: &GenSettings) -> Vec<Item> {
    pairs.sort_by_key(|p| p.position);
    // A description that contains its reference hands the model the answer (issue 11).
    if !keep_leaks {
        pairs.retain(|p| p.leak.is_none());
    }
    // Few-shot examples and retrieved sections come from every pair, asked or not.
    let prompter = Prompter::new(display, &pairs, prompt_options(Some(g)));
    let asked = sample(&pairs, g.key.max_pairs);
    let mut items = Vec::with_capacity(asked.len() * g.key.samples as usize);
    for p in asked {
        let messages = prompter.messages(p);
        for s in 0..g.key.samples {
            let seed = (g.key.temperature > 0.0).then(|| sample_seed(g.key.seed, &p.pair_id, s));
            items.push(Item { pair_id: p.pair_id.clone(), sample: s, messages: messages.clone(), seed });
        }
    }
    items
}

/// The pairs asked under `max_pairs = n`: the `n` whose ids hash lowest, a spread over the whole
/// documentation that keeps its members when other pairs come or go; in position order.
fn sample(pairs: &[Pair], n: Option<usize>) -> Vec<&Pair> {
    let Some(n) = n.filter(|&n| n < pairs.len()) else { return pairs.iter().collect() };
    let mut by_hash: Vec<&Pair> = pairs.iter().collect();
    by_hash.sort_by_cached_key(|p| *blake3::hash(p.pair_id.as_bytes()).as_bytes());
    by_hash.truncate(n);
    by_hash.sort_by_key(|p| p.position);
    by_hash
}

/// `doc2ci export requests --out DIR`: every generative model's round-0 requests as OpenAI
/// Batch input files, `DIR/<service>/<model>.jsonl`, for `vllm run-batch` or any batch API; the
/// results come back with `backend = "import"`, `format = "openai-batch"`.
pub fn export_requests(cfg: &Config, wh: &Warehouse, out: &std::path::Path) -> Result<String> {
    use std::io::Write;
    let mut summary = Vec::new();
    for m in &cfg.models {
        let Some(g) = m.gen() else { continue };
        for service in &g.services {
            let pairs: Vec<Pair> = wh.read(&Partition::new(PAIRS, &[service]))?;
            if pairs.is_empty() {
                continue;
            }
            let display = cfg.service(service).map_or(service.to_string(), |s| s.display.clone());
            let items = items(pairs, cfg.stages.dedupe.keep_leaks, &display, g);
            let dir = out.join(service);
            std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
            let path = dir.join(format!("{}.jsonl", m.name));
            let mut f = std::io::BufWriter::new(
                std::fs::File::create(&path).with_context(|| format!("cannot write {}", path.display()))?,
            );
            for it in &items {
                let body = doc2ci_llm::chat_body(&g.key.model_id, &request(g, it));
                let line = doc2ci_llm::batch::request_line(&super::generate_batch::custom_id(it, 0), &body);
                serde_json::to_writer(&mut f, &line)?;
                f.write_all(b"\n")?;
            }
            f.flush()?;
            summary.push(format!("{service}/{}: {}", m.name, items.len()));
        }
    }
    if summary.is_empty() {
        anyhow::bail!(
            "no generative model has pairs to ask in {}: run `doc2ci run --only dedupe` first",
            wh.root.display()
        );
    }
    Ok(format!("requests written to {}: {}", out.display(), summary.join(", ")))
}

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

/// One request to make: which pair and sample, and the messages.
pub(super) struct Item {
    pub pair_id: String,
    pub sample: u32,
    pub messages: Vec<Msg>,
    pub seed: Option<u64>,
}

fn to_messages(m: &[Msg]) -> Vec<Message> {
    m.iter().map(|m| Message { role: m.role.clone(), content: m.content.clone() }).collect()
}

/// Per-sample seed: reproducible pass@k samples that differ from each other.
fn sample_seed(base: u64, pair_id: &str, sample: u32) -> u64 {
    let h = blake3::hash(format!("{base}\u{0}{pair_id}\u{0}{sample}").as_bytes());
    u64::from_le_bytes(h.as_bytes()[..8].try_into().expect("8 bytes"))
}

/// The request of one item, as every backend receives it.
pub(super) fn request(g: &GenSettings, it: &Item) -> Request {
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
pub(super) fn runtime() -> Result<(Option<tokio::runtime::Runtime>, tokio::runtime::Handle)> {
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
pub(super) fn to_row(
    item: &Item,
    service: &str,
    model: &str,
    round: u32,
    r: std::result::Result<Reply, LlmError>,
    who: &str,
    g: &GenSettings,
) -> Generation {
    let prices = (g.price_per_1k_input, g.price_per_1k_output);
    let key = RowKey {
        pair_id: item.pair_id.clone(),
        service: service.into(),
        model: model.into(),
        sample: item.sample,
        round,
    };
    answer_row(key, r, who, prices)
}

/// As [`to_row`], for answers that come from a file (`format = "openai-batch"`): `prices` per
/// 1k input and output tokens, if known.
pub(super) fn answer_row(
    key: RowKey,
    r: std::result::Result<Reply, LlmError>,
    who: &str,
    prices: (Option<f64>, Option<f64>),
) -> Generation {
    let mut row = Generation::at(key);
    match r {
        Ok(reply) => {
            let output = doc2ci_generate::strip_fences(&reply.text);
            let hit_cap = reply.finish_reason.as_deref() == Some("length");
            let kind = doc2ci_generate::degenerate(&output, hit_cap);
            row.cost = match prices {
                (None, None) => None,
                (pi, po) => Some(
                    pi.unwrap_or(0.0) * reply.prompt_tokens.unwrap_or(0) as f64 / 1000.0
                        + po.unwrap_or(0.0) * reply.completion_tokens.unwrap_or(0) as f64 / 1000.0,
                ),
            };
            row.output = Some(output);
            row.raw_output = Some(reply.text);
            row.latency_ms = Some(reply.latency_ms);
            row.prompt_tokens = reply.prompt_tokens;
            row.completion_tokens = reply.completion_tokens;
            row.degenerate = kind.is_some();
            row.degenerate_kind = kind.map(|k| k.as_str().to_string());
            row.finish_reason = reply.finish_reason;
            row.attempts = Some(reply.attempts);
        }
        Err(e) => {
            let kind = match &e {
                LlmError::Http(_) => "http error",
                LlmError::Retryable(_) => "gave up after retries",
                LlmError::BadResponse(_) => "bad response",
                LlmError::Other(_) => "failed",
            };
            row.error = Some(format!("{who}: {kind}: {e}"));
        }
    }
    row
}

/// Sends `items` with up to `batch` requests in flight and checkpoints every answer as soon as it
/// arrives, so a killed run re-asks only what was in flight then (at most one request per slot),
/// never an answered one: on a paid API nothing answered is billed twice. Rows come back in
/// `items` order, whatever order the answers arrived in.
pub(super) fn run_items(
    cx: &Ctx,
    ask: &Asker,
    model_name: &str,
    round: u32,
    items: Vec<Item>,
) -> Result<Vec<Generation>> {
    let (m, service, ui) = (&ask.model, ask.service.as_str(), cx.ui);
    let g = m.gen().ok_or_else(|| anyhow!("model `{}` cannot generate", m.name))?;
    let mut rows = cx.batches::<Generation>()?;
    let order: HashMap<(&str, u32), usize> =
        items.iter().enumerate().map(|(i, it)| ((it.pair_id.as_str(), it.sample), i)).collect();
    let answered: HashSet<(String, u32)> = rows.rows().iter().map(|r| (r.pair_id.clone(), r.sample)).collect();
    let todo: Vec<&Item> = items.iter().filter(|it| !answered.contains(&(it.pair_id.clone(), it.sample))).collect();
    if !rows.rows().is_empty() {
        ui.info(&format!("{}: resuming after {} of {} requests", cx.label(), rows.rows().len(), items.len()));
    }
    if !todo.is_empty() {
        if let Some(client) = crate::backends::batch_client(&m.name, g)? {
            let cache = ask.cache.as_ref().map(RequestCache::new);
            let budget = crate::backends::Budget::new(&m.name, g, ask.run_max_cost);
            let job = super::generate_batch::BatchRun {
                cx,
                client,
                g,
                service,
                model: model_name,
                round,
                cache,
                budget,
                total: items.len(),
            };
            job.run(&todo, &mut rows)?;
            let mut rows = rows.into_rows();
            rows.sort_by_key(|r| order.get(&(r.pair_id.as_str(), r.sample)).copied().unwrap_or(usize::MAX));
            return Ok(rows);
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
    let mut rows = rows.into_rows();
    rows.sort_by_key(|r| order.get(&(r.pair_id.as_str(), r.sample)).copied().unwrap_or(usize::MAX));
    Ok(rows)
}

/// A partition stopped by its budget, every answer so far kept.
pub(super) fn budget_reached(
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

pub(super) fn summary(rows: &[Generation]) -> String {
    let cached = rows.iter().filter(|r| r.attempts == Some(0)).count();
    let errors = rows.iter().filter(|r| r.error.is_some()).count();
    let degenerate = rows.iter().filter(|r| r.degenerate).count();
    let tokens: u64 = rows.iter().filter_map(|r| r.completion_tokens).map(u64::from).sum();
    let cost: f64 = rows.iter().filter_map(|r| r.cost).sum();
    let mut s = format!("{} outputs, {errors} errors, {degenerate} degenerate, {tokens} tokens generated", rows.len());
    if cost > 0.0 {
        s.push_str(&format!(", cost {cost:.4}"));
    }
    if cached > 0 {
        s.push_str(&format!(", {cached} from the request cache"));
    }
    s
}

/// `doc2ci export finetune`: k folds of chat JSONL, stratified by service.
pub fn export_finetune(cfg: &Config, wh: &Warehouse, folds: usize, out: &std::path::Path) -> Result<String> {
    use std::io::Write;
    if folds < 2 {
        anyhow::bail!("--folds must be at least 2");
    }
    let mut pairs: Vec<Pair> = Vec::new();
    for s in &cfg.services {
        pairs.extend(wh.read::<Pair>(&Partition::new(PAIRS, &[&s.name]))?);
    }
    if pairs.is_empty() {
        anyhow::bail!("no pairs in {}: run `doc2ci run` first", wh.root.display());
    }
    let groups = doc2ci_generate::finetune::assign_folds(&pairs, folds);
    let display = |s: &str| cfg.service(s).map_or(s.to_string(), |x| x.display.clone());
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let mut summary = Vec::new();
    for f in 0..folds {
        let dir = out.join(format!("fold-{f}"));
        std::fs::create_dir_all(&dir)?;
        let mut train = std::io::BufWriter::new(std::fs::File::create(dir.join("train.jsonl"))?);
        let mut test = std::io::BufWriter::new(std::fs::File::create(dir.join("test.jsonl"))?);
        let (mut ntrain, mut ntest) = (0, 0);
        for g in &groups {
            if g.fold == f {
                for l in doc2ci_generate::finetune::test_lines(g, &display(&g.service)) {
                    serde_json::to_writer(&mut test, &l)?;
                    test.write_all(b"\n")?;
                    ntest += 1;
                }
            } else {
                serde_json::to_writer(&mut train, &doc2ci_generate::finetune::train_line(g, &display(&g.service)))?;
                train.write_all(b"\n")?;
                ntrain += 1;
            }
        }
        train.flush()?;
        test.flush()?;
        summary.push(format!("fold-{f}: {ntrain} train, {ntest} test"));
    }
    Ok(format!(
        "{} pairs, {} distinct descriptions, {folds} folds in {}: {}",
        pairs.len(),
        groups.len(),
        out.display(),
        summary.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(n: u64) -> Vec<Pair> {
        (0..n).map(|i| Pair { pair_id: format!("p{i}"), position: i, ..Default::default() }).collect()
    }

    #[test]
    fn max_pairs_asks_a_stable_spread_in_position_order() {
        let all = pairs(40);
        assert_eq!(sample(&all, None).len(), 40);
        assert_eq!(sample(&all, Some(99)).len(), 40);
        let six: Vec<u64> = sample(&all, Some(6)).iter().map(|p| p.position).collect();
        assert_eq!(six.len(), 6);
        assert!(six.windows(2).all(|w| w[0] < w[1]), "{six:?}");
        assert!(six.iter().any(|&p| p >= 20) && six.iter().any(|&p| p < 20), "a spread, not the first page: {six:?}");
        // More pairs in the documentation: the ones asked before stay asked unless outranked.
        let more = pairs(41);
        let again: Vec<u64> = sample(&more, Some(6)).iter().map(|p| p.position).collect();
        assert!(six.iter().filter(|p| again.contains(p)).count() >= 5, "{six:?} vs {again:?}");
    }
}
