//! Engine side of generate and repair: prompts from the generate crate, requests through the
//! backends of the llm crates, many in flight at once, every batch checkpointed so a killed run
//! asks each (pair, model, sample) exactly once. A failed request is a row with its error.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};

use anyhow::{anyhow, Context, Result};
use doc2ci_generate::{Msg, PromptOptions, Prompter};
use doc2ci_llm::{Backend, Limits, LlmError, Message, Reply, Request};
use doc2ci_rows::{Generation, Pair, RepairRow, Validation};

use crate::assets;
use crate::config::{Config, GenSettings, Model, SMOLLM2_GGUF};
use crate::engine::Node;
use crate::ui::Ui;
use crate::warehouse::{Partition, Warehouse};

/// Bumped when prompts or post-processing change: part of every generate/repair cache key.
pub const PROMPT_VERSION: u32 = 1;

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

fn limits(g: &GenSettings) -> Limits {
    Limits {
        concurrency: g.concurrency,
        requests_per_minute: g.rpm,
        tokens_per_minute: g.tpm,
        retries: g.retries,
        timeout_ms: g.timeout_ms,
        ..Limits::default()
    }
}

/// One backend per model name for the whole process: connection pools and rate limits are
/// shared by every partition of the model, and the embedded weights load once.
pub fn backend(m: &Model) -> Result<Arc<dyn Backend>> {
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<dyn Backend>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    let mut guard = cache.lock().map_err(|_| anyhow!("backend cache poisoned"))?;
    if let Some(b) = guard.get(&m.name) {
        return Ok(b.clone());
    }
    let g = m.gen.as_ref().ok_or_else(|| anyhow!("model `{}` is imported: it has no backend to call", m.name))?;
    let b: Arc<dyn Backend> = match g.key.backend.as_str() {
        "openai" => doc2ci_llm::openai(doc2ci_llm::OpenAiConfig {
            base_urls: g.base_urls.clone(),
            model: g.key.model_id.clone(),
            api_key_env: g.api_key_env.clone(),
            api_key: None,
            limits: limits(g),
        })
        .map_err(|e| anyhow!("model `{}`: {e}", m.name))?,
        "ollama" => doc2ci_llm::ollama(doc2ci_llm::OllamaConfig {
            base_urls: g.base_urls.clone(),
            model: g.key.model_id.clone(),
            num_ctx: g.key.num_ctx,
            limits: limits(g),
        })
        .map_err(|e| anyhow!("model `{}`: {e}", m.name))?,
        "embedded" => doc2ci_smollm::backend(embedded()?),
        other => return Err(anyhow!("model `{}`: backend `{other}` cannot generate", m.name)),
    };
    guard.insert(m.name.clone(), b.clone());
    Ok(b)
}

/// The embedded SmolLM2, loaded once however many model entries use it.
fn embedded() -> Result<Arc<doc2ci_smollm::Embedded>> {
    static E: OnceLock<std::result::Result<Arc<doc2ci_smollm::Embedded>, String>> = OnceLock::new();
    E.get_or_init(|| {
        let path = assets::require(SMOLLM2_GGUF).map_err(|e| format!("{e:#}"))?;
        doc2ci_smollm::Embedded::load(&path)
            .map(Arc::new)
            .map_err(|e| format!("loading the embedded model {}: {e:#}", path.display()))
    })
    .clone()
    .map_err(|e| anyhow!("{e}"))
}

/// One request to make: which pair and sample, and the messages.
struct Item {
    pair_id: String,
    sample: u32,
    messages: Vec<Msg>,
    seed: Option<u64>,
}

fn to_messages(m: &[Msg]) -> Vec<Message> {
    m.iter().map(|m| Message { role: m.role.clone(), content: m.content.clone() }).collect()
}

/// Per-sample seed: reproducible pass@k samples that differ from each other.
fn sample_seed(base: u64, pair_id: &str, sample: u32) -> u64 {
    let h = blake3::hash(format!("{base}\u{0}{pair_id}\u{0}{sample}").as_bytes());
    u64::from_le_bytes(h.as_bytes()[..8].try_into().expect("8 bytes"))
}

/// What the model said (or why it said nothing), as a `generations` row.
fn to_row(
    item: &Item,
    service: &str,
    model: &str,
    round: u32,
    r: std::result::Result<Reply, LlmError>,
    who: &str,
    g: &GenSettings,
) -> Generation {
    let mut row = Generation {
        pair_id: item.pair_id.clone(),
        service: service.into(),
        model: model.into(),
        sample: item.sample,
        round,
        output: None,
        raw_output: None,
        latency_ms: None,
        prompt_tokens: None,
        completion_tokens: None,
        error: None,
        degenerate: false,
        degenerate_kind: None,
        finish_reason: None,
        attempts: None,
        cost: None,
    };
    match r {
        Ok(reply) => {
            let output = doc2ci_generate::strip_fences(&reply.text);
            let hit_cap = reply.finish_reason.as_deref() == Some("length");
            let kind = doc2ci_generate::degenerate(&output, hit_cap);
            row.cost = match (g.price_per_1k_input, g.price_per_1k_output) {
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
#[allow(clippy::too_many_arguments)]
fn run_items(
    wh: &Warehouse,
    node: &Node,
    key: &str,
    cfg: &Config,
    ui: &Ui,
    m: &Model,
    service: &str,
    model_name: &str,
    round: u32,
    items: Vec<Item>,
) -> Result<Vec<Generation>> {
    let g = m.gen.as_ref().ok_or_else(|| anyhow!("model `{}` cannot generate", m.name))?;
    let ckpt = wh.checkpoint(&node.part, key);
    let (mut rows, _, mut seq, _) = ckpt.resume::<Generation>()?;
    let order: HashMap<(&str, u32), usize> =
        items.iter().enumerate().map(|(i, it)| ((it.pair_id.as_str(), it.sample), i)).collect();
    let answered: std::collections::HashSet<(String, u32)> =
        rows.iter().map(|r| (r.pair_id.clone(), r.sample)).collect();
    let todo: Vec<&Item> = items.iter().filter(|it| !answered.contains(&(it.pair_id.clone(), it.sample))).collect();
    if !rows.is_empty() {
        ui.info(&format!("{}: resuming after {} of {} requests", node.label(), rows.len(), items.len()));
    }
    if !todo.is_empty() {
        let backend = backend(m)?;
        let who = format!("model `{}` ({})", m.name, backend.describe());
        // Enough in flight to keep every endpoint busy; the backend enforces the real limits.
        let slots =
            cfg.stages.generate.batch_size.unwrap_or_else(|| 16.max(g.concurrency * g.base_urls.len().max(1) * 2));
        let delay = std::env::var("DOC2CI_TEST_BATCH_DELAY_MS").ok().and_then(|v| v.parse::<u64>().ok());
        let handle = tokio::runtime::Handle::try_current().ok();
        let local;
        let handle = match handle {
            Some(h) => h,
            None => {
                local = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
                local.handle().clone()
            }
        };
        let bar = ui.bar(todo.len() as u64, "requests");
        handle.block_on(async {
            let mut set = tokio::task::JoinSet::new();
            let mut next = 0usize;
            loop {
                while set.len() < slots && next < todo.len() {
                    let it = todo[next];
                    let req = Request {
                        messages: to_messages(&it.messages),
                        temperature: g.key.temperature,
                        max_tokens: g.key.max_tokens,
                        seed: it.seed,
                        extra: g.key.params.clone(),
                    };
                    let b = backend.clone();
                    set.spawn_on(async move { (next, b.chat(&req).await) }, &handle);
                    next += 1;
                }
                let Some(first) = set.join_next().await else { break };
                let mut ready = vec![first];
                while let Some(j) = set.try_join_next() {
                    ready.push(j);
                }
                let mut fresh = Vec::with_capacity(ready.len());
                for j in ready {
                    let (i, r) = j.map_err(|e| anyhow!("a request task failed: {e}"))?;
                    fresh.push(to_row(todo[i], service, model_name, round, r, &who, g));
                }
                seq += 1;
                ckpt.commit(seq, (rows.len() + fresh.len()) as u64, 0, &fresh)?;
                bar.inc(fresh.len() as u64);
                rows.extend(fresh);
                if let Some(ms) = delay {
                    tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
                }
            }
            Ok::<_, anyhow::Error>(())
        })?;
        bar.finish_and_clear();
    }
    rows.sort_by_key(|r| order.get(&(r.pair_id.as_str(), r.sample)).copied().unwrap_or(usize::MAX));
    Ok(rows)
}

fn summary(rows: &[Generation]) -> String {
    let errors = rows.iter().filter(|r| r.error.is_some()).count();
    let degenerate = rows.iter().filter(|r| r.degenerate).count();
    let tokens: u64 = rows.iter().filter_map(|r| r.completion_tokens).map(u64::from).sum();
    let cost: f64 = rows.iter().filter_map(|r| r.cost).sum();
    let mut s = format!("{} outputs, {errors} errors, {degenerate} degenerate, {tokens} tokens generated", rows.len());
    if cost > 0.0 {
        s.push_str(&format!(", cost {cost:.4}"));
    }
    s
}

/// The generate stage for one (service, model).
pub fn generate(
    wh: &Warehouse,
    node: &Node,
    key: &str,
    cfg: &Config,
    ui: &Ui,
    model: usize,
    service: &str,
    pairs: &Partition,
) -> Result<(Vec<Generation>, String)> {
    let m = &cfg.models[model];
    let g = m.gen.as_ref().ok_or_else(|| anyhow!("model `{}` cannot generate", m.name))?;
    let display = cfg.service(service).map_or(service.to_string(), |s| s.display.clone());
    let mut pairs: Vec<Pair> = wh.read(pairs)?;
    pairs.sort_by_key(|p| p.position);
    // A description that contains its reference hands the model the answer (issue 11).
    if !cfg.stages.dedupe.keep_leaks {
        pairs.retain(|p| p.leak.is_none());
    }
    let prompter = Prompter::new(&display, &pairs, prompt_options(Some(g)));
    let mut items = Vec::with_capacity(pairs.len() * g.key.samples as usize);
    for p in &pairs {
        let messages = prompter.messages(p);
        for s in 0..g.key.samples {
            let seed = (g.key.temperature > 0.0).then(|| sample_seed(g.key.seed, &p.pair_id, s));
            items.push(Item { pair_id: p.pair_id.clone(), sample: s, messages: messages.clone(), seed });
        }
    }
    let rows = run_items(wh, node, key, cfg, ui, m, service, &m.name, 0, items)?;
    let note = summary(&rows);
    Ok((rows, note))
}

/// The state of one (pair, sample) after the rounds so far.
struct Latest<'a> {
    /// Its newest output and that output's validation.
    output: Option<(&'a Generation, &'a Validation)>,
    valid: bool,
}

/// Round `round` of repair for one (service, model): only outputs still schema-invalid after
/// the earlier rounds are revisited; a valid output is never sent again, and no row is
/// written for it (its last row stays its answer).
#[allow(clippy::too_many_arguments)]
pub fn repair(
    wh: &Warehouse,
    node: &Node,
    key: &str,
    cfg: &Config,
    ui: &Ui,
    model: usize,
    repairer: usize,
    service: &str,
    round: u32,
    pairs: &Partition,
    gens: &[Partition],
    vals: &[Partition],
) -> Result<(Vec<Generation>, String)> {
    let m = &cfg.models[model];
    let r = &cfg.models[repairer];
    let display = cfg.service(service).map_or(service.to_string(), |s| s.display.clone());
    let mut pairs: Vec<Pair> = wh.read(pairs)?;
    pairs.sort_by_key(|p| p.position);
    let by_id: HashMap<&str, &Pair> = pairs.iter().map(|p| (p.pair_id.as_str(), p)).collect();
    let mut g_rows: Vec<Vec<Generation>> = Vec::new();
    let mut v_rows: Vec<Vec<Validation>> = Vec::new();
    for (gp, vp) in gens.iter().zip(vals) {
        g_rows.push(wh.read(gp)?);
        v_rows.push(wh.read(vp)?);
    }
    let latest = latest_state(&g_rows, &v_rows);
    // The original task as the model was asked it.
    let prompter = Prompter::new(&display, &pairs, prompt_options(m.gen.as_ref()));
    let mut items = Vec::new();
    let mut keys: Vec<&(String, u32)> = latest.keys().collect();
    keys.sort_by_key(|(p, s)| (by_id.get(p.as_str()).map_or(u64::MAX, |p| p.position), p.clone(), *s));
    for k in keys {
        let st = &latest[k];
        if st.valid {
            continue;
        }
        let Some((g, v)) = st.output else { continue };
        let Some(pair) = by_id.get(k.0.as_str()) else { continue };
        let original = prompter.messages(pair);
        let out = g.output.as_deref().unwrap_or_default();
        let messages = doc2ci_generate::repair_messages(&original, &display, out, &v.errors);
        items.push(Item { pair_id: k.0.clone(), sample: k.1, messages, seed: None });
    }
    let n = items.len();
    let rows = run_items(wh, node, key, cfg, ui, r, service, &m.name, round, items)?;
    let note = format!("round {round}: {n} invalid outputs sent to `{}`; {}", r.name, summary(&rows));
    Ok((rows, note))
}

/// (pair, sample) → its newest output with that output's validation, and whether any round
/// made it schema-valid.
fn latest_state<'a>(
    g_rows: &'a [Vec<Generation>],
    v_rows: &'a [Vec<Validation>],
) -> HashMap<(String, u32), Latest<'a>> {
    let mut out: HashMap<(String, u32), Latest<'a>> = HashMap::new();
    for (gs, vs) in g_rows.iter().zip(v_rows) {
        let vmap: HashMap<(&str, u32), &Validation> = vs.iter().map(|v| ((v.pair_id.as_str(), v.sample), v)).collect();
        for g in gs {
            let k = (g.pair_id.clone(), g.sample);
            let v = vmap.get(&(g.pair_id.as_str(), g.sample)).copied();
            let e = out.entry(k).or_insert(Latest { output: None, valid: false });
            if e.valid {
                continue;
            }
            if let Some(v) = v {
                if g.output.is_some() {
                    e.output = Some((g, v));
                }
                e.valid = v.schema_ok;
            }
        }
    }
    out
}

/// The `repairs` table of one (service, model): per round, what was revisited and fixed.
pub fn repair_summary(
    wh: &Warehouse,
    service: &str,
    model: &str,
    repair_model: &str,
    gens: &[Partition],
    vals: &[Partition],
) -> Result<Vec<RepairRow>> {
    let mut g_rows: Vec<Vec<Generation>> = Vec::new();
    let mut v_rows: Vec<Vec<Validation>> = Vec::new();
    for (gp, vp) in gens.iter().zip(vals) {
        g_rows.push(wh.read(gp)?);
        v_rows.push(wh.read(vp)?);
    }
    let total = g_rows.first().map_or(0, |g| g.len()) as u64;
    let mut valid: HashSet<(String, u32)> = v_rows
        .first()
        .map(|vs| vs.iter().filter(|v| v.schema_ok).map(|v| (v.pair_id.clone(), v.sample)).collect())
        .unwrap_or_default();
    let mut out = Vec::new();
    for k in 1..g_rows.len() {
        let valid_before = valid.len() as u64;
        let attempted = g_rows[k].len() as u64;
        let errors = g_rows[k].iter().filter(|g| g.error.is_some()).count() as u64;
        let mut fixed = 0u64;
        for v in &v_rows[k] {
            if v.schema_ok && valid.insert((v.pair_id.clone(), v.sample)) {
                fixed += 1;
            }
        }
        out.push(RepairRow {
            service: service.into(),
            model: model.into(),
            round: k as u32,
            repair_model: repair_model.into(),
            total,
            valid_before,
            attempted,
            fixed,
            still_invalid: attempted - fixed,
            errors,
            valid_after: valid.len() as u64,
        });
    }
    Ok(out)
}

/// `doc2ci export finetune`: k folds of chat JSONL, stratified by service.
pub fn export_finetune(cfg: &Config, wh: &Warehouse, folds: usize, out: &std::path::Path) -> Result<String> {
    use std::io::Write;
    if folds < 2 {
        anyhow::bail!("--folds must be at least 2");
    }
    let mut pairs: Vec<Pair> = Vec::new();
    for s in &cfg.services {
        pairs.extend(wh.read::<Pair>(&Partition::new(crate::warehouse::PAIRS, &[&s.name]))?);
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
