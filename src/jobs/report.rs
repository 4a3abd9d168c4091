//! report: the study's tables and figures (HTML, Markdown, CSV, SVG) in `report/`, from the
//! same inputs as stats plus the stats rows, and the sample browser from the pairs and every
//! generation. Layout, figures and the browser page are `stages/report`'s.

use std::collections::BTreeMap;

use anyhow::Result;
use doc2ci_rows::{Generation, Pair};
use doc2ci_stats::study::StatRow;
use serde::{Deserialize, Serialize};

use super::tables::{CONTAMINATION, GENERATIONS, PAIRS, REPORT, STATS};
use crate::config::{Config, Section};
use crate::engine::{Ctx, Graph, Job, Node, Output};
use crate::warehouse::Partition;

/// `[stages.report]`: HTML, Markdown, CSV and SVG under `<warehouse>/report/`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    #[serde(default = "super::yes")]
    pub enabled: bool,
    #[serde(default = "default_title")]
    pub title: String,
}

impl Default for Settings {
    fn default() -> Self {
        Self { enabled: true, title: default_title() }
    }
}

fn default_title() -> String {
    "doc2ci study report".into()
}

impl Section for Settings {
    const NAME: &'static str = "report";
}

pub fn declare(cfg: &Config, g: &mut Graph) -> Result<()> {
    let (Some(mut deps), Some(stats)) = (super::stats::study_inputs(g), g.find(STATS.name, &[])) else {
        return Ok(());
    };
    let params: Settings = cfg.section()?;
    if !params.enabled {
        return Ok(());
    }
    let services: Vec<(String, String)> = cfg.services.iter().map(|s| (s.name.clone(), s.display.clone())).collect();
    // The contamination screen's rows: the sample browser's "recalled" filter and continuations.
    deps.extend(g.all(CONTAMINATION.name));
    let inputs: Vec<Partition> = deps.iter().map(|&d| g.part(d).clone()).collect();
    // Every answer (the sample browser shows them, repair rounds included) and every pair.
    let gens: Vec<usize> = g.all(GENERATIONS.name);
    let pairs: Vec<usize> = g.all(PAIRS.name);
    let generations: Vec<Partition> = gens.iter().map(|&i| g.part(i).clone()).collect();
    let pair_parts: Vec<Partition> = pairs.iter().map(|&i| g.part(i).clone()).collect();
    deps.push(stats);
    deps.extend(gens);
    deps.extend(pairs);
    let job = Report {
        inputs,
        generations,
        pairs: pair_parts,
        stats: g.part(stats).clone(),
        params,
        services: services.iter().cloned().collect(),
    };
    g.add(Node::new("report", Partition::new(REPORT, &[]), job).deps(deps));
    Ok(())
}

#[derive(Serialize)]
struct Report {
    #[serde(skip)]
    inputs: Vec<Partition>,
    #[serde(skip)]
    generations: Vec<Partition>,
    #[serde(skip)]
    pairs: Vec<Partition>,
    #[serde(skip)]
    stats: Partition,
    params: Settings,
    services: BTreeMap<String, String>,
}

impl Job for Report {
    fn run(&self, cx: &Ctx) -> Result<Output> {
        let study = super::stats::StudyRows::read(cx, &self.inputs)?;
        let units = study.units();
        let stats: Vec<StatRow> = cx.read(&self.stats)?;
        let mut generations: Vec<Generation> = Vec::new();
        for p in &self.generations {
            // The browser shows the answers as scored, not the backends' raw text: at the Doc2CI
            // scale the raw texts alone are a hundred megabytes held for nothing.
            generations.extend(cx.read::<Generation>(p)?.into_iter().map(|g| Generation { raw_output: None, ..g }));
        }
        let mut pairs: Vec<Pair> = Vec::new();
        for p in &self.pairs {
            pairs.extend(cx.read::<Pair>(p)?);
        }
        // The share of degenerate answers the report states per model, at round 0.
        let mut degenerate: BTreeMap<String, (usize, usize)> = BTreeMap::new();
        for r in generations.iter().filter(|r| r.round == 0 && r.error.is_none()) {
            let e = degenerate.entry(r.model.clone()).or_default();
            e.0 += r.degenerate as usize;
            e.1 += 1;
        }
        // Errored requests per model and service: round 0, and repair rounds.
        let mut errors: BTreeMap<(String, String), (usize, usize)> = BTreeMap::new();
        for r in &generations {
            let e = errors.entry((r.model.clone(), r.service.clone())).or_default();
            match (r.error.is_some(), r.round) {
                (false, _) => {}
                (true, 0) => e.0 += 1,
                (true, _) => e.1 += 1,
            }
        }
        let contamination: Vec<doc2ci_rows::Contamination> =
            study.contamination.iter().flat_map(|(_, rows)| rows.iter().cloned()).collect();
        let samples = doc2ci_report::Samples {
            pairs: &pairs,
            generations: &generations,
            validations: &study.validations,
            scores: &study.scores,
            lints: &study.lints,
            contamination: &contamination,
            missed: Some(&doc2ci_score::missed_leaves),
        };
        let input = doc2ci_report::Input {
            title: &self.params.title,
            models: &study.models,
            units: &units,
            stats: &stats,
            services: &self.services,
            metrics: doc2ci_score::metric_infos(),
            lints: &study.lints,
            degenerate: &degenerate,
            errors: &errors,
            samples: &samples,
        };
        let files = doc2ci_report::build(&input);
        let rows: Vec<doc2ci_report::FileRow> = files.iter().map(|(p, c)| doc2ci_report::FileRow::new(p, c)).collect();
        let extra: Vec<(String, Vec<u8>)> = files.into_iter().map(|(p, c)| (p, c.into_bytes())).collect();
        let dir = cx.wh.dir(&cx.node.part);
        cx.publish_with(&rows, &extra, Some(format!("{} files in {}", rows.len(), dir.display())))
    }
}
