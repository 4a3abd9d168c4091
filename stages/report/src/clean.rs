//! The study beside itself on the pairs a model cannot have recalled (issue 45): Table I on each
//! model's screen-clean pairs and after its knowledge cutoff, the time split's tests, the headline
//! figure on screen-clean pairs, and the contamination panel (high-risk rate of references and
//! twins, Min-K% AUC, with CIs, per model).
//!
//! Reads only `stats` rows (`subset_mean`, `time_split`, `contamination_*`): what the numbers
//! are is `doc2ci_stats::split`'s and the contamination crate's.

use std::collections::BTreeSet;

use doc2ci_stats::split::SCREEN_CLEAN;
use doc2ci_stats::study::StatRow;
use plotters::prelude::*;

use crate::{disp, fmt_p, pct, Input, Means, Table};

/// The rate columns of the clean Table I, after cosine.
const RATES: &[&str] = &["exact", "parse_ok", "schema_ok"];

fn after_cutoff(label: &str) -> bool {
    label.starts_with("after ")
}

/// Models with any subset mean, in the order of the stats rows.
fn subset_models(stats: &[StatRow]) -> Vec<&str> {
    let mut seen = BTreeSet::new();
    stats
        .iter()
        .filter(|r| r.test == "subset_mean" && seen.insert(r.group_a.as_str()))
        .map(|r| r.group_a.as_str())
        .collect()
}

pub fn tables(inp: &Input) -> Vec<Table> {
    vec![table1_clean(inp), time_split_table(inp)]
}

/// Table I (all services) on every pair, on the pairs the model's screen found clean, and on
/// those published after its knowledge cutoff.
fn table1_clean(inp: &Input) -> Table {
    let all = Means::new(inp.stats);
    let clean = Means::subset(inp.stats, |l| l == SCREEN_CLEAN);
    let after = Means::subset(inp.stats, after_cutoff);
    let mut t = Table::new(
        "table1_clean",
        "Table I beside itself: each model on every pair, on the pairs its contamination screen measured and found no recall in (screen-clean: high-risk by none of DevOps-Gym's five measures; too short or unscreened pairs are not clean), and on the pairs published after its knowledge cutoff (dates: see `pairs.published_source`). Cosine with its 95% bootstrap CI.",
        &["Model", "Pairs", "n", "Cosine", "Exact%", "Parse%", "Schema%"],
    );
    for m in subset_models(inp.stats) {
        for (label, means) in [("all", &all), (SCREEN_CLEAN, &clean), ("after cutoff", &after)] {
            let Some(n) = means.get("all", "cosine", m).or_else(|| means.get("all", "schema_ok", m)).map(|r| r.n)
            else {
                continue;
            };
            // After which day: the subset's own name.
            let shown = match label {
                "after cutoff" => means.get("all", "schema_ok", m).map_or(label.to_string(), |r| r.group_b.clone()),
                _ => label.to_string(),
            };
            let mut row = vec![m.to_string(), shown, n.to_string(), means.with_ci("all", "cosine", m, false)];
            row.extend(RATES.iter().map(|metric| pct(means.mean("all", metric, m))));
            t.rows.push(row);
        }
    }
    t
}

/// The time split per model, service and metric: the pairs published after the model's cutoff
/// against those before.
fn time_split_table(inp: &Input) -> Table {
    let mut t = Table::new(
        "time_split",
        "Time split: each model's zero-shot scores on pairs published after its knowledge cutoff against those on or before it (two-sided Mann–Whitney U, Holm over models; Cliff's δ of after vs before with its 95% bootstrap CI: negative when the model does worse on pairs it cannot have seen). 'Sure' counts pairs a re-crawl found new after the cutoff; the others are after it by their page's date.",
        &["Model", "Service", "Metric", "Cutoff", "After / before (sure)", "Mean after", "Mean before", "Cliff's δ [95% CI]", "p (Holm)"],
    );
    let sub = |svc: &str, metric: &str, m: &str, label: &str| {
        inp.stats
            .iter()
            .find(|r| {
                r.test == "subset_mean"
                    && r.service == svc
                    && r.metric == metric
                    && r.group_a == m
                    && r.group_b == label
            })
            .and_then(|r| r.effect)
    };
    for r in inp.stats.iter().filter(|r| r.test == "time_split") {
        let sure = r.method.split("; ").nth(1).and_then(|s| s.split(' ').next()).unwrap_or("0");
        let delta = match (r.effect, r.ci_low, r.ci_high) {
            (Some(d), Some(lo), Some(hi)) => format!("{d:.3} [{lo:.3}, {hi:.3}]"),
            (Some(d), ..) => format!("{d:.3}"),
            _ => "–".into(),
        };
        let fmt = |v: Option<f64>| v.map_or("–".into(), |v| format!("{v:.3}"));
        t.rows.push(vec![
            r.group_a.clone(),
            disp(inp, &r.service),
            r.metric.clone(),
            r.group_b.clone(),
            format!("{} / {} ({sure})", r.b.unwrap_or(0), r.c.unwrap_or(0)),
            fmt(sub(&r.service, &r.metric, &r.group_a, &format!("after {}", r.group_b))),
            fmt(sub(&r.service, &r.metric, &r.group_a, &format!("before {}", r.group_b))),
            delta,
            format!("{} ({})", fmt_p(r.p), fmt_p(r.p_holm)),
        ]);
    }
    t
}

/// The headline figure on each model's screen-clean pairs, and the contamination panel.
pub fn figures(inp: &Input) -> Vec<crate::figures::Fig> {
    let mut out = Vec::new();
    let models: Vec<&str> = inp.models.iter().map(|m| m.model.as_str()).collect();
    let clean = Means::subset(inp.stats, |l| l == SCREEN_CLEAN);
    if let Some(svg) = crate::figures::headline(inp, &clean, &models) {
        out.push(("headline_clean".into(), "The headline on screen-clean pairs: as the figure at the top, each model on the pairs its contamination screen found no recall in.".into(), svg));
    }
    if let Some(svg) = panel(inp.stats) {
        out.push(("fig_contamination".into(), "Contamination per model and service: the high-risk rate of continuations of the real references (filled) and of their never-published twins (open), 95% Wilson CIs (left); Min-K% Prob's AUC of real vs twin with its 95% bootstrap CI, where the backend scores text (right; 0.5: nothing recalled).".into(), svg));
    }
    out
}

/// One line per (model, service): rates with CIs on the left, the AUC on the right.
fn panel(stats: &[StatRow]) -> Option<String> {
    let find = |test: &str, svc: &str, m: &str, b: &str| {
        stats.iter().find(|r| r.test == test && r.service == svc && r.group_a == m && r.group_b == b)
    };
    let keys: Vec<(&str, &str)> = {
        let mut k: Vec<(&str, &str)> = stats
            .iter()
            .filter(|r| r.test == "contamination_rate" && r.group_b == "real")
            .map(|r| (r.group_a.as_str(), r.service.as_str()))
            .collect();
        k.dedup();
        k
    };
    if keys.is_empty() {
        return None;
    }
    let n = keys.len();
    let labels: Vec<String> = keys.iter().map(|(m, s)| format!("{m} · {s}")).collect();
    let rate_max = keys
        .iter()
        .flat_map(|(m, s)| ["real", "twin"].map(|b| find("contamination_rate", s, m, b).and_then(|r| r.ci_high)))
        .flatten()
        .fold(0.05f64, f64::max)
        .min(1.0)
        * 100.0;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 90 + 40 * n as u32)).into_drawing_area();
        root.fill(&WHITE).expect("svg");
        let (left, right) = root.split_horizontally(560);
        let y_range = -0.5f64..(n as f64 - 0.5);
        let label_of = |y: &f64| {
            let i = y.round() as i64;
            if (y - i as f64).abs() < 1e-6 && i >= 0 && (i as usize) < labels.len() {
                labels[i as usize].clone()
            } else {
                String::new()
            }
        };
        let mut rates = ChartBuilder::on(&left)
            .margin(12)
            .x_label_area_size(35)
            .y_label_area_size(200)
            .build_cartesian_2d(0f64..(rate_max * 1.05), y_range.clone())
            .expect("chart");
        rates
            .configure_mesh()
            .y_labels(n)
            .y_label_formatter(&label_of)
            .x_desc("High-risk continuations (%)")
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .expect("mesh");
        for (i, (m, s)) in keys.iter().enumerate() {
            for (b, dy, filled) in [("real", -0.12, true), ("twin", 0.12, false)] {
                let Some(r) = find("contamination_rate", s, m, b) else { continue };
                let (Some(v), Some(lo), Some(hi)) = (r.effect, r.ci_low, r.ci_high) else { continue };
                let y = i as f64 + dy;
                rates
                    .draw_series(std::iter::once(PathElement::new(vec![(lo * 100.0, y), (hi * 100.0, y)], BLACK)))
                    .expect("ci");
                let style = if filled { BLACK.filled() } else { BLACK.stroke_width(1) };
                rates.draw_series(std::iter::once(Circle::new((v * 100.0, y), 4, style))).expect("point");
            }
        }
        let mut auc = ChartBuilder::on(&right)
            .margin(12)
            .x_label_area_size(35)
            .y_label_area_size(10)
            .build_cartesian_2d(0f64..1f64, y_range)
            .expect("chart");
        auc.configure_mesh()
            .y_labels(0)
            .x_desc("Min-K% AUC, real vs twin")
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .expect("mesh");
        auc.draw_series(std::iter::once(PathElement::new(vec![(0.5, -0.5), (0.5, n as f64 - 0.5)], RED.mix(0.6))))
            .expect("chance");
        for (i, (m, s)) in keys.iter().enumerate() {
            let Some(r) = find("contamination_auc", s, m, "twin") else { continue };
            let (Some(v), Some(lo), Some(hi)) = (r.effect, r.ci_low, r.ci_high) else { continue };
            let y = i as f64;
            auc.draw_series(std::iter::once(PathElement::new(vec![(lo, y), (hi, y)], BLACK))).expect("ci");
            auc.draw_series(std::iter::once(Circle::new((v, y), 4, BLACK.filled()))).expect("point");
        }
        root.present().expect("svg");
    }
    Some(svg)
}
