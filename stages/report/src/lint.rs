//! The lint dimension of the report: the validity ladder (parse → schema → the service's own
//! validator, as written and fragment-aware, then the security audit) per service and model, the
//! most frequent rule ids per service and tool, and the ladder figure.

use std::collections::BTreeMap;

use plotters::prelude::*;

use crate::{pct, Input, Means, Table};

/// Steps of the ladder: (stats metric, column label).
pub(crate) const LADDER: [(&str, &str); 4] =
    [("parse_ok", "Parse"), ("schema_ok", "Schema"), ("lint_as_is_ok", "Lint as written"), ("lint_ok", "Lint")];

pub fn tables(inp: &Input, means: &Means, models: &[&str]) -> Vec<Table> {
    let mut out = Vec::new();
    if !inp.stats.iter().any(|r| r.test == "mean" && r.metric == "lint_ok") {
        return out;
    }
    let mut t = Table::new(
        "lint",
        "Validity ladder per service and model (zero-shot): parse, schema, the service's own validator on the text as written and with fragments completed (completed_ok), and the security audit (zizmor, GitHub Actions only). Lint and audit rates are over the outputs a tool judged.",
        &["Service", "Model", "Parse%", "Schema%", "Lint as written%", "Lint%", "Audit%", "n judged"],
    );
    for (svc, disp) in inp.services.iter() {
        for m in models.iter().copied().chain(["all models"]) {
            let Some(l) = means.get(svc, "lint_ok", m) else { continue };
            t.rows.push(vec![
                disp.clone(),
                m.to_string(),
                pct(means.mean(svc, "parse_ok", m)),
                pct(means.mean(svc, "schema_ok", m)),
                pct(means.mean(svc, "lint_as_is_ok", m)),
                pct(l.effect),
                pct(means.mean(svc, "audit_ok", m)),
                l.n.to_string(),
            ]);
        }
    }
    out.push(t);

    // The rules behind the verdicts: what a model most often gets wrong, per service and tool.
    let mut counts: BTreeMap<(&str, &str), BTreeMap<&str, (usize, usize)>> = BTreeMap::new();
    for l in inp.lints.iter().filter(|l| l.model != "reference" && l.round == 0 && l.sample == 0) {
        let Some(tool) = l.tool.as_deref() else { continue };
        let rules = counts.entry((l.service.as_str(), tool)).or_default();
        let mut seen: Vec<&str> = Vec::new();
        for f in &l.findings {
            let e = rules.entry(f.rule.as_str()).or_default();
            e.0 += 1;
            if !seen.contains(&f.rule.as_str()) {
                seen.push(&f.rule);
                e.1 += 1;
            }
        }
    }
    let mut t = Table::new(
        "lint_rules",
        "The 10 most frequent rule ids per service and tool over all models' zero-shot outputs (findings inside the text; a completed fragment's wrapper excluded).",
        &["Service", "Tool", "Rule", "Findings", "Outputs"],
    );
    for ((svc, tool), rules) in counts {
        let mut v: Vec<(&str, (usize, usize))> = rules.into_iter().collect();
        v.sort_by(|a, b| b.1 .0.cmp(&a.1 .0).then(a.0.cmp(b.0)));
        let disp = inp.services.get(svc).cloned().unwrap_or_else(|| svc.to_string());
        for (rule, (n, outputs)) in v.into_iter().take(10) {
            t.rows.push(vec![disp.clone(), tool.into(), rule.into(), n.to_string(), outputs.to_string()]);
        }
    }
    out.push(t);
    out
}

/// How one ladder panel looks where it is drawn.
pub(crate) struct Panel<'a> {
    pub caption: Option<&'a str>,
    pub margin: u32,
    pub y_desc: &'a str,
    /// Each model's name by its line (the headline names them on the plane above instead).
    pub legend: bool,
}

/// One service's ladder: the share of each model's outputs passing each of `steps` (of
/// [`LADDER`], in its order), a line per model coloured by its place in `models`.
pub(crate) fn ladder_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    steps: &[(&str, &str)],
    svc: &str,
    models: &[&str],
    means: &Means,
    p: &Panel,
) {
    let mut builder = ChartBuilder::on(area);
    if let Some(c) = p.caption {
        builder.caption(c, ("sans-serif", 16));
    }
    let mut chart = builder
        .margin(p.margin)
        .x_label_area_size(35)
        .y_label_area_size(45)
        .build_cartesian_2d(-0.3f64..(steps.len() as f64 - 0.7), 0f64..100f64)
        .expect("chart");
    chart
        .configure_mesh()
        .y_desc(p.y_desc)
        .x_labels(steps.len())
        .x_label_formatter(&|x| {
            let i = x.round() as i64;
            match (x - i as f64).abs() < 1e-6 && (0..steps.len() as i64).contains(&i) {
                true => steps[i as usize].1.to_string(),
                false => String::new(),
            }
        })
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .expect("mesh");
    for (k, m) in models.iter().enumerate() {
        let pts: Vec<(f64, f64)> = steps
            .iter()
            .enumerate()
            .filter_map(|(i, (metric, _))| means.mean(svc, metric, m).map(|v| (i as f64, v * 100.0)))
            .collect();
        if pts.is_empty() {
            continue;
        }
        let col = Palette99::pick(k).to_rgba();
        let line = chart.draw_series(LineSeries::new(pts, col.stroke_width(2))).expect("line");
        if p.legend {
            line.label(m.to_string())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], col.stroke_width(2)));
        }
    }
    if p.legend {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerLeft)
            .border_style(BLACK)
            .background_style(WHITE.mix(0.8))
            .draw()
            .expect("legend");
    }
}

/// The ladder figure: one panel per service, one line per model across the steps.
pub fn ladder(inp: &Input, means: &Means, models: &[&str]) -> Option<String> {
    let services: Vec<(&String, &String)> =
        inp.services.iter().filter(|(s, _)| models.iter().any(|m| means.get(s, "lint_ok", m).is_some())).collect();
    if services.is_empty() {
        return None;
    }
    let mut svg = String::new();
    {
        let w = 360 * services.len() as u32;
        let root = SVGBackend::with_string(&mut svg, (w.max(420), 380)).into_drawing_area();
        root.fill(&WHITE).expect("svg");
        let panels = root.split_evenly((1, services.len()));
        for (area, (svc, disp)) in panels.iter().zip(&services) {
            let panel = Panel { caption: Some(disp.as_str()), margin: 12, y_desc: "% of outputs", legend: true };
            ladder_panel(area, &LADDER, svc, models, means, &panel);
        }
        root.present().expect("svg");
    }
    Some(svg)
}
