//! stats: the study's tests over every score and validation partition and the models
//! (`stats`, one partition: they compare across services and models). The tests are
//! `stages/stats`'s.

use std::collections::HashMap;

use anyhow::Result;
use doc2ci_rows::{Lint, ModelRow, RowKey, Score, Validation};
use doc2ci_stats::split::{PairDate, PairKey};
use doc2ci_stats::study::{StatRow, Unit};
use serde::{Deserialize, Serialize};

use super::tables::{CONTAMINATION, GENERATIONS, LINTS, MODELS, PAIRS, SCORES, STATS, VALIDATIONS};
use crate::config::{Config, Place, Section};
use crate::engine::{Ctx, Graph, Job, Node, Output};
use crate::warehouse::Partition;

/// `[stages.stats]`: the tests of SPEC §7 over scores and validations.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    #[serde(default = "super::yes")]
    pub enabled: bool,
    /// Seed of the percentile bootstrap (the same seed gives the same CIs everywhere).
    #[serde(default = "default_seed")]
    pub bootstrap_seed: u64,
    #[serde(default = "default_resamples")]
    pub bootstrap_resamples: usize,
    /// Metrics whose means get bootstrap CIs.
    #[serde(default = "default_ci_metrics")]
    pub ci_metrics: Vec<String>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            enabled: true,
            bootstrap_seed: default_seed(),
            bootstrap_resamples: default_resamples(),
            ci_metrics: default_ci_metrics(),
        }
    }
}

fn default_seed() -> u64 {
    doc2ci_stats::study::Params::default().seed
}
fn default_resamples() -> usize {
    doc2ci_stats::study::Params::default().resamples
}
fn default_ci_metrics() -> Vec<String> {
    doc2ci_stats::study::Params::default().ci_metrics
}

impl Section for Settings {
    const NAME: &'static str = "stats";

    fn check(&self, at: &Place, _: &Config) -> Result<()> {
        if self.bootstrap_resamples == 0 {
            at.fail_at("bootstrap_resamples", "must be at least 1")?;
        }
        let known = doc2ci_stats::study::tested_metrics(doc2ci_score::metric_infos());
        if let Some(bad) = self.ci_metrics.iter().find(|m| !known.contains(&m.as_str())) {
            at.fail_at("ci_metrics", format!("unknown metric `{bad}` (known: {})", known.join(", ")))?;
        }
        Ok(())
    }
}

pub fn declare(cfg: &Config, g: &mut Graph) -> Result<()> {
    let Some(mut deps) = study_inputs(g) else { return Ok(()) };
    let params: Settings = cfg.section()?;
    if !params.enabled {
        return Ok(());
    }
    // Which requests errored: a pair without an answer is left out of its model's paired tests.
    deps.extend(g.all(GENERATIONS.name));
    // The contamination screen's rates, sign tests and AUCs, per model and service.
    deps.extend(g.all(CONTAMINATION.name));
    // When each pair was published: the time split's sides.
    deps.extend(g.all(PAIRS.name));
    let job = Stats { inputs: deps.iter().map(|&d| g.part(d).clone()).collect(), params };
    g.add(Node::new("stats", Partition::new(STATS, &[]), job).deps(deps));
    Ok(())
}

/// What stats and report read: every partition of the checks stats reads, but the references'
/// lints, then the models.
pub fn study_inputs(g: &Graph) -> Option<Vec<usize>> {
    let tables: Vec<&str> = super::CHECKS.iter().filter(|c| c.stats).map(|c| c.table.name).collect();
    let mut deps: Vec<usize> = (0..g.nodes.len())
        .filter(|&i| tables.contains(&g.part(i).table))
        .filter(|&i| g.part(i).get("model") != Some(super::lint::REFERENCE))
        .collect();
    if deps.is_empty() {
        return None;
    }
    deps.extend(g.find(MODELS.name, &[]));
    Some(deps)
}

/// The rows of [`study_inputs`]: what the statistics' units are joined from.
pub struct StudyRows {
    pub scores: Vec<Score>,
    pub validations: Vec<Validation>,
    pub lints: Vec<Lint>,
    pub models: Vec<ModelRow>,
    /// The requests that errored, when generations partitions are among the inputs.
    pub errors: Vec<RowKey>,
    /// Each contamination partition's rows, by (service, model).
    pub contamination: Vec<((String, String), Vec<doc2ci_rows::Contamination>)>,
    /// When each pair was published, when pairs partitions are among the inputs.
    pub dates: HashMap<PairKey, PairDate>,
}

/// What stats reads of a pairs row: its dates.
#[derive(Deserialize)]
struct PairDates {
    pair_id: String,
    service: String,
    #[serde(default)]
    published: Option<String>,
    #[serde(default)]
    not_before: Option<String>,
}

/// What stats reads of a generations row: which request it was and whether it failed.
#[derive(Deserialize)]
struct Asked {
    pair_id: String,
    service: String,
    model: String,
    sample: u32,
    round: u32,
    error: Option<String>,
}

impl StudyRows {
    pub fn read(cx: &Ctx, inputs: &[Partition]) -> Result<StudyRows> {
        let mut r = StudyRows {
            scores: vec![],
            validations: vec![],
            lints: vec![],
            models: vec![],
            errors: vec![],
            contamination: vec![],
            dates: HashMap::new(),
        };
        for p in inputs {
            if p.table == GENERATIONS.name {
                let asked: Vec<Asked> = cx.wh.read_columns(p, &["pair_id", "sample", "round", "error"])?;
                r.errors.extend(asked.into_iter().filter(|a| a.error.is_some()).map(|a| RowKey {
                    pair_id: a.pair_id,
                    service: a.service,
                    model: a.model,
                    sample: a.sample,
                    round: a.round,
                }));
            } else if p.table == SCORES.name {
                r.scores.extend(cx.read::<Score>(p)?);
            } else if p.table == VALIDATIONS.name {
                r.validations.extend(cx.read::<Validation>(p)?);
            } else if p.table == LINTS.name {
                r.lints.extend(cx.read::<Lint>(p)?);
            } else if p.table == MODELS.name {
                r.models.extend(cx.read::<ModelRow>(p)?);
            } else if p.table == PAIRS.name {
                let rows: Vec<PairDates> = cx.wh.read_columns(p, &["pair_id", "published", "not_before"])?;
                for d in rows {
                    let date = PairDate { published: d.published, not_before: d.not_before };
                    r.dates.insert((d.service, d.pair_id), date);
                }
            } else if p.table == CONTAMINATION.name {
                let at = |c: &str| p.get(c).unwrap_or_default().to_string();
                r.contamination.push(((at("service"), at("model")), cx.read(p)?));
            }
        }
        Ok(r)
    }

    pub fn units(&self) -> Vec<Unit> {
        doc2ci_stats::study::units(&self.scores, &self.validations, &self.lints, doc2ci_score::metric_infos())
    }

    /// (model, service, pair_id) of every real reference the contamination screen measured and
    /// did not flag: the pairs each model's clean numbers are on.
    pub fn screen_clean(&self) -> Vec<(String, String, String)> {
        let mut out = Vec::new();
        for ((service, model), rows) in &self.contamination {
            for r in rows.iter().filter(|r| r.variant == "real" && r.status == "clean") {
                out.push((model.clone(), service.clone(), r.pair_id.clone()));
            }
        }
        out
    }
}

#[derive(Serialize)]
struct Stats {
    #[serde(skip)]
    inputs: Vec<Partition>,
    params: Settings,
}

impl Job for Stats {
    fn run(&self, cx: &Ctx) -> Result<Output> {
        let study = StudyRows::read(cx, &self.inputs)?;
        let (units, models) = (study.units(), &study.models);
        let s = &self.params;
        let params = doc2ci_stats::study::Params {
            seed: s.bootstrap_seed,
            resamples: s.bootstrap_resamples,
            ci_metrics: s.ci_metrics.clone(),
            metrics: doc2ci_score::metric_infos().to_vec(),
        };
        let mut rows: Vec<StatRow> = doc2ci_stats::study::run(&units, models, &study.errors, &params);
        for ((service, model), screen) in &study.contamination {
            use doc2ci_contamination::calibrate;
            let summary = calibrate::summarize(&calibrate::screened(screen), params.seed, params.resamples);
            rows.extend(calibrate::stat_rows(service, model, &summary));
        }
        // The same numbers on the pairs each model cannot have recalled.
        use doc2ci_stats::split;
        let clean = study.screen_clean();
        let mut subsets = split::clean_subsets(&clean);
        subsets.extend(split::cutoff_subsets(&units, models, &study.dates));
        rows.extend(split::subset_means(&units, &subsets, &params));
        rows.extend(split::time_split(&units, models, &study.dates, &params));
        let tests: std::collections::BTreeSet<&str> = rows.iter().map(|r| r.test.as_str()).collect();
        let errored = match study.errors.len() {
            0 => String::new(),
            n => format!(", {n} errored requests left out"),
        };
        let note = format!(
            "{} rows over {} outputs{errored} ({})",
            rows.len(),
            units.len(),
            tests.into_iter().collect::<Vec<_>>().join(", ")
        );
        cx.publish(&rows, Some(note))
    }
}
