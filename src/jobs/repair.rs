//! repair: round k of (service, model) sends the outputs still schema-invalid after rounds
//! 0..k, with their schema errors, back to a model (`generations/…/round-k.parquet`, validated
//! and scored like any generations partition); a summary per (service, model) fills `repairs`.
//! Which outputs a round revisits, and what it fixed, is `stages/repair`'s.

use std::collections::HashMap;

use anyhow::Result;
use doc2ci_generate::Prompter;
use doc2ci_rows::{Generation, Lint, Pair, Validation};
use doc2ci_validate::Service;
use serde::{Deserialize, Serialize};

use super::tables::{GENERATIONS, PAIRS, REPAIRS};
use crate::config::{Config, Model, Place, Section};
use crate::engine::{Ctx, Graph, Job, Node, Output};
use crate::generation::{owed, prompt_options, run_items, summary, Asker, Item};
use crate::warehouse::Partition;

/// `[stages.repair]`: schema-guided repair (SPEC §1).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    #[serde(default)]
    pub enabled: bool,
    #[serde(default = "default_rounds")]
    pub rounds: u32,
    /// The `[[models]]` entry that repairs; unset = each generative model repairs its own
    /// outputs and imported models are not repaired.
    #[serde(default)]
    pub model: Option<String>,
    /// Only these models' outputs are repaired (default: all).
    #[serde(default)]
    pub models: Option<Vec<String>>,
    /// What a round quotes and fixes: `["schema"]` (schema errors), or `["schema", "lint"]` (also the
    /// lint stage's validator findings: an output is revisited until both pass).
    #[serde(default = "default_feedback")]
    pub feedback: Vec<String>,
}

impl Default for Settings {
    fn default() -> Self {
        Self { enabled: false, rounds: default_rounds(), model: None, models: None, feedback: default_feedback() }
    }
}

fn default_feedback() -> Vec<String> {
    vec!["schema".into()]
}

fn default_rounds() -> u32 {
    2
}

impl Section for Settings {
    const NAME: &'static str = "repair";

    /// The repairing model, the stages a round reads: rules across sections and `[[models]]`.
    fn check(&self, at: &Place, cfg: &Config) -> Result<()> {
        if !self.enabled {
            return Ok(());
        }
        if self.rounds == 0 {
            at.fail_at("rounds", "must be at least 1")?;
        }
        if let Some(name) = &self.model {
            match cfg.models.iter().find(|m| &m.name == name) {
                None => at.fail_at("model", format!("`{name}`: no such [[models]] entry"))?,
                Some(m) if m.gen().is_none() => at.fail_at(
                    "model",
                    format!(
                        "`{name}` is an imported model; the repairing model must generate (openai, ollama, embedded)"
                    ),
                )?,
                _ => {}
            }
        }
        for name in self.models.iter().flatten() {
            if !cfg.models.iter().any(|m| &m.name == name) {
                at.fail_at("models", format!("no [[models]] entry `{name}`"))?;
            }
        }
        let known: Vec<&str> = super::CHECKS.iter().filter_map(|c| c.feedback).collect();
        if let Some(bad) = self.feedback.iter().find(|f| !known.contains(&f.as_str())) {
            at.fail_at("feedback", format!("unknown `{bad}` (known: {})", known.join(", ")))?;
        }
        if !self.feedback.iter().any(|f| f == "schema") {
            at.fail_at("feedback", "must include \"schema\" (a repair always quotes the schema errors)")?;
        }
        // Each quoted finding comes from its check's rows: that check must run.
        for c in super::CHECKS.iter().filter(|c| c.feedback.is_some_and(|f| self.feedback.iter().any(|x| x == f))) {
            if !(c.on)(cfg)? {
                let (f, name) = (c.feedback.unwrap_or_default(), c.settings.name);
                at.fail_at("feedback", format!("`{f}` needs the {name} stage's findings: enable [stages.{name}]"))?;
            }
        }
        Ok(())
    }
}

pub fn declare(cfg: &Config, g: &mut Graph) -> Result<()> {
    let rp: Settings = cfg.section()?;
    let checks = super::checks_on(cfg)?;
    // Each round is checked as round 0 was; the checks whose findings it quotes are fed back.
    let fed: Vec<&str> =
        checks.iter().filter_map(|c| c.feedback).filter(|f| rp.feedback.iter().any(|x| x == f)).collect();
    if !rp.enabled || !fed.contains(&"schema") {
        return Ok(());
    }
    let round0: Vec<usize> = g.all(GENERATIONS.name).into_iter().filter(|&i| g.part(i).file.is_none()).collect();
    'partitions: for g0 in round0 {
        let gp0 = g.part(g0).clone();
        let service = gp0.get("service").unwrap_or_default().to_string();
        let model_name = gp0.get("model").unwrap_or_default().to_string();
        let Some(model) = cfg.models.iter().find(|m| m.name == model_name) else { continue };
        if rp.models.as_ref().is_some_and(|ms| !ms.contains(&model_name)) {
            continue;
        }
        let repairer: &Model = match &rp.model {
            Some(r) => cfg.models.iter().find(|m| &m.name == r).expect("config checked the repair model"),
            None if model.gen().is_some() => model,
            None => continue,
        };
        let Ok(svc) = service.parse::<Service>() else { continue };
        let Some(dedupe) = g.find(PAIRS.name, &[("service", &service)]) else { continue };
        // Round 0's findings, per fed check: what round 1 quotes.
        let mut findings: HashMap<&str, Vec<usize>> = HashMap::new();
        for c in checks.iter().filter(|c| c.feedback.is_some_and(|f| fed.contains(&f))) {
            let Some(n) = g.find(c.table.name, &[("service", &service), ("model", &model_name)]) else {
                continue 'partitions;
            };
            findings.insert(c.feedback.unwrap_or_default(), vec![n]);
        }
        let mut gs = vec![g0];
        for round in 1..=rp.rounds {
            let (vs, ls) = (&findings["schema"], findings.get("lint").map_or(&[][..], |l| &l[..]));
            let mut deps = vec![dedupe];
            deps.extend(&gs);
            deps.extend(vs);
            deps.extend(ls);
            let job = Repair {
                ask: Asker::new(cfg, repairer, &service)?,
                original: model.clone(),
                round,
                pairs: g.part(dedupe).clone(),
                earlier: Earlier::of(g, &gs, vs, ls),
            };
            let part = Partition::new(GENERATIONS, &[&service, &model_name]).with_file(&format!("round-{round}"));
            let gk = g.add(
                Node::new("repair", part, job)
                    .deps(deps)
                    .pinned(crate::backends::pins(repairer.gen()))
                    .model(&model_name),
            );
            for c in &checks {
                let n = (c.add)(cfg, g, super::Answers { service: svc, pairs: dedupe, generations: gk })?;
                if let Some(f) = c.feedback.and_then(|f| findings.get_mut(f)) {
                    f.push(n);
                }
            }
            gs.push(gk);
        }
        let (vs, ls) = (&findings["schema"], findings.get("lint").map_or(&[][..], |l| &l[..]));
        let job = Summary {
            service: service.clone(),
            model: model_name.clone(),
            repairer: repairer.name.clone(),
            rounds: Earlier::of(g, &gs, vs, ls),
        };
        let mut deps = gs.clone();
        deps.extend(vs);
        deps.extend(ls);
        g.add(
            Node::new("repair", Partition::new(REPAIRS, &[&service, &model_name]), job).deps(deps).model(&model_name),
        );
    }
    Ok(())
}

/// Every earlier round's outputs and validations, with its lint verdicts folded in when the rounds
/// take lint feedback (`lints` holds one partition per round then, else none), and each output's
/// lint errors.
type Rounds = (Vec<Vec<Generation>>, Vec<Vec<Validation>>, Vec<Vec<Validation>>, doc2ci_repair::LintErrors);

/// The partitions of rounds already declared: what a round (or the summary) reads, never part
/// of its key (the engine keys it by these partitions' contents).
struct Earlier {
    gens: Vec<Partition>,
    vals: Vec<Partition>,
    /// One lint partition per round with lint feedback, else empty.
    lints: Vec<Partition>,
}

impl Earlier {
    fn of(g: &Graph, gens: &[usize], vals: &[usize], lints: &[usize]) -> Earlier {
        let parts = |ids: &[usize]| ids.iter().map(|&i| g.part(i).clone()).collect();
        Earlier { gens: parts(gens), vals: parts(vals), lints: parts(lints) }
    }

    fn read(&self, cx: &Ctx) -> Result<Rounds> {
        let (mut g_rows, mut v_rows, mut merged, mut errors) = (Vec::new(), Vec::new(), Vec::new(), Default::default());
        for (k, (gp, vp)) in self.gens.iter().zip(&self.vals).enumerate() {
            g_rows.push(cx.read(gp)?);
            let v: Vec<Validation> = cx.read(vp)?;
            if let Some(lp) = self.lints.get(k) {
                let l: Vec<Lint> = cx.read(lp)?;
                let (m, e) = doc2ci_repair::with_lint(&v, &l);
                merged.push(m);
                // The newest round's findings are what the next prompt quotes.
                errors = e;
            }
            v_rows.push(v);
        }
        Ok((g_rows, v_rows, merged, errors))
    }
}

#[derive(Serialize)]
struct Repair {
    /// The repairing model.
    ask: Asker,
    /// The model whose outputs are repaired (its prompt is quoted).
    original: Model,
    round: u32,
    #[serde(skip)]
    pairs: Partition,
    #[serde(skip)]
    earlier: Earlier,
}

impl Job for Repair {
    /// Only outputs still schema-invalid after the earlier rounds are revisited; a valid output is
    /// never sent again, and no row is written for it (its last row stays its answer).
    fn run(&self, cx: &Ctx) -> Result<Output> {
        let display = &self.ask.display;
        let mut pairs: Vec<Pair> = cx.read(&self.pairs)?;
        pairs.sort_by_key(|p| p.position);
        let by_id: HashMap<&str, &Pair> = pairs.iter().map(|p| (p.pair_id.as_str(), p)).collect();
        let (g_rows, v_rows, merged, lint_errors) = self.earlier.read(cx)?;
        let judged = if self.earlier.lints.is_empty() { &v_rows } else { &merged };
        let latest = doc2ci_repair::latest(&g_rows, judged);
        // The original task as the model was asked it.
        let prompter = Prompter::new(display, &pairs, prompt_options(self.original.gen()));
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
            let lint = lint_errors.get(k).map_or(&[][..], |e| &e[..]);
            let messages = doc2ci_generate::repair_messages_with_lint(&original, display, out, &v.errors, lint);
            items.push(Item { pair_id: k.0.clone(), sample: k.1, messages, seed: None });
        }
        let n = items.len();
        let rows = run_items(cx, &self.ask, &self.original.name, self.round, items)?;
        let note =
            format!("round {}: {n} invalid outputs sent to `{}`; {}", self.round, self.ask.model.name, summary(&rows));
        Ok(cx.publish(&rows, Some(note))?.owing(owed(&rows)))
    }
}

#[derive(Serialize)]
struct Summary {
    service: String,
    model: String,
    repairer: String,
    #[serde(skip)]
    rounds: Earlier,
}

impl Job for Summary {
    fn run(&self, cx: &Ctx) -> Result<Output> {
        let (g_rows, v_rows, merged, _) = self.rounds.read(cx)?;
        let mut rows = doc2ci_repair::summary(&self.service, &self.model, &self.repairer, "schema", &g_rows, &v_rows);
        if !self.rounds.lints.is_empty() {
            rows.extend(doc2ci_repair::summary(
                &self.service,
                &self.model,
                &self.repairer,
                "schema+lint",
                &g_rows,
                &merged,
            ));
        }
        let note = rows
            .iter()
            .map(|r| format!("round {} ({}): {}/{} fixed", r.round, r.criterion, r.fixed, r.attempted))
            .collect::<Vec<_>>()
            .join(", ");
        cx.publish(&rows, Some(note))
    }
}
