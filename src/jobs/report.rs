//! report: the study's tables and figures (HTML, Markdown, CSV, SVG) in `report/`, from the
//! same inputs as stats plus the stats rows. Layout and figures are `stages/report`'s.

use std::collections::BTreeMap;

use anyhow::Result;
use doc2ci_stats::study::StatRow;
use serde_json::json;

use crate::config::{Config, ReportParams};
use crate::engine::{Ctx, Graph, Job, Node, Output};
use crate::warehouse::{Partition, GENERATIONS, REPORT, STATS};

pub fn declare(cfg: &Config, g: &mut Graph) -> Result<()> {
    let (Some(mut deps), Some(stats)) = (super::stats::study_inputs(g), g.find(STATS.name, &[])) else {
        return Ok(());
    };
    if !cfg.stages.report.enabled {
        return Ok(());
    }
    let services: Vec<(String, String)> = cfg.services.iter().map(|s| (s.name.clone(), s.display.clone())).collect();
    let inputs: Vec<Partition> = deps.iter().map(|&d| g.part(d).clone()).collect();
    // Round-0 answers, for the share of degenerate outputs the report states per model.
    let gens: Vec<usize> = g.all(GENERATIONS.name).into_iter().filter(|&i| g.part(i).file.is_none()).collect();
    let generations: Vec<Partition> = gens.iter().map(|&i| g.part(i).clone()).collect();
    deps.push(stats);
    deps.extend(gens);
    let job = Report {
        inputs,
        generations,
        stats: g.part(stats).clone(),
        params: cfg.stages.report.clone(),
        services: services.iter().cloned().collect(),
    };
    g.add(
        Node::new("report", Partition::new(REPORT, &[]), &["doc2ci-report", "doc2ci-score"], job)
            .deps(deps)
            .params(json!({"report": cfg.stages.report, "services": services})),
    );
    Ok(())
}

struct Report {
    inputs: Vec<Partition>,
    generations: Vec<Partition>,
    stats: Partition,
    params: ReportParams,
    services: BTreeMap<String, String>,
}

impl Job for Report {
    fn run(&self, cx: &Ctx) -> Result<Output> {
        let (units, models, lints) = super::stats::study_rows(cx, &self.inputs)?;
        let stats: Vec<StatRow> = cx.read(&self.stats)?;
        let mut degenerate: BTreeMap<String, (usize, usize)> = BTreeMap::new();
        for p in &self.generations {
            for r in cx.read::<doc2ci_rows::Generation>(p)?.iter().filter(|r| r.round == 0 && r.error.is_none()) {
                let e = degenerate.entry(r.model.clone()).or_default();
                e.0 += r.degenerate as usize;
                e.1 += 1;
            }
        }
        let input = doc2ci_report::Input {
            title: &self.params.title,
            models: &models,
            units: &units,
            stats: &stats,
            services: &self.services,
            metrics: doc2ci_score::metric_infos(),
            lints: &lints,
            degenerate: &degenerate,
        };
        let files = doc2ci_report::build(&input);
        let rows: Vec<doc2ci_report::FileRow> = files.iter().map(|(p, c)| doc2ci_report::FileRow::new(p, c)).collect();
        let extra: Vec<(String, Vec<u8>)> = files.into_iter().map(|(p, c)| (p, c.into_bytes())).collect();
        let dir = cx.wh.dir(&cx.node.part);
        cx.publish_with(&rows, &extra, Some(format!("{} files in {}", rows.len(), dir.display())))
    }
}
