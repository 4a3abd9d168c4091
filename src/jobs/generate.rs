//! generate: one (service, model) → `generations/service=…/model=…`: which pairs are asked, the
//! study's prompt (and its few-shot / retrieval variants) for each sample, sent through
//! `crate::generation`'s request loop (every answer checkpointed, so a killed run asks each
//! (pair, sample) once; a failed request is a row with its error, never an answer, and the next
//! run asks it again), and the two exports of requests and fine-tuning folds.

use std::collections::BTreeMap;

use anyhow::{anyhow, Context, Result};
use doc2ci_generate::Prompter;
use doc2ci_rows::Pair;
use serde::Serialize;

use super::tables::{GENERATIONS, PAIRS};
use crate::config::{Config, GenSettings};
use crate::engine::{Ctx, Graph, Job, Node, Output};
use crate::generation::{owed, prompt_options, request, run_items, summary, Asker, Item};
use crate::warehouse::{Partition, Warehouse};

pub use doc2ci_generate::PROMPT_VERSION;

pub fn declare(cfg: &Config, g: &mut Graph) -> Result<()> {
    let keep_leaks = cfg.section::<super::dedupe::Settings>()?.keep_leaks;
    for m in &cfg.models {
        let Some(gs) = m.gen() else { continue };
        for service in &gs.services {
            // A service without pairs has nothing to ask.
            let Some(dedupe) = g.find(PAIRS.name, &[("service", service)]) else { continue };
            let job = Generate { ask: Asker::new(cfg, m, service)?, pairs: g.part(dedupe).clone(), keep_leaks };
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
        Ok(cx.publish(&rows, Some(note))?.owing(owed(&rows)))
    }
}

/// What the run's closing summary reads of a generations row: whose request, and whether it failed.
#[derive(serde::Deserialize)]
struct Asked {
    service: String,
    model: String,
    error: Option<String>,
}

/// A model's requests in the current study (every round) and those that errored, by service.
#[derive(Debug, Default, PartialEq)]
pub struct ModelErrors {
    pub asked: u64,
    pub errored: BTreeMap<String, u64>,
    /// Its errors are asked again by the next run (a generating model; an import's are the file's).
    pub asked_again: bool,
    /// The first error, as recorded (it names the model, the endpoint and what failed).
    pub example: Option<String>,
}

impl ModelErrors {
    pub fn count(&self) -> u64 {
        self.errored.values().sum()
    }
}

/// Every model's errored requests in the study's current generations partitions.
pub fn request_errors(cfg: &Config, p: &crate::engine::Pipeline) -> Result<BTreeMap<String, ModelErrors>> {
    let wh = p.warehouse();
    let mut out: BTreeMap<String, ModelErrors> = BTreeMap::new();
    for n in p.nodes.iter().filter(|n| n.part.table == GENERATIONS.name) {
        for a in wh.read_columns::<Asked>(&n.part, &["error"])? {
            let e = out.entry(a.model.clone()).or_default();
            e.asked += 1;
            e.asked_again = cfg.models.iter().any(|m| m.name == a.model && m.gen().is_some());
            if let Some(err) = a.error {
                *e.errored.entry(a.service).or_default() += 1;
                e.example.get_or_insert(err);
            }
        }
    }
    Ok(out)
}

/// The run's closing words on errors: how many answers are missing per model (None: none), and
/// an error naming every model whose share of errored requests is above `max_rate`.
pub fn error_verdict(errors: &BTreeMap<String, ModelErrors>, max_rate: f64) -> (Option<String>, Result<()>) {
    let mut said = Vec::new();
    let mut over = Vec::new();
    for (model, e) in errors.iter().filter(|(_, e)| e.count() > 0) {
        let by: Vec<String> = e.errored.iter().map(|(s, n)| format!("{s} {n}")).collect();
        let rate = e.count() as f64 / e.asked.max(1) as f64;
        let line = format!("{model}: {} of {} requests ({:.1}%; {})", e.count(), e.asked, 100.0 * rate, by.join(", "));
        let example = e.example.as_deref().map(|x| x.chars().take(300).collect::<String>()).unwrap_or_default();
        if rate > max_rate {
            over.push(format!("{line}, e.g. {example}"));
        }
        said.push(match e.asked_again {
            true => format!("{line}, asked again by the next run"),
            false => format!("{line}, errors recorded in the imported file"),
        });
    }
    if said.is_empty() {
        return (None, Ok(()));
    }
    let total: u64 = errors.values().map(ModelErrors::count).sum();
    let summary = format!(
        "{total} answers missing: their requests errored and are in no n, rate or test:\n  {}",
        said.join("\n  ")
    );
    let verdict = match over.is_empty() {
        true => Ok(()),
        false => Err(anyhow!(
            "errored requests above [study] max_error_rate = {max_rate} (every answer is kept; run again to ask \
             the errored ones, or raise max_error_rate to accept the gaps):\n  {}",
            over.join("\n  ")
        )),
    };
    (Some(summary), verdict)
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
    let keep_leaks = cfg.section::<super::dedupe::Settings>()?.keep_leaks;
    for m in &cfg.models {
        let Some(g) = m.gen() else { continue };
        for service in &g.services {
            let pairs: Vec<Pair> = wh.read(&Partition::new(PAIRS, &[service]))?;
            if pairs.is_empty() {
                continue;
            }
            let display = cfg.service(service).map_or(service.to_string(), |s| s.display.clone());
            let items = items(pairs, keep_leaks, &display, g);
            let dir = out.join(service);
            std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
            let path = dir.join(format!("{}.jsonl", m.name));
            let mut f = std::io::BufWriter::new(
                std::fs::File::create(&path).with_context(|| format!("cannot write {}", path.display()))?,
            );
            for it in &items {
                let body = doc2ci_llm::chat_body(&g.key.model_id, &request(g, it));
                let line =
                    doc2ci_llm::batch::request_line(&doc2ci_generate::custom_id(&it.pair_id, it.sample, 0), &body);
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

/// Per-sample seed: reproducible pass@k samples that differ from each other.
fn sample_seed(base: u64, pair_id: &str, sample: u32) -> u64 {
    let h = blake3::hash(format!("{base}\u{0}{pair_id}\u{0}{sample}").as_bytes());
    u64::from_le_bytes(h.as_bytes()[..8].try_into().expect("8 bytes"))
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

    /// Issue 44: the closing summary counts errors per model and service, and a model above the
    /// threshold fails the run with its count; one at or below it does not.
    #[test]
    fn the_error_verdict_names_each_model_and_fails_only_above_the_rate() {
        let e = |asked, errored: &[(&str, u64)], again| ModelErrors {
            asked,
            errored: errored.iter().map(|(s, n)| (s.to_string(), *n)).collect(),
            asked_again: again,
            example: (!errored.is_empty()).then(|| "model `x` (openai http://127.0.0.1:9/v1): http error: 500".into()),
        };
        let errors: BTreeMap<String, ModelErrors> = [
            ("flaky".to_string(), e(100, &[("github-actions", 2), ("circleci", 1)], true)),
            ("fine".to_string(), e(100, &[], true)),
            ("imported".to_string(), e(50, &[("github-actions", 1)], false)),
        ]
        .into();
        let (said, verdict) = error_verdict(&errors, 0.02);
        let said = said.unwrap();
        assert!(said.starts_with("4 answers missing"), "{said}");
        assert!(
            said.contains("flaky: 3 of 100 requests (3.0%; circleci 1, github-actions 2), asked again by the next run"),
            "{said}"
        );
        assert!(
            said.contains("imported: 1 of 50 requests (2.0%; github-actions 1), errors recorded in the imported file")
        );
        assert!(!said.contains("fine"));
        let err = verdict.unwrap_err().to_string();
        assert!(
            err.contains("max_error_rate = 0.02") && err.contains("flaky: 3 of 100") && !err.contains("imported"),
            "{err}"
        );
        assert!(err.contains("e.g. model `x` (openai http://127.0.0.1:9/v1)"), "the error names the endpoint: {err}");
        assert!(error_verdict(&errors, 0.05).1.is_ok());
        let clean: BTreeMap<String, ModelErrors> = [("fine".to_string(), e(10, &[], true))].into();
        assert_eq!(error_verdict(&clean, 0.0).0, None);
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
