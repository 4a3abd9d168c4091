//! RQ6 in the report (issue 46): Table VI's contrasts of each repair round and of the final one
//! against zero-shot, on every binary outcome (McNemar) and cosine (Wilcoxon), with fine-tuning
//! against its base; passItr@k per model and service with Wilson CIs; and the repair ladder
//! figure, passItr@k climbing round by round.

use std::collections::BTreeMap;

use doc2ci_stats::study::StatRow;
use plotters::prelude::*;

use crate::{is_fine_tune, test_cells, Input, Table};

/// `r` contrasts a model's zero-shot answers with its answers after repair: the final round
/// (`{m} repaired`) or round k (`{m} round k`).
fn is_repair(r: &StatRow) -> bool {
    r.group_b.strip_prefix(r.group_a.as_str()).is_some_and(|rest| rest == " repaired" || rest.starts_with(" round "))
}

pub(crate) fn tables(inp: &Input) -> Vec<Table> {
    let mut t = Table::new(
        "rq6_repair",
        "RQ6. Repair and fine-tuning: McNemar on every binary outcome (b = yes→no, c = no→yes) and Wilcoxon on cosine, zero-shot against each repair round and the final one (pairs valid earlier keep their answer), and base against fine-tuned; Holm over models (final round) and over models × rounds.",
        &["Test", "Service", "Metric", "A", "B", "n", "b", "c", "Statistic", "p", "p (Holm)", "Effect", "Method"],
    );
    for r in inp.stats.iter().filter(|r| {
        (r.test == "mcnemar" || (r.test == "wilcoxon" && r.metric == "cosine")) && (is_repair(r) || is_fine_tune(r))
    }) {
        let mut c = test_cells(r, inp);
        c.insert(6, r.b.map_or("–".into(), |v| v.to_string()));
        c.insert(7, r.c.map_or("–".into(), |v| v.to_string()));
        t.rows.push(c);
    }
    let mut p = Table::new(
        "pass_itr",
        "passItr@k: the share of pairs valid within k feedback rounds (k = 0: zero-shot), per model and service, with Wilson 95% CIs; pairs whose last request up to k failed are left out.",
        &["Service", "Model", "Outcome", "k", "passItr@k", "95% CI", "n", "Method"],
    );
    for r in inp.stats.iter().filter(|r| r.test == "pass_itr") {
        p.rows.push(vec![
            crate::disp(inp, &r.service),
            r.group_a.clone(),
            r.metric.clone(),
            r.group_b.trim_start_matches("k=").to_string(),
            r.effect.map_or("–".into(), |v| format!("{:.1}%", 100.0 * v)),
            match (r.ci_low, r.ci_high) {
                (Some(lo), Some(hi)) => format!("[{:.1}, {:.1}]", 100.0 * lo, 100.0 * hi),
                _ => "–".into(),
            },
            r.n.to_string(),
            r.method.clone(),
        ]);
    }
    vec![t, p]
}

/// passItr@k of schema validity over all services, one line per repaired model, with its Wilson
/// CI as whiskers; None without repair rounds.
pub(crate) fn ladder(inp: &Input) -> Option<crate::figures::Fig> {
    let mut by_model: BTreeMap<&str, Vec<(f64, f64, f64, f64)>> = BTreeMap::new();
    for r in inp.stats.iter().filter(|r| r.test == "pass_itr" && r.service == "all" && r.metric == "schema_ok") {
        let k = r.group_b.trim_start_matches("k=").parse::<f64>();
        let (Ok(k), Some(v), Some(lo), Some(hi)) = (k, r.effect, r.ci_low, r.ci_high) else { continue };
        by_model.entry(&r.group_a).or_default().push((k, 100.0 * v, 100.0 * lo, 100.0 * hi));
    }
    by_model.retain(|_, v| v.len() > 1);
    if by_model.is_empty() {
        return None;
    }
    let top = by_model.values().flatten().map(|p| p.0).fold(1.0, f64::max);
    let lo = by_model.values().flatten().map(|p| p.2).fold(100.0, f64::min);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (640, 400)).into_drawing_area();
        root.fill(&WHITE).expect("svg");
        let mut chart = ChartBuilder::on(&root)
            .margin(15)
            .x_label_area_size(40)
            .y_label_area_size(55)
            .build_cartesian_2d(-0.3f64..top + 0.3, (lo - 5.0).max(0.0)..100.0)
            .expect("chart");
        chart
            .configure_mesh()
            .x_desc("feedback rounds k")
            .y_desc("schema-valid within k rounds (%)")
            .x_labels(top as usize + 1)
            .x_label_formatter(&|x| if (x - x.round()).abs() < 1e-6 { format!("{}", x.round()) } else { String::new() })
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .expect("mesh");
        for (i, (m, mut pts)) in by_model.into_iter().enumerate() {
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            let col = Palette99::pick(i).to_rgba();
            let line: Vec<(f64, f64)> = pts.iter().map(|p| (p.0, p.1)).collect();
            chart
                .draw_series(LineSeries::new(line, col.stroke_width(2)))
                .expect("line")
                .label(m.to_string())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], col.stroke_width(2)));
            chart
                .draw_series(pts.iter().map(|p| PathElement::new(vec![(p.0, p.2), (p.0, p.3)], col.stroke_width(1))))
                .expect("whiskers");
        }
        chart.configure_series_labels().border_style(BLACK).background_style(WHITE.mix(0.9)).draw().expect("legend");
        root.present().expect("svg");
    }
    Some((
        "fig_repair_ladder".into(),
        "The repair ladder: passItr@k, the share of pairs schema-valid within k feedback rounds (k = 0: zero-shot), per repaired model over all services, with Wilson 95% CIs.".into(),
        svg,
    ))
}
