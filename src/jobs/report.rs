//! report: the study's tables and figures (HTML, Markdown, CSV, SVG) in `report/`, from the
//! same inputs as stats plus the stats rows. Layout and figures are `stages/report`'s.

use std::collections::BTreeMap;

use anyhow::Result;
use doc2ci_stats::study::StatRow;
use serde_json::json;

use crate::config::{Config, ReportParams};
use crate::engine::{Ctx, Graph, Job, Node, Output};
use crate::warehouse::{Partition, REPORT, STATS};

pub fn declare(cfg: &Config, g: &mut Graph) -> Result<()> {
    let (Some(mut deps), Some(stats)) = (super::stats::study_inputs(g), g.find(STATS.name, &[])) else {
        return Ok(());
    };
    if !cfg.stages.report.enabled {
        return Ok(());
    }
    let services: Vec<(String, String)> = cfg.services.iter().map(|s| (s.name.clone(), s.display.clone())).collect();
    let inputs: Vec<Partition> = deps.iter().map(|&d| g.part(d).clone()).collect();
    deps.push(stats);
    let job = Report {
        inputs,
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
    stats: Partition,
    params: ReportParams,
    services: BTreeMap<String, String>,
}

impl Job for Report {
    fn run(&self, cx: &Ctx) -> Result<Output> {
        let (units, models, lints) = super::stats::study_rows(cx, &self.inputs)?;
        let stats: Vec<StatRow> = cx.read(&self.stats)?;
        let input = doc2ci_report::Input {
            title: &self.params.title,
            models: &models,
            units: &units,
            stats: &stats,
            services: &self.services,
            metrics: doc2ci_score::metric_infos(),
            lints: &lints,
        };
        let files = doc2ci_report::build(&input);
        let rows: Vec<doc2ci_report::FileRow> = files.iter().map(|(p, c)| doc2ci_report::FileRow::new(p, c)).collect();
        let extra: Vec<(String, Vec<u8>)> = files.into_iter().map(|(p, c)| (p, c.into_bytes())).collect();
        let dir = cx.wh.dir(&cx.node.part);
        cx.publish_with(&rows, &extra, Some(format!("{} files in {}", rows.len(), dir.display())))
    }
}
