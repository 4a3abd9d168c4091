//! contamination: one (service, model) → `contamination/service=…/model=…`: each pair's reference
//! and its twin cut into a prefix and a suffix (`doc2ci_contamination`), the twin checked by the
//! service's validator, both prefixes continued by the model through `crate::generation`'s
//! request loop (the same backends, request cache, checkpoints and budget as generate; an errored
//! request is asked again by the next run, never measured), and DevOps-Gym's measures of each
//! continuation against its true suffix.
//!
//! A backend that continues a text as is (`GenSettings::completions`: the embedded kernel,
//! llama.cpp's server, Ollama's raw generate, an OpenAI-compatible server with `completions`) gets
//! the prefix alone; chat models get the continuation instruction. Completions are greedy (temperature 0) whatever
//! the model's generation settings, since the screen asks what the model most expects next.

use std::collections::HashMap;

use anyhow::{anyhow, Result};
use doc2ci_contamination::{continuation, instruction, measure, probe, twin, Probed, Shape};
use doc2ci_generate::Msg;
use doc2ci_rows::{Contamination, Generation, Pair};
use doc2ci_validate::Service;
use serde::{Deserialize, Serialize};

use super::tables::{CONTAMINATION, PAIRS};
use crate::config::{Config, ModelKind, Place, Section};
use crate::engine::{Ctx, Graph, Job, Node, Output, Owed};
use crate::generation::{run_items_with, Asker, Item};
use crate::resources;
use crate::warehouse::Partition;

pub use doc2ci_contamination::INSTRUCTION_VERSION;

/// `[stages.contamination]`: which (model, service) partitions are screened, on how many pairs,
/// and where references are cut. Off unless enabled: it asks every screened model two more
/// requests per pair.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    #[serde(default)]
    pub enabled: bool,
    /// Services screened (default: every service a screened model answers).
    #[serde(default)]
    pub services: Vec<String>,
    /// Models screened (default: every generative model; an import has no model to ask).
    #[serde(default)]
    pub models: Vec<String>,
    /// The first N pairs of each service, in pair order (default: all).
    #[serde(default)]
    pub max_pairs: Option<usize>,
    #[serde(default = "default_prefix")]
    pub prefix_tokens: usize,
    #[serde(default = "default_suffix")]
    pub suffix_tokens: usize,
    /// The continuation's cap in model tokens (default: 4 per suffix token, enough for YAML,
    /// where a whitespace token is 2 to 3 model tokens).
    #[serde(default)]
    pub max_tokens: Option<u32>,
}

fn default_prefix() -> usize {
    doc2ci_contamination::DEFAULT_PREFIX_TOKENS
}
fn default_suffix() -> usize {
    doc2ci_contamination::DEFAULT_SUFFIX_TOKENS
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            enabled: false,
            services: Vec::new(),
            models: Vec::new(),
            max_pairs: None,
            prefix_tokens: default_prefix(),
            suffix_tokens: default_suffix(),
            max_tokens: None,
        }
    }
}

impl Section for Settings {
    const NAME: &'static str = "contamination";

    fn check(&self, at: &Place, cfg: &Config) -> Result<()> {
        for (key, v) in [("prefix_tokens", self.prefix_tokens), ("suffix_tokens", self.suffix_tokens)] {
            if v == 0 {
                at.fail_at(key, "must be at least 1")?;
            }
        }
        if self.max_pairs == Some(0) {
            at.fail_at("max_pairs", "must be at least 1")?;
        }
        if self.max_tokens == Some(0) {
            at.fail_at("max_tokens", "must be at least 1")?;
        }
        for m in &self.models {
            match cfg.models.iter().find(|x| &x.name == m) {
                None => at.fail_at("models", format!("no model `{m}` is declared"))?,
                Some(x) if x.gen().is_none() => {
                    at.fail_at("models", format!("model `{m}` is an import: there is no model to ask"))?
                }
                Some(_) => {}
            }
        }
        for s in &self.services {
            if cfg.service(s).is_none() {
                at.fail_at("services", format!("no service `{s}` is declared"))?;
            }
        }
        Ok(())
    }
}

pub fn declare(cfg: &Config, g: &mut Graph) -> Result<()> {
    let s: Settings = cfg.section()?;
    if !s.enabled {
        return Ok(());
    }
    let shape = Shape { prefix: s.prefix_tokens, suffix: s.suffix_tokens };
    for m in cfg.models.iter().filter(|m| s.models.is_empty() || s.models.contains(&m.name)) {
        let Some(gs) = m.gen() else { continue };
        // Greedy and capped: the screen's request, not the study's.
        let mut greedy = gs.clone();
        greedy.key.temperature = 0.0;
        greedy.key.max_tokens = s.max_tokens.unwrap_or(4 * s.suffix_tokens as u32);
        greedy.key.samples = 1;
        let screened = crate::config::Model { kind: ModelKind::Generate(greedy), ..m.clone() };
        for service in gs.services.iter().filter(|x| s.services.is_empty() || s.services.contains(x)) {
            let Some(dedupe) = g.find(PAIRS.name, &[("service", service)]) else { continue };
            let parsed = service.parse::<Service>().ok();
            let mut pins = crate::backends::pins(m.gen());
            if let Some(sv) = parsed {
                pins.push(super::pin(&resources::schema_asset(sv))?);
            }
            let job = Screen {
                ask: Asker::new(cfg, &screened, service)?,
                pairs: g.part(dedupe).clone(),
                shape,
                max_pairs: s.max_pairs,
                validator: parsed.map(|x| x.name()),
                instruction: INSTRUCTION_VERSION,
                raw: gs.completions.raw,
                scores_text: gs.completions.echo_logprobs,
            };
            g.add(
                Node::new("contamination", Partition::new(CONTAMINATION, &[service, &m.name]), job)
                    .deps(vec![dedupe])
                    .pinned(pins)
                    .model(&m.name),
            );
        }
    }
    Ok(())
}

#[derive(Serialize)]
struct Screen {
    ask: Asker,
    #[serde(skip)]
    pairs: Partition,
    shape: Shape,
    max_pairs: Option<usize>,
    /// The service whose validator checks the twins (none for a service outside the four).
    validator: Option<&'static str>,
    instruction: u32,
    /// The backend continues a text as is (the prefix alone) rather than by the instruction.
    raw: bool,
    /// It scores a given text token by token: Min-K% Prob.
    scores_text: bool,
}

const REAL: u32 = 0;
const TWIN: u32 = 1;

/// One pair's two texts as cut for the screen.
struct Plan {
    pair: Pair,
    real: Probed,
    /// The twin and its probe, when it is usable; else why not.
    twin: std::result::Result<(twin::Twin, Probed, u32, Option<bool>), String>,
}

impl Job for Screen {
    fn run(&self, cx: &Ctx) -> Result<Output> {
        let m = &self.ask.model;
        let mut pairs: Vec<Pair> = cx.read(&self.pairs)?;
        pairs.truncate(self.max_pairs.unwrap_or(usize::MAX));
        let name = self.ask.service.as_str();
        let service = doc2ci_sem::service(name).ok_or_else(|| anyhow!("no service `{name}` in doc2ci's registry"))?;
        let checker = match self.validator {
            Some(name) => Some((resources::validator()?, name.parse::<Service>().map_err(|e| anyhow!("{e}"))?)),
            None => None,
        };
        let plans: Vec<Plan> = pairs.into_iter().map(|p| self.plan(p, service, checker)).collect::<Result<_>>()?;
        let g = m.gen().ok_or_else(|| anyhow!("model `{}` cannot generate", m.name))?;
        let backend = crate::backends::client(&m.name, g)?;
        let raw = self.raw && backend.raw_completion();
        let mut items = Vec::new();
        for p in &plans {
            if let Probed::Probe(pr) = &p.real {
                items.push(self.item(&p.pair, REAL, &pr.prefix, raw));
            }
            if let Ok((_, Probed::Probe(pr), _, _)) = &p.twin {
                items.push(self.item(&p.pair, TWIN, &pr.prefix, raw));
            }
        }
        let kept: Vec<Generation> = cx.kept::<Contamination>()?.into_iter().filter_map(as_generation).collect();
        let answers = run_items_with(cx, &self.ask, &m.name, 0, items, kept)?;
        let by_key: HashMap<(String, u32), Generation> =
            answers.into_iter().map(|g| ((g.pair_id.clone(), g.sample), g)).collect();
        let mut rows = Vec::new();
        for p in &plans {
            rows.push(self.row(&p.pair, "real", &p.real, by_key.get(&(p.pair.pair_id.clone(), REAL)), None, raw));
            match &p.twin {
                Ok((t, probed, changed, valid)) => {
                    let answer = by_key.get(&(p.pair.pair_id.clone(), TWIN));
                    rows.push(self.row(&p.pair, "twin", probed, answer, Some((t, *changed, *valid)), raw));
                }
                Err(why) => {
                    let mut r = self.blank(&p.pair, "twin", "no_twin");
                    r.twin_edits = Some(why.clone());
                    rows.push(r);
                }
            }
        }
        let unscored = match self.scores_text {
            true => self.min_k(cx, backend.as_ref(), &plans, &mut rows)?,
            false => None,
        };
        let errors = rows.iter().filter(|r| r.status == "error").count() as u64;
        let mut note = summary(&rows);
        if let Some(n) = unscored {
            note.push_str(&format!(
                "; Min-K% of {} texts{}",
                rows.iter().filter(|r| r.min_k.is_some()).count(),
                if n > 0 { format!(" ({n} could not be scored)") } else { String::new() }
            ));
        }
        Ok(cx
            .publish(&rows, Some(note))?
            .owing(Owed { count: errors, what: "errored continuations to ask again".into() }))
    }
}

impl Screen {
    fn plan(
        &self,
        pair: Pair,
        service: &doc2ci_sem::Service,
        checker: Option<(&doc2ci_validate::Validator, Service)>,
    ) -> Result<Plan> {
        let real = probe(&pair.reference, self.shape);
        let t = twin::twin(service, &pair.reference, self.shape);
        let valid = match checker {
            Some((v, s)) => {
                let (a, b) = (v.validate(s, &pair.reference)?, v.validate(s, &t.text)?);
                Some(b.parse_ok >= a.parse_ok && b.schema_ok >= a.schema_ok)
            }
            None => None,
        };
        let twin = match (t.differs_in(&pair.reference, self.shape), valid) {
            _ if matches!(real, Probed::TooShort { .. }) => Err("the reference is too short".to_string()),
            (_, Some(false)) => Err(format!("the twin is not valid where the reference is ({})", t.edits.join("; "))),
            (None, _) => Err("the twin is too short".to_string()),
            (Some(0), _) => Err("no edit falls inside the prefix".to_string()),
            (Some(n), _) => {
                let probed = probe(&t.text, self.shape);
                Ok((t, probed, n as u32, valid))
            }
        };
        Ok(Plan { pair, real, twin })
    }

    /// Min-K% Prob of every screened text, where the model's backend scores a given text token
    /// by token (`Backend::token_logprobs`: the embedded kernel, a server that echoes a prompt's
    /// log-probabilities); None where it cannot. Texts it
    /// fails on (longer than its context) are left unscored and counted.
    fn min_k(
        &self,
        cx: &Ctx,
        backend: &dyn doc2ci_llm::Backend,
        plans: &[Plan],
        rows: &mut [Contamination],
    ) -> Result<Option<usize>> {
        let (_local, handle) = crate::generation::runtime()?;
        let texts: HashMap<(&str, &str), &str> = plans
            .iter()
            .flat_map(|p| {
                let twin = p.twin.as_ref().ok().map(|(t, ..)| ("twin", t.text.as_str()));
                std::iter::once(("real", p.pair.reference.as_str()))
                    .chain(twin)
                    .map(move |(v, t)| ((p.pair.pair_id.as_str(), v), t))
            })
            .collect();
        let mut failed = 0;
        for r in rows.iter_mut().filter(|r| matches!(r.status.as_str(), "high_risk" | "clean")) {
            let Some(text) = texts.get(&(r.pair_id.as_str(), r.variant.as_str())) else { continue };
            match handle.block_on(backend.token_logprobs(text)) {
                None => return Ok(None),
                Some(Ok(lp)) => r.min_k = doc2ci_contamination::min_k_prob(&lp, doc2ci_contamination::MIN_K),
                Some(Err(e)) => {
                    failed += 1;
                    if failed == 1 {
                        cx.ui.info(&format!("{}: Min-K% not scored for {} {}: {e}", cx.label(), r.pair_id, r.variant));
                    }
                }
            }
        }
        Ok(Some(failed))
    }

    /// A raw-completion backend continues the prefix itself; a chat model gets the instruction.
    fn item(&self, pair: &Pair, sample: u32, prefix: &str, raw: bool) -> Item {
        let message = match raw {
            true => Msg::new(doc2ci_llm::COMPLETION_ROLE, prefix),
            false => Msg::new("user", instruction(&self.ask.display, &pair.title, prefix)),
        };
        Item { pair_id: pair.pair_id.clone(), sample, messages: vec![message], seed: None }
    }

    fn blank(&self, pair: &Pair, variant: &str, status: &str) -> Contamination {
        Contamination {
            pair_id: pair.pair_id.clone(),
            service: self.ask.service.clone(),
            model: self.ask.model.name.clone(),
            variant: variant.into(),
            status: status.into(),
            // How the model is (or would be) asked, for a row that was not asked too.
            mode: if self.raw { "raw" } else { "chat" }.into(),
            prefix_tokens: self.shape.prefix as u32,
            suffix_tokens: self.shape.suffix as u32,
            ..Contamination::default()
        }
    }

    fn row(
        &self,
        pair: &Pair,
        variant: &str,
        probed: &Probed,
        answer: Option<&Generation>,
        twin: Option<(&twin::Twin, u32, Option<bool>)>,
        raw: bool,
    ) -> Contamination {
        let mut r = self.blank(pair, variant, "too_short");
        r.mode = if raw { "raw" } else { "chat" }.into();
        if let Some((t, changed, valid)) = twin {
            r.twin_edits = Some(t.edits.join("; "));
            r.twin_prefix_changed = Some(changed);
            r.twin_valid = valid;
        }
        let Probed::Probe(pr) = probed else { return r };
        r.prefix = Some(pr.prefix.clone());
        r.suffix = Some(pr.suffix.join(" "));
        let Some(g) = answer else {
            r.status = "error".into();
            r.error = Some("not asked: stopped before this request".into());
            return r;
        };
        (r.latency_ms, r.completion_tokens, r.finish_reason, r.attempts, r.cost) =
            (g.latency_ms, g.completion_tokens, g.finish_reason.clone(), g.attempts, g.cost);
        if let Some(e) = &g.error {
            r.status = "error".into();
            r.error = Some(e.clone());
            return r;
        }
        let answer = g.raw_output.clone().unwrap_or_default();
        // A raw completion is the continuation; a chat answer may wrap or repeat it.
        let cont = if raw { answer.clone() } else { continuation(&answer, &pr.prefix) };
        let m = measure(&pr.suffix, &cont);
        (r.s, r.t, r.p, r.l, r.b) = (Some(m.s), Some(m.t), Some(m.p), Some(m.l), Some(m.b));
        r.flags = Some(m.flags().join(","));
        r.status = if m.high_risk() { "high_risk" } else { "clean" }.into();
        r.answer = Some(answer);
        r.continuation = Some(cont);
        r
    }
}

/// A published answer as the request loop keeps it, so a run that owes errors asks only those.
fn as_generation(r: Contamination) -> Option<Generation> {
    if r.error.is_some() || r.answer.is_none() {
        return None;
    }
    let sample = if r.variant == "twin" { TWIN } else { REAL };
    Some(Generation {
        pair_id: r.pair_id,
        service: r.service,
        model: r.model,
        sample,
        round: 0,
        output: r.answer.clone(),
        raw_output: r.answer,
        latency_ms: r.latency_ms,
        completion_tokens: r.completion_tokens,
        finish_reason: r.finish_reason,
        attempts: r.attempts,
        cost: r.cost,
        ..Generation::default()
    })
}

fn summary(rows: &[Contamination]) -> String {
    let of = |variant: &str, status: &str| rows.iter().filter(|r| r.variant == variant && r.status == status).count();
    let screened = |variant: &str| of(variant, "high_risk") + of(variant, "clean");
    let mut s = format!(
        "high-risk: {} of {} references, {} of {} twins; {} too short",
        of("real", "high_risk"),
        screened("real"),
        of("twin", "high_risk"),
        screened("twin"),
        of("real", "too_short"),
    );
    for (status, what) in [("no_twin", "without a usable twin"), ("error", "errored")] {
        let n = of("real", status) + of("twin", status);
        if n > 0 {
            s.push_str(&format!(", {n} {what}"));
        }
    }
    s
}
