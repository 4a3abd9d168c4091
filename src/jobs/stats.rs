//! stats: the study's tests over every score and validation partition and the models
//! (`stats`, one partition: they compare across services and models). The tests are
//! `stages/stats`'s.

use anyhow::Result;
use doc2ci_rows::{Lint, ModelRow, Score, Validation};
use doc2ci_stats::study::{StatRow, Unit};

use crate::config::{Config, StatsParams};
use crate::engine::{Ctx, Graph, Job, Node, Output};
use crate::warehouse::{Partition, LINTS, MODELS, SCORES, STATS, VALIDATIONS};

pub fn declare(cfg: &Config, g: &mut Graph) -> Result<()> {
    let Some(deps) = study_inputs(g) else { return Ok(()) };
    if !cfg.stages.stats.enabled {
        return Ok(());
    }
    let job = Stats { inputs: deps.iter().map(|&d| g.part(d).clone()).collect(), params: cfg.stages.stats.clone() };
    g.add(
        Node::new("stats", Partition::new(STATS, &[]), &["doc2ci-stats", "doc2ci-score"], job)
            .deps(deps)
            .params(&cfg.stages.stats),
    );
    Ok(())
}

/// What stats and report read: every score, validation and lint partition, then the models.
pub fn study_inputs(g: &Graph) -> Option<Vec<usize>> {
    let mut deps: Vec<usize> = (0..g.nodes.len())
        .filter(|&i| [SCORES.name, VALIDATIONS.name, LINTS.name].contains(&g.part(i).table))
        .filter(|&i| g.part(i).get("model") != Some(super::lint::REFERENCE))
        .collect();
    if deps.is_empty() {
        return None;
    }
    deps.extend(g.find(MODELS.name, &[]));
    Some(deps)
}

/// The rows of [`study_inputs`], as the statistics' units, with the models and the lint rows.
pub fn study_rows(cx: &Ctx, inputs: &[Partition]) -> Result<(Vec<Unit>, Vec<ModelRow>, Vec<Lint>)> {
    let (mut scores, mut vals, mut lints, mut models) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for p in inputs {
        if p.table == SCORES.name {
            scores.extend(cx.read::<Score>(p)?);
        } else if p.table == VALIDATIONS.name {
            vals.extend(cx.read::<Validation>(p)?);
        } else if p.table == LINTS.name {
            lints.extend(cx.read::<Lint>(p)?);
        } else if p.table == MODELS.name {
            models.extend(cx.read::<ModelRow>(p)?);
        }
    }
    let units = doc2ci_stats::study::units(&scores, &vals, &lints, doc2ci_score::metric_infos());
    Ok((units, models, lints))
}

struct Stats {
    inputs: Vec<Partition>,
    params: StatsParams,
}

impl Job for Stats {
    fn run(&self, cx: &Ctx) -> Result<Output> {
        let (units, models, _) = study_rows(cx, &self.inputs)?;
        let s = &self.params;
        let params = doc2ci_stats::study::Params {
            seed: s.bootstrap_seed,
            resamples: s.bootstrap_resamples,
            ci_metrics: s.ci_metrics.clone(),
            metrics: doc2ci_score::metric_infos().to_vec(),
        };
        let rows: Vec<StatRow> = doc2ci_stats::study::run(&units, &models, &params);
        let tests: std::collections::BTreeSet<&str> = rows.iter().map(|r| r.test.as_str()).collect();
        let note = format!(
            "{} rows over {} outputs ({})",
            rows.len(),
            units.len(),
            tests.into_iter().collect::<Vec<_>>().join(", ")
        );
        cx.publish(&rows, Some(note))
    }
}
